import { open } from "../src/upstream/formats/signatures.js"
import Anthropic from "@anthropic-ai/sdk"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** Errors, streams, watchdogs, usage and reasoning across formats, against the strict fake. */
const ADMIN = "gwk_wire_admin_key_0123456789abcdefgh"
const CONNECTIONS: ReadonlyArray<{ family: Family; body: Record<string, unknown> }> = [
  { family: "openai-chat", body: { provider: "openai-compatible", name: "up-chat" } },
  { family: "openai-responses", body: { provider: "openai-compatible", name: "up-resp", upstreamFormat: "openai-responses" } },
  { family: "anthropic", body: { provider: "anthropic", name: "up-anth", apiKey: "sk-ant" } },
  { family: "gemini", body: { provider: "gemini", name: "up-gem", apiKey: "gkey" } },
  { family: "ollama", body: { provider: "ollama", name: "up-oll" } }
]
const MODEL: Record<Family, string> = {
  "openai-chat": "up-chat/m1",
  "openai-responses": "up-resp/m1",
  anthropic: "up-anth/m1",
  gemini: "up-gem/m1",
  ollama: "up-oll/m1"
}

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ timeouts: { firstContentMs: 300, idleMs: 300, streamHeadersMs: 2000 } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const { family, body } of CONNECTIONS) {
    const res = await call(`${gw.url}/api/providers`, {
      body: { ...body, baseUrl: up.baseUrl(family), defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(res.status).toBe(201)
  }
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.requests.length = 0
  up.violations.length = 0
  up.always({})
  await gw.resetResilience()
})

/** A raw request in each client format, streamed or not. */
const request = (client: Family, model: string, stream: boolean, extra: Record<string, unknown> = {}) => {
  switch (client) {
    case "openai-chat":
      return { path: "/v1/chat/completions", body: { model, messages: [{ role: "user", content: "hi" }], stream, ...extra } }
    case "openai-responses":
      return { path: "/v1/responses", body: { model, input: "hi", stream, ...extra } }
    case "anthropic":
      return { path: "/v1/messages", body: { model, max_tokens: 100, messages: [{ role: "user", content: "hi" }], stream, ...extra } }
    case "gemini":
      return {
        path: `/v1beta/models/${model}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`,
        body: { contents: [{ role: "user", parts: [{ text: "hi" }] }], ...extra }
      }
    case "ollama":
      return { path: "/api/chat", body: { model, messages: [{ role: "user", content: "hi" }], stream, ...extra } }
  }
}

/** The error message of a client-format error body. */
const errorMessage = (client: Family, body: any): string | undefined =>
  client === "ollama" ? body?.error : client === "anthropic" ? body?.error?.message : body?.error?.message

const CLIENTS: ReadonlyArray<Family> = ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"]

describe("an upstream error before the first byte", () => {
  for (const client of CLIENTS) {
    for (const upstream of ["openai-chat", "anthropic", "gemini"] as const) {
      it(`keeps its status and is rendered in the ${client} client's error shape (upstream ${upstream})`, async () => {
        up.next({ status: 429, headers: { "retry-after": "3" }, errorMessage: "slow down please" })
        const { path, body } = request(client, MODEL[upstream], true)
        const res = await call(`${gw.url}${path}`, { body })
        expect(res.status).toBe(429)
        expect(res.headers.get("retry-after")).toBe("3")
        expect(errorMessage(client, res.body)).toContain("slow down please")
        if (client === "anthropic") expect(res.body).toMatchObject({ type: "error", error: { type: "rate_limit_error" } })
        if (client === "gemini") expect(res.body.error).toMatchObject({ code: 429, status: "RESOURCE_EXHAUSTED" })
        if (client === "openai-chat" || client === "openai-responses") expect(res.body.error.type).toBe("rate_limit_error")
      })
    }
  }
})

describe("an error after streaming started", () => {
  it("reaches the openai SDK as an APIError (chat client, anthropic upstream)", async () => {
    up.next({ content: "partial answer", chunks: 4, streamErrorAfterChunks: 4, errorMessage: "Overloaded" })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    const stream = await client.chat.completions.create({
      model: MODEL.anthropic,
      messages: [{ role: "user", content: "hi" }],
      stream: true
    })
    const err = await (async () => {
      for await (const _ of stream) {
        // read
      }
    })().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.APIError)
    expect((err as Error).message).toContain("Overloaded")
  })

  it("reaches the Anthropic SDK as an error event (messages client, gemini upstream cut mid-stream)", async () => {
    up.next({ content: "one two three four", chunks: 4, cutAfterChunks: 2 })
    const client = new Anthropic({ baseURL: gw.url, apiKey: "x", maxRetries: 0 })
    const err = await client.messages
      .stream({ model: MODEL.gemini, max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
      .finalMessage()
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Error)
    expect(String((err as Error).message)).toMatch(/ended unexpectedly|terminated|other side closed/)
  })

  it("is an Ollama error line for an Ollama client (responses upstream failing)", async () => {
    up.next({ content: "abc", failed: true, errorMessage: "model crashed" })
    const res = await call(`${gw.url}/api/chat`, {
      body: { model: MODEL["openai-responses"], messages: [{ role: "user", content: "hi" }], stream: true }
    })
    const lines = res.text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
    expect(lines.at(-1)).toEqual({ error: "model crashed" })
    expect(lines.some((l) => l.done === true)).toBe(false)
  })
})

describe("Responses pass-through", () => {
  const sseEvents = (text: string) =>
    text
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => JSON.parse(l.slice(6)))

  it("reports a stream cut mid-way as response.failed of the same response, sequence numbers continuing", async () => {
    up.next({ content: "one two three four", chunks: 4, cutAfterChunks: 6 })
    const res = await call(`${gw.url}/v1/responses`, { body: { model: MODEL["openai-responses"], input: "hi", stream: true } })
    const events = sseEvents(res.text)
    expect(events.filter((e) => e.type === "response.created").length).toBe(1)
    const created = events[0]
    const last = events.at(-1)
    expect(last.type).toBe("response.failed")
    expect(last.response.id).toBe(created.response.id)
    const seqs = events.map((e) => e.sequence_number)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(new Set(seqs).size).toBe(seqs.length)
    // The openai SDK's stream helper ends with the failed response, never a silent success.
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    up.next({ content: "one two three four", chunks: 4, cutAfterChunks: 6 })
    const final: any = await client.responses
      .stream({ model: MODEL["openai-responses"], input: "hi" })
      .finalResponse()
      .catch((e: unknown) => e)
    expect(final instanceof Error || final.status === "failed").toBe(true)
    if (!(final instanceof Error)) expect(final.error.message).toMatch(/upstream|stream|terminated|closed/i)
  })

  it("leaves previous_response_id to an OpenAI upstream that stored the response, and expands it for one that did not", async () => {
    const made = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai", name: "up-oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-responses"), defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(made.status).toBe(201)
    const first = await call(`${gw.url}/v1/responses`, { body: { model: "up-oai/m1", input: "hi" } })
    expect(first.status).toBe(200)
    const second = await call(`${gw.url}/v1/responses`, {
      body: { model: "up-oai/m1", input: "and then?", previous_response_id: first.body.id }
    })
    expect(second.status, second.text).toBe(200)
    const sent = up.requests.at(-1)!.body
    expect(sent.previous_response_id).toBe(first.body.id)
    expect(sent.input).toEqual("and then?")

    // Answered with store: false, the id means nothing upstream: the gateway sends the history itself.
    const unstored = await call(`${gw.url}/v1/responses`, { body: { model: "up-oai/m1", input: "hi", store: false } })
    const next = await call(`${gw.url}/v1/responses`, {
      body: { model: "up-oai/m1", input: "more", store: false, previous_response_id: unstored.body.id }
    })
    expect(next.status, next.text).toBe(200)
    const expanded = up.requests.at(-1)!.body
    expect(expanded).not.toHaveProperty("previous_response_id")
    expect(JSON.stringify(expanded.input)).toContain("Hello from upstream")
    expect(up.violations).toEqual([])
  })

  it("continues a conversation on another family from a response id made by a Responses upstream", async () => {
    const first = await call(`${gw.url}/v1/responses`, { body: { model: MODEL["openai-responses"], input: "remember 42" } })
    const second = await call(`${gw.url}/v1/responses`, {
      body: { model: MODEL.anthropic, input: "what number?", previous_response_id: first.body.id }
    })
    expect(second.status, second.text).toBe(200)
    const sent = up.requests.at(-1)!.body
    expect(sent.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "user"])
    expect(up.violations).toEqual([])
  })
})

