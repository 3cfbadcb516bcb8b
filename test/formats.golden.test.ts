import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import type { CanonicalResponse, FormatId, StreamEvent } from "../src/domain/canonical.js"
import { splitSignedId } from "../src/upstream/formats/common.js"
import { NdjsonParser, SseParser } from "../src/upstream/formats/frames.js"
import { FORMATS } from "../src/upstream/formats/registry.js"
import { StreamCollector } from "../src/upstream/formats/collect.js"

/**
 * Golden corpus: recorded upstream streams (test/fixtures/streams/<format>.<case>.sse|ndjson),
 * one per bug class, with the expected outcome next to them. Each is decoded in 7-byte pieces
 * (so events, lines and UTF-8 characters are split across chunks), then re-encoded into every
 * client format and decoded back: what a format can carry must survive the round trip.
 */
const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "streams")

interface Summary {
  text: string
  reasoning: string
  signature?: string
  encrypted?: string
  tools: Array<{ id?: string; name: string; input: unknown; signature?: string }>
  stop?: string
  usage?: Record<string, number>
  error?: string
}

const decode = (format: FormatId, raw: Buffer, piece = 7): Array<StreamEvent> => {
  const parser = FORMATS[format].framing === "sse" ? new SseParser() : new NdjsonParser()
  const decoder = FORMATS[format].streamDecoder()
  const events: Array<StreamEvent> = []
  for (let i = 0; i < raw.length; i += piece) for (const f of parser.push(raw.subarray(i, i + piece))) events.push(...decoder.push(f))
  for (const f of parser.end()) events.push(...decoder.push(f))
  events.push(...decoder.end())
  return events
}

const summarize = (events: ReadonlyArray<StreamEvent>): Summary => {
  const s: Summary = { text: "", reasoning: "", tools: [] }
  const tools = new Map<number, { id: string; name: string; args: string; signature?: string }>()
  const usage: Record<string, number> = {}
  for (const ev of events) {
    if (ev.type === "text_delta") s.text += ev.text
    else if (ev.type === "reasoning_delta") s.reasoning += ev.text
    else if (ev.type === "signature") ev.encrypted ? (s.encrypted = ev.signature) : (s.signature = ev.signature)
    else if (ev.type === "block_start" && ev.block.type === "tool_use") {
      const { id, signature } = splitSignedId(ev.block.id)
      tools.set(ev.index, {
        id,
        name: ev.block.name,
        args: "",
        ...((ev.block.signature ?? signature) ? { signature: ev.block.signature ?? signature } : {})
      })
    } else if (ev.type === "tool_args_delta") tools.get(ev.index)!.args += ev.partialJson
    else if (ev.type === "usage") Object.assign(usage, ev.usage)
    else if (ev.type === "finish") s.stop = ev.stopReason
    else if (ev.type === "error") s.error = ev.error.message
  }
  s.tools = [...tools.values()].map((t) => ({
    id: t.id,
    name: t.name,
    input: JSON.parse(t.args || "{}"),
    ...(t.signature ? { signature: t.signature } : {})
  }))
  if (Object.keys(usage).length) s.usage = usage
  return s
}

/** What each client format can carry back; the rest is lost by design (docs/formats.md). */
const CARRIES: Record<
  FormatId,
  {
    signature: boolean
    encrypted: boolean
    toolSignature: boolean
    cached: boolean
    reasoningTokens: boolean
    toolIds: boolean
    stops: ReadonlyArray<string>
  }
> = {
  "openai-chat": {
    signature: false,
    encrypted: false,
    toolSignature: true,
    cached: true,
    reasoningTokens: true,
    toolIds: true,
    stops: ["end_turn", "tool_use", "max_tokens", "content_filter"]
  },
  "openai-responses": {
    signature: false,
    encrypted: true,
    toolSignature: true,
    cached: true,
    reasoningTokens: true,
    toolIds: true,
    stops: ["end_turn", "tool_use", "max_tokens", "content_filter"]
  },
  anthropic: {
    signature: true,
    encrypted: false,
    toolSignature: true,
    cached: true,
    reasoningTokens: false,
    toolIds: true,
    stops: ["end_turn", "tool_use", "max_tokens"]
  },
  gemini: {
    signature: true,
    encrypted: false,
    toolSignature: true,
    cached: true,
    reasoningTokens: true,
    toolIds: true,
    stops: ["end_turn", "tool_use", "max_tokens", "content_filter"]
  },
  ollama: {
    signature: false,
    encrypted: false,
    toolSignature: false,
    cached: false,
    reasoningTokens: false,
    toolIds: true,
    stops: ["end_turn", "tool_use", "max_tokens"]
  }
}

