import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { EventBus, type GatewayEvent } from "../src/platform/events/EventBus.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Accounting and caching through HTTP: cost telemetry, usage rows, budgets with the emergency
 * fallback, token limits, the response cache, idempotency, and the usage, telemetry, monitoring
 * and pricing endpoints. Prices are the catalog's: gpt-4o is $2.50 in / $10 out per 1M tokens,
 * and the fake upstream reports 11 input and 7 output tokens unless told otherwise.
 */
const ADMIN = "gwk_acct_admin_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }
/** 11 × 2.5 / 1e6 + 7 × 10 / 1e6 */
const GPT4O_COST = 0.0000975

let gw: TestGateway
let up: FakeUpstream
let local: FakeUpstream
let userKey: { id: string; secret: string }
const events: Array<GatewayEvent> = []

const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  call(`${gw.url}/v1/chat/completions`, { body: { messages: [{ role: "user", content: "hi" }], ...body }, headers })
const asUser = { authorization: "" }
const flush = () => gw.usageWritten()
/** A streamed request's row is queued as its stream ends, just after the client saw the end: written once no request is in flight. */
const waitForRow = async (_requestId: string) => flush()

beforeAll(async () => {
  up = await FakeUpstream.start()
  local = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const created = await gw.run(
    Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: "gwk_acct_user_key_0123456789abcdefghij" }))
  )
  userKey = { id: created.id, secret: "gwk_acct_user_key_0123456789abcdefghij" }
  asUser.authorization = `Bearer ${userKey.secret}`
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (await add({ provider: "openai", name: "oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" })).status
  ).toBe(201)
  expect((await add({ provider: "ollama", name: "local", baseUrl: local.baseUrl("ollama"), defaultModel: "llama3.2" })).status).toBe(201)
  gw.runtime.runFork(
    Effect.scoped(
      Effect.gen(function* () {
        const q = yield* (yield* EventBus).subscribe
        for (;;) events.push(yield* Queue.take(q))
      })
    )
  )
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await local?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  up.always({ content: "paid answer" })
  local.always({ content: "free answer" })
  up.requests.length = 0
  local.requests.length = 0
  events.length = 0
  await call(`${gw.url}/api/cache/stats`, { method: "DELETE", headers: admin })
})

