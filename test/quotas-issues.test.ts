import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Budgets } from "../src/services/accounting/Budgets.js"
import { TokenLimits } from "../src/services/accounting/TokenLimits.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { IssueTracker } from "../src/inference/quotas/IssueTracker.js"
import { FakeQuota } from "./support/fakeQuota.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Quota checks and issue reports (docs/files-batches.md, "Quota checks and issue reports"),
 * against fake OpenRouter, DeepSeek, OpenAI-compatible and Anthropic account endpoints and a
 * fake GitHub issues API on loopback. The client is raw fetch (the openai SDK has neither).
 */
const ADMIN = "gwk_quota_admin_key_0123456789abcdef"
const USER = "gwk_quota_user_key_fedcba9876543210"
const SPENT = "gwk_quota_spent_key_aaaabbbbccccdddd"
/** No known key prefix: only the literal match of the connection's key can mask it. */
const CONN_KEY = "conn-secret-0123456789abcdefXYZ"
const REFUSED_KEY = "refused-key-ABCDEFGHIJKL1234567"
const TRACKER_TOKEN = "tracker-token-9f8e7d6c5b4a39281706"

const admin = { authorization: `Bearer ${ADMIN}` }
const user = { authorization: `Bearer ${USER}` }

let gw: TestGateway
let bare: TestGateway
let fake: FakeQuota

const check = (query: string, headers: Record<string, string> = user) => call(`${gw.url}/v1/quotas/check?${query}`, { headers })
const report = (body: unknown, on: TestGateway = gw) => call(`${on.url}/v1/issues/report`, { body, headers: user })

beforeAll(async () => {
  fake = await FakeQuota.start(CONN_KEY, TRACKER_TOKEN)
  gw = await startGateway({
    env: {
      GATEWAY_ISSUES_REPOSITORY: "acme/gateway-ops",
      GATEWAY_ISSUES_TOKEN: TRACKER_TOKEN,
      GATEWAY_ISSUES_BASE_URL: `${fake.origin}/github`
    }
  })
  bare = await startGateway()
  for (const g of [gw, bare]) {
    await g.run(
      Effect.gen(function* () {
        const keys = yield* ApiKeys
        yield* keys.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })
        yield* keys.create({ name: "user", scopes: ["inference"] }, { secret: USER })
      })
    )
  }
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "spent", scopes: ["inference"] }, { secret: SPENT })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body: { apiKey: CONN_KEY, ...body }, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openrouter", name: "or", baseUrl: `${fake.origin}/openrouter/api/v1` })
  await add({ provider: "deepseek", name: "ds", baseUrl: `${fake.origin}/deepseek/v1` })
  await add({ provider: "openai-compatible", name: "compat", baseUrl: `${fake.origin}/compat/v1`, models: ["gpt-4o-mini"] })
  await add({ provider: "anthropic", name: "claude", baseUrl: `${fake.origin}/anthropic` })
  await add({ provider: "groq", name: "refuser", baseUrl: `${fake.origin}/refuse/v1`, apiKey: REFUSED_KEY })
  await add({ provider: "jina", name: "jn", baseUrl: `${fake.origin}/jina` })
})

afterAll(async () => {
  await gw?.close()
  await bare?.close()
  await fake?.close()
})

