import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import type { FormatId, StreamEvent } from "../src/domain/canonical.js"
import { type Frame, SseParser, sseData } from "../src/upstream/formats/frames.js"
import { JsonReader } from "../src/upstream/formats/json-reader.js"
import { ResponsesStreamEncoder } from "../src/upstream/formats/openai-responses-stream.js"
import { FORMATS } from "../src/upstream/formats/registry.js"
import { seededIdsAndClock } from "./support/seededIds.js"

/**
 * The stream decoders read their usual event without JSON.parse (src/upstream/formats/json-reader.ts)
 * and the encoders write theirs from templates: the events and bytes must be exactly those of
 * JSON.parse and of the objects' JSON. Each stream here is decoded twice: as it is, and with every
 * key of every event written with an escape (`"\u0063ontent"`: the same value for JSON.parse, an
 * event the reader always leaves to JSON.parse), and the two must give the same events.
 */

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "streams")

/** Deterministic ids and clock, the same for both passes. */
const { reseed } = seededIdsAndClock()

/** A JSON value written with every key's first character escaped (JSON.parse reads the same value). */
const escapedKeys = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(escapedKeys).join(",")}]`
  if (v !== null && typeof v === "object")
    return `{${Object.entries(v)
      .map(([k, x]) => {
        const key = k === "" ? '""' : `"\\u${k.charCodeAt(0).toString(16).padStart(4, "0")}${JSON.stringify(k).slice(2)}`
        return `${key}:${escapedKeys(x)}`
      })
      .join(",")}}`
  if (typeof v === "number" && Object.is(v, -0)) return "-0"
  return JSON.stringify(v)
}

/** The frame JSON.parse alone decodes: its data with escaped keys (or still invalid JSON). */
const referenceFrame = (f: Frame): Frame => {
  let data: string
  try {
    data = escapedKeys(JSON.parse(f.data))
  } catch {
    data = f.data === "[DONE]" ? f.data : "\u0000not json"
  }
  return f.event === undefined ? { data } : { event: f.event, data }
}

const decodeFrames = (format: FormatId, frames: ReadonlyArray<Frame>): Array<StreamEvent> => {
  reseed(1)
  const decoder = FORMATS[format].streamDecoder()
  const events: Array<StreamEvent> = []
  for (const f of frames) events.push(...decoder.push(f))
  events.push(...decoder.end())
  return events
}

const framesOf = (raw: string, pieces: number): Array<Frame> => {
  const parser = new SseParser()
  const frames: Array<Frame> = []
  const buf = Buffer.from(raw)
  const step = Math.max(1, Math.ceil(buf.length / pieces))
  for (let i = 0; i < buf.length; i += step) frames.push(...parser.push(buf.subarray(i, i + step)))
  frames.push(...parser.end())
  return frames
}

/** Decodes a stream as it is and as JSON.parse alone would: the same events. */
const expectSameAsParse = (format: FormatId, raw: string): Array<StreamEvent> => {
  let events: Array<StreamEvent> = []
  for (const pieces of [1, 3, 17]) {
    const frames = framesOf(raw, pieces)
    events = decodeFrames(format, frames)
    expect(events).toEqual(decodeFrames(format, frames.map(referenceFrame)))
  }
  return events
}

/** Texts that exercise the reader's strings: escapes, quotes, backslashes, line separators, surrogates. */
const TEXTS = [
  "tok0",
  " tok1",
  "",
  'say "hi"',
  "back\\slash\\",
  "line\nbreak\ttab\rcr",
  "\u2028\u2029",
  "emoji 😀 and 🇫🇷",
  "lone \ud800 high",
  "lone \udc00 low",
  "\u0000\u001f\u007f",
  "é 漢字 ☀",
  "\\u0041 written out",
  "</script>",
  "x".repeat(300),
  '{"type":"text_delta","text":"nested"}'
]

const chatChunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}, finish: string | null = null) =>
  `data: ${JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1700000000,
    model: "m",
    system_fingerprint: "fp",
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...extra
  })}\n\n`

const chatStream = (texts: ReadonlyArray<string>, extra: (i: number) => Record<string, unknown> = () => ({})): string =>
  chatChunk({ role: "assistant", content: "" }) +
  texts.map((t, i) => chatChunk({ content: t }, extra(i))).join("") +
  chatChunk({}, {}, "stop") +
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } })}\n\ndata: [DONE]\n\n`

