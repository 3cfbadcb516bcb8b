import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigBundle } from "../src/management/sync/ConfigBundle.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { parseImproved } from "../src/services/playground/Playground.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { playgroundCases } from "./support/playgroundCases.js"

/** The playground backend on SQLite (the same cases run on PostgreSQL in test/scale/playground.pg.test.ts). */
playgroundCases(async () => ({}))

describe("playground authentication follows REQUIRE_API_KEY", () => {
  const KEY = "gwk_playground_auth_0123456789abcdef"
  let gw: TestGateway
  beforeAll(async () => {
    gw = await startGateway()
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: KEY })))
  })
  afterAll(async () => gw?.close())

  it("off (the default, loopback): open without a key, except to a foreign browser origin; on: any valid gateway key, none is 401", async () => {
    const list = (headers: Record<string, string> = {}) => call(`${gw.url}/api/playground/presets`, { headers })
    // With keys in the store the gateway still serves the playground without one while REQUIRE_API_KEY is off.
    expect((await list()).status).toBe(200)
    expect((await list({ origin: "https://evil.example" })).status).toBe(401)
    expect((await list({ authorization: "Bearer gwk_wrong" })).status).toBe(401)
    const on = await call(`${gw.url}/api/settings/feature-flags`, {
      method: "PUT",
      body: { key: "REQUIRE_API_KEY", value: "true" },
      headers: { authorization: `Bearer ${KEY}` }
    })
    // An inference key is no admin: the flag is set here through the service instead.
    expect(on.status).toBe(401)
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: `${KEY}-admin` })))
    expect(
      (
        await call(`${gw.url}/api/settings/feature-flags`, {
          method: "PUT",
          body: { key: "REQUIRE_API_KEY", value: "true" },
          headers: { authorization: `Bearer ${KEY}-admin` }
        })
      ).status
    ).toBe(200)
    const refused = await list()
    expect(refused.status).toBe(401)
    expect(refused.body.message).toMatch(/playground needs a gateway API key/)
    expect((await list({ authorization: `Bearer ${KEY}` })).status).toBe(200)
    expect((await list({ authorization: `Bearer ${KEY}-admin` })).status).toBe(200)
  })

  it("presets are in the sync bundle (the kv table's playground-presets namespace)", async () => {
    const made = await call(`${gw.url}/api/playground/presets`, {
      body: { name: "bundled", endpoint: "rerank" },
      headers: { authorization: `Bearer ${KEY}` }
    })
    expect(made.status).toBe(201)
    const bundle = await gw.run(Effect.flatMap(ConfigBundle, (b) => b.current("stored")))
    const entry = bundle.sections.settings.find((s) => s.namespace === "playground-presets" && s.key === made.body.id)
    expect(JSON.parse(String(entry?.value))).toEqual(made.body)
  })
})

describe("reading the model's improvement", () => {
  it("takes a JSON object, fenced or with text around it, else the whole text as the prompt; nothing for an empty answer", () => {
    expect(parseImproved('{"improvedPrompt":"a","improvedSystem":"b"}')).toEqual({ improvedPrompt: "a", improvedSystem: "b" })
    expect(parseImproved('Here:\n```json\n{"improvedPrompt":"a"}\n```')).toEqual({ improvedPrompt: "a" })
    expect(parseImproved('Sure! {"improvedPrompt":"a","improvedSystem":""} done')).toEqual({ improvedPrompt: "a" })
    expect(parseImproved("Just do the thing well.")).toEqual({ improvedPrompt: "Just do the thing well." })
    expect(parseImproved("   ")).toBeUndefined()
  })
})
