/**
 * How one upstream stream becomes what the client receives, frame by frame: passed through (the
 * upstream speaks the client's format) or decoded into canonical events and encoded again.
 * Nothing goes to the client until the upstream has begun its answer, so an error or a stall
 * before that is not committed and the request can still go to another target.
 */
import { type CanonicalError, mergeUsage, type StreamEvent, type Usage } from "../domain/canonical.js"
import { obj, str, tryJson } from "../upstream/formats/common.js"
import type { StreamEncoder, WireFormat } from "../upstream/formats/format.js"
import type { Frame } from "../upstream/formats/frames.js"
import { JsonArrayFraming } from "../upstream/formats/gemini.js"
import { scrubSecrets } from "../kernel/redact.js"
import type { Connection } from "../upstream/providers/Connections.js"
import { ResponsesStreamEncoder } from "../upstream/formats/openai-responses.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { type AttemptFailed, type AttemptOutcome, attemptFailed, clientFacing, failureOfStream, headerValue } from "../kernel/attempts.js"
import type { InferenceCall } from "./call.js"
import { clientError } from "../kernel/errors.js"
import type { Origin } from "./ResponseStore.js"
import { secretsOf } from "./sending.js"
import { type EventFraming, type FrameRelay, StreamFailure, type StreamOutcome, type StreamSink } from "./stream.js"
import { StreamCollector } from "../upstream/formats/collect.js"
import { sealAnswer, sealEvents, sealFrameData } from "../upstream/formats/signatures.js"
import { requestedSchema, schemaEvent } from "../upstream/formats/structured.js"
import { checkAnswer, readyEngines } from "../kernel/schemaCheck.js"

/** Events that mean the upstream has begun its answer (anything but the stream's preamble). */
const CONTENT_EVENTS: ReadonlySet<StreamEvent["type"]> = new Set(["text_delta", "reasoning_delta", "tool_args_delta", "finish"])

export interface StreamRelay {
  readonly relay: FrameRelay
  /** Usage the stream reported so far. */
  readonly usage: () => Partial<Usage> | undefined
  /** The error the upstream reported in-stream, if any. */
  readonly failed: () => string | null
  /** The stream ended: a translated Responses answer is remembered (pass-through ones as they pass). */
  readonly completed: () => void
}

/**
 * What a same-format relay parses a frame for, per format: usage, an error, reasoning state to seal (signatures.ts, MARKERS).
 * Searched with indexOf, not a regular expression (docs/performance.md, "The common request (2026-11-26)").
 */
const LOOK_AT: Readonly<Record<string, ReadonlyArray<string>>> = {
  "openai-chat": ['"usage"', '"error"', "event: error"],
  anthropic: ['"usage"', '"error"', "event: error", '"signature"', '"redacted_thinking"'],
  gemini: ["usageMetadata", '"error"', "event: error", '"thoughtSignature"']
}
const LOOK_AT_ANY: ReadonlyArray<string> = [
  '"usage"',
  "usageMetadata",
  '"done"',
  '"error"',
  "event: error",
  '"signature"',
  '"redacted_thinking"',
  "encrypted_content",
  "thoughtSignature"
]

/**
 * A marker as `markerAt` searches for it: its bytes, and the piece of it searched for first, which
 * starts `at` in it. The piece is at most six characters (memchr finds those by their first
 * character, longer ones go by Boyer-Moore-Horspool on their last), from the marker's first
 * character that is neither a quote nor an `e`, the commonest two of a chunk of JSON events.
 * Searched for whole, `"usage"` stopped at every quote of the bench's 16 KB burst (8 µs a chunk;
 * `usage`, 1.5 µs).
 */
interface MarkerBytes {
  readonly bytes: Buffer
  readonly piece: Buffer
  readonly at: number
}
const markerBytes = new Map<string, MarkerBytes>()
const bytesOf = (marker: string): MarkerBytes => {
  let m = markerBytes.get(marker)
  if (m === undefined) {
    let at = 0
    while (at < marker.length - 1 && (marker[at] === '"' || marker[at] === "e")) at++
    m = { bytes: Buffer.from(marker, "latin1"), piece: Buffer.from(marker.slice(at, at + 6), "latin1"), at }
    markerBytes.set(marker, m)
  }
  return m
}