const anthropicEvent = (name: string | undefined, data: unknown) =>
  `${name === undefined ? "" : `event: ${name}\n`}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`

const anthropicStream = (deltas: ReadonlyArray<string>, named = true): string =>
  anthropicEvent(named ? "message_start" : undefined, {
    type: "message_start",
    message: { id: "msg_1", type: "message", role: "assistant", model: "c", content: [], usage: { input_tokens: 4, output_tokens: 1 } }
  }) +
  anthropicEvent(named ? "content_block_start" : undefined, {
    type: "content_block_start",
    index: 0,
    content_block: { type: "text", text: "" }
  }) +
  deltas.map((d) => anthropicEvent(named ? "content_block_delta" : undefined, d)).join("") +
  anthropicEvent(named ? "content_block_stop" : undefined, { type: "content_block_stop", index: 0 }) +
  anthropicEvent(named ? "message_delta" : undefined, {
    type: "message_delta",
    delta: { stop_reason: "end_turn", stop_sequence: null },
    usage: { output_tokens: 9 }
  }) +
  anthropicEvent(named ? "message_stop" : undefined, { type: "message_stop" })

const textDelta = (text: string, index = 0) => JSON.stringify({ type: "content_block_delta", index, delta: { type: "text_delta", text } })

const geminiChunk = (parts: ReadonlyArray<unknown>, usage: unknown = { promptTokenCount: 42, totalTokenCount: 42 }, extra = {}) =>
  `data: ${JSON.stringify({
    candidates: [{ content: { parts, role: "model" }, index: 0, ...extra }],
    ...(usage === undefined ? {} : { usageMetadata: usage }),
    modelVersion: "g",
    responseId: "r1"
  })}\r\n\r\n`

const geminiStream = (texts: ReadonlyArray<string>): string =>
  texts.map((t, i) => geminiChunk([{ text: t }], { promptTokenCount: 42, candidatesTokenCount: i, totalTokenCount: 42 + i })).join("") +
  texts.map((t) => geminiChunk([{ text: t }])).join("") +
  geminiChunk([{ text: "" }], { promptTokenCount: 42, candidatesTokenCount: 9, totalTokenCount: 51 }, { finishReason: "STOP" })