describe("GET /v1/quotas/check", () => {
  it("reads OpenRouter's key info: credits left, the monthly reset, the gateway's view beside it", async () => {
    fake.openRouterRemaining = 7.5
    const res = await check("provider=openrouter&connection=or")
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({
      ok: true,
      remaining: 7.5,
      source: "openrouter.key",
      provider: "openrouter",
      connection: "or",
      reason: null
    })
    const now = new Date()
    expect(res.body.resetsAt).toBe(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString())
    expect(res.body.details).toMatchObject({
      unit: "usd",
      upstream: { ok: true, status: 200, limit: 10, limitReset: "monthly", rateLimit: { requests: 200, interval: "10s" } },
      budget: null,
      tokenLimits: [],
      refusedBy: []
    })
    expect(res.body.details.resilience).toMatchObject({ enabled: true, admission: "ok", breaker: "CLOSED", state: "available" })
    const sent = fake.received.filter((r) => r.path === "/openrouter/api/v1/key").at(-1)!
    expect(sent.method).toBe("GET")
    expect(sent.headers["authorization"]).toBe(`Bearer ${CONN_KEY}`)
  })

  it("says no when the OpenRouter key's credit limit is used up", async () => {
    fake.openRouterRemaining = 0
    const res = await check("connection=or")
    fake.openRouterRemaining = 7.5
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      ok: false,
      remaining: 0,
      source: "openrouter.key",
      reason: "the OpenRouter key's credit limit is used up"
    })
    expect(res.body.details.refusedBy).toEqual([
      { by: "upstream", reason: "the OpenRouter key's credit limit is used up", resetsAt: res.body.resetsAt }
    ])
  })

  it("reads DeepSeek's balance at the API origin (beside /v1): USD preferred, is_available decides", async () => {
    const res = await check("provider=deepseek")
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ ok: true, remaining: 15.5, resetsAt: null, source: "deepseek.balance", connection: "ds" })
    expect(res.body.details.unit).toBe("USD")
    expect(res.body.details.upstream.balances).toContainEqual({ currency: "CNY", total: 110, granted: 10, toppedUp: 100 })
    expect(fake.received.some((r) => r.path === "/deepseek/user/balance")).toBe(true)

    fake.deepSeekAvailable = false
    const empty = await check("provider=deepseek")
    fake.deepSeekAvailable = true
    expect(empty.body).toMatchObject({
      ok: false,
      remaining: 0,
      source: "deepseek.balance",
      reason: "the DeepSeek account has no balance available for API calls"
    })
  })

  it("reads the x-ratelimit headers of an OpenAI-compatible model list", async () => {
    fake.compatRemainingRequests = 42
    const before = Date.now()
    const res = await check("connection=compat")
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ ok: true, remaining: 42, source: "ratelimit-headers", provider: "openai-compatible" })
    expect(res.body.details.unit).toBe("requests")
    expect(res.body.details.upstream.rateLimits).toMatchObject({
      requests: { limit: 100, remaining: 42 },
      tokens: { limit: 200000, remaining: 150000 }
    })
    // Not spent: the soonest reset (the tokens window, 20 ms).
    expect(Date.parse(res.body.resetsAt)).toBeGreaterThanOrEqual(before + 20)
    expect(Date.parse(res.body.resetsAt)).toBeLessThan(Date.now() + 1000)

    fake.compatRemainingRequests = 0
    const spent = await check("connection=compat")
    fake.compatRemainingRequests = 99
    expect(spent.body).toMatchObject({ ok: false, remaining: 0, reason: "upstream rate limit reached (requests)" })
    // Spent: when the requests window resets (6 minutes).
    expect(Date.parse(spent.body.resetsAt)).toBeGreaterThanOrEqual(before + 360_000)
  })

  it("reads Anthropic's anthropic-ratelimit headers from a count_tokens call", async () => {
    const res = await check("provider=anthropic")
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({
      ok: false,
      remaining: 49,
      source: "anthropic-ratelimit-headers",
      reason: "upstream rate limit reached (tokens)",
      resetsAt: "2030-01-01T00:01:00.000Z"
    })
    const sent = fake.received.filter((r) => r.path === "/anthropic/v1/messages/count_tokens").at(-1)!
    expect(sent.method).toBe("POST")
    expect(JSON.parse(sent.body).messages).toHaveLength(1)
  })

  it("an upstream that refuses the key: ok false with the source and reason, the key never echoed", async () => {
    const res = await check("provider=groq&connection=refuser")
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ ok: false, source: "ratelimit-headers", provider: "groq", connection: "refuser", resetsAt: null })
    expect(res.body.reason).toMatch(/^the upstream refused the key \(HTTP 401\): Incorrect API key provided: /)
    expect(res.body.details.upstream.status).toBe(401)
    expect(res.text).not.toContain(REFUSED_KEY)
    expect(res.text).not.toContain(REFUSED_KEY.slice(0, 14))
  })

  it("a provider without an account endpoint: only the gateway's view, said so", async () => {
    const res = await check("provider=jina")
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ ok: true, remaining: null, source: "none" })
    expect(res.body.details.upstream.note).toMatch(/jina has no balance/)
  })

  it("the caller key's spent budget makes ok false, with its reset and remaining", async () => {
    const spentKeyId = await gw.run(
      Effect.map(
        Effect.flatMap(ApiKeys, (k) => k.list),
        (keys) => keys.find((k) => k.name === "spent")!.id
      )
    )
    await gw.run(
      Effect.gen(function* () {
        const budgets = yield* Budgets
        yield* budgets.set({ apiKeyId: spentKeyId, dailyLimitUsd: 1 })
        yield* budgets.record(spentKeyId, 1.5)
      })
    )
    const res = await check("connection=or", { authorization: `Bearer ${SPENT}` })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ ok: false, remaining: 7.5, source: "openrouter.key" })
    expect(res.body.reason).toMatch(/^the key's daily budget is spent/)
    expect(res.body.details.budget).toMatchObject({ ok: false, limitUsd: 1, spentUsd: 1.5, remainingUsd: 0, window: "daily" })
    expect(res.body.details.refusedBy.map((r: any) => r.by)).toEqual(["budget"])
    const midnight = new Date()
    midnight.setUTCHours(24, 0, 0, 0)
    expect(res.body.resetsAt).toBe(midnight.toISOString())

    // Another key of the same gateway is not affected.
    expect((await check("connection=or")).body.ok).toBe(true)
  })

  it("names what is wrong: nothing asked (400), unknown provider (400), unknown connection (404), a mismatch (400)", async () => {
    const none = await check("")
    expect(none.status).toBe(400)
    expect(none.body.error).toMatchObject({ param: "provider", message: expect.stringMatching(/provider or connection is required/) })
    const unknown = await check("provider=nosuch")
    expect(unknown.status).toBe(400)
    expect(unknown.body.error).toMatchObject({ param: "provider", message: "unknown provider: nosuch" })
    const missing = await check("connection=ghost")
    expect(missing.status).toBe(404)
    expect(missing.body.error).toMatchObject({ param: "connection", message: "no connection named ghost" })
    const noConn = await check("provider=mistral")
    expect(noConn.status).toBe(404)
    expect(noConn.body.error.message).toBe("no connection of provider mistral")
    const mismatch = await check("provider=deepseek&connection=or")
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error.message).toBe("connection or is a openrouter connection, not deepseek")
  })
})

