/** anthropic: streams decoded, with the fixed-event matching that skips JSON.parse (encoded in anthropic-stream-encoder.ts, whole answers in anthropic-answers.ts, requests in anthropic.ts). */
import { errorKindForStatus, newId, type StopReason, type StreamEvent } from "../../domain/canonical.js"
import { STOP_FROM, usageFromAnthropic } from "./anthropic-answers.js"
import { malformedStream, num, obj, splitSignedId, str, tryJson } from "./common.js"
import type { StreamDecoder } from "./format.js"
import { CRLF_BLANK, JsonReader, LF_BLANK, READER_PAUSE, TextTemplate } from "./json-reader.js"

/** The events of a Messages stream: one of them makes a stream Anthropic's, even if it is then cut. */
const ANTHROPIC_EVENTS: ReadonlySet<string> = new Set([
  "message_start",
  "content_block_start",
  "content_block_delta",
  "content_block_stop",
  "message_delta",
  "message_stop",
  "ping",
  "error"
])

const eventReader = new JsonReader()

/**
 * A `content_block_delta` whose delta is a `text_delta` (the stream's usual event), read without
 * JSON.parse (json-reader.ts): its text, its upstream index in `textDelta.index`; undefined for
 * any other event (it is parsed in full). `named`: the SSE event's name said content_block_delta
 * (the data's `type` is then not read).
 */
const textDelta = (data: string, named: boolean): string | undefined => {
  const r = eventReader.reset(data)
  let index = -1
  let text: string | undefined
  let typed = named
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("type")) {
      if (named) r.skip()
      else if (typed || !r.isString("content_block_delta")) return undefined
      else typed = true
    } else if (r.isKey("index")) {
      if (index !== -1) return undefined
      index = r.number()
      // Another number (fractions, negatives, huge) is left to JSON.parse.
      if (!Number.isSafeInteger(index) || index < 0) return undefined
    } else if (r.isKey("delta")) {
      if (text !== undefined) return undefined
      text = textOfDelta(r)
      if (text === undefined) return undefined
    } else r.skip()
  }
  if (!r.done() || !typed || index === -1) return undefined
  textDelta.index = index
  return text
}
textDelta.index = 0

/** The text of a `{"type": "text_delta", "text": "..."}` delta, or undefined. */
const textOfDelta = (r: JsonReader): string | undefined => {
  let typed = false
  let text: string | undefined
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("type")) {
      if (typed || !r.isString("text_delta")) return undefined
      typed = true
    } else if (r.isKey("text")) {
      if (text !== undefined) return undefined
      text = r.string()
    } else r.skip()
  }
  return typed && !r.failed ? text : undefined
}

/** What comes before the data of the usual event's frame (`textFrameAt`), its lines ending in \n or in \r\n. */
const NAMED_DELTA = "event: content_block_delta\ndata: "
const NAMED_DELTA_CRLF = "event: content_block_delta\r\ndata: "

/** The data of `ping` and `message_stop` as the API writes them (`bareEvent`). */
const PING = '{"type":"ping"}'
const MESSAGE_STOP_DATA = '{"type":"message_stop"}'

/**
 * The data of `content_block_stop` as the API writes it, its index a JSON integer (no leading
 * zero, few enough digits for Number to read it as JSON.parse does).
 */
const BLOCK_STOP = /^\{"type":"content_block_stop","index":(0|[1-9][0-9]{0,14})\}$/

/** The data of a text block's `content_block_start` as the API writes it (its index as in `BLOCK_STOP`). */
const TEXT_BLOCK_START = /^\{"type":"content_block_start","index":(0|[1-9][0-9]{0,14}),"content_block":\{"type":"text","text":""\}\}$/

/**
 * The data of a `message_delta` as the API writes it with a stop reason (a plain word), no stop
 * sequence and the output count alone (integers as in `BLOCK_STOP`).
 */
const PLAIN_MESSAGE_DELTA =
  /^\{"type":"message_delta","delta":\{"stop_reason":"([a-z_]+)","stop_sequence":null\},"usage":\{"output_tokens":(0|[1-9][0-9]{0,14})\}\}$/

/** Anthropic SSE events → canonical events (indices renumbered from 0). */
export class AnthropicStreamDecoder implements StreamDecoder {
  private readonly index = new Map<number, number>()
  private next = 0
  private stop: { reason: StopReason; sequence?: string } | undefined
  private done = false
  private recognized = false