describe("cost telemetry", () => {
  it("a non-streamed success carries the cost headers, computed from the catalog price", async () => {
    const res = await chat({ model: "oai/gpt-4o" })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-response-cost")).toBe("0.0000975000")
    expect(res.headers.get("x-gateway-tokens-in")).toBe("11")
    expect(res.headers.get("x-gateway-tokens-out")).toBe("7")
    expect(res.headers.get("x-gateway-model")).toBe("gpt-4o")
    expect(res.headers.get("x-gateway-provider")).toBe("openai")
    expect(Number(res.headers.get("x-gateway-latency-ms"))).toBeGreaterThanOrEqual(0)
    expect(res.headers.get("x-gateway-cache-hit")).toBe("false")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBeNull()
    expect(res.headers.get("x-gateway-request-id")).toMatch(/^req_/)
    expect(res.headers.get("x-gateway-version")).toBeTruthy()
    expect(res.headers.get("x-gateway-session-id")).toMatch(/^sess_/)
  })

  it("an unpriced model costs 0.0000000000, and a price override changes the cost", async () => {
    const free = await chat({ model: "local/llama3.2" })
    expect(free.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    const set = await call(`${gw.url}/api/pricing`, {
      method: "PUT",
      body: { provider: "openai", model: "gpt-4o", input: 1, output: 2 },
      headers: admin
    })
    expect(set.status).toBe(200)
    try {
      // 11 × 1 / 1e6 + 7 × 2 / 1e6
      expect((await chat({ model: "oai/gpt-4o" })).headers.get("x-gateway-response-cost")).toBe("0.0000250000")
      const prices = (await call(`${gw.url}/api/pricing`, { headers: admin })).body.prices
      expect(prices.find((p: any) => p.provider === "openai" && p.model === "gpt-4o")).toMatchObject({
        input: 1,
        output: 2,
        source: expect.stringContaining("override")
      })
      // Media models are listed too, with their kind and unit price.
      expect(prices.find((p: any) => p.provider === "cohere" && p.model === "rerank-v3.5")).toMatchObject({
        kind: "rerank",
        perSearch: 0.002
      })
      expect(prices.find((p: any) => p.provider === "deepgram" && p.model === "nova-3")).toMatchObject({ kind: "transcription" })
    } finally {
      await call(`${gw.url}/api/pricing`, { method: "DELETE", body: { provider: "openai", model: "gpt-4o" }, headers: admin })
    }
    expect((await chat({ model: "oai/gpt-4o" })).headers.get("x-gateway-response-cost")).toBe("0.0000975000")
  })

  it("streamed answers report the same figures in the usage row", async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: userKey.secret, maxRetries: 0 })
    const { response, data } = await client.chat.completions
      .create({ model: "oai/gpt-4o", messages: [{ role: "user", content: "hi" }], stream: true })
      .withResponse()
    for await (const _ of data) {
      // read
    }
    expect(response.headers.get("x-gateway-response-cost")).toBeNull()
    await waitForRow(response.headers.get("x-gateway-request-id")!)
    const [row] = queryDb(
      gw.dataDir,
      "SELECT tokens_in, tokens_out, cost_usd, api_key_id, requested_model, fallback_attempts, cache_hit FROM usage WHERE request_id = ?",
      response.headers.get("x-gateway-request-id")
    )
    expect(row).toMatchObject({
      tokens_in: 11,
      tokens_out: 7,
      api_key_id: userKey.id,
      requested_model: "oai/gpt-4o",
      fallback_attempts: 0,
      cache_hit: 0
    })
    expect(row!["cost_usd"]).toBeCloseTo(GPT4O_COST, 12)
  })
})

describe("budgets", () => {
  afterAll(async () => {
    await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "GATEWAY_EMERGENCY_FALLBACK" }, headers: admin })
  })

  it("POST refuses the legacy shape and a budget without a positive limit", async () => {
    const legacy = await call(`${gw.url}/api/usage/budget`, { body: { keyId: userKey.id, limit: 5, period: "daily" }, headers: admin })
    expect(legacy.status).toBe(400)
    expect(legacy.body.message).toMatch(/legacy/i)
    const none = await call(`${gw.url}/api/usage/budget`, { body: { apiKeyId: userKey.id, dailyLimitUsd: 0 }, headers: admin })
    expect(none.status).toBe(400)
    expect(none.body.message).toMatch(/at least one limit greater than 0/i)
    const unknown = await call(`${gw.url}/api/usage/budget`, { body: { apiKeyId: "key_nope", dailyLimitUsd: 1 }, headers: admin })
    expect(unknown.status).toBe(404)
  })

  it("a spent budget sends the key's requests to the free fallback model, or answers 429 when the fallback is off", async () => {
    // A key of its own: a budget counts what its key already spent in the window.
    const secret = "gwk_acct_budget_key_0123456789abcdefghi"
    const budgetKey = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "budgeted", scopes: ["inference"] }, { secret })))
    const asUser = { authorization: `Bearer ${secret}` }
    const userKey = { id: budgetKey.id }
    const set = await call(`${gw.url}/api/usage/budget`, {
      body: { apiKeyId: userKey.id, dailyLimitUsd: 0.00015, warningThreshold: 0.5 },
      headers: admin
    })
    expect(set.status).toBe(200)
    expect((await chat({ model: "oai/gpt-4o" }, asUser)).status).toBe(200)
    const warning = events.find((e) => e.event === "quota.exceeded")
    expect(warning?.data, JSON.stringify(warning)).toMatchObject({ api_key_id: userKey.id, window: "daily", kind: "warning" })
    expect((await chat({ model: "oai/gpt-4o" }, asUser)).status).toBe(200)
    expect(events.some((e) => e.event === "quota.exceeded" && e.data["kind"] === "exceeded")).toBe(true)
    const status = (await call(`${gw.url}/api/usage/budget?apiKeyId=${userKey.id}`, { headers: admin })).body.budgets[0]
    expect(status.exceeded).toBe(true)
    expect(status.windows.daily.spentUsd).toBeCloseTo(2 * GPT4O_COST, 10)
    // Spent: the emergency fallback (on by default) answers from the free local model.
    const fallback = await chat({ model: "oai/gpt-4o" }, asUser)
    expect(fallback.status).toBe(200)
    expect(fallback.body.choices[0].message.content).toBe("free answer")
    expect(fallback.headers.get("x-gateway-emergency-fallback")).toBe("local/llama3.2")
    expect(up.requests).toHaveLength(2)
    // Other keys are not affected.
    expect((await chat({ model: "oai/gpt-4o" })).body.choices[0].message.content).toBe("paid answer")
    // With the fallback off: 429 with Retry-After until the window resets.
    await call(`${gw.url}/api/settings/feature-flags`, {
      method: "PUT",
      body: { key: "GATEWAY_EMERGENCY_FALLBACK", value: "false" },
      headers: admin
    })
    const refused = await chat({ model: "oai/gpt-4o" }, asUser)
    expect(refused.status).toBe(429)
    expect(refused.body.error.code).toBe("budget_exhausted")
    expect(refused.body.error.message).toContain("daily budget")
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
  })
})