describe("GET /v1/quotas/check and token limits", () => {
  it("a spent token limit of the caller key on this provider makes ok false; other providers are not affected", async () => {
    const userId = await gw.run(
      Effect.map(
        Effect.flatMap(ApiKeys, (k) => k.list),
        (keys) => keys.find((k) => k.name === "user")!.id
      )
    )
    await gw.run(
      Effect.gen(function* () {
        const limits = yield* TokenLimits
        yield* limits.create({ apiKeyId: userId, scope: "provider", provider: "deepseek", maxTokens: 1000, window: "day" })
        yield* limits.record(userId, { provider: "deepseek", model: "deepseek-chat", requestedModel: "ds/deepseek-chat" }, 1200)
      })
    )
    const res = await check("provider=deepseek")
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ ok: false, remaining: 15.5, source: "deepseek.balance" })
    expect(res.body.reason).toMatch(/^token limit .+ reached \(1200 of 1000 tokens per day\)$/)
    expect(res.body.details.tokenLimits).toMatchObject([
      { scope: "provider", window: "day", maxTokens: 1000, usedTokens: 1200, remaining: 0 }
    ])
    expect(res.body.details.refusedBy.map((r: any) => r.by)).toEqual(["token_limit"])
    expect((await check("connection=or")).body).toMatchObject({ ok: true, details: { tokenLimits: [] } })
  })
})

