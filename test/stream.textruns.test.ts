import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { SseParser } from "../src/upstream/formats/frames.js"
import { AnthropicStreamDecoder } from "../src/upstream/formats/anthropic-stream-decoder.js"
import { AnthropicStreamEncoder } from "../src/upstream/formats/anthropic-stream-encoder.js"
import { ChatStreamEncoder } from "../src/upstream/formats/openai-chat-stream-encoder.js"
import { ResponsesStreamEncoder } from "../src/upstream/formats/openai-responses-stream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * A translated stream's usual text events are read in place (src/inference/stream.ts,
 * `translating`; docs/ARCHITECTURE.md, "Translated text runs") when a chunk holds whole events.
 * The client must get what the event-by-event path makes of the same bytes: the same events, the
 * same text, byte for byte but for the ids the gateway makes. The upstream (a Messages API on
 * 127.0.0.1) sends the same stream whole in one write, and cut into pieces that end inside events
 * (which take the event-by-event path).
 */
const ADMIN = "gwk_textruns_admin_key_0123456789abcdef"

const event = (name: string, data: unknown) => `event: ${name}\ndata: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`
const delta = (index: number, text: string) =>
  event("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text } })
const start = (index: number, block: Record<string, unknown>) =>
  event("content_block_start", { type: "content_block_start", index, content_block: block })
const MESSAGE_START = event("message_start", {
  type: "message_start",
  message: {
    id: "msg_up_1",
    type: "message",
    role: "assistant",
    model: "claude-x",
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: { input_tokens: 42, output_tokens: 1 }
  }
})
const ending = (outputTokens: number) =>
  event("message_delta", {
    type: "message_delta",
    delta: { stop_reason: "end_turn", stop_sequence: null },
    usage: { output_tokens: outputTokens }
  }) + event("message_stop", { type: "message_stop" })

/** Texts of every kind a delta can carry: plain, escaped, quoted, raw non-ASCII, an emoji (a surrogate pair), empty. */
const TEXTS = ["Hello", " world", ', a "quote"', " and a \\ backslash", "\nnew line\ttab", " café", " 😀 emoji", "", " \u2028sep", " done."]

/** A Messages stream of one text block, a delta for each of TEXTS. */
const TEXTS_STREAM =
  MESSAGE_START +
  start(0, { type: "text", text: "" }) +
  TEXTS.map((t) => delta(0, t)).join("") +
  event("content_block_stop", { type: "content_block_stop", index: 0 }) +
  ending(10)

/** The stream as the upstream sends it this time, and how it cuts it into writes. */
let stream = ""
let cut: (s: string) => Array<string> = (s) => [s]
let upstream: http.Server
let base = ""
let gw: TestGateway

/**
 * The stream in pieces of about 37 characters, none but the last ending in a line's end, so no
 * chunk the gateway reads ends where an event does (reads that join pieces end where one does).
 */
const midEvent = (s: string): Array<string> => {
  const out: Array<string> = []
  let at = 0
  while (at < s.length) {
    let end = Math.min(at + 37, s.length)
    while (end < s.length && (s[end - 1] === "\n" || s[end - 1] === "\r")) end++
    out.push(s.slice(at, end))
    at = end
  }
  return out
}

/** The request a client of each format makes, streamed: to the Messages upstream, or (`messages`) to the chat one. */
const REQUESTS = {
  responses: { path: "/v1/responses", body: { model: "an/claude-x", input: "hi", max_output_tokens: 256, stream: true } },
  chat: { path: "/v1/chat/completions", body: { model: "an/claude-x", messages: [{ role: "user", content: "hi" }], stream: true } },
  gemini: {
    path: "/v1/chat/completions",
    body: { model: "ge/gm", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } }
  },
  messages: {
    path: "/v1/messages",
    body: { model: "oc/m1", max_tokens: 256, messages: [{ role: "user", content: "hi" }], stream: true }
  },
  /** The pairs the bench does not take: a Responses client of the chat and generate-content upstreams, a Messages client of the latter. */
  "responses-chat": { path: "/v1/responses", body: { model: "oc/m1", input: "hi", stream: true } },
  "responses-gemini": { path: "/v1/responses", body: { model: "ge/gm", input: "hi", stream: true } },
  "messages-gemini": {
    path: "/v1/messages",
    body: { model: "ge/gm", max_tokens: 256, messages: [{ role: "user", content: "hi" }], stream: true }
  }
} as const
type Client = keyof typeof REQUESTS

