import Anthropic from "@anthropic-ai/sdk"
import { GoogleGenAI } from "@google/genai"
import { Ollama } from "ollama"
import OpenAI from "openai"
import { beforeAll, describe, expect, it } from "vitest"
import type { FakeUpstream } from "./support/fakeUpstream.js"
import { FAMILIES, gatewayForFile } from "./support/families.js"
import type { TestGateway } from "./support/gateway.js"

/**
 * Every inbound format, through its official SDK, against every upstream family, streamed and
 * not, text and tool calls, and a full tool round trip whose second request the strict fake
 * upstream checks the way the real API would.
 */
const ADMIN = "gwk_matrix_admin_key_0123456789abcdef"
const KEY = "gwk_matrix_client_key_0123456789abcd"
const TEXT = "Hello from upstream"
const FINAL = "It is sunny in Paris"
const WEATHER = {
  name: "get_weather",
  description: "Get the weather for a city",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] }
}

interface Outcome {
  readonly text: string
  readonly calls: ReadonlyArray<{ readonly name: string; readonly args: unknown }>
}

/** One client format: ask once, and run a tool round trip (call, result, final answer). */
interface Client {
  readonly name: string
  ask(model: string, stream: boolean, tools: boolean): Promise<Outcome>
  roundTrip(model: string, stream: boolean): Promise<{ first: Outcome; second: Outcome }>
}

let gw: TestGateway
let up: FakeUpstream

const openAiChatClient = (): Client => {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
  const tools = [{ type: "function" as const, function: WEATHER }]
  const run = async (model: string, messages: Array<OpenAI.ChatCompletionMessageParam>, stream: boolean, withTools: boolean) => {
    const params = { model, messages, ...(withTools ? { tools } : {}) }
    const completion = stream
      ? await client.chat.completions.stream(params).finalChatCompletion()
      : await client.chat.completions.create(params)
    return completion.choices[0]!.message
  }
  const outcome = (m: OpenAI.ChatCompletionMessage): Outcome => ({
    text: m.content ?? "",
    calls: (m.tool_calls ?? []).map((c) =>
      c.type === "function" ? { name: c.function.name, args: JSON.parse(c.function.arguments) } : { name: "?", args: {} }
    )
  })
  return {
    name: "openai chat",
    ask: async (model, stream, withTools) => outcome(await run(model, [{ role: "user", content: "weather in Paris?" }], stream, withTools)),
    roundTrip: async (model, stream) => {
      const user = { role: "user" as const, content: "weather in Paris?" }
      const first = await run(model, [user], stream, true)
      const call = first.tool_calls![0]!
      const second = await run(model, [user, first, { role: "tool", tool_call_id: call.id, content: "sunny" }], stream, true)
      return { first: outcome(first), second: outcome(second) }
    }
  }
}

const responsesClient = (): Client => {
  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
  const tools = [{ type: "function" as const, ...WEATHER, strict: false }]
  const run = async (model: string, input: OpenAI.Responses.ResponseInput, stream: boolean, withTools: boolean) => {
    const params = { model, input, ...(withTools ? { tools } : {}) }
    return stream ? await client.responses.stream(params).finalResponse() : await client.responses.create(params)
  }
  const outcome = (r: OpenAI.Responses.Response): Outcome => ({
    text: r.output_text,
    calls: r.output.flatMap((o) => (o.type === "function_call" ? [{ name: o.name, args: JSON.parse(o.arguments) }] : []))
  })
  return {
    name: "openai responses",
    ask: async (model, stream, withTools) => outcome(await run(model, [{ role: "user", content: "weather in Paris?" }], stream, withTools)),
    roundTrip: async (model, stream) => {
      const user = { role: "user" as const, content: "weather in Paris?" }
      const first = await run(model, [user], stream, true)
      const call = first.output.find((o) => o.type === "function_call")!
      const items = first.output as Array<OpenAI.Responses.ResponseInputItem>
      const second = await run(
        model,
        [user, ...items, { type: "function_call_output", call_id: (call as { call_id: string }).call_id, output: "sunny" }],
        stream,
        true
      )
      return { first: outcome(first), second: outcome(second) }
    }
  }
}

