import { createAnthropic } from "@ai-sdk/anthropic"
import { createGoogleGenerativeAI } from "@ai-sdk/google"
import { createOpenAI } from "@ai-sdk/openai"
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/auth/ApiKeys.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Third-party clients as they are, unmodified, with gateway model ids (`<connection>/<model>`),
 * against every upstream family (docs/agents.md, "Libraries"): the Vercel AI SDK's providers.
 */
const ADMIN = "gwk_thirdparty_admin_key_0123456789ab"
const KEY = "gwk_thirdparty_client_key_0123456789a"
const TEXT = "Hello from upstream"

const FAMILIES: ReadonlyArray<{ family: Family; connection: Record<string, unknown> }> = [
  { family: "openai-chat", connection: { provider: "openai-compatible", name: "up-chat" } },
  { family: "openai-responses", connection: { provider: "openai-compatible", name: "up-resp", upstreamFormat: "openai-responses" } },
  { family: "anthropic", connection: { provider: "anthropic", name: "up-anth", apiKey: "sk-ant-upstream" } },
  { family: "gemini", connection: { provider: "gemini", name: "up-gem", apiKey: "gemini-upstream-key" } },
  { family: "ollama", connection: { provider: "ollama", name: "up-oll" } }
]

const WEATHER = tool({
  description: "Get the weather for a city",
  inputSchema: jsonSchema<{ location: string }>({ type: "object", properties: { location: { type: "string" } }, required: ["location"], additionalProperties: false })
})

let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  for (const { family, connection } of FAMILIES) {
    const res = await call(`${gw.url}/api/providers`, { body: { ...connection, baseUrl: up.baseUrl(family), defaultModel: "m1" }, headers: { authorization: `Bearer ${ADMIN}` } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
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

describe("AI SDK: @ai-sdk/google with gateway model ids (the id goes into the path as it is)", () => {
  const google = () => createGoogleGenerativeAI({ baseURL: `${gw.url}/v1beta`, apiKey: KEY })
  for (const { family, connection } of FAMILIES) {
    const model = `${connection["name"]}/m1`
    it(`generateText and streamText → ${family} upstream`, async () => {
      up.next({ content: TEXT, chunks: 3 }, { content: TEXT, chunks: 3 })
      const whole = await generateText({ model: google()(model), prompt: "say hi", maxRetries: 0 })
      expect(whole.text).toBe(TEXT)
      expect(whole.usage.inputTokens).toBe(11)
      expect(whole.usage.outputTokens).toBe(7)
      const streamed = streamText({ model: google()(model), prompt: "say hi", maxRetries: 0 })
      let text = ""
      for await (const piece of streamed.textStream) text += piece
      expect(text).toBe(TEXT)
      expect((await streamed.usage).outputTokens).toBe(7)
      expect(up.requests.map((r) => r.family)).toEqual([family, family])
      expect(up.violations).toEqual([])
    })
  }

  it("a tool round trip through an Anthropic upstream: call, result, answer", async () => {
    up.next({ toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }] }, { content: "It is sunny in Paris" })
    const result = await generateText({
      model: google()("up-anth/m1"),
      prompt: "weather in Paris?",
      tools: { get_weather: { ...WEATHER, execute: async ({ location }: { location: string }) => `sunny in ${location}` } },
      stopWhen: stepCountIs(3),
      maxRetries: 0
    })
    expect(result.steps[0]!.toolCalls.map((c) => [c.toolName, c.input])).toEqual([["get_weather", { location: "Paris" }]])
    expect(result.text).toBe("It is sunny in Paris")
    expect(up.violations).toEqual([])
  })

  it("models/<id> still works, and a path whose prefix is no model is a 404 in Google's shape", async () => {
    up.next({ content: TEXT })
    expect((await generateText({ model: google()("models/up-chat/m1"), prompt: "hi", maxRetries: 0 })).text).toBe(TEXT)
    const err = await generateText({ model: google()("nope/unknown"), prompt: "hi", maxRetries: 0 }).catch((e: unknown) => e as { statusCode?: number; message: string })
    expect(err).toMatchObject({ statusCode: 404 })
    const raw = await call(`${gw.url}/v1beta/nope/unknown:generateContent`, { body: { contents: [] }, headers: { "x-goog-api-key": KEY } })
    expect(raw.status).toBe(404)
    expect(raw.body.error).toMatchObject({ code: 404, status: "NOT_FOUND" })
    expect(raw.body.error.message).toContain('"nope/unknown" is not a model this gateway serves')
    // Real routes keep their own answers.
    const chat = await call(`${gw.url}/v1/chat/completions`, { body: { model: "up-chat/m1", messages: [{ role: "user", content: "hi" }] }, headers: { authorization: `Bearer ${KEY}` } })
    expect(chat.status).toBe(200)
    expect(up.requests).toHaveLength(2)
  })
})

describe("AI SDK: the OpenAI, Anthropic and OpenAI-compatible providers with gateway model ids", () => {
  const providers = () => ({
    "@ai-sdk/openai (Responses)": createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY }),
    "@ai-sdk/openai (.chat)": createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY }).chat,
    "@ai-sdk/anthropic": createAnthropic({ baseURL: `${gw.url}/v1`, apiKey: KEY }),
    "@ai-sdk/openai-compatible": createOpenAICompatible({ name: "gateway", baseURL: `${gw.url}/v1`, apiKey: KEY, includeUsage: true })
  })
  const names = ["@ai-sdk/openai (Responses)", "@ai-sdk/openai (.chat)", "@ai-sdk/anthropic", "@ai-sdk/openai-compatible"] as const
  for (const name of names) {
    it(`${name}: generateText and streamText → chat and Gemini upstreams`, async () => {
      for (const model of ["up-chat/m1", "up-gem/m1"]) {
        up.next({ content: TEXT }, { content: TEXT, chunks: 3 })
        const provider = providers()[name]
        const whole = await generateText({ model: provider(model), prompt: "say hi", maxOutputTokens: 256, maxRetries: 0 })
        expect(whole.text).toBe(TEXT)
        expect(whole.usage.outputTokens).toBe(7)
        const streamed = streamText({ model: provider(model), prompt: "say hi", maxOutputTokens: 256, maxRetries: 0 })
        let text = ""
        for await (const piece of streamed.textStream) text += piece
        expect(text).toBe(TEXT)
      }
      expect(up.violations).toEqual([])
    })
  }
})
