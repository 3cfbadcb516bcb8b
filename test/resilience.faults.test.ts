import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { EventBus, type GatewayEvent } from "../src/platform/events/EventBus.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream, type Reply } from "./support/fakeUpstream.js"
import { refusedPort } from "./support/refusedPort.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The fault matrix: one connection ("flaky", provider openai-compatible, an API-key provider)
 * fails in every way the issue lists; a combo falls back to a healthy connection of another
 * provider ("steady", anthropic family). For each fault: what the client gets, whether the
 * fallback happened, the breaker / cooldown / lockout state as GET /api/resilience shows it, and
 * exactly one usage row for the request.
 */
const ADMIN = "gwk_faults_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const TIMEOUTS = { headersMs: 400, streamHeadersMs: 400, firstContentMs: 400, idleMs: 400 }

let gw: TestGateway
let flaky: FakeUpstream
let steady: FakeUpstream
let refusedUrl: string
const events: Array<GatewayEvent> = []

const status = () => call(`${gw.url}/api/resilience`, { headers: admin }).then((r) => r.body)
const breakerOf = async (provider: string) => (await status()).breakers.find((b: any) => b.provider === provider)
const connectionOf = async (name: string) => (await status()).connections.find((c: any) => c.name === name)
const lockoutsOf = async () => (await call(`${gw.url}/api/resilience/model-cooldowns`, { headers: admin })).body.modelCooldowns

/** The request's usage rows, once every request has written its own. */
const usageRows = async (requestId: string | null) => {
  await gw.usageWritten()
  return queryDb(gw.dataDir, "SELECT status, connection_id, error FROM usage WHERE request_id = ?", requestId)
}

/** Lockouts are off by default; the matrix and the lockout endpoints turn them on. */
const lockouts = (enabled: boolean) =>
  call(`${gw.url}/api/resilience`, { method: "PATCH", body: { modelLockout: { enabled } }, headers: admin })

/** The text of an answer, whole or streamed in chat-completion chunks. */
const textOf = (res: { text: string; body: any }): string =>
  res.body?.choices?.[0]?.message?.content ??
  res.text
    .split("\n")
    .filter((l) => l.startsWith("data: {"))
    .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? "")
    .join("")

const chat = (model: string, stream = false) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, stream, messages: [{ role: "user", content: "hi" }] } })

