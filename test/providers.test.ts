import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { PROVIDERS } from "../src/domain/catalog/catalog.js"
import { checkProviderUrl, classifyHost } from "../src/upstream/providers/urlPolicy.js"
import { queryDb } from "./support/db.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, localCore, startGateway, type TestGateway } from "./support/gateway.js"
import { Connections } from "../src/upstream/providers/Connections.js"
import { maskSecret } from "../src/kernel/redact.js"

const ADMIN = "gwk_providers_admin_key_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }

let upstream: FakeOpenAI
let other: FakeOpenAI
let gw: TestGateway

beforeAll(async () => {
  upstream = await FakeOpenAI.start()
  other = await FakeOpenAI.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await gw?.close()
  await upstream?.close()
  await other?.close()
})

const create = (body: unknown) => call(`${gw.url}/api/providers`, { body, headers: admin })

describe("provider catalog", () => {
  it("covers the providers the gateway promises, each with models and a base URL convention", () => {
    const ids = PROVIDERS.map((p) => p.id)
    for (const id of [
      "openai",
      "anthropic",
      "gemini",
      "ollama",
      "openrouter",
      "groq",
      "deepseek",
      "mistral",
      "xai",
      "together",
      "fireworks",
      "openai-compatible"
    ]) {
      expect(ids).toContain(id)
    }
    for (const p of PROVIDERS.filter((p) => p.id !== "openai-compatible")) {
      expect(p.models.length, p.id).toBeGreaterThan(0)
      for (const m of p.models) {
        // Media models (speech, rerank...) have no context window.
        if (m.kind === "chat" || m.kind === "embedding") expect(m.contextWindow, `${p.id}/${m.id}`).toBeGreaterThan(0)
        expect(m.pricing.input, `${p.id}/${m.id}`).toBeGreaterThanOrEqual(0)
      }
      // Media-only providers (no chat) take their API's paths whole (Cohere's /v2, ElevenLabs' /v1): a bare origin.
      const mediaOnly = !(p.offers ?? ["chat"]).includes("chat")
      // A self-hosted one (SearXNG) has no base URL of its own: a connection must give it.
      if (p.baseUrl === null) expect(p.requiresBaseUrl, p.id).toBe(true)
      else if (p.format === "openai-chat" && !mediaOnly) expect(p.baseUrl, p.id).toMatch(/\/v1$/)
      else expect(new URL(p.baseUrl!).pathname, p.id).toBe("/")
    }
  })
})