describe("stream decoders reading the usual event without JSON.parse", () => {
  it("decode the recorded streams as JSON.parse does", () => {
    for (const file of fs.readdirSync(DIR)) {
      if (!file.endsWith(".sse")) continue
      const format = file.split(".")[0] as FormatId
      expectSameAsParse(format, fs.readFileSync(path.join(DIR, file), "utf8"))
    }
  })

  it("chat: text with escapes, quotes, separators and surrogates comes through whole", () => {
    const events = expectSameAsParse("openai-chat", chatStream(TEXTS))
    const text = events.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join("")
    expect(text).toBe(TEXTS.join(""))
  })

  it("chat: other shapes of the usual chunk, and chunks that are not it", () => {
    const raw =
      chatStream(
        TEXTS.slice(0, 6),
        (i) =>
          [
            { obfuscation: `o${i}` },
            { usage: null },
            { service_tier: "default" },
            { usage: { prompt_tokens: 1, completion_tokens: i } },
            {}
          ][i % 5]!
      ) +
      chatChunk({ reasoning_content: "think" }) +
      chatChunk({ reasoning_content: null, content: "after" }) +
      chatChunk({ content: null }) +
      chatChunk({ content: "x", tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: "{}" } }] }) +
      chatChunk({ content: "y", refusal: null, role: "assistant" }) +
      chatChunk({ content: 5 } as never) +
      chatChunk({ content: "z" }, { error: { message: "boom" } })
    expectSameAsParse("openai-chat", raw)
    // Hand-written JSON: duplicate keys (JSON.parse keeps the last), whitespace, other values.
    const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":`
    const odd = [
      `${head}[{"index":0,"delta":{"content":"a","content":"b"},"finish_reason":null}]}`,
      `${head}[{"index":0,"delta":{"content":"a"},"delta":{"content":"b"},"finish_reason":null}]}`,
      `${head}[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"choices":[{"index":0,"delta":{"content":"b"}}]}`,
      `${head}[{"index":0,"delta":{"content":"a"},"finish_reason":null,"finish_reason":"length"}]}`,
      `${head}[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`,
      `${head}[{"index":0,"delta":{"content":"a"}}],"usage":null,"usage":{"prompt_tokens":2,"completion_tokens":3}}`,
      ` { "id" : "c" , "choices" : [ { "delta" : { "content" : "sp\\u0061ced" } , "finish_reason" : null } ] } `,
      `${head}[{"index":0,"delta":{"content":"a"}}]} x`,
      `${head}[{"index":0,"delta":{"content":"a"}}],}`,
      `${head}[{"index":0,"delta":{"content":"a\u0001"}}]}`,
      `${head}[{"index":0,"delta":{"content":"bad \\x escape"}}]}`,
      `${head}[{"index":0,"delta":{"content":"bad \\u12g4 escape"}}]}`,
      `${head}[{"index":0,"delta":{"\\u0063ontent":"escaped key"}}]}`,
      `${head}[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[{"token":"a","logprob":-0.5e-3}]}}],"x":[1,2.5,-0,1E+3,true,false,null]}`,
      `${head}[{"index":0,"delta":{"content":"a"}}],"x":01}`,
      `${head}[{"index":0,"delta":{"content":"a"}}],"x":1.}`,
      `${head}[{"index":0,"delta":{"content":"a"}}],"x":tru}`,
      `${head}[{"index":0,"delta":{"content":"unterminated}}]}`,
      `${head}[{"index":0,"delta":{"content":"a"}}]`,
      `${head}[{"index":0,"delta":{"content":"a"}}]}\n`
    ]
    expectSameAsParse("openai-chat", chatChunk({ role: "assistant", content: "" }) + odd.map((d) => `data: ${d}\n\n`).join(""))
  })

  it("anthropic: text deltas, named and unnamed, and the other deltas", () => {
    const deltas = TEXTS.map((t) => textDelta(t))
    for (const named of [true, false]) {
      const events = expectSameAsParse("anthropic", anthropicStream(deltas, named))
      expect(events.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join("")).toBe(TEXTS.join(""))
    }
    const odd = [
      textDelta("to an unknown block", 7),
      JSON.stringify({ index: 0, delta: { text: "reordered", type: "text_delta" }, type: "content_block_delta" }),
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "hmm" } }),
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: '{"a"' } }),
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta" } }),
      JSON.stringify({ type: "content_block_delta", delta: { type: "text_delta", text: "no index" } }),
      JSON.stringify({ type: "content_block_delta", index: 0.0, delta: { type: "text_delta", text: "index 0.0" } }),
      `{"type":"content_block_delta","index":0,"index":7,"delta":{"type":"text_delta","text":"two indexes"}}`,
      `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}`,
      `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","type":"thinking_delta","text":"a","thinking":"b"}}`,
      `{"type":"content_block_delta","index":1e0,"delta":{"type":"text_delta","text":"exp index"}}`,
      `{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"negative"}}`,
      `{"type":"content_block_delta","index":0,"delta":{"type":"text_\\u0064elta","text":"escaped type"}}`,
      `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"extra":{"deep":[[[{}]]]}}`,
      `{"type":"message_delta","index":0,"delta":{"type":"text_delta","text":"another type"}}`,
      `{"type":"content_block_delta","type":"message_stop","index":0,"delta":{"type":"text_delta","text":"two types"}}`
    ]
    for (const named of [true, false]) expectSameAsParse("anthropic", anthropicStream(odd, named))
    // A data line's event name other than content_block_delta: read in full.
    expectSameAsParse(
      "anthropic",
      anthropicStream([textDelta("a")]).replace("event: content_block_delta", "event: ping") +
        anthropicEvent("content_block_delta", textDelta("after stop"))
    )
  })

  it("gemini: one text part with its usage, and the chunks that are not that", () => {
    const events = expectSameAsParse("gemini", geminiStream(TEXTS))
    expect(events.flatMap((e) => (e.type === "text_delta" ? [e.text] : [])).join("")).toBe(TEXTS.join("") + TEXTS.join(""))
    const raw =
      geminiChunk([{ text: "a" }]) +
      geminiChunk([{ text: "thinking", thought: true }]) +
      geminiChunk([{ text: "b", thoughtSignature: "sig" }]) +
      geminiChunk([{ text: "c" }, { text: "d" }]) +
      geminiChunk([]) +
      geminiChunk([{ functionCall: { name: "f", args: { x: 1 } } }]) +
      geminiChunk([{ text: "e" }], undefined) +
      geminiChunk([{ text: "f" }], { promptTokenCount: 1, thoughtsTokenCount: 4, cachedContentTokenCount: 1, toolUsePromptTokenCount: 2 }) +
      geminiChunk([{ text: "g" }], { totalTokenCount: 3 }) +
      geminiChunk([{ text: "h" }], { promptTokenCount: 1, promptTokensDetails: [{ modality: "TEXT", tokenCount: 1 }] }) +
      geminiChunk([{ text: "i" }], null) +
      geminiChunk([{ text: "j" }], { promptTokenCount: "1" }) +
      geminiChunk([{ text: "k" }], { promptTokenCount: 1.5 }) +
      geminiChunk([{ text: "l" }], undefined, { finishReason: null, safetyRatings: [{ category: "X", probability: "LOW" }] }) +
      geminiChunk([{ text: "m" }], undefined, { finishReason: "MAX_TOKENS" }) +
      `data: {"candidates":[{"content":{"parts":[{"text":"n"}]}},{"content":{"parts":[{"text":"second candidate"}]}}]}\r\n\r\n` +
      `data: {"candidates":[{"content":{"parts":[{"text":"o"}]}}],"promptFeedback":{"blockReason":"SAFETY"}}\r\n\r\n` +
      `data: {"candidates":[{"content":{"parts":[{"text":"p"}]}}],"usageMetadata":{"promptTokenCount":1,"promptTokenCount":2}}\r\n\r\n` +
      `data: {"candidates":[{"content":{"parts":[{"text":"q"}]}}],"usageMetadata":{"promptTokenCount":1e999}}\r\n\r\n` +
      `data: {"candidates":[{"content":{"parts":[{"text":"r"}]},"content":{"role":"model"}}]}\r\n\r\n` +
      `data: {"candidates":[{"content":{"role":"model"},"content":{"parts":[{"text":"s"}]}}]}\r\n\r\n` +
      `data: [{"candidates":[{"content":{"parts":[{"text":"in an array"}]}}]}]\r\n\r\n` +
      `data: {"error":{"code":429,"message":"slow down"}}\r\n\r\n`
    expectSameAsParse("gemini", geminiChunk([{ text: "start" }]) + raw)
  })

  it("decode mutated events (invalid JSON, other values) as JSON.parse does", () => {
    let state = 7
    const rand = (n: number) => {
      state = (state * 48271) % 2147483647
      return state % n
    }
    const ALPHABET = ['"', "\\", "{", "}", "[", "]", ",", ":", " ", "0", "1", "-", ".", "e", "n", "u", "l", "t", "a", "x", "\u2028"]
    const mutate = (data: string): string => {
      const at = rand(data.length + 1)
      const op = rand(3)
      const ch = ALPHABET[rand(ALPHABET.length)]!
      if (op === 0) return data.slice(0, at) + ch + data.slice(at)
      if (op === 1) return data.slice(0, at) + data.slice(at + 1)
      return data.slice(0, at) + ch + data.slice(at + 1)
    }
    const streams: Array<[FormatId, string]> = [
      ["openai-chat", chatStream(TEXTS.slice(0, 8))],
      ["anthropic", anthropicStream(TEXTS.slice(0, 8).map((t) => textDelta(t)))],
      ["gemini", geminiStream(TEXTS.slice(0, 8))]
    ]
    for (let round = 0; round < 150; round++) {
      for (const [format, raw] of streams) {
        const frames = framesOf(raw, 1).map((f, i) => (i > 0 && rand(2) === 0 ? { ...f, data: mutate(f.data) } : f))
        expect(decodeFrames(format, frames)).toEqual(decodeFrames(format, frames.map(referenceFrame)))
      }
    }
  })
})