/** Whether `chunk` holds `bytes` at `at`. */
const holdsAt = (chunk: Buffer, bytes: Buffer, at: number): boolean => {
  if (at + bytes.length > chunk.length) return false
  for (let i = 0; i < bytes.length; i++) if (chunk[at + i] !== bytes[i]) return false
  return true
}

/** Where `marker` first occurs in `chunk` from `from`, if before `before` (-1: not before it). */
const markerAt = (chunk: Buffer, marker: string, from: number, before: number): number => {
  const { bytes, piece, at } = bytesOf(marker)
  for (let i = chunk.indexOf(piece, from + at); i !== -1 && i - at < before; i = chunk.indexOf(piece, i + 1))
    if (holdsAt(chunk, bytes, i - at)) return i - at
  return -1
}

const DATA_FIELD = Buffer.from("data: ")
const EVENT_FIELD = Buffer.from("event: ")
const BLANK_LINE = Buffer.from("\n\n")

/**
 * The end of the stretch of whole SSE events of `chunk` from `from` (an event's start) that comes
 * out of a same-format relay as it went in, with nothing to look at: up to the start of the first
 * event holding a marker, a `\r` or a line that is not `data: `, `event: ` or blank (a comment, an
 * `id:`, a field without its space: the parsed path re-writes those). Read as bytes, not decoded
 * into a string first (a chunk's copy: 16 KB a stream of the bench's burst); a string is read as
 * latin1 (one byte a character, the same offsets).
 */
export const quietUpTo = (chunk: Buffer | string, from: number, markers: ReadonlyArray<string>): number => {
  const bytes = typeof chunk === "string" ? Buffer.from(chunk, "latin1") : chunk
  if (!(holdsAt(bytes, DATA_FIELD, from) || holdsAt(bytes, EVENT_FIELD, from))) return from
  const n = bytes.length
  let stop = n
  for (const m of markers) {
    const i = markerAt(bytes, m, from, stop)
    if (i !== -1) stop = i
  }
  const cr = bytes.indexOf(13, from)
  if (cr !== -1 && cr < stop) stop = cr
  for (let nl = bytes.indexOf(10, from); nl !== -1 && nl < stop; ) {
    const next = nl + 1
    if (next === n) break
    // A blank line (an event's end): its newline is the next one, no search for it.
    if (bytes[next] === 10) {
      nl = next
      continue
    }
    if (!holdsAt(bytes, DATA_FIELD, next) && !holdsAt(bytes, EVENT_FIELD, next)) {
      stop = nl
      break
    }
    nl = bytes.indexOf(10, next)
  }
  if (stop === n) return stop
  // Nothing before `from` to end at (and lastIndexOf would read -1 from the end).
  if (stop === from) return from
  const boundary = bytes.lastIndexOf(BLANK_LINE, stop - 1)
  return boundary < from ? from : boundary + 2
}