const anthropicClient = (): Client => {
  const client = new Anthropic({ baseURL: gw.url, apiKey: KEY, maxRetries: 0 })
  const tools = [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }]
  const run = async (model: string, messages: Array<Anthropic.MessageParam>, stream: boolean, withTools: boolean) => {
    const params = { model, max_tokens: 1024, messages, ...(withTools ? { tools } : {}) }
    return stream ? await client.messages.stream(params).finalMessage() : await client.messages.create(params)
  }
  const outcome = (m: Anthropic.Message): Outcome => ({
    text: m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join(""),
    calls: m.content.flatMap((b) => (b.type === "tool_use" ? [{ name: b.name, args: b.input }] : []))
  })
  return {
    name: "anthropic messages",
    ask: async (model, stream, withTools) => outcome(await run(model, [{ role: "user", content: "weather in Paris?" }], stream, withTools)),
    roundTrip: async (model, stream) => {
      const user = { role: "user" as const, content: "weather in Paris?" }
      const first = await run(model, [user], stream, true)
      const use = first.content.find((b) => b.type === "tool_use")!
      const second = await run(
        model,
        [
          user,
          { role: "assistant", content: first.content },
          { role: "user", content: [{ type: "tool_result", tool_use_id: (use as { id: string }).id, content: "sunny" }] }
        ],
        stream,
        true
      )
      return { first: outcome(first), second: outcome(second) }
    }
  }
}

const geminiClient = (): Client => {
  const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url } })
  const config = (withTools: boolean) =>
    withTools
      ? {
          tools: [
            { functionDeclarations: [{ name: WEATHER.name, description: WEATHER.description, parametersJsonSchema: WEATHER.parameters }] }
          ]
        }
      : {}
  /** Runs one turn; returns the model content (all parts, signatures included) and the outcome. */
  const run = async (
    model: string,
    contents: Array<{ role: string; parts: Array<Record<string, unknown>> }>,
    stream: boolean,
    withTools: boolean
  ) => {
    if (!stream) {
      const r = await ai.models.generateContent({ model, contents, config: config(withTools) })
      return (r.candidates?.[0]?.content?.parts ?? []) as Array<Record<string, unknown>>
    }
    const parts: Array<Record<string, unknown>> = []
    for await (const chunk of await ai.models.generateContentStream({ model, contents, config: config(withTools) })) {
      parts.push(...((chunk.candidates?.[0]?.content?.parts ?? []) as Array<Record<string, unknown>>))
    }
    return parts
  }
  const outcome = (parts: ReadonlyArray<Record<string, unknown>>): Outcome => ({
    text: parts.flatMap((p) => (typeof p["text"] === "string" && !p["thought"] ? [p["text"]] : [])).join(""),
    calls: parts.flatMap((p) =>
      p["functionCall"] ? [{ name: (p["functionCall"] as { name: string }).name, args: (p["functionCall"] as { args: unknown }).args }] : []
    )
  })
  return {
    name: "gemini generateContent",
    ask: async (model, stream, withTools) =>
      outcome(await run(model, [{ role: "user", parts: [{ text: "weather in Paris?" }] }], stream, withTools)),
    roundTrip: async (model, stream) => {
      const user = { role: "user", parts: [{ text: "weather in Paris?" }] }
      const first = await run(model, [user], stream, true)
      const call = first.find((p) => p["functionCall"])!["functionCall"] as { name: string; id?: string }
      const modelTurn = {
        role: "model",
        parts: first.filter((p) => !(typeof p["text"] === "string" && p["text"] === "" && !p["thoughtSignature"]))
      }
      const second = await run(
        model,
        [
          user,
          modelTurn,
          {
            role: "user",
            parts: [{ functionResponse: { name: call.name, response: { result: "sunny" }, ...(call.id ? { id: call.id } : {}) } }]
          }
        ],
        stream,
        true
      )
      return { first: outcome(first), second: outcome(second) }
    }
  }
}

