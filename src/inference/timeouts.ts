import * as Context from "effect/Context"
import * as Layer from "effect/Layer"

export interface StreamTimeoutsShape {
  /** Until response headers, for a streamed request (a stream should start quickly). */
  readonly streamHeadersMs: number
  /** Until response headers, for a non-streamed request (the whole answer comes at once). */
  readonly headersMs: number
  /** From the headers until the first content of a stream. */
  readonly firstContentMs: number
  /** Longest silence between two chunks of a stream. */
  readonly idleMs: number
}

export const DEFAULT_STREAM_TIMEOUTS: StreamTimeoutsShape = {
  streamHeadersMs: 120_000,
  headersMs: 600_000,
  firstContentMs: 120_000,
  idleMs: 180_000
}

/** The three stream watchdogs (headers, first content, idle gap), apart so tests can shorten them. */
export class StreamTimeouts extends Context.Tag("gateway/StreamTimeouts")<StreamTimeouts, StreamTimeoutsShape>() {
  static readonly layer = Layer.succeed(StreamTimeouts, DEFAULT_STREAM_TIMEOUTS)
  static readonly layerTest = (t: Partial<StreamTimeoutsShape>) => Layer.succeed(StreamTimeouts, { ...DEFAULT_STREAM_TIMEOUTS, ...t })
}