describe("never an empty success", () => {
  it("a 200 whose body is an error is an error, in every upstream family", async () => {
    for (const upstream of ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const) {
      up.next({ errorIn200: true, errorMessage: `broken ${upstream}` })
      const res = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: MODEL[upstream], messages: [{ role: "user", content: "hi" }] }
      })
      expect(res.status, upstream).toBeGreaterThanOrEqual(500)
      expect(res.body.error.message, upstream).toContain(`broken ${upstream}`)
    }
  })

  it("a response.failed is an error for a chat client, whole or streamed", async () => {
    up.next({ failed: true, errorMessage: "the model failed" })
    const whole = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: MODEL["openai-responses"], messages: [{ role: "user", content: "hi" }] }
    })
    expect(whole.status).toBeGreaterThanOrEqual(400)
    expect(whole.body.error.message).toContain("the model failed")
    // A failed response is a transient failure: the connection cools down (docs/resilience.md).
    await gw.resetResilience()
    up.next({ failed: true, errorMessage: "the model failed" })
    const streamed = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: MODEL["openai-responses"], messages: [{ role: "user", content: "hi" }], stream: true }
    })
    expect(streamed.text).toContain("the model failed")
    expect(streamed.text).not.toContain("[DONE]")
  })
})

describe("stream watchdogs", () => {
  it("ends a stream that stalls after it started, with the client format's error event", async () => {
    up.next({ content: "a b c d", chunks: 4, stallAfterChunks: 2 })
    const started = Date.now()
    const res = await call(`${gw.url}/v1/messages`, {
      body: { model: MODEL["openai-chat"], max_tokens: 50, messages: [{ role: "user", content: "hi" }], stream: true }
    })
    expect(Date.now() - started).toBeLessThan(5000)
    expect(res.text).toContain("event: error")
    expect(res.text).toMatch(/stalled|no content/)
  })

  it("ends a stream that sends headers but no content within the first-content timeout", async () => {
    up.next({ content: "late", stallAfterChunks: 0 })
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: MODEL["openai-chat"], messages: [{ role: "user", content: "hi" }], stream: true }
    })
    expect(res.text).toContain("no content")
    expect(res.text).toContain("upstream_stalled")
  })

  it("answers 504 when the upstream sends no headers in time", async () => {
    up.next({ delayMs: 4000 })
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: MODEL["openai-chat"], messages: [{ role: "user", content: "hi" }], stream: true }
    })
    expect(res.status).toBe(504)
    expect(res.body.error.code).toBe("upstream_timeout")
  })
})

