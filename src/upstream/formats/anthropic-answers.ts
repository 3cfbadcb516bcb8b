/** anthropic: responses, errors and streams (the requests are in anthropic.ts). */
import {
  type CanonicalError,
  type CanonicalResponse,
  type ContentBlock,
  type ErrorKind,
  errorKindForStatus,
  type ImageBlock,
  newId,
  type StopReason,
  type StreamEvent,
  type TextBlock,
  type Usage,
  wholeUsage
} from "../../domain/canonical.js"
import { arr, idWithSignature, malformedStream, num, obj, splitSignedId, str, tryJson } from "./common.js"
import { fallbackMessage, messageIn200 } from "./common.js"
import { RequestDecodeError, type StreamDecoder, type StreamEncoder } from "./format.js"
import { sseData } from "./frames.js"
import { JsonReader, READER_PAUSE, TextTemplate } from "./json-reader.js"

/** Anthropic requires max_tokens; used when the client did not say. */
export const DEFAULT_MAX_TOKENS = 8192

// ---------------------------------------------------------------- content (requests and responses)

export const decodeImage = (b: Record<string, unknown>): ImageBlock | undefined => {
  const source = obj(b["source"])
  if (str(source?.["type"]) === "base64") {
    return {
      type: "image",
      source: { kind: "base64", mediaType: str(source?.["media_type"]) ?? "image/png", data: str(source?.["data"]) ?? "" }
    }
  }
  if (str(source?.["type"]) === "url") return { type: "image", source: { kind: "url", url: str(source?.["url"]) ?? "" } }
  return undefined
}

export const decodeBlocks = (content: unknown, where: string): Array<ContentBlock> => {
  if (typeof content === "string") return content ? [{ type: "text", text: content }] : []
  if (!Array.isArray(content))
    throw new RequestDecodeError(`${where}.content must be a string or an array of content blocks`, `${where}.content`)
  const out: Array<ContentBlock> = []
  for (const raw of content) {
    const b = obj(raw)
    if (!b) continue
    switch (str(b["type"])) {
      case "text":
        out.push({ type: "text", text: str(b["text"]) ?? "" })
        break
      case "image": {
        const image = decodeImage(b)
        if (image) out.push(image)
        break
      }
      case "tool_use":
      case "server_tool_use": {
        const { id, signature } = splitSignedId(str(b["id"]) ?? newId("toolu_"))
        out.push({ type: "tool_use", id, name: str(b["name"]) ?? "", input: b["input"] ?? {}, ...(signature ? { signature } : {}) })
        break
      }
      case "tool_result": {
        const inner = b["content"]
        const parts =
          typeof inner === "string"
            ? [{ type: "text" as const, text: inner }]
            : arr(inner).flatMap((p): Array<TextBlock | ImageBlock> => {
                const po = obj(p)
                if (str(po?.["type"]) === "text") return [{ type: "text", text: str(po?.["text"]) ?? "" }]
                if (str(po?.["type"]) === "image" && po) {
                  const image = decodeImage(po)
                  return image ? [image] : []
                }
                return []
              })
        out.push({
          type: "tool_result",
          toolUseId: splitSignedId(str(b["tool_use_id"]) ?? "").id,
          content: parts,
          ...(b["is_error"] === true ? { isError: true } : {})
        })
        break
      }
      case "thinking":
        out.push({ type: "reasoning", text: str(b["thinking"]) ?? "", ...(str(b["signature"]) ? { signature: str(b["signature"])! } : {}) })
        break
      case "redacted_thinking":
        out.push({ type: "reasoning", text: "", redacted: str(b["data"]) ?? "" })
        break
      case "document": {
        // Plain-text documents keep their text; other documents have no canonical form yet.
        const source = obj(b["source"])
        if (str(source?.["type"]) === "text") out.push({ type: "text", text: str(source?.["data"]) ?? "" })
        break
      }
    }
  }
  return out
}

// ---------------------------------------------------------------- responses

export const STOP_FROM: Record<string, StopReason> = {
  end_turn: "end_turn",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  tool_use: "tool_use",
  pause_turn: "end_turn",
  refusal: "refusal",
  model_context_window_exceeded: "max_tokens"
}

export const STOP_TO: Record<StopReason, string> = {
  end_turn: "end_turn",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  tool_use: "tool_use",
  content_filter: "refusal",
  refusal: "refusal"
}

export const usageFromAnthropic = (u: unknown): Partial<Usage> | undefined => {
  const usage = obj(u)
  if (!usage) return undefined
  const input = num(usage["input_tokens"])
  const output = num(usage["output_tokens"])
  const read = num(usage["cache_read_input_tokens"])
  const created = num(usage["cache_creation_input_tokens"])
  if (input === undefined && output === undefined) return undefined
  // Anthropic counts cached input apart from input_tokens; canonical input includes it.
  return {
    ...(input !== undefined ? { inputTokens: input + (read ?? 0) + (created ?? 0) } : {}),
    ...(output !== undefined ? { outputTokens: output } : {}),
    ...(read ? { cachedInputTokens: read } : {}),
    ...(created ? { cacheCreationTokens: created } : {})
  }
}