/** Whether a frame may carry an error: an `error` event, or an `"error"` key with a value (Responses frames carry `"error":null`). */
export const mayBeError = (frame: Frame): boolean =>
  frame.event === "error" || (frame.data.includes('"error"') && /"error"\s*(?::\s*[{"]|[,}])/.test(frame.data))

/** A stream read as one JSON array: each event's data an element, an error the last one. */
const jsonArrayEvents = (client: WireFormat): EventFraming => {
  const array = new JsonArrayFraming()
  return {
    element: (data) => array.element(data),
    close: () => array.close(),
    broken: (e) => array.element(JSON.stringify(client.encodeError(e))) + array.close()
  }
}

/**
 * `connection`: whose credentials an error the upstream reports in its stream is
 * scrubbed of them (and of anything key-shaped) before it goes on; other frames are not looked at.
 */
export const makeRelay = (
  call: InferenceCall,
  upstream: WireFormat,
  client: WireFormat,
  passthrough: boolean,
  origin: Origin,
  connection: Connection
): StreamRelay => {
  const { ctx } = call
  // Read only when an error is seen.
  const scrub = (text: string) => scrubSecrets(text, secretsOf(connection))
  const scrubError = (e: CanonicalError): CanonicalError => ({ ...e, message: scrub(e.message) })
  let usageSoFar: Partial<Usage> | undefined
  // Nothing goes to the client until the upstream has begun its answer: an error event or a
  // stall before that is not committed, so the request can still go to another target.
  let open = false
  let held = ""
  const gate = (events: ReadonlyArray<StreamEvent>): void => {
    if (open) return
    for (const ev of events) {
      if (ev.type === "error") throw new StreamFailure(scrubError(ev.error))
      if (CONTENT_EVENTS.has(ev.type)) {
        open = true
        return
      }
    }
  }
  const release = (text: string): string => {
    if (!open) {
      held += text
      return ""
    }
    const out = held + text
    held = ""
    return out
  }

  let relay: FrameRelay
  let failed: string | null = null
  let encoder: StreamEncoder | undefined
  // A streamed answer held to a schema is checked at its end, the verdict its last event
  // (docs/structured-outputs.md); the validator was loaded before the attempt.
  const schema = call.stream ? requestedSchema(client.id, call.body) : undefined
  const engines = schema ? readyEngines() : undefined
  let answerText = ""
  let verdictSent = engines === undefined
  const verdict = (framed: boolean): string => {
    if (verdictSent || failed || engines === undefined || schema === undefined) return ""
    verdictSent = true
    const v = checkAnswer(engines, schema, answerText)
    return v ? (schemaEvent(client.id, { status: v.valid ? "valid" : "invalid", errors: v.errors }, call.model, framed) ?? "") : ""
  }
  if (passthrough) {
    const dropUsageChunk = upstream.id === "openai-chat" && obj(call.body["stream_options"])?.["include_usage"] !== true
    const completed = upstream.id === "openai-responses" && call.onCompleted
    // Decodes only the stream's first frames, to see whether it begins with an answer or an error.
    const preview = upstream.streamDecoder()
    // A Responses stream that breaks is reported as response.failed of the same response.
    const relayed = { id: undefined as string | undefined, seq: -1 }
    // A client taking each event's data alone: a JSON array's elements (Gemini without alt=sse), a WebSocket's messages.
    const elements = call.eventFraming?.() ?? (call.jsonArrayStream ? jsonArrayEvents(client) : undefined)
    const whole = engines !== undefined ? upstream.streamDecoder() : undefined
    /** The verdict in this stream's framing ("" when there is none to send). */
    const verdictOut = (): string => {
      if (elements === undefined) return verdict(true)
      const data = verdict(false)
      return data === "" ? "" : elements.element(data)
    }
    relay = {
      frame: (input: Frame) => {
        // Reasoning state goes to the client sealed with its issuer (docs/reasoning-state.md).
        const sealed = sealFrameData(upstream.id, input.data, connection.id)
        const frame = sealed === input.data ? input : { ...input, data: sealed }
        const began = open
        if (!open) gate(preview.push(frame))
        const u = upstream.usageOf(frame)
        if (u) usageSoFar = mergeUsage(usageSoFar, u)
        if (dropUsageChunk && u && /"choices"\s*:\s*\[\s*\]/.test(frame.data)) return ""
        if (upstream.id === "openai-responses") {
          const seq = /"sequence_number"\s*:\s*(\d+)/.exec(frame.data)
          if (seq) relayed.seq = Math.max(relayed.seq, Number(seq[1]))
          if (relayed.id === undefined && frame.data.includes('"response.created"'))
            relayed.id = str(obj(obj(tryJson(frame.data))?.["response"])?.["id"])
        }
        if (completed && frame.data.includes('"response.completed"')) {
          const r = obj(obj(tryJson(frame.data))?.["response"])
          if (r && typeof r["id"] === "string") call.onCompleted!({ id: r["id"], output: (r["output"] as Array<unknown>) ?? [], origin })
        }
        let before = ""
        if (whole !== undefined) {
          for (const ev of whole.push(frame)) if (ev.type === "text_delta") answerText += ev.text
          // A chat stream's verdict goes before its [DONE], where its clients stop reading.
          if (client.id === "openai-chat" && frame.data === "[DONE]") before = verdictOut()
        }
        let data = frame.data
        if (began && mayBeError(frame)) {
          // An error after the answer began: passed on scrubbed, and kept for the usage row.
          data = scrub(frame.data)
          for (const ev of preview.push(frame)) if (ev.type === "error") failed ??= scrub(ev.error.message)
        }
        return release(
          before +
            (elements
              ? elements.element(data)
              : upstream.framing === "sse"
                ? (frame.event ? `event: ${frame.event}\n` : "") + `data: ${data}\n\n`
                : `${data}\n`)
        )
      },
      end: () => {
        if (!open) gate(preview.end())
        open = true
        if (whole !== undefined) for (const ev of whole.end()) if (ev.type === "text_delta") answerText += ev.text
        return release(verdictOut() + (elements ? elements.close() : ""))
      },
      // Once the answer has begun (and nothing is held back), a quiet chunk's frames would each be
      // written back as they came: its bytes go on unparsed. Not for Responses (its sequence
      // numbers are followed) nor a stream checked against a schema or re-framed.
      ...(upstream.framing === "sse" && upstream.id !== "openai-responses" && whole === undefined && elements === undefined
        ? {
            quietUpTo: (chunk: Buffer, from: number) =>
              open && held === "" ? quietUpTo(chunk, from, LOOK_AT[upstream.id] ?? LOOK_AT_ANY) : from
          }
        : {}),
      broken: (e) =>
        elements
          ? elements.broken(e)
          : (upstream.id === "openai-responses" && relayed.id !== undefined
              ? ResponsesStreamEncoder.continuing(call.model, relayed.id, relayed.seq)
              : client.streamEncoder({ model: call.model, requestId: ctx.requestId })
            ).push({ type: "error", error: e })
    }
  } else {
    const decoder = upstream.streamDecoder()
    const enc =
      call.streamEncoder?.() ??
      client.streamEncoder({ model: call.model, requestId: ctx.requestId, ...(call.encodeOptions ? { options: call.encodeOptions } : {}) })
    encoder = enc
    // The usage object merged last: a Gemini upstream repeats one on every chunk (its template's,
    // json-reader.ts), and merging it again changes nothing.
    let usageMerged: Partial<Usage> | undefined
    const handle = (events: ReadonlyArray<StreamEvent>): string => {
      gate(events)
      let out = ""
      for (const ev of events) {
        if (ev.type === "usage") {
          if (ev.usage !== usageMerged) usageSoFar = mergeUsage(usageSoFar, ev.usage)
          usageMerged = ev.usage
        } else if (ev.type === "text_delta" && engines !== undefined) answerText += ev.text
        if (ev.type === "error") {
          const error = scrubError(ev.error)
          failed = error.message
          out += enc.push({ type: "error", error })
        } else out += enc.push(ev)
      }
      return release(out)
    }
    /**
     * The upstream's usual text events read in place (`textRun`), once the answer is open and
     * nothing is held back, and no check needs the answer's text: what `handle` makes of each
     * (a text delta is not sealed and opens nothing; the usage a usual event carries, when it has
     * one, is the object merged last, which `handle` and the encoder merge only when it is
     * another), without the frame or events.
     */
    const textRun =
      decoder.textFrameAt !== undefined && enc.pushText !== undefined && engines === undefined
        ? (frames: string, from: number, crlf: boolean, out: { text: string }): number => {
            if (!open || held !== "") return from
            let text = ""
            let at = from
            for (;;) {
              const end = decoder.textFrameAt!(frames, at, crlf)
              if (end === -1 || (decoder.textUsage !== undefined && decoder.textUsage !== usageMerged)) break
              const piece = enc.pushText!(decoder.textIndex!, decoder.text!, decoder.textJson!)
              if (piece === undefined) break
              text += piece
              at = end
            }
            out.text = text
            return at
          }
        : undefined
    relay = {
      ...(textRun ? { textRun } : {}),
      frame: (frame) => handle(sealEvents(decoder.push(frame), connection.id)),
      end: () => {
        const text = handle(sealEvents(decoder.end(), connection.id))
        open = true
        return release(text) + (failed ? "" : (call.jsonArrayStream ? "" : verdict(true)) + enc.end())
      },
      broken: (e) => {
        failed = e.message
        return enc.push({ type: "error", error: e })
      }
    }
  }
  return {
    relay,
    usage: () => usageSoFar,
    failed: () => failed,
    completed: () => {
      if (!passthrough && call.onCompleted && !failed && encoder?.result) call.onCompleted(encoder.result())
    }
  }
}

/**
 * What a relayed stream tells the guarded attempt: the attempt's outcome (an error after the
 * answer began is the candidate's failure, told in-stream), or, when it failed before anything
 * reached the client, an `AttemptFailed` (another candidate may answer). A plain value: the
 * caller fails with it.
 */
export const streamEnded = (
  result: StreamOutcome,
  relayed: StreamRelay,
  res: UpstreamResponse,
  client: WireFormat
): AttemptOutcome | AttemptFailed => {
  if (result.failedBeforeOutput) {
    const e = result.failedBeforeOutput
    return attemptFailed(clientError(client, clientFacing(e)), failureOfStream(e))
  }
  relayed.completed()
  const error = result.error ?? relayed.failed()
  return {
    status: 200,
    usage: relayed.usage(),
    ttftMs: result.ttftMs,
    error,
    headers: outcomeHeaders(res.headers),
    ...(error
      ? {
          streamFailure: failureOfStream({
            status: 502,
            kind: "upstream",
            message: error,
            ...(/stalled|no content within/.test(error) ? { code: "upstream_stalled" } : {})
          })
        }
      : {})
  }
}

/**
 * The upstream's headers as an outcome carries them (`headerValue`: lower-cased names, one string
 * each). undici's parsed headers already are that unless a header came twice: then they are the
 * outcome's as they are, not copied (nothing changes either object).
 */
export const outcomeHeaders = (headers: UpstreamResponse["headers"]): Readonly<Record<string, string>> => {
  for (const name in headers)
    if (typeof headers[name] !== "string" || !Object.hasOwn(headers, name) || name === "__proto__" || !lowerAscii(name))
      return headerValue(headers)
  return headers as Readonly<Record<string, string>>
}

/** Whether `name` is ASCII without capitals (what `toLowerCase` leaves as it is), read without making the lower-cased copy. */
const lowerAscii = (name: string): boolean => {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i)
    if (c > 127 || (c >= 65 && c <= 90)) return false
  }
  return true
}

/** A sink that keeps nothing and never commits: a collected stream's answer is written whole afterwards. */
export const DISCARD: StreamSink = {
  write: () => true,
  end: () => undefined,
  gone: () => false,
  committed: () => false,
  onDrain: () => undefined,
  offDrain: () => undefined
}

export interface CollectedStream {
  readonly relay: FrameRelay
  readonly collector: StreamCollector
  /**
   * A Responses stream's terminal `response` object (`response.completed` or
   * `response.incomplete`): the Responses API's non-streamed answer itself.
   */
  readonly terminal: () => Record<string, unknown> | undefined
}

const TERMINAL_RESPONSE = /"type"\s*:\s*"response\.(completed|incomplete)"/

/**
 * An upstream stream decoded into a `StreamCollector` instead of relayed (a non-streamed request
 * asked of the upstream as a stream, docs/formats.md). Nothing goes to the client, so any error
 * the stream reports, before or after content, fails the attempt (`StreamFailure`): another
 * target may still answer. Each frame once content began answers one character, which the
 * relay's first-content watchdog counts (the sink discards it).
 */
export const collectStream = (upstream: WireFormat, connection: Connection): CollectedStream => {
  const decoder = upstream.streamDecoder()
  const collector = new StreamCollector()
  let terminal: Record<string, unknown> | undefined
  const take = (events: ReadonlyArray<StreamEvent>): string => {
    collector.push(sealEvents(events, connection.id))
    const error = collector.error()
    if (error) throw new StreamFailure({ ...error, message: scrubSecrets(error.message, secretsOf(connection)) })
    return collector.began ? " " : ""
  }
  return {
    collector,
    terminal: () => terminal,
    relay: {
      frame: (frame) => {
        if (upstream.id === "openai-responses" && TERMINAL_RESPONSE.test(frame.data)) {
          const response = obj(obj(tryJson(frame.data))?.["response"])
          if (response) sealAnswer(upstream.id, response, connection.id)
          terminal = response ?? terminal
        }
        return take(decoder.push(frame))
      },
      end: () => take(decoder.end()),
      broken: () => ""
    }
  }
}