describe("usage is recorded from every family, never 0/0", () => {
  for (const upstream of ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const) {
    for (const stream of [false, true]) {
      it(`${upstream}, ${stream ? "streamed" : "whole"}, translated to a chat client`, async () => {
        up.next({ content: "counted", usage: { input: 31, output: 17 } })
        const res = await call(`${gw.url}/v1/chat/completions`, {
          body: { model: MODEL[upstream], messages: [{ role: "user", content: "hi" }], stream }
        })
        expect(res.status).toBe(200)
        await gw.usageWritten()
        const row = queryDb(gw.dataDir, "SELECT tokens_in, tokens_out, provider FROM usage ORDER BY id DESC LIMIT 1")[0]!
        expect([row["tokens_in"], row["tokens_out"]]).toEqual([31, 17])
      })
    }
  }

  it("reads usage from a same-format stream it passes through (anthropic client and upstream)", async () => {
    up.next({ content: "passthrough", usage: { input: 44, output: 9 } })
    const res = await call(`${gw.url}/v1/messages`, {
      body: { model: MODEL.anthropic, max_tokens: 50, messages: [{ role: "user", content: "hi" }], stream: true }
    })
    expect(res.text).toContain("message_stop")
    await gw.usageWritten()
    const row = queryDb(gw.dataDir, "SELECT tokens_in, tokens_out FROM usage ORDER BY id DESC LIMIT 1")[0]!
    expect([row["tokens_in"], row["tokens_out"]]).toEqual([44, 9])
  })
})