export const usageToAnthropic = (u: Partial<Usage> | undefined) => {
  const cached = u?.cachedInputTokens ?? 0
  const created = u?.cacheCreationTokens ?? 0
  return {
    input_tokens: Math.max(0, (u?.inputTokens ?? 0) - cached - created),
    output_tokens: u?.outputTokens ?? 0,
    cache_creation_input_tokens: created,
    cache_read_input_tokens: cached
  }
}

export const decodeResponse = (raw: unknown): CanonicalResponse => {
  const body = obj(raw) ?? {}
  const content = decodeBlocks(body["content"] ?? [], "content").filter((b) => b.type !== "tool_result")
  const usage = usageFromAnthropic(body["usage"])
  const stopSequence = str(body["stop_sequence"])
  return {
    id: str(body["id"]) ?? newId("msg_"),
    model: str(body["model"]) ?? "",
    created: Math.floor(Date.now() / 1000),
    content,
    stopReason: STOP_FROM[str(body["stop_reason"]) ?? ""] ?? "end_turn",
    ...(stopSequence ? { stopSequence } : {}),
    ...(usage ? { usage: wholeUsage(usage) } : {})
  }
}

export const encodeBlock = (b: ContentBlock): Record<string, unknown> | undefined => {
  switch (b.type) {
    case "text":
      return { type: "text", text: b.text }
    case "tool_use":
      return { type: "tool_use", id: idWithSignature(b.id, b.signature), name: b.name, input: b.input ?? {} }
    case "reasoning":
      return b.redacted
        ? { type: "redacted_thinking", data: b.redacted }
        : { type: "thinking", thinking: b.text, signature: b.encrypted ? "" : (b.signature ?? "") }
    default:
      return undefined
  }
}

export const encodeResponse = (res: CanonicalResponse, ctx: { readonly model: string }) => ({
  id: res.id.startsWith("msg_") ? res.id : `msg_${res.id}`,
  type: "message",
  role: "assistant",
  model: ctx.model,
  content: res.content.flatMap((b) => encodeBlock(b) ?? []),
  stop_reason: STOP_TO[res.stopReason],
  stop_sequence: res.stopSequence ?? null,
  usage: usageToAnthropic(res.usage)
})

// ---------------------------------------------------------------- errors

export const TYPE_BY_KIND: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "not_found_error",
  too_large: "request_too_large",
  rate_limit: "rate_limit_error",
  timeout: "timeout_error",
  overloaded: "overloaded_error",
  upstream: "api_error",
  server: "api_error"
}

export const encodeAnthropicError = (e: CanonicalError) => ({
  type: "error",
  error: { type: TYPE_BY_KIND[e.kind], message: e.message }
})

export const decodeError = (status: number, body: unknown, text: string): CanonicalError => {
  const e = obj(obj(body)?.["error"])
  const message = str(e?.["message"]) ?? fallbackMessage(status, text)
  const type = str(e?.["type"])
  return { status, kind: type === "overloaded_error" ? "overloaded" : errorKindForStatus(status), message, code: type ?? null }
}

/** An Anthropic error object: `{type: "error", error: {...}}` (or an `error` object alone). */
export const isErrorBody = (body: unknown): boolean => {
  const b = obj(body)
  return b !== undefined && (b["type"] === "error" || obj(b["error"]) !== undefined)
}

/** A 200 whose `type` is `error`. */
export const errorIn200 = (body: unknown): CanonicalError | undefined => {
  const b = obj(body)
  return b?.["type"] === "error" ? { status: 502, kind: "upstream", message: messageIn200(b["error"]) } : undefined
}

// ---------------------------------------------------------------- streams

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

/**
 * The JSON of `usageToAnthropic(u)`, written from a template (its four counts, in its key order):
 * a stream's message_start and message_delta carry it.
 */
const anthropicUsageJson = (u: Partial<Usage> | undefined): string => {
  const usage = usageToAnthropic(u)
  return `{"input_tokens":${JSON.stringify(usage.input_tokens)},"output_tokens":${JSON.stringify(usage.output_tokens)},"cache_creation_input_tokens":${JSON.stringify(usage.cache_creation_input_tokens)},"cache_read_input_tokens":${JSON.stringify(usage.cache_read_input_tokens)}}`
}

/** A text block's content_block_start, from a template: the same bytes as sseData of its object. */
const textBlockStart = (index: number): string =>
  `event: content_block_start\ndata: {"type":"content_block_start","index":${index},"content_block":{"type":"text","text":""}}\n\n`

/** content_block_stop, from a template: the same bytes as sseData of { type, index }. */
const blockStop = (index: number): string => `event: content_block_stop\ndata: {"type":"content_block_stop","index":${index}}\n\n`

/** What follows a text delta's JSON text in its event (`AnthropicStreamEncoder.textDelta`). */
const TEXT_DELTA_END = "}}\n\n"

const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n'

