import Database from "better-sqlite3"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { runCli } from "./support/cli.js"
import { until } from "./support/until.js"

/** Backups end to end: a real gateway, real SQLite files, the management API and the CLI. */
const ADMIN = "gwk_backups_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
let up2: FakeUpstream

const api = (p: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${p}`, { ...init, headers: admin })
const upload = async (bytes: Uint8Array) => {
  const res = await fetch(`${gw.url}/api/db-backups/import`, {
    method: "POST",
    headers: { ...admin, "content-type": "application/octet-stream" },
    body: bytes
  })
  return { status: res.status, body: (await res.json()) as any }
}
const chat = (model: string, key: string) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model, messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${key}` }
  })

/** Everything a restore must bring back, as the management API shows it. */
const state = async () => ({
  providers: (await api("/api/providers")).body,
  // lastUsedAt moves with every admin call made to look: compared without it.
  keys: (await api("/api/keys")).body.keys.map(({ lastUsedAt: _, ...k }: any) => k),
  combos: (await api("/api/combos")).body,
  flag: (await api("/api/settings/feature-flags")).body.flags.find((f: any) => f.key === "TOOL_POLICY_MODE")
})

beforeAll(async () => {
  up = await FakeUpstream.start()
  up2 = await FakeUpstream.start()
  up.always({ content: "from the first upstream" })
  up2.always({ content: "from the second upstream" })
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await up2?.close()
})

describe("backup and restore round trip", () => {
  it("brings back every connection, key, combo and flag, and routes inference through the restored connection", async () => {
    expect(
      (
        await api("/api/providers", {
          body: { provider: "openai-compatible", name: "first", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] }
        })
      ).status
    ).toBe(201)
    const key = await api("/api/keys", { body: { name: "client" } })
    expect(key.status).toBe(201)
    const secret: string = key.body.secret ?? key.body.key
    expect((await api("/api/combos", { body: { name: "pair", strategy: "priority", targets: [{ model: "first/m1" }] } })).status).toBe(201)
    expect((await api("/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE", value: "block" } })).status).toBe(
      200
    )
    expect((await chat("pair", secret)).body.choices[0].message.content).toBe("from the first upstream")
    const before = await state()

    const made = await api("/api/db-backups", { method: "PUT" })
    expect(made.status).toBe(201)
    expect(made.body.id).toMatch(/-manual$/)
    expect(made.body.kind).toBe("manual")

    // Change everything.
    const first =
      before.providers.connections?.find?.((c: any) => c.name === "first") ?? before.providers.find?.((c: any) => c.name === "first")
    expect((await api(`/api/providers/${first.id}`, { method: "DELETE" })).status).toBeLessThan(300)
    expect(
      (
        await api("/api/providers", {
          body: { provider: "openai-compatible", name: "second", baseUrl: up2.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] }
        })
      ).status
    ).toBe(201)
    expect((await api("/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE" } })).status).toBe(200)
    const combos = (await api("/api/combos")).body.combos
    for (const c of combos) expect((await api(`/api/combos/${c.id}`, { method: "DELETE" })).status).toBeLessThan(300)
    expect(await state()).not.toEqual(before)

    const restored = await api("/api/db-backups", { body: { id: made.body.id } })
    expect(restored.status).toBe(200)
    expect(restored.body.restored).toBe(made.body.id)
    expect(restored.body.safetyBackup.kind).toBe("pre-restore")

    const after = await state()
    expect(after.providers).toEqual(before.providers)
    expect(after.combos).toEqual(before.combos)
    expect(after.flag.effectiveValue).toBe("block")
    expect(after.flag).toEqual(before.flag)
    expect(after.keys).toEqual(before.keys)
    const res = await chat("pair", secret)
    expect(res.status).toBe(200)
    expect(res.body.choices[0].message.content).toBe("from the first upstream")

    const list = (await api("/api/db-backups")).body.backups
    expect(list.map((b: any) => b.kind)).toEqual(["pre-restore", "manual"])
  })
})

describe("MCP servers in a backup", () => {
  it("a restore brings back the registry, its env secret still opening with the storage key, and the API serves it at once", async () => {
    const TOKEN = "ghp_backup_secret_token_0123456789abcd"
    const created = await api("/api/mcp/servers", {
      body: { name: "kept", transport: "stdio", command: "node", args: ["--version"], env: { TOKEN }, allowedTools: ["*"] }
    })
    expect(created.status, created.text).toBe(201)
    const before = (await api("/api/mcp/servers")).body.servers
    const made = (await api("/api/db-backups", { method: "PUT" })).body.id

    expect((await api("/api/mcp/servers/kept", { method: "DELETE" })).status).toBe(200)
    expect((await api("/api/mcp/servers", { body: { name: "after", transport: "http", url: "http://127.0.0.1:9/mcp" } })).status).toBe(201)
    expect((await api("/api/db-backups", { body: { id: made } })).status).toBe(200)

    const after = (await api("/api/mcp/servers")).body.servers
    expect(after.map((s: any) => s.name)).toEqual(["kept"])
    // The record as it was; its health is the live connection's.
    const record = (list: Array<any>) => list.map(({ health: _, ...s }) => s)
    expect(record(after)).toEqual(record(before))
    const env = await gw.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ env_enc: string }>`SELECT env_enc FROM mcp_servers WHERE name = 'kept'`
        return JSON.parse(Redacted.value(yield* (yield* Secrets).decrypt(row!.env_enc)))
      })
    )
    expect(env).toEqual({ TOKEN })
    expect((await api("/api/mcp/servers/kept", { method: "DELETE" })).status).toBe(200)
  })
})