describe("token limits", () => {
  afterAll(async () => {
    const list = (await call(`${gw.url}/api/usage/token-limits`, { headers: admin })).body.limits
    for (const l of list) await call(`${gw.url}/api/usage/token-limits`, { method: "DELETE", body: { id: l.id }, headers: admin })
  })

  it("a model-scoped limit answers 429 with Retry-After once reached, and leaves other models alone", async () => {
    // A key of its own: a limit counts the tokens its key already used in the current window.
    const secret = "gwk_acct_limited_key_0123456789abcdefgh"
    const limitedKey = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "limited", scopes: ["inference"] }, { secret })))
    const asUser = { authorization: `Bearer ${secret}` }
    const userKey = { id: limitedKey.id }
    const bad = await call(`${gw.url}/api/usage/token-limits`, {
      body: { apiKeyId: userKey.id, scope: "model", maxTokens: 10 },
      headers: admin
    })
    expect(bad.status).toBe(400)
    const created = await call(`${gw.url}/api/usage/token-limits`, {
      body: { apiKeyId: userKey.id, scope: "model", model: "oai/gpt-4o", maxTokens: 20, window: "hour" },
      headers: admin
    })
    expect(created.status).toBe(201)
    expect((await chat({ model: "oai/gpt-4o" }, asUser)).status).toBe(200)
    expect((await chat({ model: "oai/gpt-4o" }, asUser)).status).toBe(200)
    const limited = await chat({ model: "oai/gpt-4o" }, asUser)
    expect(limited.status).toBe(429)
    expect(limited.body.error.code).toBe("token_limit_exceeded")
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
    expect(up.requests).toHaveLength(2)
    expect((await chat({ model: "local/llama3.2" }, asUser)).status).toBe(200)
    const listed = (await call(`${gw.url}/api/usage/token-limits?apiKeyId=${userKey.id}`, { headers: admin })).body.limits
    expect(listed[0]).toMatchObject({ scope: "model", model: "oai/gpt-4o", maxTokens: 20, usedTokens: 36 })
    const removed = await call(`${gw.url}/api/usage/token-limits`, { method: "DELETE", body: { id: created.body.id }, headers: admin })
    expect(removed.status).toBe(200)
    expect((await chat({ model: "oai/gpt-4o" }, asUser)).status).toBe(200)
  })
})