describe("JsonReader", () => {
  it("accepts exactly what JSON.parse accepts, and reads strings as it does", () => {
    const r = new JsonReader()
    const valid = [
      "{}",
      "[]",
      ' { "a" : [ 1 , -2.5e+3 , true , false , null , "x\\"y" , { } ] } ',
      '"\\ud83d\\ude00 \\u2028 \\/ \\b\\f\\n\\r\\t"',
      "0",
      "-0.0E-0",
      '{"a":{"b":{"c":[[[]]]}}}',
      '"\u2028 raw separator"'
    ]
    let state = 11
    const rand = (n: number) => {
      state = (state * 48271) % 2147483647
      return state % n
    }
    const ALPHABET = ['"', "\\", "{", "}", "[", "]", ",", ":", " ", "0", "1", "-", ".", "e", "E", "+", "u", "n", "t", "\t", "\u0001"]
    const cases = [...valid]
    for (let i = 0; i < 4000; i++) {
      const base = valid[rand(valid.length)]!
      const at = rand(base.length + 1)
      const ch = ALPHABET[rand(ALPHABET.length)]!
      cases.push(rand(2) === 0 ? base.slice(0, at) + ch + base.slice(at) : base.slice(0, at) + base.slice(at + 1))
    }
    for (const text of cases) {
      let parsed = true
      try {
        JSON.parse(text)
      } catch {
        parsed = false
      }
      r.reset(text)
      r.skip()
      expect(r.done(), text).toBe(parsed)
    }
    for (const t of TEXTS) {
      r.reset(JSON.stringify(t))
      expect(r.string()).toBe(t)
      expect(r.done()).toBe(true)
    }
  })
})

describe("Responses text deltas written from a template", () => {
  it("are the bytes of the event's JSON", () => {
    const events: Array<StreamEvent> = [
      { type: "start", id: "x", model: "m", created: 1 },
      { type: "block_start", index: 0, block: { type: "text" } },
      ...TEXTS.map((text): StreamEvent => ({ type: "text_delta", index: 0, text })),
      { type: "block_stop", index: 0 },
      { type: "finish", stopReason: "end_turn" }
    ]
    const run = (encoder: ResponsesStreamEncoder) => {
      reseed(1)
      return events.map((e) => encoder.push(e)).join("") + encoder.end()
    }
    const templated = run(new ResponsesStreamEncoder("m", { responseId: "resp_1" }))
    expect(templated).toBe(run(new ResponsesStreamEncoder("m", { responseId: "resp_1" }, (e) => sseData(e, e["type"] as string))))
    expect(templated).toContain('"type":"response.output_text.delta","sequence_number":4,')
  })
})
