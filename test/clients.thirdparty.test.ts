import { createAnthropic } from "@ai-sdk/anthropic"
import { createGoogleGenerativeAI } from "@ai-sdk/google"
import { createOpenAI } from "@ai-sdk/openai"
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { ChatAnthropic } from "@langchain/anthropic"
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai"
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool as agentTool } from "@openai/agents"
import { generateText, jsonSchema, Output, stepCountIs, streamText, tool } from "ai"
import OpenAI from "openai"
import { WebSocket as WsWebSocket } from "ws"
import { z } from "zod"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "./support/fakeUpstream.js"
import { FAMILIES, gatewayForFile } from "./support/families.js"
import { call, type TestGateway } from "./support/gateway.js"

/**
 * Third-party clients as they are, unmodified, with gateway model ids (`<connection>/<model>`),
 * against every upstream family (docs/agents.md, "Libraries"): the Vercel AI SDK's providers,
 * LangChain's chat models, and the OpenAI Agents SDK over HTTP and over the Responses WebSocket.
 */
// The Agents SDK's trace provider, made on its first use (the line below), adds process listeners
// whether tracing is on or not: on SIGTERM, SIGINT or an unhandled rejection it shuts tracing down
// and exits the process. In the test worker that runs this file they outlived it: the pool's SIGTERM
// at the end of a run with more workers than cores ran their shutdown instead of ending the worker,
// whose closed channel then kept it busy (docs/performance.md, "CI time (2026-11-29)"). They go
// with this file.
const SDK_PROCESS_EVENTS = ["SIGTERM", "SIGINT", "beforeExit", "unhandledRejection"]
const processEvents = process as unknown as NodeJS.EventEmitter
const listenersBefore = new Map(SDK_PROCESS_EVENTS.map((event) => [event, processEvents.listeners(event)]))
// The Agents SDK exports traces to OpenAI's servers unless told not to (nothing leaves this machine).
setTracingDisabled(true)
afterAll(() => {
  for (const event of SDK_PROCESS_EVENTS)
    for (const listener of processEvents.listeners(event))
      if (!listenersBefore.get(event)?.includes(listener)) processEvents.off(event, listener as (...args: Array<unknown>) => void)
})
// Its WebSocket transport needs a global WebSocket, which Node has from 22 on.
;(globalThis as { WebSocket?: unknown }).WebSocket ??= WsWebSocket
const ADMIN = "gwk_thirdparty_admin_key_0123456789ab"
const KEY = "gwk_thirdparty_client_key_0123456789a"
const TEXT = "Hello from upstream"

const WEATHER = tool({
  description: "Get the weather for a city",
  inputSchema: jsonSchema<{ location: string }>({
    type: "object",
    properties: { location: { type: "string" } },
    required: ["location"],
    additionalProperties: false
  })
})

const file = gatewayForFile({ admin: ADMIN, keys: [KEY], env: { REQUIRE_API_KEY: "true" } })
let gw: TestGateway
let up: FakeUpstream
beforeAll(() => {
  ;({ gw, up } = file)
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
    const err = await generateText({ model: google()("nope/unknown"), prompt: "hi", maxRetries: 0 }).catch(
      (e: unknown) => e as { statusCode?: number; message: string }
    )
    expect(err).toMatchObject({ statusCode: 404 })
    const raw = await call(`${gw.url}/v1beta/nope/unknown:generateContent`, { body: { contents: [] }, headers: { "x-goog-api-key": KEY } })
    expect(raw.status).toBe(404)
    expect(raw.body.error).toMatchObject({ code: 404, status: "NOT_FOUND" })
    expect(raw.body.error.message).toContain('"nope/unknown" is not a model this gateway serves')
    // Real routes keep their own answers.
    const chat = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "up-chat/m1", messages: [{ role: "user", content: "hi" }] },
      headers: { authorization: `Bearer ${KEY}` }
    })
    expect(chat.status).toBe(200)
    expect(up.requests).toHaveLength(2)
  })
})

