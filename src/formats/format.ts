import type { CanonicalError, CanonicalRequest, CanonicalResponse, FormatId, StreamEvent, Usage } from "./canonical.js"
import type { Frame } from "./frames.js"

/** A client request that cannot be understood: answered 400 in the client's format. */
export class RequestDecodeError extends Error {
  constructor(
    message: string,
    readonly param: string | null = null
  ) {
    super(message)
  }
}

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
}

/** Turns upstream stream frames into canonical events, incrementally. */
export interface StreamDecoder {
  push(frame: Frame): ReadonlyArray<StreamEvent>
  /** The upstream ended the stream: close what is open and finish. */
  end(): ReadonlyArray<StreamEvent>
}

/** Turns canonical events into the client's wire frames, incrementally. */
export interface StreamEncoder {
  push(event: StreamEvent): string
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
 * One wire format: a decoder and an encoder each for requests, responses and stream events,
 * plus its error shape. Transport (paths, headers, auth) belongs to the executors.
 */
export interface WireFormat {
  readonly id: FormatId
  /** `text/event-stream` or `application/x-ndjson`. */
  readonly streamContentType: string
  readonly framing: "sse" | "ndjson"
  decodeRequest(body: Record<string, unknown>): CanonicalRequest
  encodeRequest(req: CanonicalRequest): Record<string, unknown>
  decodeResponse(body: unknown): CanonicalResponse
  encodeResponse(res: CanonicalResponse, ctx: EncodeContext): unknown
  streamDecoder(): StreamDecoder
  streamEncoder(ctx: EncodeContext): StreamEncoder
  /** The error body this format's clients expect. */
  encodeError(error: CanonicalError): unknown
  /** An upstream's error answer (any status) in canonical terms. */
  decodeError(status: number, body: unknown, text: string): CanonicalError
  /**
   * Usage carried by one frame of this format's stream, if any, without decoding the rest:
   * the pass-through path uses it to count tokens of a stream it does not translate.
   */
  usageOf(frame: Frame): Partial<Usage> | undefined
  /** Usage of a whole (non-streamed) answer in this format. */
  usageOfResponse(body: unknown): Partial<Usage> | undefined
}