describe("GET /api/db-backups", () => {
  it("lists backups newest first with id, createdAt, size and kind; requires management auth", async () => {
    expect((await call(`${gw.url}/api/db-backups`)).status).toBe(401)
    await api("/api/db-backups", { method: "PUT" })
    const { status, body } = await api("/api/db-backups")
    expect(status).toBe(200)
    expect(body.backups.length).toBeGreaterThan(0)
    for (const b of body.backups) {
      expect(Object.keys(b).sort()).toEqual(["createdAt", "id", "kind", "size"])
      expect(b.size).toBeGreaterThan(0)
      expect(new Date(b.createdAt).toISOString()).toBe(b.createdAt)
    }
    const times = body.backups.map((b: any) => b.createdAt)
    expect([...times].sort().reverse()).toEqual(times)
  })

  it("answers 404 for an unknown backup and 400 for an id that is not one", async () => {
    expect((await api("/api/db-backups", { body: { id: "20200101T000000000Z-manual" } })).status).toBe(404)
    expect((await api("/api/db-backups", { body: { id: "../gateway" } })).status).toBe(400)
  })
})

describe("export and import", () => {
  it("exports the live database as a valid SQLite file", async () => {
    const res = await fetch(`${gw.url}/api/db-backups/export`, { headers: admin })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/vnd.sqlite3")
    expect(res.headers.get("content-disposition")).toMatch(/attachment; filename="gateway-.*\.db"/)
    const file = path.join(tempDir(), "export.db")
    fs.writeFileSync(file, Buffer.from(await res.arrayBuffer()))
    const db = new Database(file, { readonly: true })
    expect((db.prepare("PRAGMA integrity_check").get() as any).integrity_check).toBe("ok")
    expect((db.prepare("select count(*) as n from connections").get() as any).n).toBeGreaterThan(0)
    db.close()
  })

  it("refuses random bytes and a SQLite file that is not a gateway database with 400, changing nothing", async () => {
    const before = await state()
    const backupsBefore = (await api("/api/db-backups")).body.backups.length
    const random = await upload(new Uint8Array(8192).map(() => Math.floor(Math.random() * 256)))
    expect(random.status).toBe(400)
    expect(random.body.message).toMatch(/not a readable SQLite database/)
    const foreignFile = path.join(tempDir(), "foreign.db")
    const foreign = new Database(foreignFile)
    foreign.exec("create table notes (id integer primary key, body text); insert into notes (body) values ('hello')")
    foreign.close()
    const res = await upload(fs.readFileSync(foreignFile))
    expect(res.status).toBe(400)
    expect(res.body.message).toMatch(/not a gateway database/)
    expect(await state()).toEqual(before)
    expect((await api("/api/db-backups")).body.backups.length).toBe(backupsBefore)
  })

  it("imports an exported database: the upload replaces the live one", async () => {
    const exported = Buffer.from(await (await fetch(`${gw.url}/api/db-backups/export`, { headers: admin })).arrayBuffer())
    const before = await state()
    await api("/api/settings/feature-flags", { method: "PUT", body: { key: "TOOL_POLICY_MODE" } })
    const res = await upload(exported)
    expect(res.status).toBe(200)
    expect(res.body.safetyBackup.kind).toBe("pre-restore")
    expect((await state()).flag).toEqual(before.flag)
  })

  it("exportAll answers a gzipped archive (its contents are pinned in test/sync.test.ts)", async () => {
    const res = await fetch(`${gw.url}/api/db-backups/exportAll`, { headers: admin })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("application/gzip")
    const bytes = new Uint8Array(await res.arrayBuffer())
    expect([bytes[0], bytes[1]]).toEqual([0x1f, 0x8b])
  })
})

describe("a backup under write load", () => {
  it("is consistent (integrity ok) while usage writes run", async () => {
    const key = await api("/api/keys", { body: { name: "load" } })
    const secret: string = key.body.secret ?? key.body.key
    let stop = false
    const load = (async () => {
      let n = 0
      while (!stop) {
        await chat("pair", secret)
        n++
      }
      return n
    })()
    const ids: Array<string> = []
    for (let i = 0; i < 3; i++) ids.push((await api("/api/db-backups", { method: "PUT" })).body.id)
    stop = true
    expect(await load).toBeGreaterThan(0)
    for (const id of ids) {
      const db = new Database(path.join(gw.dataDir, "backups", `${id}.db`), { readonly: true })
      expect((db.prepare("PRAGMA integrity_check").get() as any).integrity_check).toBe("ok")
      db.close()
    }
  })
})

