import { describe, expect, it } from "vitest"
import type { StreamEvent, Usage } from "../src/domain/canonical.js"
import { usageToAnthropic } from "../src/upstream/formats/anthropic-answers.js"
import { AnthropicStreamEncoder } from "../src/upstream/formats/anthropic-stream-encoder.js"
import { SseParser, sseData } from "../src/upstream/formats/frames.js"
import { GeminiStreamDecoder } from "../src/upstream/formats/gemini-answers.js"
import { ChatStreamEncoder } from "../src/upstream/formats/openai-chat-stream-encoder.js"
import { ResponsesStreamEncoder } from "../src/upstream/formats/openai-responses-stream.js"
import { seededIdsAndClock } from "./support/seededIds.js"

/**
 * The events a translated stream writes once or twice (an Anthropic stream's message_start,
 * content_block_start/stop, message_delta and message_stop; a Responses stream's response in
 * response.created, in_progress and completed) are written from templates: the same bytes as
 * their objects' JSON. And a usage object repeated on every chunk (a Gemini upstream's) is merged
 * once: the same answer as merging each.
 */

const { reseed } = seededIdsAndClock()

const start: StreamEvent = { type: "start", id: "msg_up", model: "m", created: 1_700_000_000 }

describe("Anthropic encoder: fixed events from templates", () => {
  /** The events as the encoder wrote them from their objects (sseData) before the templates. */
  const messageStart = (id: string, model: string, usage: Partial<Usage>) =>
    sseData(
      {
        type: "message_start",
        message: {
          id,
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: usageToAnthropic(usage)
        }
      },
      "message_start"
    )
  const blockStart = (index: number) =>
    sseData({ type: "content_block_start", index, content_block: { type: "text", text: "" } }, "content_block_start")
  const blockStop = (index: number) => sseData({ type: "content_block_stop", index }, "content_block_stop")
  const delta = (index: number, text: string) =>
    sseData({ type: "content_block_delta", index, delta: { type: "text_delta", text } }, "content_block_delta")
  const messageDelta = (stop: string, sequence: string | null, usage: Partial<Usage>) =>
    sseData(
      { type: "message_delta", delta: { stop_reason: stop, stop_sequence: sequence }, usage: usageToAnthropic(usage) },
      "message_delta"
    ) + sseData({ type: "message_stop" }, "message_stop")

  it("writes the same bytes as the events' objects", () => {
    const usage = { inputTokens: 30, outputTokens: 7, cachedInputTokens: 4, cacheCreationTokens: 2 }
    const cases: Array<{ events: Array<StreamEvent>; expected: string }> = [
      {
        events: [
          start,
          { type: "usage", usage: { inputTokens: 12 } },
          { type: "block_start", index: 0, block: { type: "text" } },
          { type: "text_delta", index: 0, text: 'a "quoted" é' },
          { type: "block_stop", index: 0 },
          { type: "usage", usage },
          { type: "finish", stopReason: "end_turn" }
        ],
        expected:
          messageStart("msg_up", 'claude-"x"', { inputTokens: 12 }) +
          blockStart(0) +
          delta(0, 'a "quoted" é') +
          blockStop(0) +
          messageDelta("end_turn", null, usage)
      },
      {
        // two text blocks, the second left open until the finish, a stop sequence
        events: [
          { ...start, id: "abc" },
          { type: "block_start", index: 3, block: { type: "text" } },
          { type: "block_stop", index: 3 },
          { type: "block_start", index: 5, block: { type: "text" } },
          { type: "text_delta", index: 5, text: "x" },
          { type: "finish", stopReason: "stop_sequence", stopSequence: "\n\nHuman:" }
        ],
        expected:
          messageStart("msg_abc", 'claude-"x"', {}) +
          blockStart(0) +
          blockStop(0) +
          blockStart(1) +
          delta(1, "x") +
          blockStop(1) +
          messageDelta("stop_sequence", "\n\nHuman:", {})
      },
      {
        // a finish with nothing before it: message_start then the end
        events: [{ type: "finish", stopReason: "content_filter" }],
        expected: "" // the id is made by the encoder: compared below with the id it made
      }
    ]
    for (const { events, expected } of cases.slice(0, 2)) {
      const encoder = new AnthropicStreamEncoder('claude-"x"')
      expect(events.map((e) => encoder.push(e)).join("") + encoder.end()).toBe(expected)
    }
    reseed(5)
    const encoder = new AnthropicStreamEncoder("m")
    const out = encoder.push(cases[2]!.events[0]!)
    const id = /"id":"(msg_[a-z0-9]{24})"/.exec(out)?.[1]
    expect(id).toBeDefined()
    expect(out).toBe(messageStart(id!, "m", {}) + messageDelta("refusal", null, {}))
  })
})