const ask = async (client: Client = "responses"): Promise<{ status: number; text: string }> => {
  const { path, body } = REQUESTS[client]
  const res = await fetch(`${gw.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN}` },
    body: JSON.stringify(body)
  })
  return { status: res.status, text: await res.text() }
}
const responses = () => ask("responses")

/** The stream with the ids and times the gateway makes on each request made alike. */
const normalized = (text: string) =>
  text
    .replace(/"(resp|msg|rs|fc|toolu)_[A-Za-z0-9-]+"/g, '"$1_ID"')
    .replace(/"chatcmpl-[A-Za-z0-9]+"/g, '"chatcmpl-ID"')
    .replace(/"created(_at)?":\d+/g, '"created$1":0')

/** The Responses events' data, parsed. */
const eventsOf = (text: string): Array<Record<string, any>> =>
  text
    .split("\n\n")
    .filter((e) => e.includes("data: "))
    .map((e) => JSON.parse(e.slice(e.indexOf("data: ") + 6)))

/** Text events the gateway's encoders wrote in place so far (`pushText` answered). */
let readInPlace = 0
for (const encoder of [ResponsesStreamEncoder, ChatStreamEncoder, AnthropicStreamEncoder]) {
  const pushText = encoder.prototype.pushText
  vi.spyOn(encoder.prototype, "pushText").mockImplementation(function (this: InstanceType<typeof encoder>, index, text, json) {
    const out = pushText.call(this, index, text, json)
    if (out !== undefined) readInPlace++
    return out
  })
}

/**
 * The same stream whole, then cut inside its events: the two answers, normalized, and how many of
 * its text events each read in place (the whole one at least `inPlace`, the cut one none).
 */
