/**
 * Every POST inference route checks the types and ranges of the parameters it knows and answers
 * 400 in the client's own error shape, naming the field, before anything reaches an upstream.
 * Unknown fields, and `null` for an optional parameter, still pass.
 */
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

const ADMIN = "gwk_valid_admin_key_0123456789abcdef0"
let gw: TestGateway
let up: FakeUpstream

const add = async (family: Family, body: Record<string, unknown>) => {
  const res = await call(`${gw.url}/api/providers`, {
    body: { ...body, baseUrl: up.baseUrl(family) },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
}

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await add("openai-chat", { provider: "openai-compatible", name: "up-chat", defaultModel: "m1", models: ["m1", "emb"] })
  await add("openai-responses", { provider: "openai", name: "up-resp", apiKey: "sk-x" })
  await add("anthropic", { provider: "anthropic", name: "up-anth", apiKey: "sk-ant" })
  await add("gemini", { provider: "gemini", name: "up-gem", apiKey: "gkey" })
  await add("ollama", { provider: "ollama", name: "up-oll" })
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

const post = (path: string, body: unknown) => call(`${gw.url}${path}`, { body })

const user = { role: "user", content: "hi" }
const chat = { model: "up-chat/m1", messages: [user] }
const responses = { model: "up-resp/gpt-5", input: "hi" }
const messages = { model: "up-anth/claude-haiku-4-5", max_tokens: 100, messages: [user] }
const contents = [{ role: "user", parts: [{ text: "hi" }] }]
const GEMINI = "/v1beta/models/up-gem/gemini-2.5-flash"
const ollamaChat = { model: "up-oll/llama3", messages: [user], stream: false }

/** [path, body, field named] for the OpenAI shape `{error: {type, param, message}}`. */
const openAiCases: ReadonlyArray<readonly [string, Record<string, unknown>, string, RegExp]> = [
  ["/v1/chat/completions", { ...chat, temperature: "hot" }, "temperature", /temperature: expected a number between 0 and 2, got "hot"/],
  ["/v1/chat/completions", { ...chat, temperature: 2.5 }, "temperature", /between 0 and 2, got 2.5/],
  ["/v1/chat/completions", { ...chat, max_tokens: -5 }, "max_tokens", /max_tokens: expected a positive integer, got -5/],
  ["/v1/chat/completions", { ...chat, max_tokens: "ten" }, "max_tokens", /max_tokens: expected a positive integer, got "ten"/],
  ["/v1/chat/completions", { ...chat, max_completion_tokens: 1.5 }, "max_completion_tokens", /positive integer/],
  ["/v1/chat/completions", { ...chat, top_p: 1.1 }, "top_p", /between 0 and 1/],
  ["/v1/chat/completions", { ...chat, n: 0 }, "n", /positive integer/],
  ["/v1/chat/completions", { ...chat, presence_penalty: -3 }, "presence_penalty", /between -2 and 2/],
  ["/v1/chat/completions", { ...chat, frequency_penalty: "x" }, "frequency_penalty", /between -2 and 2/],
  ["/v1/chat/completions", { ...chat, stream: "yes" }, "stream", /stream: expected a boolean/],
  ["/v1/chat/completions", { ...chat, stop: [1] }, "stop", /a string or an array of strings/],
  ["/v1/chat/completions", { ...chat, stream_options: true }, "stream_options", /an object/],
  ["/v1/chat/completions", { model: "up-chat/m1", messages: [] }, "messages", /messages must be a non-empty array/],
  ["/v1/completions", { model: "up-chat/m1", prompt: "hi", max_tokens: 0 }, "max_tokens", /positive integer/],
  ["/v1/completions", { model: "up-chat/m1", prompt: "hi", logprobs: true }, "logprobs", /an integer between 0 and 5/],
  ["/v1/responses", { ...responses, temperature: "hot" }, "temperature", /between 0 and 2/],
  ["/v1/responses", { ...responses, max_output_tokens: -1 }, "max_output_tokens", /positive integer/],
  ["/v1/responses", { ...responses, stream: 1 }, "stream", /a boolean/],
  ["/v1/responses", { ...responses, reasoning: "high" }, "reasoning", /an object/],
  ["/v1/embeddings", { model: "up-chat/emb", input: "hi", dimensions: -1 }, "dimensions", /positive integer/],
  ["/v1/embeddings", { model: "up-chat/emb", input: "hi", encoding_format: "hex" }, "encoding_format", /"float" or "base64"/]
]

describe("OpenAI routes check the parameters they know", () => {
  it.each(openAiCases)("%s %j names %s", async (path, body, param, message) => {
    const res = await post(path, body)
    expect(res.status, res.text).toBe(400)
    expect(res.body.error).toMatchObject({ type: "invalid_request_error", param })
    expect(res.body.error.message).toMatch(message)
    expect(up.requests).toHaveLength(0)
  })

  it("accepts null for optional parameters and passes unknown fields through", async () => {
    const res = await post("/v1/chat/completions", {
      ...chat,
      temperature: null,
      max_tokens: null,
      stop: null,
      stream: null,
      top_p: 1,
      n: 1,
      stream_options: null,
      x_vendor_flag: { a: 1 }
    })
    expect(res.status, res.text).toBe(200)
    expect(up.requests[0]!.body.x_vendor_flag).toEqual({ a: 1 })
    const r2 = await post("/v1/responses", {
      ...responses,
      temperature: null,
      max_output_tokens: 32000,
      store: false,
      include: ["reasoning.encrypted_content"]
    })
    expect(r2.status, r2.text).toBe(200)
  })
})

describe("Anthropic routes answer in Anthropic's error shape", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, RegExp]> = [
    ["/v1/messages", { ...messages, temperature: "hot" }, /temperature: expected a number between 0 and 1, got "hot"/],
    ["/v1/messages", { ...messages, temperature: 1.5 }, /temperature: expected a number between 0 and 1, got 1.5/],
    ["/v1/messages", { ...messages, max_tokens: -5 }, /max_tokens: expected a positive integer, got -5/],
    ["/v1/messages", { ...messages, max_tokens: "ten" }, /max_tokens: expected a positive integer/],
    ["/v1/messages", { model: messages.model, messages: [user] }, /max_tokens: Field required/],
    ["/v1/messages", { ...messages, max_tokens: null }, /max_tokens: Field required/],
    ["/v1/messages", { ...messages, top_k: 1.5 }, /top_k: expected an integer of at least 0/],
    ["/v1/messages", { ...messages, stop_sequences: "END" }, /stop_sequences: expected an array of strings/],
    [
      "/v1/messages",
      { ...messages, thinking: { type: "enabled", budget_tokens: "lots" } },
      /thinking.budget_tokens: expected a positive integer/
    ],
    ["/v1/messages/count_tokens", { model: messages.model, messages: [user], top_p: 3 }, /top_p: expected a number between 0 and 1/]
  ]
  it.each(cases)("%s %j", async (path, body, message) => {
    const res = await post(path, body)
    expect(res.status, res.text).toBe(400)
    expect(res.body).toMatchObject({ type: "error", error: { type: "invalid_request_error" } })
    expect(res.body.error.message).toMatch(message)
    expect(up.requests).toHaveLength(0)
  })

  it("count_tokens needs no max_tokens; messages passes unknown fields and nulls", async () => {
    expect((await post("/v1/messages/count_tokens", { model: messages.model, messages: [user] })).status).toBe(200)
    const res = await post("/v1/messages", { ...messages, temperature: null, top_p: 0.9, context_management: { edits: [] } })
    expect(res.status, res.text).toBe(200)
    expect(up.requests.at(-1)!.body.context_management).toEqual({ edits: [] })
  })
})