beforeAll(async () => {
  flaky = await FakeUpstream.start()
  steady = await FakeUpstream.start()
  // A port that refuses connections for the whole run (not one just freed, which another test may take).
  refusedUrl = `http://127.0.0.1:${await refusedPort()}/v1`

  gw = await startGateway({ timeouts: TIMEOUTS })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (await add({ provider: "openai-compatible", name: "flaky", baseUrl: flaky.baseUrl("openai-chat"), defaultModel: "m1" })).status
  ).toBe(201)
  expect(
    (await add({ provider: "anthropic", name: "steady", apiKey: "sk-ant", baseUrl: steady.baseUrl("anthropic"), defaultModel: "m1" }))
      .status
  ).toBe(201)
  expect((await add({ provider: "ollama", name: "gone", baseUrl: refusedUrl.replace(/\/v1$/, ""), defaultModel: "m1" })).status).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "pair", strategy: "priority", targets: [{ model: "flaky/m1" }, { model: "steady/m1" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "gone-first", strategy: "priority", targets: [{ model: "gone/m1" }, { model: "steady/m1" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
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
  await flaky?.close()
  await steady?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  flaky.always({ content: "from flaky" })
  steady.always({ content: "from steady" })
  flaky.requests.length = 0
  steady.requests.length = 0
  events.length = 0
})

interface Row {
  readonly name: string
  readonly reply: Reply | (() => Reply)
  readonly stream?: boolean
  /** Breaker failures counted for openai-compatible. */
  readonly breakerFailures: number
  /** Connection state of `flaky` afterwards. */
  readonly connection: "available" | "cooldown" | "banned" | "expired" | "credits_exhausted"
  /** ms of cooldown expected from the failure, when in cooldown. */
  readonly cooldownMs?: number
  /** How far the cooldown's end may fall before the expected one (an HTTP date counts whole seconds). */
  readonly earlyMs?: number
  /** A model lockout for (openai-compatible, flaky, m1). */
  readonly locked: boolean
}

const MATRIX: ReadonlyArray<Row> = [
  { name: "500", reply: { status: 500 }, breakerFailures: 1, connection: "cooldown", cooldownMs: 3_000, locked: false },
  { name: "502", reply: { status: 502 }, breakerFailures: 1, connection: "cooldown", cooldownMs: 3_000, locked: true },
  { name: "503", reply: { status: 503 }, breakerFailures: 1, connection: "cooldown", cooldownMs: 3_000, locked: true },
  { name: "504", reply: { status: 504 }, breakerFailures: 1, connection: "cooldown", cooldownMs: 3_000, locked: true },
  { name: "408", reply: { status: 408 }, breakerFailures: 1, connection: "cooldown", cooldownMs: 3_000, locked: false },
  {
    name: "429 Retry-After seconds",
    reply: { status: 429, headers: { "retry-after": "20" } },
    breakerFailures: 0,
    connection: "cooldown",
    cooldownMs: 20_000,
    locked: true
  },
  {
    name: "429 Retry-After HTTP date",
    reply: () => ({ status: 429, headers: { "retry-after": new Date(Date.now() + 40_000).toUTCString() } }),
    breakerFailures: 0,
    connection: "cooldown",
    cooldownMs: 40_000,
    earlyMs: 1_000,
    locked: true
  },
  {
    name: "429 retry-after-ms",
    reply: { status: 429, headers: { "retry-after-ms": "15000" } },
    breakerFailures: 0,
    connection: "cooldown",
    cooldownMs: 15_000,
    locked: true
  },
  {
    name: "429 x-ratelimit-reset-requests",
    reply: { status: 429, headers: { "x-ratelimit-reset-requests": "1m0s" } },
    breakerFailures: 0,
    connection: "cooldown",
    cooldownMs: 60_000,
    locked: true
  },
  {
    name: "429 reset text in the body",
    reply: { status: 429, errorMessage: "Rate limit reached. Please try again in 25s." },
    breakerFailures: 0,
    connection: "cooldown",
    cooldownMs: 25_000,
    locked: true
  },
  {
    name: "429 without a hint (base 3 s)",
    reply: { status: 429 },
    breakerFailures: 0,
    connection: "cooldown",
    cooldownMs: 3_000,
    locked: true
  },
  {
    name: "401",
    reply: { status: 401, errorMessage: "Incorrect API key provided" },
    breakerFailures: 0,
    connection: "expired",
    locked: false
  },
  {
    name: "403 ban",
    reply: { status: 403, errorMessage: "Your account has been suspended for a policy violation" },
    breakerFailures: 0,
    connection: "banned",
    locked: true
  },
  {
    name: "403 no access to the model",
    reply: { status: 403, errorMessage: "You do not have access to this model" },
    breakerFailures: 0,
    connection: "available",
    locked: true
  },
  {
    name: "402 credits",
    reply: { status: 402, errorMessage: "Your credit balance is too low" },
    breakerFailures: 0,
    connection: "credits_exhausted",
    locked: false
  },
  // Far past the 400 ms timeout: the fake shares this process's loop (see resilience.transient.test.ts).
  {
    name: "timeout before headers",
    reply: { delayMs: 10_000 },
    breakerFailures: 1,
    connection: "cooldown",
    cooldownMs: 3_000,
    locked: true
  },
  {
    name: "stall before the first chunk (stream)",
    reply: { stallAfterChunks: 0 },
    stream: true,
    breakerFailures: 1,
    connection: "cooldown",
    cooldownMs: 3_000,
    locked: true
  },
  {
    name: "200 with an error body",
    reply: { errorIn200: true, errorMessage: "internal failure" },
    breakerFailures: 1,
    connection: "cooldown",
    cooldownMs: 3_000,
    locked: true
  }
]

/** Rounding between the gateway's clock readings and the test's. */
const CLOCK_SLACK_MS = 50

describe("fault matrix: the first target fails, the second answers", () => {
  beforeAll(async () => expect((await lockouts(true)).status).toBe(200))
  afterAll(() => lockouts(false))
  for (const row of MATRIX) {
    it(row.name, async () => {
      flaky.always(typeof row.reply === "function" ? row.reply() : row.reply)
      const before = Date.now()
      const res = await chat("pair", row.stream)
      const answered = Date.now()
      // The client gets the healthy target's answer, after one fallback.
      expect(res.status, res.text).toBe(200)
      expect(textOf(res)).toBe("from steady")
      expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
      expect(flaky.requests).toHaveLength(1)
      expect(steady.requests).toHaveLength(1)
      // One usage row, for the target that answered.
      const rows = await usageRows(res.headers.get("x-gateway-request-id"))
      expect(rows).toHaveLength(1)
      expect(rows[0]!["status"]).toBe(200)
      // Breaker.
      const breaker = await breakerOf("openai-compatible")
      expect(breaker?.consecutiveFailures ?? 0).toBe(row.breakerFailures)
      expect(breaker?.state ?? "CLOSED").toBe("CLOSED")
      // Cooldown / terminal state.
      const conn = await connectionOf("flaky")
      expect(conn.state).toBe(row.connection)
      if (row.cooldownMs !== undefined) {
        // The cooldown runs from the failure, which came between the request and its answer (however late a loaded machine ran).
        const until = Date.parse(conn.rateLimitedUntil)
        expect(until).toBeGreaterThanOrEqual(before + row.cooldownMs - (row.earlyMs ?? CLOCK_SLACK_MS))
        expect(until).toBeLessThanOrEqual(answered + row.cooldownMs + CLOCK_SLACK_MS)
        expect(conn.testStatus).toBe("unavailable")
        expect(conn.backoffLevel).toBe(1)
      }
      if (row.connection !== "available") expect(conn.lastError).toBeTruthy()
      // Lockout.
      const locks = await lockoutsOf()
      expect(locks.some((l: any) => l.provider === "openai-compatible" && l.connection === "flaky" && l.model === "m1")).toBe(row.locked)
      // provider.error only for breaker-tripping failures.
      expect(events.filter((e) => e.event === "provider.error").length).toBe(row.breakerFailures)
    })
  }

  it("a refused connection falls back, counts for the breaker of its provider", async () => {
    const res = await chat("gone-first")
    expect(res.status).toBe(200)
    expect(res.text).toContain("from steady")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect((await breakerOf("ollama")).consecutiveFailures).toBe(1)
    expect(await usageRows(res.headers.get("x-gateway-request-id"))).toHaveLength(1)
  })

  it("a stream cut mid-way reaches the client as its error event (no fallback after output), and counts for the breaker", async () => {
    flaky.always({ content: "one two three four", chunks: 4, cutAfterChunks: 3 })
    const res = await chat("pair", true)
    expect(res.status).toBe(200)
    expect(res.text).toContain("one")
    expect(res.text).toMatch(/"error"/)
    expect(res.text).not.toContain("[DONE]")
    expect(steady.requests).toHaveLength(0)
    expect((await breakerOf("openai-compatible")).consecutiveFailures).toBe(1)
    const rows = await usageRows(res.headers.get("x-gateway-request-id"))
    expect(rows).toHaveLength(1)
    expect(rows[0]!["error"]).toBeTruthy()
  })

  it("a 400 is the client's own fault: answered as is, no fallback, no breaker, no cooldown", async () => {
    flaky.always({ status: 400, errorMessage: "messages: bad role" })
    const res = await chat("pair")
    expect(res.status).toBe(400)
    expect(res.body.error.message).toContain("bad role")
    expect(steady.requests).toHaveLength(0)
    expect(await breakerOf("openai-compatible")).toBeUndefined()
    expect((await connectionOf("flaky")).state).toBe("available")
    expect(await usageRows(res.headers.get("x-gateway-request-id"))).toHaveLength(1)
  })

  it("a terminal connection is skipped without a request until new credentials arrive", async () => {
    flaky.always({ status: 401 })
    await chat("pair")
    expect(flaky.requests).toHaveLength(1)
    const again = await chat("pair")
    expect(again.text).toContain("from steady")
    expect(again.headers.get("x-gateway-fallback-attempts")).toBeNull()
    expect(flaky.requests).toHaveLength(1)
    // Direct requests to it are refused at once, naming the reason.
    const direct = await chat("flaky/m1")
    expect(direct.status).toBe(503)
    expect(direct.body.error.message).toContain("expired")
    // New credentials clear it: a new conversation goes to it first again (this one's prompt
    // cache is warm on steady now, where it stays: docs/routing.md, "Prompt-cache affinity").
    await call(`${gw.url}/api/providers/flaky`, { method: "PUT", body: { apiKey: "sk-new" }, headers: admin })
    flaky.always({ content: "from flaky" })
    const fresh = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "pair", messages: [{ role: "user", content: "a new conversation" }] }
    })
    expect(fresh.text).toContain("from flaky")
  })

  it("a connection cooling down answers a direct request 429 with Retry-After, without calling it", async () => {
    flaky.always({ status: 429, headers: { "retry-after": "30" } })
    const first = await chat("flaky/m1")
    expect(first.status).toBe(429)
    const second = await chat("flaky/m1")
    expect(second.status).toBe(429)
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThan(25)
    expect(second.body.error.message).toContain("cooling down")
    expect(flaky.requests).toHaveLength(1)
  })
})

