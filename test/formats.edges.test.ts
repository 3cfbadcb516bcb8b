import { describe, expect, it } from "vitest"
import type { StreamEvent } from "../src/domain/canonical.js"
import { encodeAnthropicRequest } from "../src/upstream/formats/anthropic.js"
import { gemini } from "../src/upstream/formats/gemini.js"
import { sanitizeGeminiSchema } from "../src/upstream/formats/gemini-schema.js"
import { repairToolHistory } from "../src/upstream/formats/common.js"
import { SseParser } from "../src/upstream/formats/frames.js"
import { ollama } from "../src/upstream/formats/ollama.js"
import { encodeChatRequest, openAiChat } from "../src/upstream/formats/openai-chat.js"
import { openAiResponses } from "../src/upstream/formats/openai-responses.js"
import { anthropic } from "../src/upstream/formats/anthropic.js"

/** Edge cases real clients and servers produce, one per bug class. */

const sse = (chunks: ReadonlyArray<unknown>): Array<StreamEvent> => {
  const parser = new SseParser()
  const decoder = openAiChat.streamDecoder()
  const events: Array<StreamEvent> = []
  for (const c of chunks) for (const f of parser.push(Buffer.from(`data: ${JSON.stringify(c)}\n\n`))) events.push(...decoder.push(f))
  events.push(...decoder.end())
  return events
}

const encodeAll = (encoder: { push(e: StreamEvent): string; end(): string }, events: ReadonlyArray<StreamEvent>): Array<any> => {
  const text = events.map((e) => encoder.push(e)).join("") + encoder.end()
  return text
    .split("\n")
    .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
    .map((l) => JSON.parse(l.slice(6)))
}

describe("custom (free-form) tools on chat completions", () => {
  const tools = [{ type: "custom", custom: { name: "apply_patch", description: "Apply a patch" } }]

  it("reads a custom tool and a custom call from history as a one-string-argument function", () => {
    const req = openAiChat.decodeRequest({
      model: "m",
      tools,
      tool_choice: { type: "custom", custom: { name: "apply_patch" } },
      messages: [
        { role: "user", content: "patch it" },
        { role: "assistant", tool_calls: [{ id: "c1", type: "custom", custom: { name: "apply_patch", input: "*** Begin Patch" } }] },
        { role: "tool", tool_call_id: "c1", content: "done" }
      ]
    })
    expect(req.tools).toEqual([
      { name: "apply_patch", description: "Apply a patch", parameters: expect.objectContaining({ required: ["input"] }) }
    ])
    expect(req.toolChoice).toEqual({ type: "tool", name: "apply_patch" })
    expect(req.messages[1]!.content[0]).toMatchObject({
      type: "tool_use",
      id: "c1",
      name: "apply_patch",
      input: { input: "*** Begin Patch" }
    })
    // Sent to an Anthropic upstream it is an ordinary tool with an `input` string.
    const body = encodeAnthropicRequest(req)
    expect((body.tools as Array<any>)[0]).toMatchObject({
      name: "apply_patch",
      input_schema: { properties: { input: { type: "string" } } }
    })
  })

  it("answers a custom tool's call as type custom with its text input, whole and streamed", () => {
    const customTools = new Set(["apply_patch"])
    const whole = openAiChat.encodeResponse(
      {
        id: "r1",
        model: "m",
        created: 1,
        content: [{ type: "tool_use", id: "c9", name: "apply_patch", input: { input: "line1\nline2" } }],
        stopReason: "tool_use"
      },
      { model: "m", requestId: "q", options: { customTools } }
    ) as any
    expect(whole.choices[0].message.tool_calls).toEqual([
      { id: "c9", type: "custom", custom: { name: "apply_patch", input: "line1\nline2" } }
    ])
    expect(whole.choices[0].finish_reason).toBe("tool_calls")

    const chunks = encodeAll(openAiChat.streamEncoder({ model: "m", requestId: "q", options: { customTools } }), [
      { type: "start", id: "x", model: "m", created: 1 },
      { type: "block_start", index: 0, block: { type: "tool_use", id: "c9", name: "apply_patch" } },
      { type: "tool_args_delta", index: 0, partialJson: '{"input":"line1\\n' },
      { type: "tool_args_delta", index: 0, partialJson: 'line2"}' },
      { type: "block_stop", index: 0 },
      { type: "finish", stopReason: "tool_use" }
    ])
    const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
    expect(calls[0]).toEqual({ index: 0, id: "c9", type: "custom", custom: { name: "apply_patch", input: "" } })
    expect(
      calls
        .slice(1)
        .map((c: any) => c.custom.input)
        .join("")
    ).toBe("line1\nline2")
  })

  it("decodes a streamed custom call from an OpenAI upstream into canonical arguments", () => {
    const events = sse([
      {
        choices: [{ delta: { tool_calls: [{ index: 0, id: "c1", type: "custom", custom: { name: "apply_patch", input: 'a "quoted"' } }] } }]
      },
      { choices: [{ delta: { tool_calls: [{ index: 0, custom: { input: "\nend" } }] } }] },
      { choices: [{ delta: {}, finish_reason: "tool_calls" }] }
    ])
    const args = events.flatMap((e) => (e.type === "tool_args_delta" ? [e.partialJson] : [])).join("")
    expect(JSON.parse(args)).toEqual({ input: 'a "quoted"\nend' })
    expect(events.find((e) => e.type === "block_start")).toMatchObject({ block: { name: "apply_patch", id: "c1" } })
  })
})