describe("response cache", () => {
  it("serves a repeated deterministic request from the cache: no upstream call, cost 0, cost saved", async () => {
    const body = { model: "oai/gpt-4o", temperature: 0, messages: [{ role: "user", content: "what is 2+2" }] }
    const first = await chat(body)
    expect(first.headers.get("x-gateway-cache")).toBe("MISS")
    await flush()
    const second = await chat(body)
    expect(second.headers.get("x-gateway-cache")).toBe("HIT")
    expect(second.body).toEqual(first.body)
    expect(up.requests).toHaveLength(1)
    expect(second.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    expect(second.headers.get("x-gateway-cost-saved")).toBe("0.0000975000")
    expect(second.headers.get("x-gateway-cache-hit")).toBe("true")
    await flush()
    const [row] = queryDb(
      gw.dataDir,
      "SELECT cache_hit, cost_usd, status FROM usage WHERE request_id = ?",
      second.headers.get("x-gateway-request-id")
    )
    expect(row).toMatchObject({ cache_hit: 1, cost_usd: 0, status: 200 })
    // A seed makes a request deterministic too; key order does not matter.
    const seeded = { messages: [{ content: "pick a number", role: "user" }], seed: 7, model: "oai/gpt-4o" }
    await chat(seeded)
    expect(
      (await chat({ model: "oai/gpt-4o", seed: 7, messages: [{ role: "user", content: "pick a number" }] })).headers.get("x-gateway-cache")
    ).toBe("HIT")
    const stats = (await call(`${gw.url}/api/cache/stats`, { headers: admin })).body
    expect(stats.semanticCache).toMatchObject({ memorySize: 2, memoryMaxSize: 1000, hits: 2 })
    expect(stats.semanticCache.hitRate).toBeGreaterThan(0)
    expect(stats.idempotency).toEqual({ activeKeys: expect.any(Number), windowMs: 5000 })
  })

  it("never caches sampling requests, and X-Gateway-No-Cache bypasses it", async () => {
    const sampled = { model: "oai/gpt-4o", temperature: 0.7, messages: [{ role: "user", content: "a poem" }] }
    await chat(sampled)
    expect((await chat(sampled)).headers.get("x-gateway-cache")).toBe("MISS")
    expect(up.requests).toHaveLength(2)
    const exact = { model: "oai/gpt-4o", temperature: 0, messages: [{ role: "user", content: "bypass" }] }
    await chat(exact)
    const bypass = await chat(exact, { "x-gateway-no-cache": "true" })
    expect(bypass.headers.get("x-gateway-cache")).toBe("MISS")
    expect(up.requests).toHaveLength(4)
  })

  it("DELETE /api/cache/stats empties it", async () => {
    const body = { model: "oai/gpt-4o", temperature: 0, messages: [{ role: "user", content: "clear me" }] }
    await chat(body)
    await flush()
    const cleared = await call(`${gw.url}/api/cache/stats`, { method: "DELETE", headers: admin })
    expect(cleared.body.cleared.memory).toBeGreaterThanOrEqual(1)
    expect((await chat(body)).headers.get("x-gateway-cache")).toBe("MISS")
  })
})

describe("idempotency", () => {
  it("a burst of 50 identical requests with one Idempotency-Key makes exactly one upstream call", async () => {
    up.always({ content: "once", delayMs: 100 })
    const results = await Promise.all(
      Array.from({ length: 50 }, () => chat({ model: "oai/gpt-4o", temperature: 0.9 }, { "idempotency-key": "burst-1" }))
    )
    expect(up.requests).toHaveLength(1)
    expect(results.every((r) => r.status === 200 && r.body.choices[0].message.content === "once")).toBe(true)
    expect(results.filter((r) => r.headers.get("x-gateway-idempotent") === "true")).toHaveLength(49)
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1)
    // X-Request-Id works the same way; a different key is a different request.
    await chat({ model: "oai/gpt-4o" }, { "x-request-id": "r-1" })
    const again = await chat({ model: "oai/gpt-4o" }, { "x-request-id": "r-1" })
    expect(again.headers.get("x-gateway-idempotent")).toBe("true")
    await chat({ model: "oai/gpt-4o" }, { "idempotency-key": "other" })
    expect(up.requests).toHaveLength(3)
  })

  it("a streamed answer is shared whole with a duplicate", async () => {
    const body = { model: "oai/gpt-4o", stream: true }
    const first = await chat(body, { "idempotency-key": "stream-1" })
    const dup = await chat(body, { "idempotency-key": "stream-1" })
    expect(dup.headers.get("x-gateway-idempotent")).toBe("true")
    expect(dup.text).toBe(first.text)
    expect(up.requests).toHaveLength(1)
  })
})

