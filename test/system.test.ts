import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AdminAuth } from "../src/services/auth/AdminAuth.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/** GET /api/init and POST /api/system/env/repair against an in-process gateway with a real env file. */
const ADMIN = "gwk_system_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
const dir = tempDir("gw-system-")
const envFile = path.join(dir, "gateway.env")

beforeAll(async () => {
  fs.writeFileSync(
    envFile,
    "# the gateway's env\nOPENAI_API_KEY=sk-openai-original-0123456789\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\nLOG_LEVEL=info\n"
  )
  process.env.GATEWAY_ENV_FILE = envFile
  gw = await startGateway({ dataDir: path.join(dir, "data") })
})
afterAll(async () => {
  await gw?.close()
  delete process.env.GATEWAY_ENV_FILE
})

describe("GET /api/init", () => {
  it("answers the first-run booleans without authentication and nothing more", async () => {
    const res = await call(`${gw.url}/api/init`)
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      authenticated: false,
      passwordSet: false,
      providersConfigured: false,
      keysConfigured: false,
      setupComplete: false
    })
    expect(res.body.dataDir).toBeUndefined()
    expect(res.body.providers).toBeUndefined()
  })

  it("adds counts, data dir and restart state for a management caller, and follows setup", async () => {
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    await gw.run(Effect.flatMap(AdminAuth, (a) => a.setPassword("a long admin password")))
    const created = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "up", baseUrl: "http://127.0.0.1:9/v1", defaultModel: "m1" },
      headers: admin
    })
    expect(created.status).toBe(201)
    const anon = await call(`${gw.url}/api/init`)
    expect(anon.body).toMatchObject({
      authenticated: false,
      passwordSet: true,
      providersConfigured: true,
      keysConfigured: true,
      setupComplete: true
    })
    const res = await call(`${gw.url}/api/init`, { headers: admin })
    expect(res.body).toMatchObject({
      authenticated: true,
      providers: { count: 1, enabled: 1 },
      keys: { count: 1 },
      dataDir: gw.dataDir,
      envFile,
      restartRequired: false
    })
    // A wrong key is answered like none.
    expect((await call(`${gw.url}/api/init`, { headers: { authorization: "Bearer gwk_wrong" } })).body.authenticated).toBe(false)
  })
})

describe("POST /api/system/env/repair", () => {
  it("snapshots the env file at start, restores a provider's lost variables from it, and says a restart is needed", async () => {
    const backups = fs.readdirSync(path.join(gw.dataDir, "env-backups"))
    expect(backups).toHaveLength(1)
    // Someone rewrote the env file and lost the OpenAI variables.
    fs.writeFileSync(envFile, "LOG_LEVEL=debug\n")
    const res = await call(`${gw.url}/api/system/env/repair`, { body: { provider: "openai" }, headers: admin })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      success: true,
      provider: "openai",
      repaired: ["OPENAI_API_KEY", "OPENAI_BASE_URL"],
      missing: [],
      restartRequired: true
    })
    expect(res.body.backupPath).toBe(path.join(gw.dataDir, "env-backups", backups[0]!))
    const text = fs.readFileSync(envFile, "utf8")
    expect(text).toContain("LOG_LEVEL=debug")
    expect(text).toContain("OPENAI_API_KEY=sk-openai-original-0123456789")
    expect(text).toContain("OPENAI_BASE_URL=http://127.0.0.1:9/v1")
    // The file as it was before the repair was kept too.
    expect(fs.readdirSync(path.join(gw.dataDir, "env-backups")).length).toBe(2)
    // Nothing missing any more: nothing to do.
    const again = await call(`${gw.url}/api/system/env/repair`, { body: { provider: "openai" }, headers: admin })
    expect(again.body).toMatchObject({ success: true, repaired: [], backupPath: null })
  })

  it("reports what no snapshot holds as still missing", async () => {
    const res = await call(`${gw.url}/api/system/env/repair`, { body: { provider: "anthropic" }, headers: admin })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ success: true, repaired: [], backupPath: null, missing: ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] })
  })

  it("answers 400 naming an unknown provider or a bad body, and 401 without management auth", async () => {
    const unknown = await call(`${gw.url}/api/system/env/repair`, { body: { provider: "no-such-provider" }, headers: admin })
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toContain("provider")
    expect(unknown.body.message).toContain("no-such-provider")
    const missing = await call(`${gw.url}/api/system/env/repair`, { body: {}, headers: admin })
    expect(missing.status).toBe(400)
    expect(missing.body.message).toContain("provider")
    const extra = await call(`${gw.url}/api/system/env/repair`, { body: { provider: "openai", force: true }, headers: admin })
    expect(extra.status).toBe(400)
    expect(extra.body.message).toContain("force")
    expect((await call(`${gw.url}/api/system/env/repair`, { body: { provider: "openai" } })).status).toBe(401)
    expect((await call(`${gw.url}/api/restart`, { method: "POST" })).status).toBe(401)
    expect((await call(`${gw.url}/api/shutdown`, { method: "POST" })).status).toBe(401)
  })
})
