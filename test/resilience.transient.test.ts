import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { refusedPort } from "./support/refusedPort.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Three resilience defects, through real HTTP against fake upstreams:
 * 1. a transient failure (5xx, timeout, refused connection) cools its connection down with
 *    exponential backoff like a 429, so a combo skips it and falls back;
 * 2. the breaker belongs to a provider at one upstream origin: a broken local server does not
 *    block the same provider's healthy servers at other addresses;
 * 3. a 400 saying this target cannot take the request (context too long, model or parameter not
 *    supported) falls back to the next target; any other 400 is the client's, returned as is.
 */
const ADMIN = "gwk_transient_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let flaky: FakeUpstream
let steady: FakeUpstream
let ollamaA: FakeUpstream
let ollamaB: FakeUpstream
let refusedUrl: string

const status = () => call(`${gw.url}/api/resilience`, { headers: admin }).then((r) => r.body)
const connectionOf = async (name: string) => (await status()).connections.find((c: any) => c.name === name)
const providerView = async (name: string) => (await call(`${gw.url}/api/providers/${name}`, { headers: admin })).body
const chat = (model: string, extra: Record<string, unknown> = {}) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }], ...extra } })
const patch = (body: unknown) => call(`${gw.url}/api/resilience`, { method: "PATCH", body, headers: admin })
const DEFAULT_COOLDOWN = { apiKeyBaseMs: 3000, oauthBaseMs: 5000, maxCooldownMs: 300_000 }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

