import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import * as Effect from "effect/Effect"
import { Ollama } from "ollama"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

const ADMIN = "gwk_routes_admin_key_0123456789abcdef"
const KEY = "gwk_routes_client_key_0123456789abcd"
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
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  await add("openai-chat", { provider: "openai-compatible", name: "up-chat", defaultModel: "m1", models: ["emb"] })
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

describe("legacy completions", () => {
  it("answers a prompt in text_completion shape, whole and streamed", async () => {
    up.next({ content: "Once upon a time" })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
    const res = await client.completions.create({ model: "up-anth/claude-haiku-4-5", prompt: "Tell a story", max_tokens: 20 })
    expect(res.object).toBe("text_completion")
    expect(res.choices[0]!.text).toBe("Once upon a time")
    expect(up.requests[0]!.body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Tell a story" }] }])
    up.next({ content: "streamed story", chunks: 3 })
    let text = ""
    for await (const chunk of await client.completions.create({ model: "up-chat/m1", prompt: "go", stream: true }))
      text += chunk.choices[0]!.text
    expect(text).toBe("streamed story")
  })
})

describe("token counting", () => {
  it("asks an Anthropic upstream, counts locally for others, and refuses unknown models as /v1/messages does", async () => {
    const client = new Anthropic({ baseURL: gw.url, apiKey: KEY, maxRetries: 0 })
    const params = { messages: [{ role: "user" as const, content: "Hello there, how are you today?" }] }
    const upstream = await client.messages.countTokens({ model: "up-anth/claude-sonnet-4-5", ...params })
    expect(up.requests.map((r) => r.path)).toEqual(["/v1/messages/count_tokens"])
    expect(upstream.input_tokens).toBe(Math.ceil("Hello there, how are you today?".length / 4))
    const local = await client.messages.countTokens({
      model: "up-chat/m1",
      ...params,
      system: "be brief",
      tools: [{ name: "t", input_schema: { type: "object" } }]
    })
    expect(local.input_tokens).toBeGreaterThan(10)
    await expect(client.messages.countTokens({ model: "claude-opus-5-5", ...params })).rejects.toMatchObject({ status: 404 })
    expect(up.requests).toHaveLength(1)
  })

  it("answers 25 concurrent count_tokens (Claude Code's /context)", async () => {
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        call(`${gw.url}/v1/messages/count_tokens?beta=true`, {
          body: { model: "up-chat/m1", messages: [{ role: "user", content: `section ${i} `.repeat(20) }], tools: [] }
        })
      )
    )
    expect(results.every((r) => r.status === 200 && r.body.input_tokens > 0)).toBe(true)
  })

  it("Gemini countTokens asks a Gemini upstream and counts locally otherwise", async () => {
    const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url } })
    const upstream = await ai.models.countTokens({ model: "up-gem/gemini-2.5-flash", contents: "Hello there" })
    expect(upstream.totalTokens).toBe(Math.ceil("Hello there".length / 4))
    const local = await ai.models.countTokens({ model: "up-chat/m1", contents: "Hello there" })
    expect(local.totalTokens).toBeGreaterThan(0)
  })
})

describe("embeddings", () => {
  it("through the OpenAI, Gemini and Ollama SDKs, to upstreams of any family that has them", async () => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
    const viaOpenAi = await openai.embeddings.create({ model: "up-gem/text-embedding-004", input: ["a", "b"] })
    expect(viaOpenAi.data.map((d) => d.embedding.length)).toEqual([8, 8])
    expect(up.requests.at(-1)!.path).toMatch(/:batchEmbedContents$/)

    const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url } })
    const viaGemini = await ai.models.embedContent({ model: "up-oll/nomic-embed-text", contents: ["a", "b"] })
    expect(viaGemini.embeddings?.map((e) => e.values?.length)).toEqual([8, 8])
    expect(up.requests.at(-1)!.path).toBe("/api/embed")

    const ollama = new Ollama({ host: gw.url, headers: { authorization: `Bearer ${KEY}` } })
    const viaOllama = await ollama.embed({ model: "up-chat/emb", input: ["a", "b", "c"] })
    expect(viaOllama.embeddings).toHaveLength(3)
    expect(up.requests.at(-1)!.path).toBe("/v1/embeddings")
  })

  it("says clearly when the upstream family has no embeddings", async () => {
    const res = await call(`${gw.url}/v1/embeddings`, { body: { model: "up-anth/claude-haiku-4-5", input: "a" } })
    expect(res.status).toBe(400)
    expect(res.body.error.code).toBe("embeddings_not_supported")
  })
})