describe("chat encoder: chunks written around the stream's head", () => {
  /** A chunk as the encoder wrote it from its object (sseData) before the template. */
  const chunkOf = (id: string, created: unknown, model: string, delta: Record<string, unknown>, finish: string | null = null) =>
    sseData({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })

  it("writes the same bytes as each chunk's object, for every kind of chunk", () => {
    const usage = { inputTokens: 5, outputTokens: 9, reasoningTokens: 2 }
    const events: Array<StreamEvent> = [
      { type: "start", id: "abc", model: "up", created: 1_700_000_000 },
      { type: "block_start", index: 0, block: { type: "reasoning" } },
      { type: "reasoning_delta", index: 0, text: 'think "x"' },
      { type: "block_stop", index: 0 },
      { type: "block_start", index: 1, block: { type: "text" } },
      { type: "text_delta", index: 1, text: "é\n" },
      { type: "block_stop", index: 1 },
      { type: "block_start", index: 2, block: { type: "tool_use", id: "call_1", name: "get" } },
      { type: "tool_args_delta", index: 2, partialJson: '{"a":' },
      { type: "tool_args_delta", index: 2, partialJson: "1}" },
      { type: "block_stop", index: 2 },
      { type: "block_start", index: 3, block: { type: "tool_use", id: "call_2", name: "noargs" } },
      { type: "block_stop", index: 3 },
      { type: "block_start", index: 4, block: { type: "tool_use", id: "call_3", name: "shell" } },
      { type: "tool_args_delta", index: 4, partialJson: '{"input":"ls"}' },
      { type: "block_stop", index: 4 },
      { type: "usage", usage },
      { type: "finish", stopReason: "tool_use" }
    ]
    const model = 'm "1"'
    const c = (delta: Record<string, unknown>, finish: string | null = null) => chunkOf("chatcmpl-abc", 1_700_000_000, model, delta, finish)
    const encoder = new ChatStreamEncoder(model, true, new Set(["shell"]))
    const out = events.map((e) => encoder.push(e)).join("") + encoder.end()
    const expected =
      c({ role: "assistant", content: "" }) +
      c({ reasoning_content: 'think "x"' }) +
      c({ content: "é\n" }) +
      c({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get", arguments: "" } }] }) +
      c({ tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] }) +
      c({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }) +
      c({ tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "noargs", arguments: "" } }] }) +
      c({ tool_calls: [{ index: 1, function: { arguments: "{}" } }] }) +
      c({ tool_calls: [{ index: 2, id: "call_3", type: "custom", custom: { name: "shell", input: "" } }] }) +
      c({ tool_calls: [{ index: 2, custom: { input: "ls" } }] }) +
      c({}, "tool_calls")
    expect(out.slice(0, expected.length)).toBe(expected)
    expect(out.slice(expected.length)).toMatch(/^data: \{"id":"chatcmpl-abc",.*"choices":\[\],"usage":\{"prompt_tokens":5,/)
    expect(out.endsWith("data: [DONE]\n\n")).toBe(true)
  })

  it("writes a chunk before the start and one with a created that JSON writes as null the same as their objects", () => {
    reseed(4)
    const encoder = new ChatStreamEncoder("m", false)
    const first = encoder.push({ type: "block_start", index: 0, block: { type: "tool_use", id: "call_1", name: "get" } })
    const id = /"id":"(chatcmpl-[a-z0-9]{24})"/.exec(first)?.[1]
    expect(id).toBeDefined()
    const created = JSON.parse(first.slice(6)).created as number
    expect(first).toBe(
      chunkOf(id!, created, "m", {
        role: "assistant",
        tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get", arguments: "" } }]
      })
    )
    const odd = new ChatStreamEncoder("m", false)
    odd.push({ type: "start", id: "x", model: "m", created: Number.NaN })
    const text = odd.push({ type: "text_delta", index: 0, text: "t" })
    expect(text).toBe(chunkOf("chatcmpl-x", null, "m", { content: "t" }))
    expect(odd.push({ type: "finish", stopReason: "end_turn" })).toBe(chunkOf("chatcmpl-x", null, "m", {}, "stop"))
  })
})