describe("Gemini routes answer in Gemini's error shape", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, RegExp]> = [
    [`${GEMINI}:generateContent`, { generationConfig: { temperature: "hot" } }, /contents: Field required/],
    [
      `${GEMINI}:generateContent`,
      { contents, generationConfig: { temperature: "hot" } },
      /generationConfig.temperature: expected a number between 0 and 2, got "hot"/
    ],
    [
      `${GEMINI}:generateContent`,
      { contents, generationConfig: { maxOutputTokens: -5 } },
      /generationConfig.maxOutputTokens: expected a positive integer/
    ],
    [
      `${GEMINI}:generateContent`,
      { contents, generation_config: { top_p: 2 } },
      /generation_config.top_p: expected a number between 0 and 1/
    ],
    [
      `${GEMINI}:generateContent`,
      { contents, generationConfig: { thinkingConfig: { thinkingBudget: "max" } } },
      /generationConfig.thinkingConfig.thinkingBudget: expected an integer/
    ],
    [`${GEMINI}:generateContent`, { contents, generationConfig: "hot" }, /generationConfig: expected an object/],
    [`${GEMINI}:generateContent`, { contents: "hi" }, /contents: expected an array/],
    [
      `${GEMINI}:streamGenerateContent?alt=sse`,
      { contents, generationConfig: { stopSequences: "END" } },
      /stopSequences: expected an array of strings/
    ],
    [`${GEMINI}:countTokens`, {}, /contents: Field required/],
    [`${GEMINI}:embedContent`, { taskType: "RETRIEVAL_QUERY" }, /content: Field required/],
    [
      `${GEMINI}:embedContent`,
      { content: { parts: [{ text: "a" }] }, outputDimensionality: 0 },
      /outputDimensionality: expected a positive integer/
    ],
    [
      `${GEMINI}:batchEmbedContents`,
      { requests: [{ content: { parts: [{ text: "a" }] }, outputDimensionality: "x" }] },
      /requests\[0\].outputDimensionality/
    ]
  ]
  it.each(cases)("%s %j", async (path, body, message) => {
    const res = await post(path, body)
    expect(res.status, res.text).toBe(400)
    expect(res.body.error).toMatchObject({ code: 400, status: "INVALID_ARGUMENT" })
    expect(res.body.error.message).toMatch(message)
    expect(up.requests).toHaveLength(0)
  })

  it("accepts what @google/genai and Gemini CLI send", async () => {
    const res = await post(`${GEMINI}:generateContent`, {
      contents,
      generationConfig: {
        temperature: 1,
        topP: 0.95,
        topK: 64,
        thinkingConfig: { includeThoughts: true, thinkingBudget: -1 },
        maxOutputTokens: null
      }
    })
    expect(res.status, res.text).toBe(200)
  })
})