const expectedAfter = (original: Summary, client: FormatId): Summary => {
  const c = CARRIES[client]
  const out: Summary = { ...original, tools: original.tools.map((t) => ({ ...t })) }
  if (!c.signature || original.signature === undefined) delete out.signature
  if (!c.encrypted) delete out.encrypted
  if (!c.toolSignature) for (const t of out.tools) delete t.signature
  if (out.usage) {
    out.usage = { ...out.usage }
    if (!c.cached) delete out.usage["cachedInputTokens"]
    if (!c.reasoningTokens) delete out.usage["reasoningTokens"]
    delete out.usage["cacheCreationTokens"]
  }
  if (out.stop && !c.stops.includes(out.stop)) out.stop = client === "anthropic" && out.stop === "content_filter" ? "refusal" : "end_turn"
  if (out.error) {
    delete out.stop
    // Error events carry no usage; only Anthropic's message_start has already sent it.
    if (client !== "anthropic") delete out.usage
  }
  return out
}

const comparable = (s: Summary) => ({ ...s, tools: s.tools.map(({ id: _id, ...t }) => t) })

const fixtures = fs.readdirSync(DIR).filter((f) => f.endsWith(".sse") || f.endsWith(".ndjson"))

describe("golden stream corpus", () => {
  it("has a fixture per format", () => {
    const formats = new Set(fixtures.map((f) => f.split(".")[0]))
    expect([...formats].sort()).toEqual(["anthropic", "gemini", "ollama", "openai-chat", "openai-responses"])
  })

  for (const file of fixtures) {
    const format = file.split(".")[0] as FormatId
    const raw = fs.readFileSync(path.join(DIR, file))
    const expected = JSON.parse(fs.readFileSync(path.join(DIR, file.replace(/\.(sse|ndjson)$/, ".expected.json")), "utf8")) as Summary

    it(`${file}: decodes to the expected outcome, whatever the chunk boundaries`, () => {
      for (const piece of [1, 7, 4096]) {
        const got = summarize(decode(format, raw, piece))
        const want = { ...expected, tools: expected.tools.map((t) => ({ ...t })) }
        // Tool ids are compared only where the fixture pins them (others are generated).
        got.tools = got.tools.map((t, i) => (want.tools[i]?.id ? t : (({ id: _id, ...rest }) => rest)(t)))
        expect(got, `chunks of ${piece} bytes`).toEqual(want)
      }
    })

    for (const client of Object.keys(FORMATS) as Array<FormatId>) {
      it(`${file}: survives re-encoding as ${client} and decoding back`, () => {
        const events = decode(format, raw)
        const encoder = FORMATS[client].streamEncoder({
          model: "m",
          requestId: "req_test",
          options: { stream_options: { include_usage: true } }
        })
        const wire = Buffer.from(
          events.map((e) => encoder.push(e)).join("") + (events.some((e) => e.type === "error") ? "" : encoder.end())
        )
        const back = summarize(decode(client, wire))
        expect(comparable(back)).toEqual(comparable(expectedAfter(summarize(events), client)))
        if (CARRIES[client].toolIds && client !== "ollama")
          expect(back.tools.map((t) => t.id)).toEqual(summarize(events).tools.map((t) => t.id))
      })
    }

    // A non-streamed request is answered from its upstream's stream collected (docs/formats.md,
    // "Non-streamed answers from streams"): the whole answer must say what the stream said.
    it(`${file}: collected into a whole answer, it says what the stream said, in every client format`, () => {
      const collector = new StreamCollector()
      collector.push(decode(format, raw))
      if (expected.error) {
        // A stream that reports an error is that error, not a partial success.
        expect(collector.error()?.message).toBe(expected.error)
        return
      }
      const whole = collector.result("resp_fallback")
      expect(comparable(summarizeResponse(whole))).toEqual(comparable(expected))
      for (const client of Object.keys(FORMATS) as Array<FormatId>) {
        const encoded = FORMATS[client].encodeResponse(whole, { model: "m", requestId: "req_test" })
        const back = summarizeResponse(FORMATS[client].decodeResponse(JSON.parse(JSON.stringify(encoded))))
        expect(comparable(back), client).toEqual(comparable(expectedAfter(expected, client)))
      }
    })
  }
})

/** A whole answer summarized as a stream is (`summarize`). */
const summarizeResponse = (r: CanonicalResponse): Summary => {
  const s: Summary = { text: "", reasoning: "", tools: [] }
  for (const b of r.content) {
    if (b.type === "text") s.text += b.text
    else if (b.type === "reasoning") {
      s.reasoning += b.text
      if (b.signature) s.signature = b.signature
      if (b.encrypted) s.encrypted = b.encrypted
    } else if (b.type === "tool_use") {
      const { id, signature } = splitSignedId(b.id)
      s.tools.push({ id, name: b.name, input: b.input, ...((b.signature ?? signature) ? { signature: b.signature ?? signature } : {}) })
    }
  }
  s.stop = r.stopReason
  if (r.usage) s.usage = Object.fromEntries(Object.entries(r.usage).filter(([, v]) => v !== undefined)) as Record<string, number>
  return s
}