describe("chat stream tool calls from loose servers", () => {
  it("separates calls that carry ids but no index (Gemini's OpenAI endpoint)", () => {
    const events = sse([
      { choices: [{ delta: { tool_calls: [{ id: "a1", function: { name: "f", arguments: '{"x":' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ function: { arguments: "1}" } }] } }] },
      { choices: [{ delta: { tool_calls: [{ id: "a2", function: { name: "g", arguments: "{}" } }] }, finish_reason: "tool_calls" }] }
    ])
    const starts = events.flatMap((e) =>
      e.type === "block_start" && e.block.type === "tool_use" ? [[e.index, e.block.id, e.block.name]] : []
    )
    expect(starts).toEqual([
      [0, "a1", "f"],
      [1, "a2", "g"]
    ])
    const args = (i: number) => events.flatMap((e) => (e.type === "tool_args_delta" && e.index === i ? [e.partialJson] : [])).join("")
    expect(JSON.parse(args(0))).toEqual({ x: 1 })
    expect(JSON.parse(args(1))).toEqual({})
  })

  it("separates calls that all say index 0 but have different ids", () => {
    const events = sse([
      { choices: [{ delta: { tool_calls: [{ index: 0, id: "a1", function: { name: "f", arguments: "{}" } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, id: "a2", function: { name: "g", arguments: "{}" } }] } }] },
      { choices: [{ delta: {}, finish_reason: "tool_calls" }] }
    ])
    expect(events.filter((e) => e.type === "block_start").length).toBe(2)
  })

  it("gives a call streamed without arguments (Anthropic's empty partial_json) an empty JSON object", () => {
    const chunks = encodeAll(openAiChat.streamEncoder({ model: "m", requestId: "q" }), [
      { type: "start", id: "x", model: "m", created: 1 },
      { type: "block_start", index: 0, block: { type: "tool_use", id: "t1", name: "list_files" } },
      { type: "tool_args_delta", index: 0, partialJson: "" },
      { type: "block_stop", index: 0 },
      { type: "finish", stopReason: "tool_use" }
    ])
    const args = chunks
      .flatMap((c) => c.choices[0]?.delta?.tool_calls ?? [])
      .map((c: any) => c.function.arguments)
      .join("")
    expect(JSON.parse(args)).toEqual({})
  })
})

describe("stop reasons when an answer holds tool calls", () => {
  it("a call cut by the token limit reports the limit, not a finished call, in every family", () => {
    const chat = openAiChat.decodeResponse({
      id: "x",
      choices: [
        {
          message: { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: '{"a' } }] },
          finish_reason: "length"
        }
      ]
    })
    expect(chat.stopReason).toBe("max_tokens")
    const gem = gemini.decodeResponse({
      candidates: [{ content: { role: "model", parts: [{ functionCall: { name: "f", args: {} } }] }, finishReason: "MAX_TOKENS" }]
    })
    expect(gem.stopReason).toBe("max_tokens")
    const oll = ollama.decodeResponse({
      model: "m",
      message: { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: {} } }] },
      done: true,
      done_reason: "length"
    })
    expect(oll.stopReason).toBe("max_tokens")
    const resp = openAiResponses.decodeResponse({
      id: "r",
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
      output: [{ type: "function_call", call_id: "c", name: "f", arguments: "{" }]
    })
    expect(resp.stopReason).toBe("max_tokens")
  })

  it("a complete call reports tool_use even when the family says stop", () => {
    const chat = openAiChat.decodeResponse({
      id: "x",
      choices: [
        {
          message: { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] },
          finish_reason: "stop"
        }
      ]
    })
    expect(chat.stopReason).toBe("tool_use")
    const gem = gemini.decodeResponse({
      candidates: [{ content: { role: "model", parts: [{ functionCall: { name: "f", args: {} } }] }, finishReason: "STOP" }]
    })
    expect(gem.stopReason).toBe("tool_use")
  })
})