describe("usage, telemetry, monitoring", () => {
  it("history, logs, request logs, per-connection usage, telemetry percentiles and monitoring health", async () => {
    up.next({ status: 503 })
    await chat({ model: "oai/gpt-4o" }, asUser)
    // The 503 cooled the connection down (docs/resilience.md): the next requests should reach it.
    await gw.resetResilience()
    for (let i = 0; i < 3; i++) await chat({ model: "oai/gpt-4o" }, asUser)
    await chat({ model: "local/llama3.2" })
    const history = await call(`${gw.url}/api/usage/history?groupBy=provider`, { headers: admin })
    expect(history.status).toBe(200)
    const openai = history.body.rows.find((r: any) => r.key === "openai")
    expect(openai.requests).toBeGreaterThanOrEqual(4)
    expect(openai.errors).toBeGreaterThanOrEqual(1)
    expect(openai.costUsd).toBeGreaterThan(0)
    expect(history.body.totals.requests).toBeGreaterThanOrEqual(openai.requests)
    const byKey = await call(`${gw.url}/api/usage/history?groupBy=apiKey&apiKeyId=${userKey.id}`, { headers: admin })
    expect(byKey.body.rows.every((r: any) => r.key === userKey.id)).toBe(true)

    const logs = await call(`${gw.url}/api/usage/logs?limit=2`, { headers: admin })
    expect(logs.body.logs).toHaveLength(2)
    expect(logs.body.nextBefore).toBeTypeOf("number")
    const page2 = await call(`${gw.url}/api/usage/logs?limit=2&before=${logs.body.nextBefore}`, { headers: admin })
    expect(page2.body.logs[0].id).toBeLessThan(logs.body.logs[1].id)
    const errors = await call(`${gw.url}/api/usage/request-logs?status=error&provider=openai`, { headers: admin })
    expect(errors.body.requests.length).toBeGreaterThanOrEqual(1)
    expect(errors.body.requests[0]).toMatchObject({ status: 503, cacheHit: false, fallbackAttempts: 0 })
    expect((await call(`${gw.url}/api/usage/logs?limit=0`, { headers: admin })).status).toBe(400)
    expect((await call(`${gw.url}/api/usage/history?groupBy=color`, { headers: admin })).status).toBe(400)

    const conn = await call(`${gw.url}/api/usage/oai`, { headers: admin })
    expect(conn.status).toBe(200)
    expect(conn.body).toMatchObject({ name: "oai", provider: "openai" })
    expect(conn.body.last24h.requests).toBeGreaterThanOrEqual(4)
    expect(conn.body.last24h.p50LatencyMs).toBeTypeOf("number")
    expect((await call(`${gw.url}/api/usage/nope`, { headers: admin })).status).toBe(404)

    const telemetry = await call(`${gw.url}/api/telemetry/summary`, { headers: admin })
    const t = telemetry.body.providers.find((p: any) => p.provider === "openai")
    expect(t.count).toBeGreaterThanOrEqual(4)
    expect(t.p50).toBeLessThanOrEqual(t.p95)
    expect(t.p95).toBeLessThanOrEqual(t.p99)

    const health = await call(`${gw.url}/api/monitoring/health`, { headers: admin })
    expect(health.body).toMatchObject({ status: "ok", configuredCount: 2, activeCount: 2 })
    expect(health.body.catalogCount).toBeGreaterThanOrEqual(12)
    expect(health.body.monitoredCount).toBeGreaterThanOrEqual(1)
    expect((await call(`${gw.url}/api/monitoring/health`)).status).toBe(401)
  })

  it("every inference answer names a session, and X-Gateway-Progress is echoed", async () => {
    const plain = await chat({ model: "oai/gpt-4o" })
    expect(plain.headers.get("x-gateway-session-id")).toMatch(/^sess_/)
    // The same conversation gets the same derived session id.
    expect((await chat({ model: "oai/gpt-4o" })).headers.get("x-gateway-session-id")).toBe(plain.headers.get("x-gateway-session-id"))
    const unknown = await chat({ model: "nope/x" })
    expect(unknown.status).toBe(404)
    expect(unknown.headers.get("x-gateway-session-id")).toMatch(/^sess_/)
    const codex = await call(`${gw.url}/v1/responses`, {
      body: { model: "oai/gpt-4o", input: "hi" },
      headers: { session_id: "codex-thread-1" }
    })
    expect(codex.headers.get("x-gateway-session-id")).toBe("codex-thread-1")
    const progress = await chat({ model: "oai/gpt-4o" }, { "x-gateway-progress": "true" })
    expect(progress.headers.get("x-gateway-progress")).toBe("enabled")
  })
})