const both = async (s: string, inPlace: number, client: Client = "responses") => {
  stream = s
  cut = (x) => [x]
  readInPlace = 0
  const whole = await ask(client)
  const wholeInPlace = readInPlace
  cut = midEvent
  readInPlace = 0
  const pieces = await ask(client)
  expect(whole.status).toBe(200)
  expect(pieces.status).toBe(200)
  expect(wholeInPlace).toBeGreaterThanOrEqual(inPlace)
  expect(readInPlace).toBe(0)
  return { whole: normalized(whole.text), pieces: normalized(pieces.text) }
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    req.resume()
    req.on("end", async () => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      for (const piece of cut(stream)) {
        res.write(piece)
        await new Promise((r) => setTimeout(r, 2))
      }
      res.end()
    })
  })
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
  base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const added = await call(`${gw.url}/api/providers`, {
    body: { provider: "anthropic", name: "an", baseUrl: base, apiKey: "sk-ant-upstream-0123456789", models: ["claude-x"] },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(added.status).toBe(201)
  const chat = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "oc", baseUrl: `${base}/v1`, apiKey: "sk-upstream-0123456789", defaultModel: "m1" },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(chat.status).toBe(201)
  const gemini = await call(`${gw.url}/api/providers`, {
    body: { provider: "gemini", name: "ge", baseUrl: base, apiKey: "gm-upstream-0123456789", models: ["gm"] },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(gemini.status).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await new Promise((r) => upstream?.close(r))
})

describe("a translated stream's text events read in place", () => {
  it("give the Responses client the same events as the stream read event by event, every kind of text", async () => {
    const s = TEXTS_STREAM
    const { whole, pieces } = await both(s, 5)
    expect(whole).toBe(pieces)
    const events = eventsOf(whole)
    const deltas = events.filter((e) => e["type"] === "response.output_text.delta").map((e) => e["delta"])
    expect(deltas).toEqual(TEXTS.filter((t) => t !== ""))
    expect(events.map((e) => e["sequence_number"])).toEqual(events.map((_, i) => i))
    const completed = events.find((e) => e["type"] === "response.completed")!
    expect(completed["response"]["output"][0]["content"][0]["text"]).toBe(TEXTS.join(""))
    expect(completed["response"]["usage"]["output_tokens"]).toBe(10)
  })

  it("keep the order of other events between them: a ping, a second text block, a tool call, a block started with text", async () => {
    const s =
      MESSAGE_START +
      start(0, { type: "text", text: "" }) +
      delta(0, "one") +
      event("ping", { type: "ping" }) +
      delta(0, " two") +
      event("content_block_stop", { type: "content_block_stop", index: 0 }) +
      start(1, { type: "text", text: "begun " }) +
      delta(1, "three") +
      delta(1, " four") +
      event("content_block_stop", { type: "content_block_stop", index: 1 }) +
      start(2, { type: "tool_use", id: "toolu_1", name: "lookup", input: {} }) +
      event("content_block_delta", { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: '{"q":' } }) +
      event("content_block_delta", { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: '"x"}' } }) +
      event("content_block_stop", { type: "content_block_stop", index: 2 }) +
      ending(7)
    const { whole, pieces } = await both(s, 2)
    expect(whole).toBe(pieces)
    const events = eventsOf(whole)
    expect(events.filter((e) => e["type"] === "response.output_text.delta").map((e) => [e["output_index"], e["delta"]])).toEqual([
      [0, "one"],
      [0, " two"],
      [1, "begun "],
      [1, "three"],
      [1, " four"]
    ])
    const output = events.find((e) => e["type"] === "response.completed")!["response"]["output"]
    expect(output.map((o: any) => o["type"])).toEqual(["message", "message", "function_call"])
    expect(output[1]["content"][0]["text"]).toBe("begun three four")
    expect(output[2]["arguments"]).toBe('{"q":"x"}')
  })

  it("leave an event written otherwise than the usual one to the event-by-event path: other key order, spacing, an extra key", async () => {
    const s =
      MESSAGE_START +
      start(0, { type: "text", text: "" }) +
      delta(0, "usual") +
      event("content_block_delta", '{"index":0,"type":"content_block_delta","delta":{"type":"text_delta","text":" reordered"}}') +
      event("content_block_delta", '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " spaced"}}') +
      event("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" extra","x":1}}') +
      delta(0, " usual again") +
      delta(0, " and again") +
      "data: " +
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " unnamed" } }) +
      "\n\n" +
      event("content_block_stop", { type: "content_block_stop", index: 0 }) +
      ending(6)
    const { whole, pieces } = await both(s, 1)
    expect(whole).toBe(pieces)
    const completed = eventsOf(whole).find((e) => e["type"] === "response.completed")!
    expect(completed["response"]["output"][0]["content"][0]["text"]).toBe("usual reordered spaced extra usual again and again unnamed")
  })

  it("give a chat client of the Messages upstream the same chunks as the stream read event by event", async () => {
    const s = TEXTS_STREAM
    const { whole, pieces } = await both(s, 5, "chat")
    expect(whole).toBe(pieces)
    const chunks = whole
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)))
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(TEXTS.join(""))
    expect(whole.trimEnd().endsWith("data: [DONE]")).toBe(true)
  })

  it("give a Messages client of a chat upstream the same events as the stream read event by event", async () => {
    const chunk = (delta: Record<string, unknown>, extra = "") =>
      `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":${JSON.stringify(delta)},"finish_reason":null}]${extra}}\n\n`
    const s =
      chunk({ role: "assistant", content: "" }) +
      TEXTS.map((t) => chunk({ content: t })).join("") +
      chunk({ content: " again" }) +
      `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":11,"total_tokens":14}}\n\n` +
      "data: [DONE]\n\n"
    // Read in place: " world", " café", " \u2028sep", " done.", " again" (the first text teaches the template).
    const { whole, pieces } = await both(s, 5, "messages")
    expect(whole).toBe(pieces)
    const events = eventsOf(whole)
    const text = events
      .filter((e) => e["type"] === "content_block_delta")
      .map((e) => e["delta"]["text"])
      .join("")
    expect(text).toBe(`${TEXTS.join("")} again`)
    expect(events.find((e) => e["type"] === "message_delta")!["usage"]["output_tokens"]).toBe(11)
    expect(events.at(-1)!["type"]).toBe("message_stop")
  })

  it("read a stream whose lines end in \\r\\n (Messages) the same way", async () => {
    const s = TEXTS_STREAM.replaceAll("\n", "\r\n")
    const { whole, pieces } = await both(s, 5)
    expect(whole).toBe(pieces)
    const completed = eventsOf(whole).find((e) => e["type"] === "response.completed")!
    expect(completed["response"]["output"][0]["content"][0]["text"]).toBe(TEXTS.join(""))
  })

  it("give a chat client of a generate-content upstream (lines ending in \\r\\n, usage on every chunk) the same chunks", async () => {
    const chunk = (parts: Array<string>, usage: Record<string, number> | undefined, finish?: string) =>
      `data: ${JSON.stringify({
        candidates: [
          { content: { parts: parts.map((text) => ({ text })), role: "model" }, index: 0, ...(finish ? { finishReason: finish } : {}) }
        ],
        ...(usage ? { usageMetadata: usage } : {}),
        modelVersion: "gm",
        responseId: "gm-resp-1"
      })}\r\n\r\n`
    const running = { promptTokenCount: 5, totalTokenCount: 5 }
    const s =
      TEXTS.slice(0, 4)
        .map((t) => chunk([t], running))
        .join("") +
      // Text-only with other counts: the template learned again (then once more, for the running counts).
      chunk([" midway"], { promptTokenCount: 5, candidatesTokenCount: 3, totalTokenCount: 8 }) +
      chunk([TEXTS[4]!], running) +
      chunk([TEXTS[5]!], running) +
      chunk([TEXTS[6]!], running) +
      chunk([TEXTS[7]!], running) +
      // Not the usual chunk (two parts), with counts of its own: the next usual chunk's usage is merged
      // again, so it goes event by event although its bytes are the template's.
      chunk([" two", " parts"], { promptTokenCount: 5, candidatesTokenCount: 2, totalTokenCount: 7 }) +
      chunk([TEXTS[8]!], running) +
      chunk([TEXTS[9]!], running) +
      // The last chunk has no counts: the stream's usage is the running one merged last.
      chunk([" end"], undefined, "STOP")
    // Written in place: " café" and " done." (" world" teaches the template; the chunk after " midway"
    // another one; " \u2028sep" follows other counts; the emoji and the empty text are not read so).
    const { whole, pieces } = await both(s, 2, "gemini")
    expect(whole).toBe(pieces)
    const chunks = whole
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map((e) => JSON.parse(e.slice(6)))
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")
    expect(text).toBe(`${TEXTS.slice(0, 4).join("")} midway${TEXTS.slice(4, 8).join("")} two parts${TEXTS[8]}${TEXTS[9]} end`)
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 5, total_tokens: 5 })
  })

  it("leave an upstream's data written on several lines to the event-by-event path, however it repeats", async () => {
    const head = '{"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":'
    const s =
      `data: ${head}{"role":"assistant","content":""},"finish_reason":null}]}\n\n` +
      `data: ${head}{"content":"Hi"},"finish_reason":null}]\ndata: }\n\n` +
      `data: ${head}{"content":" there"},"finish_reason":null}]\n}\n\n` +
      `data: ${head}{"content":" again"},"finish_reason":null}]\ndata: }\n\n` +
      `data: ${head}{},"finish_reason":"stop"}]}\n\n` +
      "data: [DONE]\n\n"
    const { whole, pieces } = await both(s, 0, "messages")
    expect(whole).toBe(pieces)
    const text = eventsOf(whole)
      .filter((e) => e["type"] === "content_block_delta")
      .map((e) => e["delta"]["text"])
      .join("")
    // " there" came with its closing brace on a line of no field: not a chunk, as the parser reads it.
    expect(text).toBe("Hi again")
  })

  it("give the other pairs the same answer read in place or event by event: Responses of chat and of generate-content, Messages of generate-content", async () => {
    const chatChunk = (delta: Record<string, unknown>) =>
      `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":${JSON.stringify(delta)},"finish_reason":null}]}\n\n`
    const chat =
      chatChunk({ role: "assistant", content: "" }) +
      TEXTS.map((t) => chatChunk({ content: t })).join("") +
      `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":10,"total_tokens":13}}\n\n` +
      "data: [DONE]\n\n"
    const geminiChunk = (text: string, finish?: string) =>
      `data: ${JSON.stringify({
        candidates: [{ content: { parts: [{ text }], role: "model" }, index: 0, ...(finish ? { finishReason: finish } : {}) }],
        usageMetadata: { promptTokenCount: 5, totalTokenCount: 5 },
        modelVersion: "gm"
      })}\r\n\r\n`
    const gemini = TEXTS.map((t) => geminiChunk(t)).join("") + geminiChunk(" end", "STOP")
    // Read in place, each: " café", " \u2028sep", " done." at least (the first text or two teach the template).
    for (const [client, stream, text] of [
      ["responses-chat", chat, TEXTS.join("")],
      ["responses-gemini", gemini, `${TEXTS.join("")} end`],
      ["messages-gemini", gemini, `${TEXTS.join("")} end`]
    ] as const) {
      const { whole, pieces } = await both(stream, 3, client)
      expect(whole, client).toBe(pieces)
      const events = eventsOf(whole)
      const deltas = client.startsWith("responses")
        ? events.filter((e) => e["type"] === "response.output_text.delta").map((e) => e["delta"])
        : events.filter((e) => e["type"] === "content_block_delta").map((e) => e["delta"]["text"])
      expect(deltas.join(""), client).toBe(text)
    }
  })

  it("end a stream cut off after its text read in place as a failed response", async () => {
    // Once only: the failure counts against the connection, whose next request would be refused.
    stream = MESSAGE_START + start(0, { type: "text", text: "" }) + delta(0, "partial") + delta(0, " answer")
    cut = (x) => [x]
    readInPlace = 0
    const res = await responses()
    expect(res.status).toBe(200)
    expect(readInPlace).toBe(1)
    const events = eventsOf(res.text)
    expect(events.filter((e) => e["type"] === "response.output_text.delta").map((e) => e["delta"])).toEqual(["partial", " answer"])
    expect(events.at(-1)!["type"]).toBe("response.failed")
    expect(events.at(-1)!["response"]["error"]["message"]).toMatch(/ended before message_stop/)
  })
})