describe("one assistant turn split over several messages (@google/genai chat history)", () => {
  it("joins consecutive model entries so parallel calls stay one turn with their results after it", () => {
    const req = gemini.decodeRequest({
      model: "g",
      contents: [
        { role: "user", parts: [{ text: "weather in Paris and Rome?" }] },
        { role: "model", parts: [{ text: "Let me ", thought: true }] },
        { role: "model", parts: [{ text: "check.", thought: true, thoughtSignature: "SIG" }] },
        { role: "model", parts: [{ functionCall: { name: "weather", args: { city: "Paris" } } }] },
        { role: "model", parts: [{ functionCall: { name: "weather", args: { city: "Rome" } } }] },
        {
          role: "user",
          parts: [
            { functionResponse: { name: "weather", response: { t: 20 } } },
            { functionResponse: { name: "weather", response: { t: 25 } } }
          ]
        }
      ]
    })
    const chat = encodeChatRequest(req).messages as Array<any>
    expect(chat.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool"])
    expect(chat[1].tool_calls.map((c: any) => JSON.parse(c.function.arguments).city)).toEqual(["Paris", "Rome"])
    expect(chat.slice(2).map((m) => m.tool_call_id)).toEqual(chat[1].tool_calls.map((c: any) => c.id.split("__")[0]))

    const msgs = encodeAnthropicRequest(req).messages as Array<any>
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "user"])
    // The unsigned thought continues into the signed one: one reasoning block carries the whole text.
    const turn = repairToolHistory(req.messages)[1]!
    expect(turn.content.filter((b) => b.type === "reasoning")).toEqual([{ type: "reasoning", text: "Let me check.", signature: "SIG" }])
    expect(msgs[1].content.filter((b: any) => b.type === "tool_use").length).toBe(2)
    expect(msgs[2].content.map((b: any) => b.type)).toEqual(["tool_result", "tool_result"])
  })

  it("takes a signature-only thought part as the signature of the thought text before it", () => {
    const res = gemini.decodeResponse({
      candidates: [
        {
          content: {
            role: "model",
            parts: [{ text: "thinking", thought: true }, { text: "", thoughtSignature: "S1" }, { text: "answer" }]
          },
          finishReason: "STOP"
        }
      ]
    })
    expect(res.content).toEqual([
      { type: "reasoning", text: "thinking", signature: "S1" },
      { type: "text", text: "answer" }
    ])
  })
})