describe("progress events", () => {
  it("a streamed request with X-Gateway-Progress: true gets routing and attempt events as SSE comments the SDK ignores", async () => {
    await call(`${gw.url}/api/combos`, {
      body: { name: "prog", strategy: "priority", targets: [{ model: "oai/gpt-4o" }, { model: "local/llama3.2" }] },
      headers: admin
    })
    try {
      up.always({ status: 503 })
      const raw = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "prog", stream: true, messages: [{ role: "user", content: "hi" }] },
        headers: { "x-gateway-progress": "true" }
      })
      expect(raw.status).toBe(200)
      expect(raw.headers.get("x-gateway-progress")).toBe("enabled")
      const stages = raw.text
        .split("\n")
        .filter((l) => l.startsWith(": progress "))
        .map((l) => JSON.parse(l.slice(": progress ".length)).stage)
      expect(stages).toEqual(["accepted", "routed", "attempt", "failed", "attempt"])
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0, defaultHeaders: { "x-gateway-progress": "true" } })
      const stream = await client.chat.completions.create({ model: "prog", messages: [{ role: "user", content: "hi" }], stream: true })
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
      expect(text).toBe("free answer")
      // When every target fails after the stream opened, the error is the format's stream error event.
      local.always({ status: 500 })
      const failing = await client.chat.completions.create({ model: "prog", messages: [{ role: "user", content: "hi" }], stream: true })
      const err = await (async () => {
        for await (const _ of failing) {
          // read
        }
      })().catch((e: unknown) => e)
      expect(err).toBeInstanceOf(OpenAI.APIError)
    } finally {
      await call(`${gw.url}/api/combos/prog`, { method: "DELETE", headers: admin })
    }
  })
})

