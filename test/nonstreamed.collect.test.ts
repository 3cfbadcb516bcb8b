import { open } from "../src/upstream/formats/signatures.js"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import type { FormatId } from "../src/domain/canonical.js"
import type { Family, FakeUpstream, Reply } from "./support/fakeUpstream.js"
import { FAMILIES, gatewayForFile } from "./support/families.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * A non-streamed request is asked of its upstream as a stream and the answer collected
 * (docs/formats.md, "Non-streamed answers from streams"): the client gets what the whole answer
 * would have given it. Each upstream family twice, a connection that collects (`"stream"`) and one
 * that asks for the whole answer (`timeouts.nonStreamed: "whole"`), the same replies, every client
 * format; and the default (`"auto"`), which asks whole once an answer showed the upstream is fast.
 */
const ADMIN = "gwk_collect_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

/**
 * Each upstream family three times: `c-<name>` collects streams (`nonStreamed: "stream"`),
 * `w-<name>` asks for whole answers, `a-<name>` is left to the default (`"auto"`).
 */
const file = gatewayForFile({
  admin: ADMIN,
  setup: async (gw, up) => {
    for (const { family, connection } of FAMILIES) {
      for (const [prefix, timeouts] of [
        ["c", { nonStreamed: "stream" }],
        ["w", { nonStreamed: "whole" }],
        ["a", undefined]
      ] as const) {
        const body = {
          ...connection,
          name: `${prefix}-${String(connection["name"])}`,
          baseUrl: up.baseUrl(family),
          defaultModel: "m1",
          ...(timeouts ? { timeouts } : {})
        }
        const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
        expect(res.status, res.text).toBe(201)
      }
    }
  }
})
let gw: TestGateway
let up: FakeUpstream
beforeAll(() => {
  ;({ gw, up } = file)
})

const WEATHER = {
  name: "get_weather",
  description: "Get the weather",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] }
}

/** A non-streamed request in a client format, with a tool declared. */
const request = (client: FormatId, model: string): { path: string; body: Record<string, unknown> } => {
  switch (client) {
    case "openai-chat":
      return {
        path: "/v1/chat/completions",
        body: { model, messages: [{ role: "user", content: "weather in Paris?" }], tools: [{ type: "function", function: WEATHER }] }
      }
    case "openai-responses":
      return {
        path: "/v1/responses",
        body: { model, input: "weather in Paris?", tools: [{ type: "function", ...WEATHER, strict: false }] }
      }
    case "anthropic":
      return {
        path: "/v1/messages",
        body: {
          model,
          max_tokens: 1024,
          messages: [{ role: "user", content: "weather in Paris?" }],
          tools: [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters }]
        }
      }
    case "gemini":
      return {
        path: `/v1beta/models/${model}:generateContent`,
        body: { contents: [{ role: "user", parts: [{ text: "weather in Paris?" }] }], tools: [{ functionDeclarations: [WEATHER] }] }
      }
    case "ollama":
      return {
        path: "/api/chat",
        body: {
          model,
          stream: false,
          messages: [{ role: "user", content: "weather in Paris?" }],
          tools: [{ type: "function", function: WEATHER }]
        }
      }
  }
}

const REPLIES: ReadonlyArray<{ readonly name: string; readonly reply: Reply }> = [
  { name: "text with usage", reply: { content: "It is sunny in Paris today.", chunks: 4, usage: { input: 123, output: 45 } } },
  {
    name: "parallel tool calls",
    reply: {
      toolCalls: [
        { name: "get_weather", arguments: '{"location":"Paris"}' },
        { name: "get_weather", arguments: '{"location":"Lyon"}' }
      ]
    }
  },
  { name: "reasoning, then text", reply: { reasoning: { text: "The user wants the weather.", signature: "sig-abc" }, content: "Sunny." } },
  {
    name: "reasoning, then a tool call",
    reply: {
      reasoning: { text: "I should look it up.", signature: "sig-def" },
      toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }]
    }
  },
  { name: "cut at the output limit", reply: { content: "It is sunny and", stop: "max_tokens" } },
  { name: "refused", reply: { content: "I cannot help with that.", stop: "refusal" } }
]