/**
 * Every transient failure also cools its connection down (3 s and up): the breaker tests below
 * send one failure after another to the same connection, so they shorten the cooldown to 1 ms.
 */
/**
 * Sends requests to `model` until its upstream has answered `n` of them. The connection cools
 * down for 1 ms after each failure: a request that arrives within that millisecond is refused
 * without reaching the upstream (and says nothing to the breaker), so counting requests sent
 * would race the clock; counting what the upstream saw does not.
 */
const failUpstream = async (up: FakeUpstream, model: string, n: number) => {
  const start = up.requests.length
  for (let sent = 0; up.requests.length - start < n; sent++) {
    if (sent >= 10 * n) throw new Error(`the upstream saw ${up.requests.length - start} of ${n} requests after ${sent} sent`)
    await chat(model)
  }
}

const shortCooldowns = (on: boolean) =>
  call(`${gw.url}/api/resilience`, {
    method: "PATCH",
    body: { connectionCooldown: on ? { apiKeyBaseMs: 1, maxCooldownMs: 1 } : { apiKeyBaseMs: 3000, maxCooldownMs: 300_000 } },
    headers: admin
  })

describe("the provider breaker over HTTP", () => {
  beforeAll(async () => expect((await shortCooldowns(true)).status).toBe(200))
  afterAll(() => shortCooldowns(false))

  it("opens after 12 failures (API-key provider), skips the provider, then probes once the reset timeout passed", async () => {
    await call(`${gw.url}/api/resilience`, {
      method: "PATCH",
      // 3 s: the refusals below must come before it ends, however slow the machine.
      body: { providerBreaker: { apikey: { resetTimeoutMs: 3_000 } } },
      headers: admin
    })
    try {
      flaky.always({ status: 503 })
      await failUpstream(flaky, "flaky/m1", 12)
      const open = await breakerOf("openai-compatible")
      expect(open).toMatchObject({ state: "OPEN", consecutiveFailures: 12, failureThreshold: 12, degradationThreshold: 7 })
      const seen = flaky.requests.length
      const refused = await chat("flaky/m1")
      expect(refused.status).toBe(503)
      expect(refused.body.error.message).toContain("circuit open")
      expect(flaky.requests.length).toBe(seen)
      // The combo goes straight to the other provider.
      const viaCombo = await chat("pair")
      expect(viaCombo.text).toContain("from steady")
      expect(flaky.requests.length).toBe(seen)
      const errors = events.filter((e) => e.event === "provider.error")
      expect(errors).toHaveLength(12)
      expect(errors[6]!.data).toMatchObject({
        provider: "openai-compatible",
        status: 503,
        consecutive_failures: 7,
        circuit_state: "DEGRADED"
      })
      expect(errors[11]!.data).toMatchObject({ consecutive_failures: 12, circuit_state: "OPEN" })
      // After the reset timeout the next request is the probe; success closes the breaker.
      await until("the breaker half open", async () => (await breakerOf("openai-compatible")).state === "HALF_OPEN", 15_000)
      flaky.always({ content: "from flaky" })
      expect((await chat("flaky/m1")).status).toBe(200)
      expect((await breakerOf("openai-compatible")).state).toBe("CLOSED")
      expect(events.find((e) => e.event === "provider.recovered")?.data).toMatchObject({
        provider: "openai-compatible",
        previous_state: "HALF_OPEN"
      })
    } finally {
      await call(`${gw.url}/api/resilience`, {
        method: "PATCH",
        body: { providerBreaker: { apikey: { resetTimeoutMs: 30_000 } } },
        headers: admin
      })
    }
  })

  it("POST /api/resilience/reset closes breakers (and with connections: true clears cooldowns)", async () => {
    flaky.always({ status: 503 })
    await failUpstream(flaky, "flaky/m1", 12)
    expect((await breakerOf("openai-compatible")).state).toBe("OPEN")
    const reset = await call(`${gw.url}/api/resilience/reset`, { body: {}, headers: admin })
    expect(reset.status).toBe(200)
    expect(reset.body.breakersReset).toBeGreaterThanOrEqual(1)
    expect(await breakerOf("openai-compatible")).toBeUndefined()
    await shortCooldowns(false)
    flaky.always({ status: 429, headers: { "retry-after": "60" } })
    await chat("flaky/m1")
    expect((await connectionOf("flaky")).state).toBe("cooldown")
    const both = await call(`${gw.url}/api/resilience/reset`, { body: { connections: true }, headers: admin })
    expect(both.body.connectionsReset).toBeGreaterThanOrEqual(1)
    expect((await connectionOf("flaky")).state).toBe("available")
  })
})