describe("Gemini schema sanitising stays bounded", () => {
  it("cuts a recursive $ref at the recursion, not after expanding it", () => {
    const out = sanitizeGeminiSchema({
      type: "object",
      properties: { root: { $ref: "#/$defs/Node" } },
      $defs: {
        Node: { type: "object", properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/Node" } } } }
      }
    })
    expect(out).toEqual({
      type: "object",
      properties: {
        root: {
          type: "object",
          properties: { name: { type: "string" }, children: { type: "array", items: { type: "object", description: "object" } } }
        }
      }
    })
  })

  it("keeps a small schema that references one definition from many places from growing past the node budget", () => {
    // Each level references the next twice: 2^20 nodes if expanded naively.
    const defs: Record<string, unknown> = { L20: { type: "string" } }
    for (let i = 0; i < 20; i++)
      defs[`L${i}`] = { type: "object", properties: { a: { $ref: `#/$defs/L${i + 1}` }, b: { $ref: `#/$defs/L${i + 1}` } } }
    const out = sanitizeGeminiSchema({ type: "object", properties: { x: { $ref: "#/$defs/L0" } }, $defs: defs })
    const text = JSON.stringify(out)
    expect(text.length).toBeLessThan(1_000_000)
    expect(text.split('"type"').length - 1).toBeLessThanOrEqual(5001 + 100)
    expect(out).toMatchObject({ type: "object", properties: { x: { type: "object" } } })
  })
})

describe("Responses stream encoder", () => {
  it("opens with response.created even when the first canonical event is not a start", () => {
    const frames = encodeAll(openAiResponses.streamEncoder({ model: "m", requestId: "q" }), [
      { type: "block_start", index: 0, block: { type: "text" } },
      { type: "text_delta", index: 0, text: "hi" },
      { type: "block_stop", index: 0 },
      { type: "finish", stopReason: "end_turn" }
    ])
    expect(frames[0].type).toBe("response.created")
    expect(frames.filter((f) => f.type === "response.created").length).toBe(1)
    expect(frames.map((f) => f.sequence_number)).toEqual(frames.map((_, i) => i))
    expect(frames[frames.length - 1].type).toBe("response.completed")
  })
})

describe("request shape errors name the field", () => {
  const user = { role: "user", content: "hi" }
  it("tools that are not an array are a decode error naming tools, in every format", () => {
    const cases: Array<[string, () => unknown]> = [
      ["chat", () => openAiChat.decodeRequest({ model: "m", messages: [user], tools: "x" })],
      ["responses", () => openAiResponses.decodeRequest({ model: "m", input: "hi", tools: { a: 1 } })],
      ["messages", () => anthropic.decodeRequest({ model: "m", messages: [user], tools: 5 })],
      ["gemini", () => gemini.decodeRequest({ model: "m", contents: [{ role: "user", parts: [{ text: "hi" }] }], tools: "x" })],
      ["ollama", () => ollama.decodeRequest({ model: "m", messages: [user], tools: true })]
    ]
    for (const [, f] of cases) expect(f).toThrow(/tools must be an array/)
  })

  it("an Anthropic system that is neither text nor blocks is a decode error naming system", () => {
    expect(() => anthropic.decodeRequest({ model: "m", messages: [], system: 5 })).toThrow(/system must be a string or an array/)
  })
})

describe("SSE framing: line ends and chunk boundaries", () => {
  const frames = (chunks: ReadonlyArray<string>) => {
    const parser = new SseParser()
    const out = chunks.flatMap((c) => parser.push(Buffer.from(c)))
    return [...out, ...parser.end()]
  }
  const stream = (eol: string) => Array.from({ length: 50 }, (_, i) => `event: e${i}${eol}data: {"n":${i}}${eol}${eol}`).join("")

  it("reads LF, CRLF and CR streams alike, many events in one chunk", () => {
    const expected = Array.from({ length: 50 }, (_, i) => ({ event: `e${i}`, data: `{"n":${i}}` }))
    expect(frames([stream("\n")])).toEqual(expected)
    expect(frames([stream("\r\n")])).toEqual(expected)
    expect(frames([stream("\r")])).toEqual(expected)
  })

  it("gives the same frames whatever the chunk boundaries, a CRLF split in two included", () => {
    for (const eol of ["\n", "\r\n", "\r"]) {
      const whole = frames([stream(eol)])
      const text = stream(eol)
      for (const size of [1, 2, 3, 7, 64]) {
        const parts: Array<string> = []
        for (let i = 0; i < text.length; i += size) parts.push(text.slice(i, i + size))
        expect(frames(parts)).toEqual(whole)
      }
    }
  })

  it("a CR stream after LF lines, and a comment between events", () => {
    expect(frames(["data: a\n\n: keep-alive\r\ndata: b\r\rdata: c\n", "\n"])).toEqual([{ data: "a" }, { data: "b" }, { data: "c" }])
  })
})