describe("AnthropicStreamDecoder.textFrameAt", () => {
  /** A decoder that has read a stream's opening and one usual event, event by event. */
  const learned = () => {
    const decoder = new AnthropicStreamDecoder()
    const parser = new SseParser()
    for (const frame of parser.push(MESSAGE_START + start(0, { type: "text", text: "" }) + delta(0, "first"))) decoder.push(frame)
    return decoder
  }

  it("reads the usual event where a frame begins, as push reads it, and nothing else", () => {
    const decoder = learned()
    const frames = delta(0, "abc") + event("ping", { type: "ping" }) + delta(0, 'x"y') + delta(0, "def")
    const first = decoder.textFrameAt(frames, 0, false)
    expect(first).toBe(delta(0, "abc").length)
    expect([decoder.textIndex, decoder.text, decoder.textJson]).toEqual([0, "abc", '"abc"'])
    // Inside a frame, at the ping, at a text with an escape: not the usual event read in place.
    expect(decoder.textFrameAt(frames, 1, false)).toBe(-1)
    expect(decoder.textFrameAt(frames, first, false)).toBe(-1)
    const escaped = first + event("ping", { type: "ping" }).length
    expect(decoder.textFrameAt(frames, escaped, false)).toBe(-1)
    const last = escaped + delta(0, 'x"y').length
    expect(decoder.textFrameAt(frames, last, false)).toBe(frames.length)
    expect(decoder.text).toBe("def")
    // Searched again from an earlier place in the same frames, and in other frames.
    expect(decoder.textFrameAt(frames, 0, false)).toBe(first)
    expect(decoder.textFrameAt(delta(0, "ghi"), 0, false)).toBe(delta(0, "ghi").length)
    expect(decoder.text).toBe("ghi")
  })

  it("answers nothing before the usual event was learned, for another index, or without the blank line", () => {
    const fresh = new AnthropicStreamDecoder()
    expect(fresh.textFrameAt(delta(0, "abc"), 0, false)).toBe(-1)
    const decoder = learned()
    expect(decoder.textFrameAt(delta(1, "abc"), 0, false)).toBe(-1)
    expect(decoder.textFrameAt(delta(0, "abc").slice(0, -1), 0, false)).toBe(-1)
    expect(decoder.textFrameAt(`${delta(0, "abc").slice(0, -1)}x\n`, 0, false)).toBe(-1)
    expect(decoder.textFrameAt(delta(0, "abc").replace("\n", "\r\n"), 0, false)).toBe(-1)
  })

  it("reads a frame whose lines end in \\r\\n only when told so, and one of \\n only when not", () => {
    const decoder = learned()
    const crlf = delta(0, "abc").replaceAll("\n", "\r\n")
    expect(decoder.textFrameAt(crlf, 0, true)).toBe(crlf.length)
    expect(decoder.text).toBe("abc")
    expect(decoder.textFrameAt(crlf, 0, false)).toBe(-1)
    expect(decoder.textFrameAt(delta(0, "abc"), 0, true)).toBe(-1)
    // Mixed within the frame: parsed, not read in place.
    expect(decoder.textFrameAt(delta(0, "abc").replace("\n\n", "\r\n\r\n"), 0, true)).toBe(-1)
  })

  it("answers nothing when the usual event it learned came on several data lines", () => {
    const decoder = new AnthropicStreamDecoder()
    const parser = new SseParser()
    const split = (text: string) =>
      `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\ndata: "delta":{"type":"text_delta","text":${JSON.stringify(text)}}}\n\n`
    for (const frame of parser.push(MESSAGE_START + start(0, { type: "text", text: "" }) + split("first"))) decoder.push(frame)
    expect(decoder.textFrameAt(split("abc"), 0, false)).toBe(-1)
    // Its data as one line is another template, learned by `push` when it comes.
    expect(decoder.textFrameAt(delta(0, "abc"), 0, false)).toBe(-1)
  })

  it("answers nothing once the stream is done", () => {
    const decoder = learned()
    for (const frame of new SseParser().push(ending(1))) decoder.push(frame)
    expect(decoder.textFrameAt(delta(0, "late"), 0, false)).toBe(-1)
  })
})