describe("review fixes", () => {
  it("the cache key separates endpoints, extra body fields and the no-thinking alias", async () => {
    const chatBody = { model: "oai/gpt-4o", temperature: 0, messages: [{ role: "user", content: "2+2?" }] }
    await chat(chatBody)
    const legacy = await call(`${gw.url}/v1/completions`, { body: { model: "oai/gpt-4o", temperature: 0, prompt: "2+2?" } })
    expect(legacy.headers.get("x-gateway-cache")).toBe("MISS")
    expect(legacy.body.object).toBe("text_completion")
    const n3 = await chat({ ...chatBody, n: 3, logprobs: true })
    expect(n3.headers.get("x-gateway-cache")).toBe("MISS")
    expect((await chat(chatBody)).headers.get("x-gateway-cache")).toBe("HIT")
  })

  it("budgets and token limits hold for embeddings too", async () => {
    const secret = "gwk_acct_embed_key_0123456789abcdefghij"
    const k = await gw.run(Effect.flatMap(ApiKeys, (x) => x.create({ name: "embedder", scopes: ["inference"] }, { secret })))
    await call(`${gw.url}/api/usage/budget`, { body: { apiKeyId: k.id, dailyLimitUsd: 0.00001 }, headers: admin })
    await call(`${gw.url}/api/settings/feature-flags`, {
      method: "PUT",
      body: { key: "GATEWAY_EMERGENCY_FALLBACK", value: "false" },
      headers: admin
    })
    try {
      const auth = { authorization: `Bearer ${secret}` }
      // 11 + 7 tokens of gpt-4o: $0.0000975, past the $0.00001 budget.
      expect((await chat({ model: "oai/gpt-4o" }, auth)).status).toBe(200)
      const embedding = await call(`${gw.url}/v1/embeddings`, {
        body: { model: "oai/text-embedding-3-small", input: "hello" },
        headers: auth
      })
      expect(embedding.status).toBe(429)
      expect(embedding.body.error.code).toBe("budget_exhausted")
    } finally {
      await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "GATEWAY_EMERGENCY_FALLBACK" }, headers: admin })
    }
  })

  it("parallel requests of one key cannot spend far past its budget once its cost is known", async () => {
    const secret = "gwk_acct_burst_key_0123456789abcdefghij"
    const k = await gw.run(Effect.flatMap(ApiKeys, (x) => x.create({ name: "burst", scopes: ["inference"] }, { secret })))
    await call(`${gw.url}/api/settings/feature-flags`, {
      method: "PUT",
      body: { key: "GATEWAY_EMERGENCY_FALLBACK", value: "false" },
      headers: admin
    })
    try {
      await call(`${gw.url}/api/usage/budget`, { body: { apiKeyId: k.id, dailyLimitUsd: GPT4O_COST * 5.5 }, headers: admin })
      const auth = { authorization: `Bearer ${secret}` }
      expect((await chat({ model: "oai/gpt-4o" }, auth)).status).toBe(200)
      up.always({ content: "slow", delayMs: 200 })
      const burst = await Promise.all(Array.from({ length: 20 }, () => chat({ model: "oai/gpt-4o" }, auth)))
      const ok = burst.filter((r) => r.status === 200).length
      expect(ok).toBeGreaterThanOrEqual(4)
      expect(ok).toBeLessThanOrEqual(5)
      expect(burst.filter((r) => r.status === 429).every((r) => r.body.error.code === "budget_exhausted")).toBe(true)
    } finally {
      await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "GATEWAY_EMERGENCY_FALLBACK" }, headers: admin })
    }
  })

  it("a token limit written as <connection>/<model> holds through a combo", async () => {
    const secret = "gwk_acct_combo_key_0123456789abcdefghij"
    const k = await gw.run(Effect.flatMap(ApiKeys, (x) => x.create({ name: "combo-user", scopes: ["inference"] }, { secret })))
    await call(`${gw.url}/api/usage/token-limits`, {
      body: { apiKeyId: k.id, scope: "model", model: "oai/gpt-4o", maxTokens: 10 },
      headers: admin
    })
    await call(`${gw.url}/api/combos`, {
      body: { name: "only-oai", strategy: "priority", targets: [{ model: "oai/gpt-4o" }] },
      headers: admin
    })
    try {
      const auth = { authorization: `Bearer ${secret}` }
      expect((await chat({ model: "only-oai" }, auth)).status).toBe(200)
      const limited = await chat({ model: "only-oai" }, auth)
      expect(limited.status).toBe(429)
      expect(limited.body.error.code).toBe("token_limit_exceeded")
    } finally {
      await call(`${gw.url}/api/combos/only-oai`, { method: "DELETE", headers: admin })
    }
  })

  it("idempotency keeps different bodies and different callers apart, and does not keep a transient failure", async () => {
    await chat({ model: "oai/gpt-4o", messages: [{ role: "user", content: "translate cat" }] }, { "x-request-id": "trace-123" })
    const other = await chat({ model: "oai/gpt-4o", messages: [{ role: "user", content: "summarise" }] }, { "x-request-id": "trace-123" })
    expect(other.headers.get("x-gateway-idempotent")).toBeNull()
    await chat({ model: "oai/gpt-4o" }, { "idempotency-key": "k1", authorization: "Bearer token-of-alice" })
    const bob = await chat({ model: "oai/gpt-4o" }, { "idempotency-key": "k1", authorization: "Bearer token-of-bob" })
    expect(bob.headers.get("x-gateway-idempotent")).toBeNull()
    expect(up.requests).toHaveLength(4)
    up.next({ status: 503 })
    expect((await chat({ model: "oai/gpt-4o" }, { "idempotency-key": "retry-me" })).status).toBe(503)
    // Past the cooldown the 503 started: the retry reaches the upstream again.
    await gw.resetResilience()
    const retry = await chat({ model: "oai/gpt-4o" }, { "idempotency-key": "retry-me" })
    expect(retry.status).toBe(200)
    expect(retry.headers.get("x-gateway-idempotent")).toBeNull()
  })

  it("fusion panel calls are priced and counted, and the answer's cost header includes them", async () => {
    await call(`${gw.url}/api/providers`, {
      body: { provider: "openai", name: "oai2", apiKey: "sk-2", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" },
      headers: admin
    })
    await call(`${gw.url}/api/combos`, {
      body: {
        name: "panel",
        strategy: "fusion",
        targets: [{ model: "oai/gpt-4o" }, { model: "oai2/gpt-4o" }],
        config: { judgeModel: "oai/gpt-4o" }
      },
      headers: admin
    })
    try {
      const res = await chat({ model: "panel" })
      expect(res.status).toBe(200)
      // Two panel calls and the judge, each 11 + 7 tokens of gpt-4o.
      expect(res.headers.get("x-gateway-response-cost")).toBe("0.0002925000")
      await flush()
      const rows = queryDb(gw.dataDir, "SELECT endpoint, cost_usd FROM usage WHERE request_id = ?", res.headers.get("x-gateway-request-id"))
      expect(rows.filter((r: any) => r.endpoint.endsWith("fusion-panel")).map((r: any) => r.cost_usd)).toEqual([GPT4O_COST, GPT4O_COST])
    } finally {
      await call(`${gw.url}/api/combos/panel`, { method: "DELETE", headers: admin })
      await call(`${gw.url}/api/providers/oai2`, { method: "DELETE", headers: admin })
    }
  })

  it("a date beyond what JavaScript can represent is a 400, not a 500", async () => {
    expect((await call(`${gw.url}/api/usage/history?from=99999999999999999999`, { headers: admin })).status).toBe(400)
    expect((await call(`${gw.url}/api/usage/history?to=9000000000000000`, { headers: admin })).status).toBe(400)
  })
})