describe("a restore while another writer holds the database", () => {
  /** Another connection's write transaction on the live file, held for `ms` (the CLI, a batch commit). */
  const holdWriteLock = (ms: number) => {
    const db = new Database(path.join(gw.dataDir, "gateway.db"))
    db.exec("BEGIN IMMEDIATE")
    return new Promise<void>((resolve) =>
      setTimeout(() => {
        db.exec("COMMIT")
        db.close()
        resolve()
      }, ms)
    )
  }
  const connectionNames = async () => ((await api("/api/providers")).body.connections as Array<any>).map((c) => c.name).sort()

  it("waits for the lock and then restores: never answers 200 having copied nothing", async () => {
    expect(
      (
        await api("/api/providers", {
          body: { provider: "openai-compatible", name: "kept", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
        })
      ).status
    ).toBe(201)
    const made = (await api("/api/db-backups", { method: "PUT" })).body.id
    const expected = await connectionNames()
    expect(
      (
        await api("/api/providers", {
          body: { provider: "openai-compatible", name: "after-the-backup", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
        })
      ).status
    ).toBe(201)
    const held = holdWriteLock(400)
    const restored = await api("/api/db-backups", { body: { id: made } })
    await held
    expect(restored.status).toBe(200)
    expect(await connectionNames()).toEqual(expected)
  })

  it("answers 503 naming the lock when it is held past the busy timeout, and changes nothing", async () => {
    const made = (await api("/api/db-backups", { method: "PUT" })).body.id
    expect(
      (
        await api("/api/providers", {
          body: { provider: "openai-compatible", name: "survives", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] }
        })
      ).status
    ).toBe(201)
    const expected = await connectionNames()
    const held = holdWriteLock(6500)
    const refused = await api("/api/db-backups", { body: { id: made } })
    await held
    expect(refused.status).toBe(503)
    expect(refused.body.message).toMatch(/another writer held the database/)
    expect(await connectionNames()).toEqual(expected)
  }, 20_000)
})

describe("CLI backup and restore", () => {
  it("gateway backup prints an id; gateway restore <id> restores it; a corrupt file exits non-zero with one line", async () => {
    const dataDir = tempDir()
    const env = { DATA_DIR: dataDir }
    const made = await runCli(["backup"], env)
    expect(made.code).toBe(0)
    const id = made.stdout.trim()
    expect(id).toMatch(/^\d{8}T\d{9}Z-manual$/)
    expect(fs.existsSync(path.join(dataDir, "backups", `${id}.db`))).toBe(true)
    const restored = await runCli(["restore", id], env)
    expect(restored.code).toBe(0)
    expect(restored.stdout).toMatch(/restored/)
    const bad = path.join(dataDir, "corrupt.db")
    fs.writeFileSync(bad, "this is not a database at all".repeat(200))
    const refused = await runCli(["restore", bad], env)
    expect(refused.code).not.toBe(0)
    expect(refused.stderr.trim().split("\n")).toHaveLength(1)
    expect(refused.stderr).toMatch(/not a readable SQLite database/)
  })
})

describe("scheduled backups", () => {
  it("run every GATEWAY_BACKUP_INTERVAL_HOURS and keep the newest GATEWAY_BACKUP_KEEP", async () => {
    // One a second: the next one starts a second after a prune ends, so the files are read in that
    // quiet window (right after the prune is logged) however slow the machine is to make them.
    const scheduled = await startGateway({ env: { GATEWAY_BACKUP_INTERVAL_HOURS: String(1 / 3600), GATEWAY_BACKUP_KEEP: "2" } })
    try {
      const prunes = () => scheduled.logs.filter((l) => l.message.includes("scheduled backups pruned")).length
      await until("a third scheduled backup and its prune", () => prunes() >= 1, 30_000)
      const names = fs.readdirSync(path.join(scheduled.dataDir, "backups")).filter((n) => n.endsWith("-scheduled.db"))
      expect(names.length).toBe(2)
    } finally {
      await scheduled.close()
    }
  })

  it("are off with an interval of 0", async () => {
    const off = await startGateway({ env: { GATEWAY_BACKUP_INTERVAL_HOURS: "0" } })
    try {
      await new Promise((r) => setTimeout(r, 500))
      expect(fs.existsSync(path.join(off.dataDir, "backups"))).toBe(false)
      expect(off.logs.some((l) => l.message.includes("scheduled backups off"))).toBe(true)
    } finally {
      await off.close()
    }
  })
})