  push(frame: { event?: string; data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    if (frame.event === undefined || frame.event === "content_block_delta") {
      // The stream's usual event, read without JSON.parse (the same events as below).
      const text = this.usualText(frame.data, frame.event !== undefined)
      if (text !== undefined) {
        this.recognized = true
        const index = this.index.get(this.usualIndex)
        return index === undefined ? [] : [{ type: "text_delta", index, text }]
      }
    }
    const bare = this.bareEvent(frame)
    if (bare !== undefined) return bare
    const ev = obj(tryJson(frame.data))
    if (!ev) return []
    const type = frame.event ?? str(ev["type"])
    if (!this.recognized && type !== undefined && ANTHROPIC_EVENTS.has(type)) this.recognized = true
    const out: Array<StreamEvent> = []
    switch (type) {
      case "message_start": {
        const m = obj(ev["message"]) ?? {}
        out.push({ type: "start", id: str(m["id"]) ?? newId("msg_"), model: str(m["model"]) ?? "", created: Math.floor(Date.now() / 1000) })
        const usage = usageFromAnthropic(m["usage"])
        // A message_start without counts (0 in, at most 1 out) reports nothing yet.
        if (usage && ((usage.inputTokens ?? 0) > 0 || (usage.outputTokens ?? 0) > 1)) out.push({ type: "usage", usage })
        break
      }
      case "content_block_start": {
        const b = obj(ev["content_block"]) ?? {}
        const index = this.next++
        this.index.set(num(ev["index"]) ?? 0, index)
        const bt = str(b["type"])
        if (bt === "tool_use" || bt === "server_tool_use") {
          const { id, signature } = splitSignedId(str(b["id"]) ?? newId("toolu_"))
          out.push({
            type: "block_start",
            index,
            block: { type: "tool_use", id, name: str(b["name"]) ?? "", ...(signature ? { signature } : {}) }
          })
          const input = obj(b["input"])
          if (input && Object.keys(input).length > 0) out.push({ type: "tool_args_delta", index, partialJson: JSON.stringify(input) })
        } else if (bt === "thinking") {
          out.push({ type: "block_start", index, block: { type: "reasoning" } })
          if (str(b["thinking"])) out.push({ type: "reasoning_delta", index, text: str(b["thinking"])! })
        } else if (bt === "redacted_thinking") {
          out.push({ type: "block_start", index, block: { type: "reasoning", redacted: str(b["data"]) ?? "" } })
        } else {
          out.push({ type: "block_start", index, block: { type: "text" } })
          if (str(b["text"])) out.push({ type: "text_delta", index, text: str(b["text"])! })
        }
        break
      }
      case "content_block_delta": {
        const index = this.index.get(num(ev["index"]) ?? 0)
        const d = obj(ev["delta"]) ?? {}
        if (index === undefined) break
        switch (str(d["type"])) {
          case "text_delta":
            out.push({ type: "text_delta", index, text: str(d["text"]) ?? "" })
            break
          case "input_json_delta":
            out.push({ type: "tool_args_delta", index, partialJson: str(d["partial_json"]) ?? "" })
            break
          case "thinking_delta":
            out.push({ type: "reasoning_delta", index, text: str(d["thinking"]) ?? "" })
            break
          case "signature_delta":
            out.push({ type: "signature", index, signature: str(d["signature"]) ?? "" })
            break
        }
        break
      }
      case "content_block_stop": {
        const index = this.index.get(num(ev["index"]) ?? 0)
        if (index !== undefined) out.push({ type: "block_stop", index })
        break
      }
      case "message_delta": {
        const d = obj(ev["delta"]) ?? {}
        const reason = str(d["stop_reason"])
        if (reason)
          this.stop = {
            reason: STOP_FROM[reason] ?? "end_turn",
            ...(str(d["stop_sequence"]) ? { sequence: str(d["stop_sequence"])! } : {})
          }
        // output_tokens is cumulative; newer API versions repeat the input counts here too.
        const usage = usageFromAnthropic(ev["usage"])
        if (usage) out.push({ type: "usage", usage })
        break
      }
      case "message_stop":
        this.done = true
        out.push(this.finishEvent())
        break
      case "error": {
        this.done = true
        const e = obj(ev["error"]) ?? {}
        const etype = str(e["type"])
        const status =
          etype === "overloaded_error" ? 529 : etype === "rate_limit_error" ? 429 : etype === "invalid_request_error" ? 400 : 500
        out.push({
          type: "error",
          error: { status, kind: errorKindForStatus(status), message: str(e["message"]) ?? "upstream error", code: etype ?? null }
        })
        break
      }
    }
    return out
  }

  /** The stream's `finish`, at its message_stop. */
  private finishEvent(): StreamEvent {
    return {
      type: "finish",
      stopReason: this.stop?.reason ?? "end_turn",
      ...(this.stop?.sequence ? { stopSequence: this.stop.sequence } : {})
    }
  }

  /**
   * The events of a stream whose data is one of a few fixed shapes, as the API writes them
   * (`ping`, `message_stop`, `content_block_stop`, a text block's `content_block_start`, a
   * `message_delta` with a stop reason and the output count): the same events as `push` makes of
   * them after JSON.parse, made without it (a stream has five such events; JSON.parse of a few
   * bytes costs several times a match). Undefined for any other frame, or one whose name is another
   * event's (it is parsed in full).
   */
  private bareEvent(frame: { event?: string; data: string }): ReadonlyArray<StreamEvent> | undefined {
    const { event, data } = frame
    if (data === PING && (event === undefined || event === "ping")) {
      this.recognized = true
      return []
    }
    if (data === MESSAGE_STOP_DATA && (event === undefined || event === "message_stop")) {
      this.recognized = true
      this.done = true
      return [this.finishEvent()]
    }
    let m: RegExpExecArray | null
    if ((event === undefined || event === "content_block_stop") && (m = BLOCK_STOP.exec(data)) !== null) {
      this.recognized = true
      const index = this.index.get(Number(m[1]))
      return index === undefined ? [] : [{ type: "block_stop", index }]
    }
    if ((event === undefined || event === "content_block_start") && (m = TEXT_BLOCK_START.exec(data)) !== null) {
      this.recognized = true
      const index = this.next++
      this.index.set(Number(m[1]), index)
      return [{ type: "block_start", index, block: { type: "text" } }]
    }
    if ((event === undefined || event === "message_delta") && (m = PLAIN_MESSAGE_DELTA.exec(data)) !== null) {
      this.recognized = true
      this.stop = { reason: STOP_FROM[m[1]!] ?? "end_turn" }
      const usage = usageFromAnthropic({ output_tokens: Number(m[2]) })
      return usage ? [{ type: "usage", usage }] : []
    }
    return undefined
  }

  /**
   * The usual event's bytes around its text (one template for events named content_block_delta,
   * one for events without a name), the upstream index it carries, and how many events go to
   * JSON.parse before the reader tries again.
   */
  private readonly named = new TextTemplate()
  private readonly unnamed = new TextTemplate()
  private namedIndex = 0
  private unnamedIndex = 0
  private usualIndex = 0
  private readerPause = 0

  /** The frame `textFrameAt` found last: its text's canonical index, its text and its JSON literal. */
  textIndex = 0
  text = ""
  textJson = ""

  /**
   * The usual event (a named content_block_delta with a text, as `named` learned it) read in place
   * from a run of frames: where its frame ends, or -1 (StreamDecoder). Only once the stream is
   * recognized and its text block known, as `push` would answer it.
   */
  textFrameAt(frames: string, from: number, crlf: boolean): number {
    if (this.done) return -1
    const end = crlf
      ? this.named.frameAt(frames, from, NAMED_DELTA_CRLF, CRLF_BLANK)
      : this.named.frameAt(frames, from, NAMED_DELTA, LF_BLANK)
    if (end === -1) return -1
    const index = this.index.get(this.namedIndex)
    if (index === undefined) return -1
    this.textIndex = index
    this.text = this.named.frameText
    this.textJson = this.named.frameJson
    return end
  }

  /** The text of a text_delta event (`textDelta`), its upstream index in `usualIndex`; else undefined. */
  private usualText(data: string, named: boolean): string | undefined {
    const known = (named ? this.named : this.unnamed).text(data)
    if (known !== undefined) {
      this.usualIndex = named ? this.namedIndex : this.unnamedIndex
      return known
    }
    if (this.readerPause > 0) {
      this.readerPause--
      return undefined
    }
    const text = textDelta(data, named)
    if (text === undefined) {
      this.readerPause = READER_PAUSE
      return undefined
    }
    this.usualIndex = textDelta.index
    if ((named ? this.named : this.unnamed).learn(data, eventReader)) {
      if (named) this.namedIndex = textDelta.index
      else this.unnamedIndex = textDelta.index
    }
    return text
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    // No event of a Messages stream at all (HTML, another format): not an answer that broke off.
    if (!this.recognized) return [malformedStream("Messages event")]
    // The upstream closed without message_stop: that is a broken stream, not a finished one.
    return [
      {
        type: "error",
        error: { status: 502, kind: "upstream", message: "upstream stream ended before message_stop", code: "stream_interrupted" }
      }
    ]
  }
}