/** Canonical events → Anthropic SSE (`event:` lines included: the SDK needs them). */
export class AnthropicStreamEncoder implements StreamEncoder {
  /** The message id: the upstream's (from `start`), or one made when the stream has none (made only then). */
  private givenId: string | undefined
  private get id(): string {
    this.givenId ??= newId("msg_")
    return this.givenId
  }
  private usage: Partial<Usage> = {}
  /** The usage event's object merged last into `usage`. */
  private usageMerged: Partial<Usage> | undefined
  private started = false
  private readonly openBlocks = new Set<number>()
  private readonly blockIndex = new Map<number, number>()

  constructor(private readonly model: string) {}

  /**
   * `message_start`, written from a template: the same bytes as `sseData` of its object
   * ({ type, message: { id, type, role, model, content: [], stop_reason: null, stop_sequence: null, usage } }).
   */
  private start(): string {
    if (this.started) return ""
    this.started = true
    return `event: message_start\ndata: {"type":"message_start","message":{"id":${JSON.stringify(this.id)},"type":"message","role":"assistant","model":${JSON.stringify(this.model)},"content":[],"stop_reason":null,"stop_sequence":null,"usage":${anthropicUsageJson(this.usage)}}}\n\n`
  }

  /** The bytes of a text delta's event before its text, for the block `textHeadIndex` (`textDelta`). */
  private textHead = ""
  private textHeadIndex = -1

  /**
   * A text delta's event around the JSON of its text, the part before made once per block rather
   * than per delta (a string made of fewer pieces): the same bytes as sseData of its object.
   */
  private textDelta(index: number, text: string): string {
    if (index !== this.textHeadIndex) {
      this.textHeadIndex = index
      this.textHead = `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":`
    }
    return this.textHead + JSON.stringify(text) + TEXT_DELTA_END
  }

  private idx(canonical: number): number {
    let i = this.blockIndex.get(canonical)
    if (i === undefined) {
      i = this.blockIndex.size
      this.blockIndex.set(canonical, i)
    }
    return i
  }

  push(ev: StreamEvent): string {
    switch (ev.type) {
      case "start":
        if (ev.id) this.givenId = ev.id.startsWith("msg_") ? ev.id : `msg_${ev.id}`
        return ""
      case "usage":
        // A Gemini upstream repeats one usage object on every chunk: merged again, it changes nothing.
        if (ev.usage !== this.usageMerged) this.usage = { ...this.usage, ...ev.usage }
        this.usageMerged = ev.usage
        return ""
      case "block_start": {
        const index = this.idx(ev.index)
        this.openBlocks.add(index)
        if (ev.block.type === "text") return this.start() + textBlockStart(index)
        const block =
          ev.block.type === "reasoning"
            ? ev.block.redacted !== undefined
              ? { type: "redacted_thinking", data: ev.block.redacted }
              : { type: "thinking", thinking: "", signature: "" }
            : { type: "tool_use", id: idWithSignature(ev.block.id, ev.block.signature), name: ev.block.name, input: {} }
        return this.start() + sseData({ type: "content_block_start", index, content_block: block }, "content_block_start")
      }
      case "text_delta":
        // Written from a template (the same bytes as the object's JSON): the stream's most frequent event.
        return this.start() + this.textDelta(this.idx(ev.index), ev.text)
      case "reasoning_delta":
        return (
          this.start() +
          sseData(
            { type: "content_block_delta", index: this.idx(ev.index), delta: { type: "thinking_delta", thinking: ev.text } },
            "content_block_delta"
          )
        )
      case "signature":
        // An OpenAI encrypted reasoning blob is not an Anthropic signature.
        return ev.encrypted
          ? ""
          : sseData(
              { type: "content_block_delta", index: this.idx(ev.index), delta: { type: "signature_delta", signature: ev.signature } },
              "content_block_delta"
            )
      case "tool_args_delta":
        return ev.partialJson
          ? sseData(
              { type: "content_block_delta", index: this.idx(ev.index), delta: { type: "input_json_delta", partial_json: ev.partialJson } },
              "content_block_delta"
            )
          : ""
      case "block_stop": {
        const index = this.idx(ev.index)
        this.openBlocks.delete(index)
        return blockStop(index)
      }
      case "finish": {
        let out = this.start()
        for (const index of this.openBlocks) out += blockStop(index)
        this.openBlocks.clear()
        // message_delta from a template: the same bytes as sseData of { type, delta: { stop_reason, stop_sequence }, usage }.
        const reason = STOP_TO[ev.stopReason]
        const stopReason = reason === undefined ? "" : `"stop_reason":${JSON.stringify(reason)},`
        return `${out}event: message_delta\ndata: {"type":"message_delta","delta":{${stopReason}"stop_sequence":${JSON.stringify(ev.stopSequence ?? null)}},"usage":${anthropicUsageJson(this.usage)}}\n\n${MESSAGE_STOP}`
      }
      case "error":
        return sseData(encodeAnthropicError(ev.error), "error")
    }
  }

  end(): string {
    return ""
  }
}