describe("model lists in each client's shape", () => {
  it("GET /v1/models works for the OpenAI and the Anthropic SDK alike", async () => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
    const ids = (await openai.models.list()).data.map((m) => m.id)
    expect(ids).toContain("up-chat/m1")
    expect(ids).toContain("up-anth/claude-sonnet-4-5")
    const anthropic = new Anthropic({ baseURL: gw.url, apiKey: KEY, maxRetries: 0 })
    const page = await anthropic.models.list()
    const entry = page.data.find((m) => m.id === "up-anth/claude-sonnet-4-5")
    expect(entry).toMatchObject({ type: "model", display_name: "Claude Sonnet 4.5" })
    expect((await openai.models.retrieve("up-chat/m1")).id).toBe("up-chat/m1")
  })

  it("lists the no-thinking alias for thinking-capable Claude models only, and it turns thinking off", async () => {
    const list = await call(`${gw.url}/v1/models`)
    const ids: Array<string> = list.body.data.map((m: { id: string }) => m.id)
    expect(ids).toContain("claude-3-gateway-no-thinking/up-anth/claude-sonnet-4-5")
    expect(ids.filter((i) => i.startsWith("claude-3-gateway-no-thinking/")).every((i) => i.includes("up-anth/"))).toBe(true)
    expect(ids).not.toContain("claude-3-gateway-no-thinking/up-anth/claude-3-5-haiku-latest")

    up.next({ content: "no thoughts" })
    const res = await call(`${gw.url}/v1/messages`, {
      body: {
        model: "claude-3-gateway-no-thinking/up-anth/claude-sonnet-4-5",
        max_tokens: 2000,
        thinking: { type: "enabled", budget_tokens: 1024 },
        messages: [{ role: "user", content: "hi" }]
      }
    })
    expect(res.status).toBe(200)
    expect(up.requests[0]!.body).toMatchObject({ model: "claude-sonnet-4-5", thinking: { type: "disabled" } })
    up.next({ content: "no thoughts" })
    await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "claude-3-gateway-no-thinking/up-chat/m1", reasoning_effort: "high", messages: [{ role: "user", content: "hi" }] }
    })
    expect(up.requests[1]!.body.reasoning_effort).toBeUndefined()
  })

  it("Gemini list and get for @google/genai, Ollama tags and show", async () => {
    const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url, apiVersion: "v1beta" } })
    const names: Array<string> = []
    for await (const m of await ai.models.list()) names.push(m.name ?? "")
    expect(names).toContain("models/up-gem/gemini-2.5-flash")
    const one = await call(`${gw.url}/v1beta/models/up-gem/gemini-2.5-flash`)
    expect(one.body).toMatchObject({ name: "models/up-gem/gemini-2.5-flash", inputTokenLimit: 1_048_576 })

    const ollama = new Ollama({ host: gw.url, headers: { authorization: `Bearer ${KEY}` } })
    const tags = await ollama.list()
    expect(tags.models.map((m) => m.name)).toContain("up-oll/llama3.2")
    const show = await ollama.show({ model: "up-oll/llama3.2" })
    expect(show.capabilities).toContain("tools")
  })
})

describe("Ollama generate", () => {
  it("answers a prompt (with :latest), whole and streamed, and loads on an empty prompt", async () => {
    const ollama = new Ollama({ host: gw.url, headers: { authorization: `Bearer ${KEY}` } })
    up.next({ content: "generated text" })
    expect((await ollama.generate({ model: "up-oll/llama3.2:latest", prompt: "go", stream: false })).response).toBe("generated text")
    expect(up.requests[0]!.body.model).toBe("llama3.2:latest")
    up.next({ content: "generated text" })
    await ollama.generate({ model: "up-chat/m1:latest", prompt: "go", stream: false })
    expect(up.requests[1]!.body.model).toBe("m1")
    up.next({ content: "streamed text", chunks: 3 })
    let text = ""
    for await (const part of await ollama.generate({ model: "up-chat/m1", prompt: "go", stream: true })) text += part.response
    up.requests.length = 0
    expect(text).toBe("streamed text")
    const load = await call(`${gw.url}/api/generate`, { body: { model: "up-oll/llama3.2", prompt: "" } })
    expect(load.body).toMatchObject({ done: true, done_reason: "load" })
  })
})