describe("Ollama routes answer {error}", () => {
  const cases: ReadonlyArray<readonly [string, Record<string, unknown>, RegExp]> = [
    ["/api/chat", { ...ollamaChat, stream: "no" }, /stream: expected a boolean/],
    ["/api/chat", { ...ollamaChat, options: { temperature: "hot" } }, /options.temperature: expected a number/],
    ["/api/chat", { ...ollamaChat, options: { num_predict: 1.5 } }, /options.num_predict: expected an integer/],
    ["/api/chat", { ...ollamaChat, options: "fast" }, /options: expected an object/],
    ["/api/generate", { model: "up-oll/llama3", prompt: 5, stream: false }, /prompt: expected a string/],
    ["/api/generate", { model: "up-oll/llama3", prompt: "hi", options: { top_p: 7 } }, /options.top_p: expected a number between 0 and 1/],
    ["/api/embed", { model: "up-oll/llama3", input: "hi", dimensions: "x" }, /dimensions: expected a positive integer/]
  ]
  it.each(cases)("%s %j", async (path, body, message) => {
    const res = await post(path, body)
    expect(res.status, res.text).toBe(400)
    expect(typeof res.body.error).toBe("string")
    expect(res.body.error).toMatch(message)
    expect(up.requests).toHaveLength(0)
  })

  it("accepts Ollama's own values (num_predict -1, keep_alive as a number, think as a level)", async () => {
    const res = await post("/api/chat", {
      ...ollamaChat,
      think: "high",
      keep_alive: -1,
      options: { num_predict: -1, temperature: null, stop: ["\n"] }
    })
    expect(res.status, res.text).toBe(200)
  })
})
