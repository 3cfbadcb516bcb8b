import type { CanonicalError, CanonicalRequest, CanonicalResponse, FormatId, StreamEvent, Usage } from "../../domain/canonical.js"
import type { Frame } from "./frames.js"
import { CRLF_BLANK, LF_BLANK, type TextTemplate } from "./json-reader.js"
import type { ProviderQuirks } from "../../domain/catalog/modelSpec.js"

export type { ProviderQuirks }

import { RequestDecodeError } from "../../kernel/errors.js"

export { RequestDecodeError }

/** A list field of a request body: absent or null is empty; anything but an array is a 400 naming it. */
export const listField = (body: Readonly<Record<string, unknown>>, key: string): ReadonlyArray<unknown> => {
  const v = body[key]
  if (v === undefined || v === null) return []
  if (!Array.isArray(v)) throw new RequestDecodeError(`${key} must be an array`, key)
  return v
}

/**
 * For decoders of formats that stream flat deltas (chat completions, Gemini, Ollama): the
 * canonical blocks are made sequential, one open at a time, numbered in order.
 */
export abstract class SequentialBlocks {
  protected open: { kind: "text" | "reasoning" | "tool"; index: number; toolIndex?: number } | undefined
  protected next = 0

  /** Opens a text or reasoning block unless one of that kind is open (closing another first). */
  protected ensure(kind: "text" | "reasoning", out: Array<StreamEvent>) {
    if (this.open?.kind === kind) return
    this.close(out)
    const index = this.next++
    this.open = { kind, index }
    out.push({ type: "block_start", index, block: { type: kind } })
  }

  protected close(out: Array<StreamEvent>) {
    if (this.open) out.push({ type: "block_stop", index: this.open.index })
    this.open = undefined
  }

  /** The frame `textFrameAt` found last: its text's canonical index, its text and its JSON literal (StreamDecoder). */
  textIndex = 0
  text = ""
  textJson = ""

  /**
   * `textFrameAt` of a decoder whose usual chunk is a data line alone, as `template` learned it:
   * read in place while the decoder is `live` and a text block is open; -1 for an empty text too
   * (`push` answers it with no text event).
   */
  protected textFrameOf(template: TextTemplate, live: boolean, frames: string, from: number, crlf: boolean): number {
    const open = this.open
    if (!live || open?.kind !== "text") return -1
    const end = template.frameAt(frames, from, DATA_HEAD, crlf ? CRLF_BLANK : LF_BLANK)
    if (end === -1 || template.frameText === "") return -1
    this.textIndex = open.index
    this.text = template.frameText
    this.textJson = template.frameJson
    return end
  }
}

/** What comes before the data of a usual chunk's frame (`textFrameOf`): an unnamed event. */
const DATA_HEAD = "data: "

/** Turns upstream stream frames into canonical events, incrementally. */
export interface StreamDecoder {
  push(frame: Frame): ReadonlyArray<StreamEvent>
  /** The upstream ended the stream: close what is open and finish. */
  end(): ReadonlyArray<StreamEvent>
  /**
   * The stream's usual event read in place from a run of whole SSE frames, without a frame or an
   * event made (docs/ARCHITECTURE.md, "Translated text runs"), its lines ending in \r\n when
   * `crlf`, else in \n: where the frame at `from` ends when it is a text delta `push` would
   * answer with exactly `[{ type: "text_delta", index: textIndex, text: text }]` (followed by `{ type: "usage", usage: textUsage }` when the decoder has a
   * `textUsage`: one object, the same for each such frame), its text's JSON literal in `textJson`
   * (what JSON.stringify writes of it); -1 for any other frame, which then goes to `push`.
   */
  textFrameAt?(frames: string, from: number, crlf: boolean): number
  readonly textIndex?: number
  readonly text?: string
  readonly textJson?: string
  readonly textUsage?: Partial<Usage> | undefined
}