describe("Responses encoder: the response written member by member", () => {
  const events: Array<StreamEvent> = [
    start,
    { type: "block_start", index: 0, block: { type: "text" } },
    { type: "text_delta", index: 0, text: "hi" },
    { type: "block_stop", index: 0 },
    { type: "usage", usage: { inputTokens: 3, outputTokens: 5, reasoningTokens: 1 } },
    { type: "finish", stopReason: "end_turn" }
  ]
  const encodeBothWays = (request: Record<string, unknown> | undefined, evs: ReadonlyArray<StreamEvent> = events) => {
    const run = (make: () => ResponsesStreamEncoder) => {
      reseed(9)
      const encoder = make()
      return evs.map((e) => encoder.push(e)).join("") + encoder.end()
    }
    const options = request === undefined ? undefined : { request }
    return [
      run(() => new ResponsesStreamEncoder("gpt-\u2028x", options)),
      run(() => new ResponsesStreamEncoder("gpt-\u2028x", options, (e) => sseData(e, e["type"] as string)))
    ]
  }

  it("writes the same bytes as JSON.stringify of the response, whatever the request echoes", () => {
    const requests: Array<Record<string, unknown> | undefined> = [
      undefined,
      {},
      {
        instructions: 'be "brief"\n',
        max_output_tokens: 512,
        parallel_tool_calls: false,
        previous_response_id: "resp_prev",
        reasoning: { effort: "high", summary: "auto", other: 1 },
        store: true,
        temperature: 0,
        text: { format: { type: "json_schema", name: "x", schema: { type: "object" } }, verbosity: "low" },
        tool_choice: { type: "function", name: "get" },
        tools: [{ type: "function", name: "get", parameters: { type: "object", properties: {} } }],
        top_p: 0.5,
        metadata: { k: "v", é: "漢字" }
      },
      // null and falsy values echo as the defaults `??` gives them
      {
        instructions: null,
        max_output_tokens: null,
        parallel_tool_calls: null,
        reasoning: null,
        store: null,
        text: null,
        tool_choice: null,
        tools: null,
        metadata: null
      },
      { reasoning: { effort: "low" }, temperature: 1.5, store: false, tools: [], metadata: {}, instructions: "" },
      { reasoning: "not an object", top_p: 1, tool_choice: "required" }
    ]
    for (const request of requests) {
      const [templated, reference] = encodeBothWays(request)
      expect(templated, JSON.stringify(request)).toBe(reference)
    }
    // without usage: completed carries usage null
    const [templated, reference] = encodeBothWays({ instructions: "x" }, [events[0]!, events[5]!])
    expect(templated).toBe(reference)
    expect(templated).toContain('"usage":null')
  })
})

describe("a usage object repeated on every chunk", () => {
  it("gives the same chat stream merged once as merged on every chunk", () => {
    let s = ""
    for (let i = 0; i < 8; i++) {
      const last = i === 7
      const candidate = { content: { parts: [{ text: ` tok${i}` }], role: "model" }, index: 0, ...(last ? { finishReason: "STOP" } : {}) }
      const usageMetadata = last
        ? { promptTokenCount: 42, candidatesTokenCount: 8, totalTokenCount: 50 }
        : { promptTokenCount: 42, totalTokenCount: 42 }
      s += `data: ${JSON.stringify({ candidates: [candidate], usageMetadata, modelVersion: "g", responseId: "r1" })}\r\n\r\n`
    }
    const parser = new SseParser()
    const decoder = new GeminiStreamDecoder()
    const events: Array<StreamEvent> = []
    for (const f of [...parser.push(Buffer.from(s)), ...parser.end()]) events.push(...decoder.push(f))
    events.push(...decoder.end())
    const usages = events.filter((e) => e.type === "usage").map((e) => (e as { usage: object }).usage)
    // the decoder's template repeats one object: the identity the encoders skip on
    expect(new Set(usages).size).toBeLessThan(usages.length)
    const encode = (evs: ReadonlyArray<StreamEvent>) => {
      const encoder = new ChatStreamEncoder("m", true)
      return evs.map((e) => encoder.push(e)).join("") + encoder.end()
    }
    const copied = events.map((e) => (e.type === "usage" ? { ...e, usage: { ...e.usage } } : e))
    const once = encode(events)
    expect(once).toBe(encode(copied))
    expect(once).toContain('"usage":{"prompt_tokens":42,"completion_tokens":8,"total_tokens":50')
    for (const make of [() => new AnthropicStreamEncoder("m"), () => new ResponsesStreamEncoder("m", undefined)]) {
      reseed(2)
      const a = make()
      const first = events.map((e) => a.push(e)).join("")
      reseed(2)
      const b = make()
      expect(first).toBe(copied.map((e) => b.push(e)).join(""))
    }
  })
})