describe("similarity matching in the response cache", () => {
  it("with an embedding model configured, a near-identical prompt is a HIT without a chat call", async () => {
    const similarGw = await startGateway({ env: { GATEWAY_CACHE_EMBEDDING_MODEL: "emb/similar-embed", GATEWAY_CACHE_SIMILARITY: "0.99" } })
    try {
      await similarGw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      await call(`${similarGw.url}/api/providers`, {
        body: {
          provider: "openai-compatible",
          name: "emb",
          baseUrl: up.baseUrl("openai-chat"),
          models: ["similar-embed", "m1"],
          defaultModel: "m1"
        },
        headers: admin
      })
      const ask = (content: string) =>
        call(`${similarGw.url}/v1/chat/completions`, { body: { model: "emb/m1", temperature: 0, messages: [{ role: "user", content }] } })
      expect((await ask("What is the capital of France?")).headers.get("x-gateway-cache")).toBe("MISS")
      await similarGw.usageWritten()
      const near = await ask("what is the capital of france ?")
      expect(near.headers.get("x-gateway-cache")).toBe("HIT")
      const far = await ask("Tell me a long story about dragons and castles")
      expect(far.headers.get("x-gateway-cache")).toBe("MISS")
      const chats = up.requests.filter((r) => r.path.endsWith("/chat/completions"))
      expect(chats).toHaveLength(2)
      const stats = (await call(`${similarGw.url}/api/cache/stats`, { headers: admin })).body.semanticCache
      expect(stats).toMatchObject({ similarHits: 1, embeddingModel: "emb/similar-embed" })
    } finally {
      await similarGw.close()
    }
  })
})