/** An answer with what differs between any two answers taken out: ids and times. */
const normalise = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(normalise)
  if (typeof v === "string") {
    // Reasoning state is sealed with the connection that issued it (docs/reasoning-state.md): the two connections differ.
    const s = open(v).signature
    return /^(chatcmpl|resp|msg|call|toolu|fc|rs|req)[-_]/.test(s) ? "<id>" : s.replace(/^[cwa]-up-/, "up-")
  }
  if (v === null || typeof v !== "object") return v
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(v)) {
    if (
      [
        "id",
        "created",
        "created_at",
        "responseId",
        "call_id",
        "tool_call_id",
        "total_duration",
        "load_duration",
        "prompt_eval_duration",
        "eval_duration"
      ].includes(k)
    )
      continue
    out[k] = normalise(x)
  }
  return out
}

const CLIENTS: ReadonlyArray<FormatId> = ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"]

describe("a collected answer is the whole answer", () => {
  for (const client of CLIENTS) {
    for (const { family, connection } of FAMILIES) {
      it(`${client} client ← ${family} upstream: text, tool calls, reasoning, usage, cuts and refusals`, async () => {
        for (const { name, reply } of REPLIES) {
          const answers: Array<{ status: number; body: unknown; tokens: string }> = []
          for (const prefix of ["w", "c"]) {
            up.next(reply)
            const { path, body } = request(client, `${prefix}-${String(connection["name"])}/m1`)
            const res = await call(`${gw.url}${path}`, { body })
            answers.push({
              status: res.status,
              body: normalise(res.body),
              tokens: `${res.headers.get("x-gateway-tokens-in")}/${res.headers.get("x-gateway-tokens-out")}`
            })
          }
          // What went upstream: the whole answer asked whole, the collected one as a stream.
          const [whole, collected] = up.requests.slice(-2)
          expect(whole!.family).toBe(family as Family)
          expect(JSON.stringify(collected!.body?.stream ?? collected!.path)).toMatch(/true|streamGenerateContent/)
          expect(answers[1], `${name}: ${JSON.stringify(answers[1]).slice(0, 600)}`).toEqual(answers[0])
          expect(answers[0]!.status, name).toBe(200)
        }
        expect(up.violations).toEqual([])
      })
    }
  }
})

describe('the default, timeouts.nonStreamed "auto"', () => {
  const asked = () => up.requests.at(-1)!
  const streamedAsk = (r: { body: any; path: string }) => r.body?.stream === true || r.path.includes("streamGenerateContent")

  for (const { family, connection } of FAMILIES) {
    it(`${family}: the first answer is collected from a stream, the next short one asked whole; a reasoning request stays a stream`, async () => {
      const model = `a-${String(connection["name"])}/m1`
      const chat = (body: Record<string, unknown> = {}) =>
        call(`${gw.url}/v1/chat/completions`, { body: { model, max_tokens: 200, messages: [{ role: "user", content: "hi" }], ...body } })
      // A fresh candidate of its own (the model's name makes the key): nothing known of its pace yet.
      const fresh = `${model}-${family}-${Date.now()}`
      up.next({ content: "first", usage: { input: 5, output: 40 } })
      const first = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: fresh, max_tokens: 200, messages: [{ role: "user", content: "hi" }] }
      })
      expect(first.status, first.text).toBe(200)
      expect(streamedAsk(asked())).toBe(true)
      up.next({ content: "second", usage: { input: 5, output: 40 } })
      const second = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: fresh, max_tokens: 200, messages: [{ role: "user", content: "hi" }] }
      })
      expect(second.status, second.text).toBe(200)
      expect(second.body.choices[0].message.content).toBe("second")
      expect(streamedAsk(asked())).toBe(false)
      // A request that asks for reasoning may think for long before its first byte: a stream.
      up.next({ content: "thought", usage: { input: 5, output: 40 } })
      expect((await chat({ model: fresh, reasoning_effort: "high" })).status).toBe(200)
      expect(streamedAsk(asked())).toBe(true)
      // An output cap the upstream cannot produce within half the headers timeout at its pace: a stream.
      up.next({ content: "long", usage: { input: 5, output: 40 } })
      expect((await chat({ model: fresh, max_tokens: 100_000_000 })).status).toBe(200)
      expect(streamedAsk(asked())).toBe(true)
    })
  }
})