/** Turns canonical events into the client's wire frames, incrementally. */
export interface StreamEncoder {
  push(event: StreamEvent): string
  /**
   * `push({ type: "text_delta", index, text })` given the text's JSON literal too (`json`, what
   * JSON.stringify writes of it): the same text for the client; undefined when this encoder cannot
   * take it so now (then `push` has it).
   */
  pushText?(index: number, text: string, json: string): string | undefined
  /** Frames after the last event (`data: [DONE]`), if the format has them. */
  end(): string
  /** The finished answer's id and output items (Responses; kept for `previous_response_id`). */
  result?(): { readonly id: string; readonly output: ReadonlyArray<unknown> }
}

export interface EncodeContext {
  /** The model id as the client asked for it, echoed in answers. */
  readonly model: string
  /** The gateway's request id. */
  readonly requestId: string
  /** Client options that shape the answer (OpenAI `stream_options.include_usage`, ...). */
  readonly options?: Readonly<Record<string, unknown>>
}

/**
 * How one provider's dialect of a wire format differs from the format itself. Declared with the
 * provider (`quirks` of its entry in src/domain/catalog/catalog.ts), read by the format's functions;
 * an absent field is the format's standard behaviour.
 */

/** A provider without quirks. */
export const NO_QUIRKS: ProviderQuirks = {}

/**
 * One wire format: a decoder and an encoder each for requests, responses and stream events,
 * plus its error shapes (answered, and inside a 2xx) and what a same-format body needs before
 * it passes through. Transport (paths, headers, auth) belongs to the executors.
 */
export interface WireFormat {
  readonly id: FormatId
  /** `text/event-stream` or `application/x-ndjson`. */
  readonly streamContentType: string
  readonly framing: "sse" | "ndjson"
  decodeRequest(body: Record<string, unknown>): CanonicalRequest
  /** The upstream's request body; `quirks` are the upstream provider's. */
  encodeRequest(req: CanonicalRequest, quirks?: ProviderQuirks): Record<string, unknown>
  /**
   * A client's body in this format, passed through to an upstream of the same format: the fixes
   * it needs first, given the upstream provider's quirks. `body` itself when nothing changes.
   */
  passthroughBody(body: Record<string, unknown>, quirks: ProviderQuirks): Record<string, unknown>
  /** A passed-through body with reasoning turned off (the no-thinking model alias). */
  withoutThinking(body: Record<string, unknown>): Record<string, unknown>
  /** A same-format body asked as a stream (a non-streamed request whose answer the gateway collects). */
  asStream(body: Record<string, unknown>): Record<string, unknown>
  /**
   * Whether a same-format non-streamed request can be answered from its stream collected
   * (`StreamCollector`) as faithfully as from the whole answer: false when it asks for what the
   * canonical form does not carry (several choices, log probabilities, server-side tools...).
   */
  collectable(body: Record<string, unknown>): boolean
  decodeResponse(body: unknown): CanonicalResponse
  encodeResponse(res: CanonicalResponse, ctx: EncodeContext): unknown
  streamDecoder(): StreamDecoder
  streamEncoder(ctx: EncodeContext): StreamEncoder
  /** The error body this format's clients expect. */
  encodeError(error: CanonicalError): unknown
  /** An upstream's error answer (any status) in canonical terms. */
  decodeError(status: number, body: unknown, text: string): CanonicalError
  /** Whether a parsed body is an error object in this format's own shape (a same-format client gets it as it is). */
  isErrorBody(body: unknown): boolean
  /** A 2xx answer whose body is an error in this format (some upstreams answer so): that error, never an empty success. */
  errorIn200(body: unknown): CanonicalError | undefined
  /**
   * Why a whole 2xx generation answer (not an error: `errorIn200` first) is not one of this
   * format's (JSON without `choices`, `content`, `output`, `candidates`...), or undefined when it
   * is: such a body is a 502 `upstream_malformed`, never an empty success.
   */
  answerProblem(body: unknown): string | undefined
  /**
   * Usage carried by one frame of this format's stream, if any, without decoding the rest:
   * the pass-through path uses it to count tokens of a stream it does not translate.
   */
  usageOf(frame: Frame): Partial<Usage> | undefined
  /** Usage of a whole (non-streamed) answer in this format. */
  usageOfResponse(body: unknown): Partial<Usage> | undefined
}
