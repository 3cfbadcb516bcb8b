import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it, vi } from "vitest"
import { type FormatId, mergeUsage, newId, type StreamEvent } from "../src/domain/canonical.js"
import { type Frame, SseParser, sseData } from "../src/upstream/formats/frames.js"
import { ResponsesStreamEncoder } from "../src/upstream/formats/openai-responses-stream.js"
import { FORMATS } from "../src/upstream/formats/registry.js"
import { seededIdsAndClock } from "./support/seededIds.js"

/**
 * The Responses encoder writes a text block's opening and closing events (`output_item.added`,
 * `content_part.added`, `output_text.done`, `content_part.done`, `output_item.done`) from templates
 * when it writes SSE; given a `frame` it writes every event from its object. Both must give the
 * same bytes: each stream here is encoded both ways, with the same ids (seeded Math.random).
 */

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "streams")

/** Deterministic ids and clock, the same for both passes. */
const { reseed } = seededIdsAndClock()

/** The events encoded as SSE from templates, and as SSE of each event's object (the reference). */
const encodeBothWays = (events: ReadonlyArray<StreamEvent>, options?: Record<string, unknown>): [string, string] => {
  const run = (make: () => ResponsesStreamEncoder) => {
    reseed(7)
    const encoder = make()
    return events.map((e) => encoder.push(e)).join("") + encoder.end()
  }
  const templated = run(() => new ResponsesStreamEncoder("claude-x", options))
  const reference = run(() => new ResponsesStreamEncoder("claude-x", options, (e) => sseData(e, e["type"] as string)))
  return [templated, reference]
}

const TEXTS = [
  "tok0",
  'say "hi"',
  "back\\slash\\",
  "line\nbreak\ttab\rcr",
  "\u2028\u2029",
  "emoji 😀 and 🇫🇷",
  "lone \ud800 high",
  "\u0000\u001f\u007f",
  "é 漢字 ☀",
  "</script>",
  "x".repeat(300)
]

const textBlock = (index: number, texts: ReadonlyArray<string>): Array<StreamEvent> => [
  { type: "block_start", index, block: { type: "text" } },
  ...texts.map((text): StreamEvent => ({ type: "text_delta", index, text })),
  { type: "block_stop", index }
]