describe("resilience endpoints", () => {
  it("need management auth", async () => {
    for (const [method, path] of [
      ["GET", "/api/resilience"],
      ["PATCH", "/api/resilience"],
      ["POST", "/api/resilience/reset"],
      ["GET", "/api/resilience/model-cooldowns"],
      ["DELETE", "/api/resilience/model-cooldowns"],
      ["GET", "/api/rate-limits"],
      ["GET", "/api/rate-limit"]
    ] as const) {
      const res = await call(`${gw.url}${path}`, { method, ...(method === "GET" ? {} : { body: {} }) })
      expect(res.status, `${method} ${path}`).toBe(401)
    }
  })

  it("PATCH validates settings: lockout cap below its base, local breaker profile, unknown keys", async () => {
    const cases: Array<[unknown, RegExp]> = [
      [
        { modelLockout: { baseCooldownMs: 600_000, maxCooldownMs: 60_000 } },
        /maxCooldownMs \(60000\) must be at least baseCooldownMs \(600000\)/
      ],
      [{ providerBreaker: { local: { failureThreshold: 5 } } }, /local/],
      [{ providerBreaker: { apikey: { failureThreshold: 0 } } }, /failureThreshold must be a positive integer/],
      [{ modelLockout: { errorCodes: [200] } }, /errorCodes/],
      [{ speed: 1 }, /speed/]
    ]
    for (const [body, message] of cases) {
      const res = await call(`${gw.url}/api/resilience`, { method: "PATCH", body, headers: admin })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.message).toMatch(message)
    }
    const ok = await call(`${gw.url}/api/resilience`, {
      method: "PATCH",
      body: { connectionCooldown: { apiKeyBaseMs: 2000 } },
      headers: admin
    })
    expect(ok.body.settings.connectionCooldown.apiKeyBaseMs).toBe(2000)
    expect(ok.body.settings.providerBreaker.local).toEqual({ degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 15_000 })
    expect((await status()).settings.connectionCooldown.apiKeyBaseMs).toBe(2000)
    await call(`${gw.url}/api/resilience`, { method: "PATCH", body: { connectionCooldown: { apiKeyBaseMs: 3000 } }, headers: admin })
  })

  it("GET and DELETE /api/resilience/model-cooldowns list and clear lockouts, one or all", async () => {
    await lockouts(true)
    try {
      flaky.always({ status: 404 })
      await chat("flaky/m1")
      await chat("steady/m1")
      steady.always({ status: 404 })
      await chat("steady/m2")
      const list = await lockoutsOf()
      expect(list.map((l: any) => `${l.connection}/${l.model}`).sort()).toEqual(["flaky/m1", "steady/m2"])
      expect(list[0]).toMatchObject({ reason: "not_found", status: 404, failures: 1 })
      expect(Date.parse(list[0].expiresAt) - Date.now()).toBeGreaterThan(100_000)
      const one = await call(`${gw.url}/api/resilience/model-cooldowns`, {
        method: "DELETE",
        body: { provider: "openai-compatible", model: "m1" },
        headers: admin
      })
      expect(one.body.cleared).toBe(1)
      expect((await lockoutsOf()).map((l: any) => l.connection)).toEqual(["steady"])
      const bad = await call(`${gw.url}/api/resilience/model-cooldowns`, { method: "DELETE", body: { provider: "x" }, headers: admin })
      expect(bad.status).toBe(400)
      const all = await call(`${gw.url}/api/resilience/model-cooldowns`, { method: "DELETE", body: { all: true }, headers: admin })
      expect(all.body.cleared).toBe(1)
      expect(await lockoutsOf()).toEqual([])
    } finally {
      await lockouts(false)
    }
  })

  it("GET /api/rate-limits shows each account's headroom from the upstream's rate-limit headers; /api/rate-limit the configuration", async () => {
    flaky.always({
      content: "ok",
      headers: { "x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "25", "x-ratelimit-reset-requests": "30s" }
    })
    await chat("flaky/m1")
    const limits = await call(`${gw.url}/api/rate-limits`, { headers: admin })
    const account = limits.body.accounts.find((a: any) => a.name === "flaky")
    expect(account).toMatchObject({ state: "available", quota: { remaining: 0.25, limit: 100, remainingCount: 25, exhausted: false } })
    expect(Date.parse(account.quota.resetAt) - Date.now()).toBeGreaterThan(20_000)
    const config = await call(`${gw.url}/api/rate-limit`, { headers: admin })
    expect(config.body).toMatchObject({
      comboCooldownWait: { enabled: true, maxWaitMs: 5000, maxAttempts: 2, budgetMs: 8000 },
      quotaShareConcurrencyLimit: { enabled: true }
    })
  })
})