describe("reasoning signatures survive a round trip", () => {
  it("Anthropic thinking + signature, same format: sent back unchanged with thinking on", async () => {
    up.next(
      {
        reasoning: { text: "plan", signature: "SIG-ANTHROPIC-1" },
        toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }]
      },
      { content: "done" }
    )
    const client = new Anthropic({ baseURL: gw.url, apiKey: "x", maxRetries: 0 })
    const tools = [{ name: "get_weather", input_schema: { type: "object" as const, properties: { location: { type: "string" } } } }]
    const base = { model: MODEL.anthropic, max_tokens: 4096, thinking: { type: "enabled" as const, budget_tokens: 2048 }, tools }
    const first = await client.messages.stream({ ...base, messages: [{ role: "user", content: "weather?" }] }).finalMessage()
    // The client holds it sealed with the connection that issued it (docs/reasoning-state.md); the upstream gets its own back.
    expect(first.content[0]).toMatchObject({ type: "thinking", thinking: "plan" })
    expect(open((first.content[0] as Anthropic.ThinkingBlock).signature).signature).toBe("SIG-ANTHROPIC-1")
    const use = first.content.find((b) => b.type === "tool_use") as Anthropic.ToolUseBlock
    const second = await client.messages.create({
      ...base,
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] }
      ]
    })
    expect(up.violations).toEqual([])
    expect(up.requests[1]!.body.messages[1].content[0]).toEqual({ type: "thinking", thinking: "plan", signature: "SIG-ANTHROPIC-1" })
    expect(second.content[0]).toMatchObject({ type: "text", text: "done" })
  })

  it("Gemini thought signature through a chat client: back on the functionCall part", async () => {
    up.next({ reasoning: { text: "think", signature: "GEMINI-SIG-42" }, toolCalls: [{ name: "ls", arguments: "{}" }] }, { content: "done" })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    const tools = [{ type: "function" as const, function: { name: "ls", parameters: { type: "object", properties: {} } } }]
    const first = await client.chat.completions.create({
      model: MODEL.gemini,
      messages: [{ role: "user", content: "list" }],
      tools,
      reasoning_effort: "low"
    })
    const message = first.choices[0]!.message
    expect((message as unknown as Record<string, unknown>)["reasoning_content"]).toBe("think")
    const callId = message.tool_calls![0]!.id
    await client.chat.completions.create({
      model: MODEL.gemini,
      tools,
      messages: [{ role: "user", content: "list" }, message, { role: "tool", tool_call_id: callId, content: "a.txt" }]
    })
    expect(up.violations).toEqual([])
    const modelTurn = up.requests[1]!.body.contents[1]
    expect(modelTurn.parts.find((p: any) => p.functionCall)).toMatchObject({
      functionCall: { name: "ls" },
      thoughtSignature: "GEMINI-SIG-42"
    })
  })

  it("Anthropic thinking through a chat client: the round trip works (thinking off where the signature cannot return)", async () => {
    up.next({ reasoning: { text: "plan" }, toolCalls: [{ name: "ls", arguments: "{}" }] }, { content: "done" })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    const tools = [{ type: "function" as const, function: { name: "ls", parameters: { type: "object", properties: {} } } }]
    const first = await client.chat.completions.create({
      model: MODEL.anthropic,
      messages: [{ role: "user", content: "list" }],
      tools,
      reasoning_effort: "high",
      max_tokens: 30000
    })
    expect(up.requests[0]!.body.thinking).toMatchObject({ type: "enabled" })
    const message = first.choices[0]!.message
    const second = await client.chat.completions.create({
      model: MODEL.anthropic,
      tools,
      reasoning_effort: "high",
      max_tokens: 30000,
      messages: [{ role: "user", content: "list" }, message, { role: "tool", tool_call_id: message.tool_calls![0]!.id, content: "a.txt" }]
    })
    expect(up.violations).toEqual([])
    expect(up.requests[1]!.body.thinking).toBeUndefined()
    expect(second.choices[0]!.message.content).toBe("done")
  })
})

describe("Gemini's URLs, which name the model", () => {
  it("each model and mode is sent to its own path, the same each time (chat client)", async () => {
    // A connection that sends a non-streamed request whole (the default, "auto", may stream it and collect).
    const made = await call(`${gw.url}/api/providers`, {
      body: {
        provider: "gemini",
        name: "up-gem-whole",
        apiKey: "gkey",
        baseUrl: up.baseUrl("gemini"),
        defaultModel: "m1",
        timeouts: { nonStreamed: "whole" }
      },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(made.status).toBe(201)
    const asks: ReadonlyArray<readonly [string, boolean]> = [
      ["m1", true],
      ["m2", false],
      ["m1", false],
      ["m2", true],
      ["m1", true],
      ["m2", false],
      ["m1", false]
    ]
    for (const [model, stream] of asks) {
      const { path, body } = request("openai-chat", `up-gem-whole/${model}`, stream)
      const res = await call(`${gw.url}${path}`, { body })
      expect(res.status, `${model} stream=${stream}`).toBe(200)
    }
    expect(up.requests.map((r) => `${r.path}${r.query.get("alt") ? `?alt=${r.query.get("alt")}` : ""}`)).toEqual(
      asks.map(([model, stream]) => `/v1beta/models/${model}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`)
    )
    // The body names no model (it is in the path).
    for (const r of up.requests) expect(r.body.model).toBeUndefined()
  })
})