describe("AI SDK: what its providers add to requests (structured output, forced tools) goes through", () => {
  const schema = jsonSchema<{ city: string; sunny: boolean }>({
    $schema: "http://json-schema.org/draft-07/schema#",
    type: "object",
    properties: { city: { type: "string" }, sunny: { type: "boolean" } },
    required: ["city", "sunny"],
    additionalProperties: false
  })
  it("Output.object through @ai-sdk/google (responseJsonSchema) and @ai-sdk/anthropic (structured-outputs beta) → chat and Anthropic upstreams", async () => {
    const providers = [
      createGoogleGenerativeAI({ baseURL: `${gw.url}/v1beta`, apiKey: KEY }),
      createAnthropic({ baseURL: `${gw.url}/v1`, apiKey: KEY })
    ]
    for (const provider of providers) {
      for (const model of ["up-chat/m1", "up-anth/m1"]) {
        up.next({ content: '{"city":"Paris","sunny":true}' })
        const result = await generateText({
          model: provider(model),
          prompt: "weather in Paris as JSON",
          output: Output.object({ schema }),
          maxOutputTokens: 256,
          maxRetries: 0
        })
        expect(result.output).toEqual({ city: "Paris", sunny: true })
      }
    }
    expect(up.violations).toEqual([])
  })

  it("toolChoice required through @ai-sdk/anthropic (tool_choice any, no parallel calls) → every family", async () => {
    const anthropic = createAnthropic({ baseURL: `${gw.url}/v1`, apiKey: KEY })
    for (const { connection } of FAMILIES) {
      up.next({ toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }] })
      const result = await generateText({
        model: anthropic(`${connection["name"]}/m1`),
        prompt: "weather?",
        tools: { get_weather: WEATHER },
        toolChoice: "required",
        maxOutputTokens: 256,
        maxRetries: 0
      })
      expect(result.toolCalls.map((c) => [c.toolName, c.input])).toEqual([["get_weather", { location: "Paris" }]])
    }
    expect(up.violations).toEqual([])
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

describe("OpenAI Agents SDK with gateway model ids", () => {
  /** A runner whose provider talks to the gateway: Responses over HTTP or over the WebSocket, or chat completions. */
  const runnerOf = (mode: "websocket" | "responses" | "chat") => {
    const provider =
      mode === "websocket"
        ? new OpenAIProvider({ baseURL: `${gw.url}/v1`, apiKey: KEY, useResponses: true, useResponsesWebSocket: true })
        : new OpenAIProvider({
            openAIClient: new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 }),
            useResponses: mode === "responses"
          })
    return { runner: new Runner({ modelProvider: provider, tracingDisabled: true }), close: () => provider.close() }
  }
  const weather = agentTool({
    name: "get_weather",
    description: "Get the weather for a city",
    parameters: z.object({ location: z.string() }),
    execute: async ({ location }) => `sunny in ${location}`
  })

  for (const { family, connection } of FAMILIES) {
    const model = `${connection["name"]}/m1`
    it(`WebSocket transport → ${family} upstream: run, streamed run, previousResponseId, a tool round trip, reasoning`, async () => {
      const { runner, close } = runnerOf("websocket")
      try {
        const agent = new Agent({ name: "assistant", instructions: "Be brief.", model })
        up.next({ content: TEXT })
        const first = await runner.run(agent, "say hi")
        expect(first.finalOutput).toBe(TEXT)

        up.next({ content: "streamed answer", chunks: 3 })
        const streamed = await runner.run(agent, "stream please", { stream: true })
        let deltas = ""
        for await (const event of streamed)
          if (event.type === "raw_model_stream_event" && event.data.type === "output_text_delta") deltas += event.data.delta
        await streamed.completed
        expect(deltas).toBe("streamed answer")
        expect(streamed.finalOutput).toBe("streamed answer")

        // The next turn names the first response; the gateway puts that conversation in front.
        up.next({ content: "continued" })
        const next = await runner.run(agent, "and again", { previousResponseId: first.lastResponseId })
        expect(next.finalOutput).toBe("continued")
        const continued = up.requests.at(-1)!
        expect(JSON.stringify(continued.body)).toContain("say hi")
        expect(JSON.stringify(continued.body)).toContain(TEXT)

        up.next({ toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }] }, { content: "It is sunny in Paris" })
        const withTool = await runner.run(
          new Agent({ name: "weather", instructions: "Use the tool.", model, tools: [weather] }),
          "weather in Paris?"
        )
        expect(withTool.finalOutput).toBe("It is sunny in Paris")

        up.next({ reasoning: { text: "The user wants a greeting.", signature: "sig-1" }, content: "hi there" })
        const reasoned = await runner.run(agent, "think, then greet")
        expect(reasoned.finalOutput).toBe("hi there")
        const thought = reasoned.newItems.map((i) => i.rawItem).find((r) => r.type === "reasoning") as
          | { content: Array<{ text: string }> }
          | undefined
        expect(thought?.content.map((c) => c.text)).toEqual(["The user wants a greeting."])
        expect(up.requests.map((r) => r.family)).toEqual(Array(6).fill(family))
        expect(up.violations).toEqual([])
      } finally {
        await close()
      }
    })
  }

  for (const mode of ["responses", "chat"] as const) {
    it(`over HTTP (${mode === "responses" ? "Responses" : "chat completions"}) → Anthropic and Gemini upstreams, with a tool round trip`, async () => {
      const { runner, close } = runnerOf(mode)
      try {
        for (const model of ["up-anth/m1", "up-gem/m1"]) {
          up.next(
            { content: TEXT },
            { toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }] },
            { content: "It is sunny in Paris" }
          )
          expect((await runner.run(new Agent({ name: "a", model }), "say hi")).finalOutput).toBe(TEXT)
          expect((await runner.run(new Agent({ name: "w", model, tools: [weather] }), "weather in Paris?")).finalOutput).toBe(
            "It is sunny in Paris"
          )
        }
        expect(up.violations).toEqual([])
      } finally {
        await close()
      }
    })
  }
})