describe("quota-share concurrency and cooldown waits", () => {
  it("max_concurrent serialises quota-share requests per connection", async () => {
    await call(`${gw.url}/api/providers/flaky`, { method: "PUT", body: { max_concurrent: 1 }, headers: admin })
    try {
      flaky.always({ content: "slow", delayMs: 150 })
      flaky.maxInFlight = 0
      const results = await Promise.all(Array.from({ length: 4 }, () => chat("qtSd/g/flaky/m1")))
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200])
      expect(flaky.maxInFlight).toBe(1)
      // Without the quota-share form the limit does not apply.
      flaky.maxInFlight = 0
      await Promise.all(Array.from({ length: 3 }, () => chat("flaky/m1")))
      expect(flaky.maxInFlight).toBeGreaterThan(1)
    } finally {
      await call(`${gw.url}/api/providers/flaky`, { method: "PUT", body: { max_concurrent: null }, headers: admin })
    }
  })

  it("a short transient cooldown is waited out and the request dispatched again", async () => {
    flaky.next({ status: 429, headers: { "retry-after": "1" } })
    const started = Date.now()
    const res = await chat("qtSd/g/flaky/m1")
    expect(res.status).toBe(200)
    expect(res.text).toContain("from flaky")
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
    expect(flaky.requests).toHaveLength(2)
    expect(await usageRows(res.headers.get("x-gateway-request-id"))).toHaveLength(1)
  })

  it("never waits for an exhausted quota or a long cooldown", async () => {
    flaky.always({ status: 429, errorMessage: "You exceeded your daily limit" })
    const started = Date.now()
    const res = await chat("qtSd/g/flaky/m1")
    expect(res.status).toBe(429)
    expect(Date.now() - started).toBeLessThan(800)
    expect(flaky.requests).toHaveLength(1)
  })
})

describe("usage rows under load", () => {
  it("a burst of requests through a failing-over combo writes exactly one row per request", async () => {
    flaky.always({ status: 503 })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    const ids = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const { response } = await client.chat.completions
          .create({ model: "pair", messages: [{ role: "user", content: `n${i}` }], stream: i % 2 === 0 })
          .withResponse()
        if (i % 2 === 0) await response.text()
        return response.headers.get("x-gateway-request-id")!
      })
    )
    await gw.usageWritten()
    const rows = queryDb(gw.dataDir, `SELECT request_id FROM usage WHERE request_id IN (${ids.map(() => "?").join(",")})`, ...ids)
    expect(rows).toHaveLength(30)
    expect(new Set(rows.map((r: any) => r.request_id)).size).toBe(30)
  })
})