describe("a long generation, non-streamed", () => {
  /**
   * The gateway's limits scaled down a hundredfold: a whole answer is waited for 600 ms (60 s by
   * default), a stream may be silent 800 ms (120 s). The upstream takes 3 s (3 min) and sends an
   * event every 150 ms (a few seconds). The defaults themselves: `npm run test:long`.
   */
  let short: TestGateway
  beforeAll(async () => {
    // The first content gets three times the idle limit: the describe's first request (the
    // gateway's first through the collecting path) missed 800 ms in two loaded runs of the suite
    // (2026-11-28, "upstream sent no content within 800 ms"); no case here is about first content.
    short = await startGateway({ timeouts: { headersMs: 600, bodyIdleMs: 600, streamHeadersMs: 800, firstContentMs: 2400, idleMs: 800 } })
    await short.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    const add = async (body: Record<string, unknown>) =>
      expect((await call(`${short.url}/api/providers`, { body, headers: admin })).status).toBe(201)
    await add({ provider: "anthropic", name: "slow", apiKey: "sk-ant-slow", baseUrl: up.baseUrl("anthropic"), defaultModel: "m1" })
    await add({
      provider: "anthropic",
      name: "slow-whole",
      apiKey: "sk-ant-slow",
      baseUrl: up.baseUrl("anthropic"),
      defaultModel: "m1",
      timeouts: { nonStreamed: "whole" }
    })
    await add({ provider: "openai-compatible", name: "steady", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" })
    expect(
      (
        await call(`${short.url}/api/combos`, {
          body: { name: "slow-then-steady", strategy: "priority", targets: [{ model: "slow/m1" }, { model: "steady/m1" }] },
          headers: admin
        })
      ).status
    ).toBe(201)
  })
  afterAll(async () => {
    await short?.close()
  })
  beforeEach(async () => {
    await short.resetResilience()
  })
  const text = "a long considered answer, one token at a time, sixteen pieces in all, slowly"
  const chat = (model: string) =>
    call(`${short.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "think hard" }] } })

  it("is served whole although it takes five times the whole-answer limit, as long as tokens keep coming", async () => {
    const started = Date.now()
    up.next({ content: text, chunks: 16, chunkDelayMs: 150, usage: { input: 40, output: 900 } })
    const res = await chat("slow/m1")
    expect(res.status, res.text).toBe(200)
    expect(res.body.choices[0].message.content).toBe(text)
    expect(res.body.usage).toMatchObject({ prompt_tokens: 40, completion_tokens: 900 })
    expect(up.requests.at(-1)!.body.stream).toBe(true)
    // It did take longer than a whole answer is waited for.
    expect(Date.now() - started).toBeGreaterThan(1200)
  })

  it("one that goes silent is cut by the idle limit and falls back to the next target", async () => {
    up.next({ content: text, chunks: 10, chunkDelayMs: 100, stallAfterChunks: 5 }, { content: "from steady" })
    const res = await chat("slow-then-steady")
    expect(res.status, res.text).toBe(200)
    expect(res.body.choices[0].message.content).toBe("from steady")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    // The silent target's failure is counted: its connection cools down.
    const providers = (await call(`${short.url}/api/providers`, { headers: admin })).body.connections
    expect(providers.find((c: { name: string }) => c.name === "slow").rateLimitedUntil).not.toBeNull()
  })

  it("a connection set to wait for whole answers keeps the whole-answer limit (an upstream that cannot stream)", async () => {
    up.next({ content: text, delayMs: 3000 })
    const res = await chat("slow-whole/m1")
    expect(res.status).toBe(504)
    expect(res.body.error.code).toBe("upstream_timeout")
    expect(up.requests.at(-1)!.body.stream).toBeUndefined()
  })
})