describe("LangChain with gateway model ids", () => {
  const models = () => ({
    "ChatOpenAI (chat completions)": (model: string) =>
      new ChatOpenAI({ model, apiKey: KEY, maxRetries: 0, configuration: { baseURL: `${gw.url}/v1` } }),
    "ChatOpenAI (useResponsesApi)": (model: string) =>
      new ChatOpenAI({ model, apiKey: KEY, maxRetries: 0, useResponsesApi: true, configuration: { baseURL: `${gw.url}/v1` } }),
    ChatAnthropic: (model: string) => new ChatAnthropic({ model, apiKey: KEY, maxRetries: 0, anthropicApiUrl: gw.url })
  })
  const names = ["ChatOpenAI (chat completions)", "ChatOpenAI (useResponsesApi)", "ChatAnthropic"] as const
  for (const name of names) {
    it(`${name}: invoke, stream and a bound tool → chat, Anthropic and Gemini upstreams`, async () => {
      for (const model of ["up-chat/m1", "up-anth/m1", "up-gem/m1"]) {
        const chat = models()[name](model)
        up.next({ content: TEXT })
        const answer = await chat.invoke("say hi")
        expect(answer.content === TEXT || JSON.stringify(answer.content).includes(TEXT), JSON.stringify(answer.content)).toBe(true)
        expect(answer.usage_metadata).toMatchObject({ input_tokens: 11, output_tokens: 7 })
        up.next({ content: TEXT, chunks: 3 })
        let streamed = ""
        for await (const chunk of await chat.stream("say hi"))
          streamed += typeof chunk.content === "string" ? chunk.content : chunk.content.map((c) => ("text" in c ? c.text : "")).join("")
        expect(streamed).toBe(TEXT)
        up.next({ toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }] })
        const called = await chat
          .bindTools([
            {
              type: "function",
              function: {
                name: "get_weather",
                description: "Get the weather",
                parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] }
              }
            }
          ])
          .invoke("weather in Paris?")
        expect(called.tool_calls?.map((c) => [c.name, c.args])).toEqual([["get_weather", { location: "Paris" }]])
      }
      expect(up.violations).toEqual([])
    })
  }

  it("OpenAIEmbeddings (base64 by default) embeds through an OpenAI-compatible upstream", async () => {
    const embeddings = new OpenAIEmbeddings({ model: "up-chat/m1", apiKey: KEY, maxRetries: 0, configuration: { baseURL: `${gw.url}/v1` } })
    const vectors = await embeddings.embedDocuments(["one", "two"])
    expect(vectors).toHaveLength(2)
    expect(vectors[0]!.length).toBeGreaterThan(0)
    // The SDK asked for base64 and decoded the gateway's little-endian float32 back into numbers.
    expect(vectors.flat().every((v) => Number.isFinite(v))).toBe(true)
  })
})
