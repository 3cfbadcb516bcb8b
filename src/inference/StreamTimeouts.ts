import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { positiveInteger } from "../platform/config/AppConfig.js"

/**
 * How long a silent upstream is waited for, in ms. Every wait that comes before the answer has
 * begun ends in a fallback to the next target, so these bound how long a hung upstream can hold a
 * request (docs/resilience.md, "Upstream timeouts"). A connection may override the headers and
 * silence limits for itself (`timeouts` of a provider connection).
 */
export interface StreamTimeoutsShape {
  /** Until response headers, for a streamed request (a stream should start quickly). */
  readonly streamHeadersMs: number
  /** Until response headers, for a non-streamed request (the whole answer comes at once). */
  readonly headersMs: number
  /** From the headers until the first content of a stream. */
  readonly firstContentMs: number
  /** Longest silence between two chunks of a stream. */
  readonly idleMs: number
  /** Longest silence between two chunks of a non-streamed answer's body, once its headers came. */
  readonly bodyIdleMs: number
}

/**
 * Defaults: a hung upstream is left within tens of seconds. The cost is on non-streamed requests
 * whose upstream sends its headers only with the finished answer (most do): a generation longer
 * than `headersMs` (long outputs, reasoning models) counts as a timeout. Such clients should
 * stream, or the connection (or the process) gets a longer `headersMs`.
 */
export const DEFAULT_STREAM_TIMEOUTS: StreamTimeoutsShape = {
  streamHeadersMs: 30_000,
  headersMs: 60_000,
  firstContentMs: 60_000,
  idleMs: 120_000,
  bodyIdleMs: 30_000
}

/** The environment variable of each setting. */
export const TIMEOUT_ENV: { readonly [K in keyof StreamTimeoutsShape]: string } = {
  streamHeadersMs: "GATEWAY_STREAM_HEADERS_TIMEOUT_MS",
  headersMs: "GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS",
  firstContentMs: "GATEWAY_STREAM_FIRST_CONTENT_TIMEOUT_MS",
  idleMs: "GATEWAY_STREAM_IDLE_TIMEOUT_MS",
  bodyIdleMs: "GATEWAY_UPSTREAM_BODY_IDLE_TIMEOUT_MS"
}

const positiveMs = (name: string, fallback: number) => positiveInteger(name, "milliseconds", fallback)

/** The stream watchdogs (headers, first content, idle gap) and the non-streamed waits, apart so tests can shorten them. */
export class StreamTimeouts extends Context.Tag("gateway/StreamTimeouts")<StreamTimeouts, StreamTimeoutsShape>() {
  /** The defaults, each overridable by its environment variable (TIMEOUT_ENV). */
  static readonly layer = Layer.effect(
    StreamTimeouts,
    Effect.all({
      streamHeadersMs: positiveMs(TIMEOUT_ENV.streamHeadersMs, DEFAULT_STREAM_TIMEOUTS.streamHeadersMs),
      headersMs: positiveMs(TIMEOUT_ENV.headersMs, DEFAULT_STREAM_TIMEOUTS.headersMs),
      firstContentMs: positiveMs(TIMEOUT_ENV.firstContentMs, DEFAULT_STREAM_TIMEOUTS.firstContentMs),
      idleMs: positiveMs(TIMEOUT_ENV.idleMs, DEFAULT_STREAM_TIMEOUTS.idleMs),
      bodyIdleMs: positiveMs(TIMEOUT_ENV.bodyIdleMs, DEFAULT_STREAM_TIMEOUTS.bodyIdleMs)
    })
  )
  static readonly layerTest = (t: Partial<StreamTimeoutsShape>) => Layer.succeed(StreamTimeouts, { ...DEFAULT_STREAM_TIMEOUTS, ...t })
}