const ollamaClient = (): Client => {
  const client = new Ollama({ host: gw.url, headers: { authorization: `Bearer ${KEY}` } })
  const tools = [{ type: "function", function: WEATHER }]
  const run = async (model: string, messages: Array<Record<string, unknown>>, stream: boolean, withTools: boolean) => {
    const base = { model, messages: messages as never, ...(withTools ? { tools } : {}) }
    if (!stream) return (await client.chat({ ...base, stream: false })).message
    const message = {
      role: "assistant",
      content: "",
      tool_calls: [] as Array<{ function: { name: string; arguments: Record<string, unknown> } }>
    }
    for await (const part of await client.chat({ ...base, stream: true })) {
      message.content += part.message.content
      message.tool_calls.push(...((part.message.tool_calls ?? []) as typeof message.tool_calls))
    }
    return message
  }
  const outcome = (m: { content: string; tool_calls?: ReadonlyArray<{ function: { name: string; arguments: unknown } }> }): Outcome => ({
    text: m.content,
    calls: (m.tool_calls ?? []).map((c) => ({ name: c.function.name, args: c.function.arguments }))
  })
  return {
    name: "ollama chat",
    ask: async (model, stream, withTools) => outcome(await run(model, [{ role: "user", content: "weather in Paris?" }], stream, withTools)),
    roundTrip: async (model, stream) => {
      const user = { role: "user", content: "weather in Paris?" }
      const first = await run(model, [user], stream, true)
      const second = await run(
        model,
        [
          user,
          { role: "assistant", content: "", tool_calls: first.tool_calls },
          { role: "tool", content: "sunny", tool_name: "get_weather" }
        ],
        stream,
        true
      )
      return { first: outcome(first), second: outcome(second) }
    }
  }
}

const CLIENTS: ReadonlyArray<() => Client> = [openAiChatClient, responsesClient, anthropicClient, geminiClient, ollamaClient]

const file = gatewayForFile({ admin: ADMIN, keys: [KEY], env: { REQUIRE_API_KEY: "true" } })
beforeAll(() => {
  ;({ gw, up } = file)
})

for (const makeClient of CLIENTS) {
  const clientName = makeClient.name.replace(/Client$/, "")
  describe(`${clientName} client`, () => {
    for (const { family, connection } of FAMILIES) {
      const model = `${connection["name"]}/m1`
      for (const stream of [false, true]) {
        const mode = stream ? "streamed" : "whole"
        it(`→ ${family} upstream: text, ${mode}`, async () => {
          up.next({ content: TEXT, chunks: 4 })
          const out = await makeClient().ask(model, stream, false)
          expect(out).toEqual({ text: TEXT, calls: [] })
          expect(up.violations).toEqual([])
          expect(up.requests.map((r) => r.family)).toEqual([family])
        })

        it(`→ ${family} upstream: parallel tool calls, ${mode}`, async () => {
          up.next({
            toolCalls: [
              { name: "get_weather", arguments: '{"location":"Paris"}' },
              { name: "get_weather", arguments: '{"location":"Lyon"}' }
            ]
          })
          const out = await makeClient().ask(model, stream, true)
          expect(out.calls).toEqual([
            { name: "get_weather", args: { location: "Paris" } },
            { name: "get_weather", args: { location: "Lyon" } }
          ])
          expect(up.violations).toEqual([])
        })
      }

      it(`→ ${family} upstream: tool round trip (call, result, answer) with a valid history upstream`, async () => {
        up.next({ toolCalls: [{ name: "get_weather", arguments: '{"location":"Paris"}' }] }, { content: FINAL })
        const { first, second } = await makeClient().roundTrip(model, true)
        expect(first.calls).toEqual([{ name: "get_weather", args: { location: "Paris" } }])
        expect(second.text).toBe(FINAL)
        expect(up.violations).toEqual([])
        expect(up.requests).toHaveLength(2)
      })
    }
  })
}