describe("Responses encoder templates", () => {
  it("writes the same bytes as the events' objects for synthetic streams", () => {
    const start: StreamEvent = { type: "start", id: "msg_up", model: "claude-x", created: 1_700_000_000 }
    const streams: Array<{ events: Array<StreamEvent>; options?: Record<string, unknown> }> = [
      { events: [start, ...textBlock(0, TEXTS), { type: "finish", stopReason: "end_turn" }] },
      { events: [start, ...textBlock(0, []), { type: "finish", stopReason: "end_turn" }] },
      {
        events: [
          start,
          ...textBlock(0, ["", "a", ""]),
          { type: "usage", usage: { inputTokens: 3, outputTokens: 5 } },
          { type: "finish", stopReason: "max_tokens" }
        ]
      },
      {
        // text blocks around reasoning and a tool call; one text block left open until the finish
        events: [
          start,
          { type: "block_start", index: 0, block: { type: "reasoning" } },
          { type: "reasoning_delta", index: 0, text: "think" },
          { type: "signature", index: 0, signature: "sig", encrypted: true },
          { type: "block_stop", index: 0 },
          ...textBlock(1, ["first ", "block"]),
          { type: "block_start", index: 2, block: { type: "tool_use", id: "toolu_1", name: "get" } },
          { type: "tool_args_delta", index: 2, partialJson: '{"a":1}' },
          { type: "block_stop", index: 2 },
          { type: "block_start", index: 3, block: { type: "text" } },
          { type: "text_delta", index: 3, text: 'left open "' },
          { type: "usage", usage: { inputTokens: 10, outputTokens: 20, cachedInputTokens: 2 } },
          { type: "finish", stopReason: "tool_use" }
        ],
        options: { request: { instructions: 'be "brief"', tools: [{ type: "function", name: "get" }], metadata: { k: "v" } } }
      },
      {
        // a request setting echoed keys to null (their defaults echoed) and one of them to a value; counts JSON writes its own way
        events: [
          start,
          ...textBlock(0, ["x"]),
          { type: "usage", usage: { inputTokens: 1e21, outputTokens: -0, reasoningTokens: 4, cachedInputTokens: 0 } },
          { type: "finish", stopReason: "end_turn" }
        ],
        options: { request: { store: null, tools: null, reasoning: null, top_p: 0.5, max_output_tokens: 64 } }
      },
      {
        // a count that is not a finite number, and every echoed key set
        events: [
          start,
          ...textBlock(0, ["y"]),
          { type: "usage", usage: { inputTokens: Number.NaN, outputTokens: 2 } },
          { type: "finish", stopReason: "end_turn" }
        ],
        options: {
          request: {
            parallel_tool_calls: false,
            previous_response_id: "resp_prev",
            reasoning: { effort: "low" },
            store: true,
            temperature: 0,
            text: { format: { type: "json_object" } },
            tool_choice: "none",
            tools: [],
            top_p: 1
          }
        }
      },
      {
        // no start event, an error in the middle of a text block
        events: [
          { type: "block_start", index: 0, block: { type: "text" } },
          { type: "text_delta", index: 0, text: "partial" },
          { type: "error", error: { status: 502, kind: "upstream", message: "cut" } }
        ],
        options: { responseId: "resp_fixed" }
      }
    ]
    for (const { events, options } of streams) {
      const [templated, reference] = encodeBothWays(events, options)
      expect(templated).toBe(reference)
    }
    expect(encodeBothWays(streams[0]!.events)[0]).toContain('"type":"response.output_text.done","sequence_number":')
  })

  it("writes the same bytes as the events' objects for the recorded streams", () => {
    const files = fs.readdirSync(DIR).filter((f) => /\.(sse|ndjson)$/.test(f))
    expect(files.length).toBeGreaterThan(5)
    for (const file of files) {
      const format = file.split(".")[0] as FormatId
      const raw = fs.readFileSync(path.join(DIR, file), "utf8")
      reseed(1)
      const decoder = FORMATS[format].streamDecoder()
      const frames: Array<Frame> = []
      if (file.endsWith(".sse")) {
        const parser = new SseParser()
        frames.push(...parser.push(Buffer.from(raw)), ...parser.end())
      } else for (const line of raw.split("\n")) if (line.trim()) frames.push({ data: line })
      const events: Array<StreamEvent> = []
      for (const f of frames) events.push(...decoder.push(f))
      events.push(...decoder.end())
      const [templated, reference] = encodeBothWays(events)
      expect(templated, file).toBe(reference)
    }
  })
})

describe("newId and mergeUsage", () => {
  it("newId gives the prefix and 24 characters of [a-z0-9], the same as the array-joined id for the same random numbers", () => {
    const joined = (prefix: string) =>
      prefix + Array.from({ length: 24 }, () => "abcdefghijklmnopqrstuvwxyz0123456789"[Math.floor(Math.random() * 36)]).join("")
    for (const prefix of ["msg_", "resp_", ""]) {
      reseed(3)
      const a = newId(prefix)
      reseed(3)
      expect(a).toBe(joined(prefix))
      expect(a).toMatch(new RegExp(`^${prefix}[a-z0-9]{24}$`))
    }
    vi.restoreAllMocks()
    expect(newId("x_")).toMatch(/^x_[a-z0-9]{24}$/)
  })

  it("mergeUsage: later numbers win, keys keep their order, the first is not changed", () => {
    const a = { inputTokens: 1, outputTokens: 2 }
    const merged = mergeUsage(a, { outputTokens: 5, cachedInputTokens: 3, reasoningTokens: undefined })
    expect(merged).toEqual({ inputTokens: 1, outputTokens: 5, cachedInputTokens: 3 })
    expect(Object.keys(merged)).toEqual(["inputTokens", "outputTokens", "cachedInputTokens"])
    expect(a).toEqual({ inputTokens: 1, outputTokens: 2 })
    expect(mergeUsage(undefined, { inputTokens: 4 })).toEqual({ inputTokens: 4 })
    expect(Object.keys(mergeUsage(undefined, { reasoningTokens: 1, inputTokens: 4 }))).toEqual(["reasoningTokens", "inputTokens"])
  })
})