describe("POST /v1/issues/report", () => {
  it("files to the tracker with GitHub's headers and labels; connection and gateway keys arrive masked", async () => {
    fake.trackerStatus = 201
    const res = await report({
      kind: "quota",
      provider: "openrouter",
      connection: "or",
      message: `OpenRouter key exhausted while issuing a key. Connection key was ${CONN_KEY}, caller used ${USER}.`,
      details: { apiKey: CONN_KEY, note: `tracker ${TRACKER_TOKEN}`, remaining: 0 }
    })
    expect(res.status, res.text).toBe(201)
    expect(res.body).toMatchObject({
      ok: true,
      number: expect.any(Number),
      url: expect.stringMatching(/^https:\/\/github\.example\/acme\/gateway-ops\/issues\/\d+$/)
    })
    const filed = fake.issuesFiled().at(-1)!
    expect(filed.path).toBe("/github/repos/acme/gateway-ops/issues")
    expect(filed.headers["authorization"]).toBe(`Bearer ${TRACKER_TOKEN}`)
    expect(filed.headers["accept"]).toBe("application/vnd.github+json")
    expect(filed.body.labels).toEqual(["gateway", "quota"])
    expect(filed.body.title).toBe("[quota] or: OpenRouter key exhausted while issuing a key. Connection key was ****, caller used ****.")
    const text = JSON.stringify(filed.body)
    for (const secret of [CONN_KEY, USER, TRACKER_TOKEN]) {
      expect(text).not.toContain(secret)
      expect(text).not.toContain(secret.slice(0, 14))
    }
    expect(filed.body.body).toContain("OpenRouter key exhausted while issuing a key")
    expect(filed.body.body).toContain("| Provider | openrouter |")
    expect(filed.body.body).toContain('"remaining": 0')
  })

  it("a tracker that fails is a 502 that says so, never echoing the token", async () => {
    fake.trackerStatus = 500
    const res = await report({ kind: "key_issuance", message: "could not issue a key" })
    fake.trackerStatus = 201
    expect(res.status).toBe(502)
    expect(res.body.error.message).toBe("issue report not filed: the tracker failed (HTTP 500): Server Error")
    expect(res.text).not.toContain(TRACKER_TOKEN)
  })

  it("400 naming the missing settings when no tracker is configured", async () => {
    const res = await report({ kind: "quota", message: "out of credits" }, bare)
    expect(res.status).toBe(400)
    expect(res.body.error).toMatchObject({ code: "issues_not_configured", param: "repository" })
    expect(res.body.error.message).toBe(
      "issue reports are not configured: set the tracker's repository (GATEWAY_ISSUES_REPOSITORY) and token (GATEWAY_ISSUES_TOKEN)"
    )
  })

  it("stored settings (token encrypted) apply without the environment", async () => {
    const view = await bare.run(
      Effect.flatMap(IssueTracker, (t) =>
        t.configure({ repository: "acme/stored", baseUrl: `${fake.origin}/github`, token: TRACKER_TOKEN })
      )
    )
    expect(view).toEqual({
      repository: "acme/stored",
      baseUrl: `${fake.origin}/github`,
      tokenSet: true,
      source: { repository: "stored", token: "stored", baseUrl: "stored" }
    })
    const res = await report({ kind: "key_issuance", message: "stored settings work" }, bare)
    expect(res.status, res.text).toBe(201)
    expect(fake.issuesFiled().at(-1)!.path).toBe("/github/repos/acme/stored/issues")
    const { queryDb } = await import("./support/db.js")
    const rows = queryDb(bare.dataDir, "SELECT value FROM kv WHERE namespace = 'issues'") as Array<{ value: string }>
    expect(rows[0]!.value).not.toContain(TRACKER_TOKEN)
    expect(JSON.parse(rows[0]!.value).tokenEnc).toMatch(/^v1:/)
  })

  it("bad input is a 400 naming the field", async () => {
    const kind = await report({ kind: "weather", message: "x" })
    expect(kind.status).toBe(400)
    expect(kind.body.error).toMatchObject({ param: "kind", message: "kind must be one of quota, key_issuance, provider_error, other" })
    const message = await report({ kind: "quota" })
    expect(message.status).toBe(400)
    expect(message.body.error.param).toBe("message")
    const details = await report({ kind: "quota", message: "m", details: "text" })
    expect(details.body.error.param).toBe("details")
  })
})