beforeAll(async () => {
  flaky = await FakeUpstream.start()
  steady = await FakeUpstream.start()
  ollamaA = await FakeUpstream.start()
  ollamaB = await FakeUpstream.start()
  // A port that refuses connections for the whole run (not one just freed, which another test may take).
  refusedUrl = `http://127.0.0.1:${await refusedPort()}/v1`

  gw = await startGateway({ timeouts: { headersMs: 400, streamHeadersMs: 400, firstContentMs: 400, idleMs: 400 } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) =>
    expect((await call(`${gw.url}/api/providers`, { body, headers: admin })).status).toBe(201)
  await add({ provider: "openai-compatible", name: "flaky", baseUrl: flaky.baseUrl("openai-chat"), defaultModel: "m1" })
  await add({ provider: "anthropic", name: "steady", apiKey: "sk-ant", baseUrl: steady.baseUrl("anthropic"), defaultModel: "m1" })
  await add({ provider: "openai-compatible", name: "refused", baseUrl: refusedUrl, defaultModel: "m1" })
  await add({ provider: "ollama", name: "ollama-a", baseUrl: ollamaA.baseUrl("ollama"), defaultModel: "m1" })
  await add({ provider: "ollama", name: "ollama-b", baseUrl: ollamaB.baseUrl("ollama"), defaultModel: "m1" })
  const combo = async (name: string, targets: Array<string>) =>
    expect(
      (
        await call(`${gw.url}/api/combos`, {
          body: { name, strategy: "priority", targets: targets.map((model) => ({ model })) },
          headers: admin
        })
      ).status
    ).toBe(201)
  await combo("pair", ["flaky/m1", "steady/m1"])
  await combo("refused-first", ["refused/m1", "steady/m1"])
})
afterAll(async () => {
  await gw?.close()
  for (const u of [flaky, steady, ollamaA, ollamaB]) await u?.close()
})
beforeEach(async () => {
  await patch({ connectionCooldown: DEFAULT_COOLDOWN })
  await gw.resetResilience()
  for (const u of [flaky, steady, ollamaA, ollamaB]) {
    u.always({ content: "from upstream" })
    u.requests.length = 0
  }
  steady.always({ content: "from steady" })
})

/** Rounding between the gateway's clock readings and the test's. */
const CLOCK_SLACK_MS = 50

describe("a transient failure cools the connection down (like a 429)", () => {
  for (const [name, reply] of [
    ["500", { status: 500 }],
    ["502", { status: 502 }],
    ["503", { status: 503 }],
    ["504", { status: 504 }],
    // An upstream that answers far past the 400 ms headers timeout: the fake runs in this process, so a
    // loop held up past both deadlines runs both timers in one turn and the answer is read before the
    // verdict (the gateway's rule, docs/resilience.md); 10 s keeps that out of reach of a loaded machine.
    ["timeout before headers", { delayMs: 10_000 }]
  ] as const) {
    it(`${name}: the combo falls back, and skips the cooling connection on the next request`, async () => {
      flaky.always(reply)
      const before = Date.now()
      const first = await chat("pair")
      const answered = Date.now()
      expect(first.status, first.text).toBe(200)
      expect(first.text).toContain("from steady")
      const conn = await connectionOf("flaky")
      expect(conn.state).toBe("cooldown")
      expect(conn.testStatus).toBe("unavailable")
      expect(conn.backoffLevel).toBe(1)
      // 3 s from the failure, which came between the request and its answer (however late a loaded machine ran).
      const until = Date.parse(conn.rateLimitedUntil)
      expect(until).toBeGreaterThanOrEqual(before + 3000 - CLOCK_SLACK_MS)
      expect(until).toBeLessThanOrEqual(answered + 3000 + CLOCK_SLACK_MS)
      // The connection view says the same.
      const view = await providerView("flaky")
      expect(view.testStatus).toBe("unavailable")
      expect(Date.parse(view.rateLimitedUntil)).toBe(until)
      // The next request does not call it: the combo goes straight to the next target.
      const second = await chat("pair")
      expect(second.text).toContain("from steady")
      expect(second.headers.get("x-gateway-fallback-attempts")).toBeNull()
      expect(flaky.requests).toHaveLength(1)
    })
  }

  it("a refused connection cools down too", async () => {
    expect((await chat("refused-first")).text).toContain("from steady")
    expect((await connectionOf("refused")).state).toBe("cooldown")
    const again = await chat("refused-first")
    expect(again.text).toContain("from steady")
    expect(again.headers.get("x-gateway-fallback-attempts")).toBeNull()
  })

  it("backs off exponentially (base × 2^n) and a success clears it", async () => {
    await patch({ connectionCooldown: { apiKeyBaseMs: 200 } })
    flaky.always({ status: 503 })
    // The cooldown runs from the failure, somewhere between the chat's send and its answer: the
    // window is measured, not assumed (a loaded machine answers slowly).
    const cooledFor = async (ms: number, level: number) => {
      const sent = Date.now()
      await chat("flaky/m1")
      const answered = Date.now()
      const conn = await connectionOf("flaky")
      expect(conn.backoffLevel).toBe(level)
      expect(Date.parse(conn.rateLimitedUntil)).toBeGreaterThanOrEqual(sent + ms - 5)
      expect(Date.parse(conn.rateLimitedUntil)).toBeLessThanOrEqual(answered + ms + 5)
    }
    await cooledFor(200, 1)
    await sleep(250)
    await cooledFor(400, 2)
    await sleep(450)
    flaky.always({ content: "back" })
    expect((await chat("flaky/m1")).status).toBe(200)
    expect(await connectionOf("flaky")).toMatchObject({ state: "available", backoffLevel: 0, rateLimitedUntil: null })
  })

  it("a direct request to a connection cooling down after errors gets 503 with Retry-After (not a rate limit 429)", async () => {
    flaky.always({ status: 502 })
    expect((await chat("flaky/m1")).status).toBe(502)
    const again = await chat("flaky/m1")
    expect(again.status).toBe(503)
    expect(Number(again.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(again.body.error.message).toContain("error cooldown")
    expect(flaky.requests).toHaveLength(1)
  })
})

describe("one breaker per provider and upstream origin", () => {
  it("a broken local server does not block the same provider's healthy server at another address", async () => {
    // Failures one after another on the same connection: shorten its cooldown.
    await patch({ connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 } })
    ollamaA.always({ status: 503 })
    expect((await chat("ollama-a/m1")).status).toBe(503)
    await sleep(5)
    expect((await chat("ollama-a/m1")).status).toBe(503)
    const { breakers } = await status()
    const keyA = `ollama@${new URL(ollamaA.url).origin}`
    expect(breakers).toEqual([
      expect.objectContaining({ key: keyA, provider: "ollama", origin: new URL(ollamaA.url).origin, state: "OPEN" })
    ])
    // Another Ollama server answers as usual.
    const b = await chat("ollama-b/m1")
    expect(b.status, b.text).toBe(200)
    expect(ollamaB.requests).toHaveLength(1)
    // The broken one is refused while its breaker is open.
    await sleep(5)
    const a = await chat("ollama-a/m1")
    expect(a.status).toBe(503)
    expect(a.body.error.message).toContain("circuit open")
    expect(ollamaA.requests).toHaveLength(2)
  })

  it("POST /api/resilience/reset takes a provider (every origin), a breaker key, or a provider and an origin", async () => {
    await patch({ connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 } })
    ollamaA.always({ status: 503 })
    ollamaB.always({ status: 503 })
    const openBoth = async () => {
      for (const name of ["ollama-a", "ollama-b", "ollama-a", "ollama-b"]) {
        await chat(`${name}/m1`)
        await sleep(5)
      }
      expect((await status()).breakers.filter((x: any) => x.state === "OPEN")).toHaveLength(2)
    }
    const reset = async (body: unknown) => (await call(`${gw.url}/api/resilience/reset`, { body, headers: admin })).body
    await openBoth()
    expect(await reset({ provider: `ollama@${new URL(ollamaA.url).origin}` })).toEqual({ breakersReset: 1, connectionsReset: 0 })
    expect((await status()).breakers.map((x: any) => x.origin)).toEqual([new URL(ollamaB.url).origin])
    await gw.resetResilience()
    await openBoth()
    expect((await reset({ provider: "ollama", origin: ollamaB.baseUrl("ollama") })).breakersReset).toBe(1)
    expect((await status()).breakers.map((x: any) => x.origin)).toEqual([new URL(ollamaA.url).origin])
    await gw.resetResilience()
    await openBoth()
    expect((await reset({ provider: "ollama" })).breakersReset).toBe(2)
    expect((await status()).breakers).toEqual([])
    const bad = await call(`${gw.url}/api/resilience/reset`, { body: { origin: "http://x" }, headers: admin })
    expect(bad.status).toBe(400)
  })
})

describe("a 400 that says this target cannot take the request falls back", () => {
  const FALLS_BACK: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
    [
      "OpenAI context_length_exceeded",
      {
        status: 400,
        body: {
          error: {
            message: "This model's maximum context length is 8192 tokens.",
            type: "invalid_request_error",
            code: "context_length_exceeded"
          }
        }
      }
    ],
    [
      "Anthropic prompt is too long",
      {
        status: 400,
        body: { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } }
      }
    ],
    [
      "Gemini exceeds the maximum number of tokens",
      {
        status: 400,
        body: {
          error: {
            code: 400,
            message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            status: "INVALID_ARGUMENT"
          }
        }
      }
    ],
    [
      "model_not_found",
      {
        status: 400,
        body: {
          error: {
            message: "The model `m1` does not exist or you do not have access to it.",
            type: "invalid_request_error",
            code: "model_not_found"
          }
        }
      }
    ],
    [
      "model not supported",
      { status: 400, body: { error: { message: "The requested model is not supported.", type: "invalid_request_error" } } }
    ],
    [
      "unsupported_parameter",
      {
        status: 400,
        body: {
          error: {
            message: "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            type: "invalid_request_error",
            param: "max_tokens",
            code: "unsupported_parameter"
          }
        }
      }
    ],
    [
      "unknown parameter",
      { status: 400, body: { error: { message: "Unknown parameter: 'reasoning_effort'.", type: "invalid_request_error" } } }
    ]
  ]
  for (const [name, reply] of FALLS_BACK) {
    it(`${name}: the next target answers; no breaker, no cooldown`, async () => {
      flaky.always(reply)
      const res = await chat("pair")
      expect(res.status, res.text).toBe(200)
      expect(res.text).toContain("from steady")
      expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
      const s = await status()
      expect(s.breakers).toEqual([])
      expect(s.connections.find((c: any) => c.name === "flaky").state).toBe("available")
    })
  }

  it("any other 400 is the client's: returned as it is, no fallback", async () => {
    flaky.always({
      status: 400,
      body: {
        error: {
          message: "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user'.",
          type: "invalid_request_error",
          param: "messages[0].role"
        }
      }
    })
    const res = await chat("pair")
    expect(res.status).toBe(400)
    expect(res.body.error.message).toContain("robot")
    expect(steady.requests).toHaveLength(0)
  })

  it("when every target says so, the client gets the last 400", async () => {
    flaky.always({
      status: 400,
      body: { error: { message: "This model's maximum context length is 8192 tokens.", code: "context_length_exceeded" } }
    })
    steady.always({
      status: 400,
      body: { type: "error", error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" } }
    })
    const res = await chat("pair")
    expect(res.status).toBe(400)
    expect(res.body.error.message).toContain("prompt is too long")
    expect(flaky.requests).toHaveLength(1)
    expect(steady.requests).toHaveLength(1)
  })
})