describe("/api/providers", () => {
  it("creates, reads, updates and deletes a connection; the key is masked everywhere and encrypted at rest", async () => {
    const secret = "sk-upstream-secret-abcdef123456"
    const created = await create({
      provider: "openai-compatible",
      name: "crud",
      baseUrl: upstream.baseUrl,
      apiKey: secret,
      defaultModel: "m1",
      max_concurrent: 4,
      priority: 3
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({
      provider: "openai-compatible",
      name: "crud",
      baseUrl: upstream.baseUrl,
      defaultModel: "m1",
      max_concurrent: 4,
      priority: 3,
      enabled: true,
      hasApiKey: true
    })
    expect(created.body.apiKey).toBe("sk-upstr…3456")
    const id = created.body.id

    for (const res of [
      await call(`${gw.url}/api/providers`, { headers: admin }),
      await call(`${gw.url}/api/providers/${id}`, { headers: admin })
    ]) {
      expect(res.status).toBe(200)
      expect(res.text).not.toContain(secret)
    }
    const [row] = queryDb<{ api_key_enc: string }>(gw.dataDir, "SELECT api_key_enc FROM connections WHERE id = ?", id)
    expect(row!.api_key_enc).toMatch(/^v1:/)
    expect(row!.api_key_enc).not.toContain(secret)

    const updated = await call(`${gw.url}/api/providers/${id}`, {
      method: "PUT",
      body: { enabled: false, defaultModel: "m2", max_concurrent: null },
      headers: admin
    })
    expect(updated.status).toBe(200)
    expect(updated.body).toMatchObject({ enabled: false, defaultModel: "m2", max_concurrent: null, apiKey: "sk-upstr…3456" })
    const byName = await call(`${gw.url}/api/providers/crud`, { headers: admin })
    expect(byName.body.id).toBe(id)

    expect((await call(`${gw.url}/api/providers/${id}`, { method: "DELETE", headers: admin })).status).toBe(200)
    expect((await call(`${gw.url}/api/providers/${id}`, { headers: admin })).status).toBe(404)
  })

  it.each([
    ["an unknown provider", { provider: "nope" }, 400, "unknown provider 'nope'"],
    ["openai-compatible without a base URL", { provider: "openai-compatible" }, 400, "baseUrl is required"],
    ["openai without a key", { provider: "openai" }, 400, "apiKey is required"],
    ["a base URL that is not a URL", { provider: "openai-compatible", baseUrl: "not a url" }, 400, "not a valid URL"],
    ["a base URL with credentials", { provider: "openai-compatible", baseUrl: "http://u:p@127.0.0.1/v1" }, 400, "credentials"],
    ["a cloud metadata address", { provider: "openai-compatible", baseUrl: "http://169.254.169.254/v1" }, 400, "metadata"],
    [
      "a metadata address written as IPv4-mapped IPv6",
      { provider: "openai-compatible", baseUrl: "http://[::ffff:169.254.169.254]/v1" },
      400,
      "metadata"
    ],
    [
      "a metadata name with a trailing dot",
      { provider: "openai-compatible", baseUrl: "http://metadata.google.internal./v1" },
      400,
      "metadata"
    ],
    ["a name with a slash", { provider: "openai-compatible", name: "a/b", baseUrl: "http://127.0.0.1:1/v1" }, 400, "name"],
    [
      "a name that is another provider's id",
      { provider: "openai-compatible", name: "anthropic", baseUrl: "http://127.0.0.1:1/v1" },
      400,
      "provider anthropic"
    ],
    ["an unknown field", { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", apikey: "typo" }, 400, "apikey"],
    [
      "a non-positive max_concurrent",
      { provider: "openai-compatible", baseUrl: "http://127.0.0.1:1/v1", max_concurrent: 0 },
      400,
      "max_concurrent"
    ]
  ])("rejects %s", async (_name, body, status, fragment) => {
    const res = await create(body)
    expect(res.status).toBe(status)
    expect(res.text).toContain(fragment)
  })

  it("answers bad management input with a one-line 400, never a 500", async () => {
    const notJson = await call(`${gw.url}/api/providers`, {
      method: "POST",
      body: "not json",
      headers: { ...admin, "content-type": "application/json" }
    })
    expect(notJson.status).toBe(400)
    expect(notJson.body).toMatchObject({ _tag: "BadRequest" })
    expect(notJson.body.message).toContain("not valid JSON")
    const wrongType = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", baseUrl: upstream.baseUrl, priority: "high" },
      headers: admin
    })
    expect(wrongType.status).toBe(400)
    expect(wrongType.body.message).toBe('invalid request: priority: expected number, actual "high"')
    const truncated = await call(`${gw.url}/api/auth/login`, {
      method: "POST",
      body: '{"password":',
      headers: { "content-type": "application/json" }
    })
    expect(truncated.status).toBe(400)
  })

  it("refuses a second connection with the same name with 409", async () => {
    expect((await create({ provider: "openai-compatible", name: "twice", baseUrl: upstream.baseUrl })).status).toBe(201)
    const again = await create({ provider: "openai-compatible", name: "TWICE", baseUrl: upstream.baseUrl })
    expect(again.status).toBe(409)
  })

  it("tests a connection against its upstream and records the outcome", async () => {
    const ok = await create({ provider: "openai-compatible", name: "probe-ok", baseUrl: upstream.baseUrl, apiKey: "sk-good" })
    const res = await call(`${gw.url}/api/providers/${ok.body.id}/test`, { method: "POST", headers: admin })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ ok: true, status: 200, modelCount: 2, error: null, name: "probe-ok" })
    expect(upstream.requests.at(-1)).toMatchObject({ method: "GET", path: "/v1/models" })
    expect(upstream.requests.at(-1)!.headers.authorization).toBe("Bearer sk-good")
    const after = await call(`${gw.url}/api/providers/${ok.body.id}`, { headers: admin })
    expect(after.body.testStatus).toBe("active")
    expect(after.body.lastTestedAt).not.toBeNull()

    other.next({
      status: 401,
      body: { error: { message: "Incorrect API key provided", type: "invalid_request_error", code: "invalid_api_key" } }
    })
    const bad = await create({ provider: "openai-compatible", name: "probe-bad", baseUrl: other.baseUrl, apiKey: "sk-bad" })
    const failed = await call(`${gw.url}/api/providers/${bad.body.id}/test`, { method: "POST", headers: admin })
    expect(failed.body).toMatchObject({ ok: false, status: 401 })
    expect(failed.body.error).toContain("Incorrect API key")
    expect((await call(`${gw.url}/api/providers/${bad.body.id}`, { headers: admin })).body).toMatchObject({
      testStatus: "error",
      lastErrorType: "test_failed"
    })
  })

  it("lists a connection's models from the upstream, else from the catalog", async () => {
    const c = await create({ provider: "openai-compatible", name: "models", baseUrl: upstream.baseUrl, defaultModel: "m1" })
    const res = await call(`${gw.url}/api/providers/${c.body.id}/models`, { headers: admin })
    expect(res.body).toMatchObject({ source: "upstream", models: [{ id: "m1" }, { id: "m2" }] })
    other.next({ status: 500 })
    const d = await create({ provider: "openai-compatible", name: "models-down", baseUrl: other.baseUrl, defaultModel: "mx" })
    const fallback = await call(`${gw.url}/api/providers/${d.body.id}/models`, { headers: admin })
    expect(fallback.body).toMatchObject({ source: "catalog", models: [{ id: "mx" }] })
    expect(fallback.body.error).toContain("HTTP 500")
  })

  it("validates credentials without saving anything", async () => {
    const before = (await call(`${gw.url}/api/providers`, { headers: admin })).body.connections.length
    const res = await call(`${gw.url}/api/providers/validate`, {
      body: { provider: "openai-compatible", baseUrl: upstream.baseUrl, apiKey: "sk-try" },
      headers: admin
    })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ ok: true, status: 200, modelCount: 2 })
    expect((await call(`${gw.url}/api/providers`, { headers: admin })).body.connections.length).toBe(before)
    const unknown = await call(`${gw.url}/api/providers/validate`, { body: { provider: "nope", apiKey: "x" }, headers: admin })
    expect(unknown.status).toBe(400)
  })

  it("routes <name>/<model> to the named connection when two share a provider type", async () => {
    await create({ provider: "openai-compatible", name: "left", baseUrl: upstream.baseUrl, apiKey: "sk-left" })
    await create({ provider: "openai-compatible", name: "right", baseUrl: other.baseUrl, apiKey: "sk-right" })
    upstream.next({ content: "from left" })
    other.next({ content: "from right" })
    const l = await call(`${gw.url}/v1/chat/completions`, { body: { model: "left/m1", messages: [{ role: "user", content: "x" }] } })
    const r = await call(`${gw.url}/v1/chat/completions`, { body: { model: "right/m1", messages: [{ role: "user", content: "x" }] } })
    expect(l.body.choices[0].message.content).toBe("from left")
    expect(r.body.choices[0].message.content).toBe("from right")
    expect(other.chatRequests.at(-1)!.headers.authorization).toBe("Bearer sk-right")
  })

  it("routes <provider>/<model> past a disabled connection named like the provider to its other connections", async () => {
    const dir = await startGateway()
    try {
      await dir.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const h = { authorization: `Bearer ${ADMIN}` }
      await call(`${dir.url}/api/providers`, {
        body: { provider: "openai-compatible", baseUrl: upstream.baseUrl, enabled: false },
        headers: h
      })
      await call(`${dir.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "backup", baseUrl: other.baseUrl },
        headers: h
      })
      other.next({ content: "from backup" })
      const res = await call(`${dir.url}/v1/chat/completions`, {
        body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] }
      })
      expect(res.status).toBe(200)
      expect(res.body.choices[0].message.content).toBe("from backup")
    } finally {
      await dir.close()
    }
  })

  it("answers 409, not 500, when another process took the name a moment ago", async () => {
    await Effect.runPromise(
      Effect.provide(
        Effect.flatMap(Connections, (c) => c.create({ provider: "openai-compatible", name: "raced", baseUrl: upstream.baseUrl })),
        localCore(gw.dataDir)
      )
    )
    // The server's cache has not seen the other process's commit yet; the database decides.
    const res = await create({ provider: "openai-compatible", name: "raced", baseUrl: upstream.baseUrl })
    expect(res.status).toBe(409)
  })

  it("will not send a stored key to a new host on an edit alone", async () => {
    const c = await create({ provider: "openai-compatible", name: "keyed", baseUrl: upstream.baseUrl, apiKey: "sk-keep-this-secret-123" })
    const moved = await call(`${gw.url}/api/providers/${c.body.id}`, {
      method: "PUT",
      body: { baseUrl: "https://elsewhere.example/v1" },
      headers: admin
    })
    expect(moved.status).toBe(400)
    expect(moved.body.message).toContain("apiKey")
    const samePath = await call(`${gw.url}/api/providers/${c.body.id}`, {
      method: "PUT",
      body: { baseUrl: `${upstream.url}/v2` },
      headers: admin
    })
    expect(samePath.status).toBe(200)
    const withKey = await call(`${gw.url}/api/providers/${c.body.id}`, {
      method: "PUT",
      body: { baseUrl: "https://elsewhere.example/v1", apiKey: "sk-new-key-for-elsewhere-1" },
      headers: admin
    })
    expect(withKey.status).toBe(200)
  })

  it("does not route to a disabled connection", async () => {
    const c = await create({ provider: "openai-compatible", name: "off", baseUrl: upstream.baseUrl, enabled: false })
    expect(c.status).toBe(201)
    const res = await call(`${gw.url}/v1/chat/completions`, { body: { model: "off/m1", messages: [{ role: "user", content: "x" }] } })
    expect(res.status).toBe(404)
    expect(res.body.error.message).toContain("disabled")
  })
})

describe("outbound URL policy", () => {
  const defaults = { guard: true, allowLocal: true, allowPrivate: false }
  it("classifies hosts", () => {
    expect(classifyHost("127.0.0.1")).toBe("loopback")
    expect(classifyHost("[::1]")).toBe("loopback")
    expect(classifyHost("localhost")).toBe("loopback")
    expect(classifyHost("192.168.1.20")).toBe("lan")
    expect(classifyHost("10.1.2.3")).toBe("lan")
    expect(classifyHost("172.20.0.1")).toBe("lan")
    expect(classifyHost("100.64.1.1")).toBe("private")
    expect(classifyHost("169.254.10.10")).toBe("private")
    expect(classifyHost("169.254.169.254")).toBe("metadata")
    expect(classifyHost("metadata.google.internal")).toBe("metadata")
    expect(classifyHost("::ffff:127.0.0.1")).toBe("loopback")
    // IPv4 inside IPv6, in the hex form URL parsing produces
    expect(classifyHost(new URL("http://[::ffff:169.254.169.254]/").hostname)).toBe("metadata")
    expect(classifyHost(new URL("http://[::ffff:7f00:1]/").hostname)).toBe("loopback")
    expect(classifyHost("[64:ff9b::a9fe:a9fe]")).toBe("metadata")
    expect(classifyHost("[::a9fe:a9fe]")).toBe("metadata")
    expect(classifyHost("[fd00:ec2::254]")).toBe("metadata")
    expect(classifyHost("[::ffff:808:808]")).toBe("public")
    expect(classifyHost("[fe80::1]")).toBe("private")
    expect(classifyHost("[fc00::1]")).toBe("lan")
    expect(classifyHost("[::]")).toBe("private")
    expect(classifyHost("localhost.")).toBe("loopback")
    expect(classifyHost(new URL("http://2130706433/").hostname)).toBe("loopback")
    expect(classifyHost("api.openai.com")).toBe("public")
    expect(classifyHost("8.8.8.8")).toBe("public")
  })
  it("allows local by default, blocks private unless allowed, always blocks metadata while the guard is on", () => {
    expect(checkProviderUrl("http://127.0.0.1:11434", defaults).ok).toBe(true)
    expect(checkProviderUrl("http://100.64.0.1/v1", defaults).ok).toBe(false)
    expect(checkProviderUrl("http://100.64.0.1/v1", { ...defaults, allowPrivate: true }).ok).toBe(true)
    expect(checkProviderUrl("http://127.0.0.1:11434", { ...defaults, allowLocal: false }).ok).toBe(false)
    expect(checkProviderUrl("http://169.254.169.254", { ...defaults, allowPrivate: true }).ok).toBe(false)
    expect(checkProviderUrl("http://169.254.169.254", { ...defaults, guard: false }).ok).toBe(true)
  })
})

describe("masking", () => {
  it("shows at most about a third of a secret, and nothing of a short one", () => {
    expect(maskSecret("sk-up")).toBe("****")
    expect(maskSecret("sk-12345678")).toBe("****")
    expect(maskSecret("sk-admin-1234")).toBe("sk-…34")
    expect(maskSecret("gwk_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG")).toBe("gwk_0123…DEFG")
  })
})