describe("dedicated provider routes", () => {
  it("add the provider prefix when missing, keep it when present, and refuse another provider's model with 400", async () => {
    up.always({ content: "via provider route" })
    const plain = await call(`${gw.url}/v1/providers/up-chat/chat/completions`, {
      body: { model: "m1", messages: [{ role: "user", content: "hi" }] }
    })
    expect(plain.status).toBe(200)
    expect(up.requests.at(-1)!.body.model).toBe("m1")
    const prefixed = await call(`${gw.url}/v1/providers/up-chat/chat/completions`, {
      body: { model: "up-chat/m1", messages: [{ role: "user", content: "hi" }] }
    })
    expect(prefixed.status).toBe(200)
    const mismatch = await call(`${gw.url}/v1/providers/up-chat/chat/completions`, {
      body: { model: "anthropic/claude-sonnet-4-5", messages: [{ role: "user", content: "hi" }] }
    })
    expect(mismatch.status).toBe(400)
    expect(mismatch.body.error.code).toBe("model_provider_mismatch")
    const unknown = await call(`${gw.url}/v1/providers/nobody/chat/completions`, {
      body: { model: "m1", messages: [{ role: "user", content: "hi" }] }
    })
    expect(unknown.status).toBe(404)
    const images = await call(`${gw.url}/v1/providers/up-chat/images/generations`, { body: { model: "m1", prompt: "cat" } })
    // The images route is served (test/media.images.test.ts): the model pinned to the provider reaches its images API.
    expect(images.status).not.toBe(501)
    expect(up.requests.at(-1)).toMatchObject({ path: "/v1/images/generations", body: { model: "m1", prompt: "cat" } })
  })
})

describe("tokenized editor aliases", () => {
  it("serve the same routes with the key in the path", async () => {
    const gate = await startGateway({ env: { REQUIRE_API_KEY: "true" }, dataDir: gw.dataDir })
    try {
      up.always({ content: "editor answer" })
      const base = `${gate.url}/api/v1/editor/${KEY}`
      expect((await call(`${base}/`)).body).toMatchObject({ ok: true })
      expect((await call(`${base}/models`)).body.data.length).toBeGreaterThan(0)
      const chat = await call(`${base}/chat/completions`, { body: { model: "up-chat/m1", messages: [{ role: "user", content: "hi" }] } })
      expect(chat.body.choices[0].message.content).toBe("editor answer")
      const responses = await call(`${base}/responses`, { body: { model: "up-chat/m1", input: "hi" } })
      expect(responses.body.output_text ?? responses.body.output[0].content[0].text).toBe("editor answer")
      const ollamaChat = await call(`${base}/api/chat`, {
        body: { model: "up-chat/m1", messages: [{ role: "user", content: "hi" }], stream: false }
      })
      expect(ollamaChat.body.message.content).toBe("editor answer")
      expect((await call(`${base}/api/tags`)).body.models.length).toBeGreaterThan(0)
      expect((await call(`${gate.url}/api/v1/editor/gwk_not_a_key/models`)).status).toBe(401)
    } finally {
      await gate.close()
    }
  })
})

describe("other client-facing endpoints", () => {
  it("publish a provider manifest without secrets, the WebSocket handshake, and answer Claude Code's HEAD /api/hello", async () => {
    const manifest = await call(`${gw.url}/api/v1/provider-plugin-manifest`)
    expect(manifest.body.providers.map((p: { id: string }) => p.id)).toContain("anthropic")
    expect(manifest.text).not.toContain("sk-ant")
    expect(manifest.text).not.toMatch(/apiKey"\s*:/)
    const handshake = await call(`${gw.url}/v1/ws?handshake=1`)
    expect(handshake.body).toMatchObject({ ok: true, enabled: true, paths: ["/v1/responses", "/responses", "/api/v1/responses"] })
    expect(handshake.body.messages.request.type).toBe("response.create")
    const hello = await fetch(`${gw.url}/api/hello`, { method: "HEAD" })
    expect(hello.status).toBe(200)
  })

  it("validate Responses input: empty input is a 400, an unknown previous_response_id is a 400 off OpenAI", async () => {
    const empty = await call(`${gw.url}/v1/responses`, { body: { model: "up-chat/m1", input: [] } })
    expect(empty.status).toBe(400)
    expect(empty.body.error.message).toContain("input must not be empty")
    const unknown = await call(`${gw.url}/v1/responses`, {
      body: { model: "up-chat/m1", input: "more", previous_response_id: "resp_never" }
    })
    expect(unknown.status).toBe(400)
    expect(unknown.body.error.code).toBe("previous_response_not_found")
  })

  it("resolve previous_response_id over HTTP for any upstream", async () => {
    up.next({ content: "first answer" }, { content: "second answer" })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
    const first = await client.responses.create({ model: "up-anth/claude-haiku-4-5", input: "remember the number 7" })
    const second = await client.responses.create({
      model: "up-anth/claude-haiku-4-5",
      input: "which number?",
      previous_response_id: first.id
    })
    expect(second.output_text).toBe("second answer")
    expect(up.violations).toEqual([])
    const messages = up.requests[1]!.body.messages
    expect(messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "user"])
    expect(JSON.stringify(messages)).toContain("first answer")
  })
})
