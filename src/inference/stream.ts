import * as Effect from "effect/Effect"
import type { CanonicalError } from "../domain/canonical.js"
import { type Frame, NdjsonParser, SseParser } from "../upstream/formats/frames.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { committed, endStream, type HttpRequestContext, startStream, streamResponseHeaders, writeStream } from "./io.js"
import type { StreamProgress, StreamWatchdogShape } from "./StreamWatchdog.js"

export {
  makeStreamWatchdog,
  type StreamProgress,
  StreamStalled,
  StreamWatchdog,
  type StreamWatchdogShape,
  type Watched
} from "./StreamWatchdog.js"

/** How one upstream stream is turned into what the client receives, frame by frame. */
export interface FrameRelay {
  /** Text for the client for one upstream frame ("" for nothing). May throw StreamFailure. */
  frame(frame: Frame): string
  /** Text after the upstream ended normally. May throw StreamFailure. */
  end(): string
  /** Text after the upstream broke off or stalled: the client format's error event. */
  broken(error: CanonicalError): string
  /**
   * Where the stretch of whole SSE events of `chunk` from `from` ends that would come out byte
   * for byte as it came in and has nothing in it to look at (usage, an error, reasoning state):
   * those bytes go to the client as they are, unparsed (`from` itself: none). `chunk` is a chunk
   * of whole events, read as bytes (only ASCII is looked at). Only a same-format relay has it.
   */
  quietUpTo?(chunk: Buffer, from: number): number
}

/**
 * Thrown by a FrameRelay when the upstream's stream reports an error (an error event before any
 * content, or a stream that ended without its terminal event): the relay ends with that error
 * instead of a parse failure.
 */
export class StreamFailure extends Error {
  constructor(readonly error: CanonicalError) {
    super(error.message)
  }
}

export interface StreamOutcome {
  readonly ttftMs: number | null
  readonly error: string | null
  /**
   * The stream failed before anything was written to the client (no headers either): nothing is
   * committed, so the caller may answer with an HTTP error or fall back to another target.
   */
  readonly failedBeforeOutput?: CanonicalError
}

/**
 * Events given to a client one by one, their data only (a JSON array's elements, a WebSocket's
 * messages), instead of as SSE or NDJSON lines.
 */
export interface EventFraming {
  /** One event's data as the client gets it ("" for nothing). */
  element(data: string): string
  /** Text after the last event. */
  close(): string
  /** Text that ends a stream that broke off or stalled. */
  broken(error: CanonicalError): string
}

/**
 * Where a relayed stream's text goes: the client's HTTP response (`HttpSink`) or a WebSocket
 * (one message per event, see ResponsesWebSocket.ts).
 */
export interface StreamSink {
  /** Writes text (an HTTP answer's headers go out with the first); false: wait for `onDrain`. */
  write(text: string): boolean
  /** Whether `writeBytes` may be used: no hook or rewrite reads each frame's text. */
  takesBytes?(): boolean
  /** Writes bytes as they are, like `write` (only when `takesBytes()`). */
  writeBytes?(bytes: Buffer): boolean
  /** Ends the answer with `tail` (an HTTP answer's headers first, when nothing was written yet); `error`: it ended with an error event. */
  end(tail: string, error: string | null): void
  /** The client can no longer be written to. */
  gone(): boolean
  /** Something of the answer reached the client: no other target may be tried. */
  committed(): boolean
  /** Calls `f` once when the client takes more again (after `write` answered false). */
  onDrain(f: () => void): void
  offDrain(f: () => void): void
  /**
   * Calls `f` when the client goes away (at once when it already has). Without it the relay is
   * stopped by interrupting its fiber, and its upstream body is destroyed then.
   */
  onGone?(f: () => void): void
  offGone?(f: () => void): void
}

/**
 * A stream relayed to the client's HTTP response. The headers go out with the first text; the
 * response closing (the client left) ends the relay rather than an interruption, so the wait
 * carries no canceler (docs/performance.md).
 */
class HttpSink implements StreamSink {
  constructor(
    private readonly ctx: HttpRequestContext,
    private readonly contentType: string
  ) {}

  private start(): void {
    const { ctx } = this
    if (ctx.progress) ctx.progress.contentStarted = true
    if (ctx.res.headersSent) return
    // Through the lifecycle's writers: they fire onStreamStart, onFrame and onStreamEnd.
    startStream(ctx, streamResponseHeaders(ctx, this.contentType))
  }

  write(text: string): boolean {
    this.start()
    return writeStream(this.ctx, text)
  }

  takesBytes(): boolean {
    const { ctx } = this
    return ctx.rewrite === undefined && (ctx.hooks === undefined || ctx.hooks.onFrame.length === 0)
  }

  writeBytes(bytes: Buffer): boolean {
    this.start()
    return this.ctx.res.write(bytes)
  }

  end(tail: string, error: string | null): void {
    this.start()
    endStream(this.ctx, tail, error)
  }

  gone(): boolean {
    return this.ctx.res.destroyed
  }

  committed(): boolean {
    return committed(this.ctx)
  }

  onDrain(f: () => void): void {
    this.ctx.res.once("drain", f)
  }

  offDrain(f: () => void): void {
    this.ctx.res.off("drain", f)
  }

  onGone(f: () => void): void {
    // It may have left already, between the upstream's headers and this relay. A response closes
    // once: `on` rather than `once`, which wraps `f` for every stream.
    if (this.ctx.res.closed) f()
    else this.ctx.res.on("close", f)
  }

  offGone(f: () => void): void {
    this.ctx.res.off("close", f)
  }
}

const BLANK_LINE = Buffer.from("\n\n")

/**
 * Whether `out`, what a relay made of the event `chunk` holds from `start` to `end`, is that
 * event's bytes: the same characters as the bytes read as latin1, all ASCII (whose UTF-8 is one
 * byte each, the chunk's own).
 */
const asItCame = (out: string, chunk: Buffer, start: number, end: number): boolean => {
  if (out.length !== end - start) return false
  const event = chunk.toString("latin1", start, end)
  return out === event && Buffer.byteLength(event) === event.length
}

/** `relayStream` without an effect (the common path): `done` once. */
export const relayStreamNow = (
  ctx: HttpRequestContext,
  res: UpstreamResponse,
  framing: "sse" | "ndjson",
  relay: FrameRelay,
  contentType: string,
  watchdog: StreamWatchdogShape,
  silenceMs: number | undefined,
  done: (ended: RelayEnd) => void
): void => {
  relayFramesNow(res, framing, relay, new HttpSink(ctx, contentType), watchdog, ctx.startedAt, silenceMs, ctx.tap?.chunk, done)
}

/**
 * Relays an upstream stream to the client's HTTP response: see `relayFrames`. The client leaving
 * (its response closing) destroys the upstream body, which aborts the upstream request.
 */
export const relayStream = (
  ctx: HttpRequestContext,
  res: UpstreamResponse,
  framing: "sse" | "ndjson",
  relay: FrameRelay,
  contentType: string,
  watchdog: StreamWatchdogShape,
  silenceMs?: number
): Effect.Effect<StreamOutcome> =>
  relayFrames(res, framing, relay, new HttpSink(ctx, contentType), watchdog, ctx.startedAt, silenceMs, ctx.tap?.chunk)

/**
 * Relays an upstream stream to a sink frame by frame, with backpressure; nothing is committed until
 * something was written, so a stream that fails first can still fall back (docs/resilience.md).
 */
export const relayFrames = (
  res: UpstreamResponse,
  framing: "sse" | "ndjson",
  relay: FrameRelay,
  sink: StreamSink,
  watchdog: StreamWatchdogShape,
  startedAt: number,
  silenceMs?: number,
  onChunk?: (chunk: Buffer) => void
): Effect.Effect<StreamOutcome> =>
  Effect.async<StreamOutcome>((resume) => {
    const stop = relayFramesNow(res, framing, relay, sink, watchdog, startedAt, silenceMs, onChunk, (ended) =>
      resume(ended._tag === "ended" ? Effect.succeed(ended.outcome) : ended._tag === "gone" ? Effect.interrupt : Effect.die(ended.defect))
    )
    // A sink without its own event: the relay ends when its fiber is interrupted.
    return sink.onGone ? undefined : Effect.sync(stop)
  })

/** How a relay without an effect ended (`relayFramesNow`). */
export type RelayEnd =
  | { readonly _tag: "ended"; readonly outcome: StreamOutcome }
  /** The client went away (the sink's `onGone`): the upstream body was destroyed. */
  | { readonly _tag: "gone" }
  /** The relay's own code threw while ending a stalled stream. */
  | { readonly _tag: "defect"; readonly defect: unknown }

/**
 * `relayFrames` without an effect (the common request path, docs/ARCHITECTURE.md): `done` is
 * called once. Answers the function that stops the relay (for a sink without `onGone`).
 */
export const relayFramesNow = (
  res: UpstreamResponse,
  framing: "sse" | "ndjson",
  relay: FrameRelay,
  sink: StreamSink,
  watchdog: StreamWatchdogShape,
  startedAt: number,
  silenceMs: number | undefined,
  onChunk: ((chunk: Buffer) => void) | undefined,
  done: (ended: RelayEnd) => void
): (() => void) => {
  const parser = framing === "sse" ? new SseParser() : new NdjsonParser()
  const state: StreamProgress = {
    headersAt: Date.now(),
    lastChunkAt: Date.now(),
    firstContentAt: 0,
    ...(silenceMs !== undefined ? { silenceMs } : {})
  }
  let ttftMs: number | null = null

  /** The first content is going out now: time to first token, and the watchdog's first content. */
  const contentGoes = () => {
    if (ttftMs === null) ttftMs = Date.now() - startedAt
    if (!state.firstContentAt) state.firstContentAt = Date.now()
  }
  const write = (text: string) => {
    if (!text || sink.gone()) return true
    contentGoes()
    return sink.write(text)
  }
  // Same-format SSE: stretches of whole events with nothing to look at pass as they came
  // (`quietUpTo`); the events around them go through the parser one by one.
  const sse = framing === "sse" ? (parser as SseParser) : undefined
  let passes: boolean | undefined
  /**
   * What one chunk of whole events comes to for the client (undefined: it is not one, parse it).
   * An event the relay gave back as it came (`asItCame`: the first, which opens the answer, and
   * the usage one, nearly always) goes on as its bytes too: a chunk changed nowhere is written as
   * it is, without a copy.
   */
  const passing = (chunk: Buffer): Buffer | string | undefined => {
    const n = chunk.length
    if (n < 2 || chunk[n - 1] !== 0x0a || chunk[n - 2] !== 0x0a || !sse!.idle()) return undefined
    const parts: Array<Buffer> = []
    // What the events the relay changed came to, not yet in `parts`.
    let out = ""
    // The chunk's bytes from `same` on go out as they came, up to the event looked at.
    let same = 0
    for (let pos = 0; pos < n; ) {
      const upTo = relay.quietUpTo!(chunk, pos)
      if (upTo > pos) {
        pos = upTo
        continue
      }
      const end = chunk.indexOf(BLANK_LINE, pos) + 2
      let event = ""
      for (const frame of sse!.push(chunk.subarray(pos, end))) event += relay.frame(frame)
      if (!asItCame(event, chunk, pos, end)) {
        if (pos > same) {
          if (out !== "") parts.push(Buffer.from(out))
          out = ""
          parts.push(chunk.subarray(same, pos))
        }
        out += event
        same = end
      }
      pos = end
    }
    if (same === 0) return chunk
    if (parts.length === 0 && same === n) return out
    if (out !== "") parts.push(Buffer.from(out))
    if (same < n) parts.push(chunk.subarray(same, n))
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts)
  }
  /** Writes what `passing` made of a chunk; answers whether the client takes more. */
  const writeOut = (out: Buffer | string): boolean => {
    if (typeof out === "string") return write(out)
    if (out.length === 0 || sink.gone()) return true
    contentGoes()
    return sink.writeBytes!(out)
  }
  const ended = (outcome: StreamOutcome) => done({ _tag: "ended", outcome })

  const body = res.body
  let finished = false
  // A stall before anything was written leaves the request free to go elsewhere; after, the
  // client gets its format's error event.
  const unwatch = watchdog.watch({
    state,
    stalled: (e) => {
      if (finished) return
      finished = true
      sink.offDrain(onDrain)
      sink.offGone?.(onGone)
      body.destroy()
      const error: CanonicalError = { status: 504, kind: "timeout", message: e.message, code: "upstream_stalled" }
      if (!sink.committed()) return ended({ ttftMs, error: e.message, failedBeforeOutput: error })
      try {
        if (!sink.gone()) sink.end(relay.broken(error), e.message)
        ended({ ttftMs, error: e.message })
      } catch (thrown) {
        done({ _tag: "defect", defect: thrown })
      }
    }
  })
  const onDrain = () => {
    state.paused = false
    state.lastChunkAt = Date.now()
    body.resume()
  }
  const finish = (error: CanonicalError | undefined, endText?: string) => {
    if (finished) return
    finished = true
    unwatch()
    sink.offDrain(onDrain)
    sink.offGone?.(onGone)
    if (error && !sink.committed()) return ended({ ttftMs, error: error.message, failedBeforeOutput: error })
    const tail = error ? relay.broken(error) : (endText ?? relay.end())
    if (!sink.gone()) sink.end(tail, error?.message ?? null)
    ended({ ttftMs, error: error?.message ?? null })
  }
  body.on("data", (chunk: Buffer) => {
    state.lastChunkAt = Date.now()
    if (onChunk !== undefined) onChunk(chunk)
    if (passes === undefined) passes = sse !== undefined && relay.quietUpTo !== undefined && sink.takesBytes?.() === true
    let text: string | Buffer = ""
    try {
      const out = passes ? passing(chunk) : undefined
      if (out !== undefined) text = out
      else {
        let t = ""
        for (const frame of parser.push(chunk)) t += relay.frame(frame)
        text = t
      }
    } catch (e) {
      body.destroy()
      return finish(
        e instanceof StreamFailure
          ? e.error
          : {
              status: 502,
              kind: "upstream",
              message: `upstream stream could not be parsed: ${(e as Error).message}`,
              code: "stream_interrupted"
            }
      )
    }
    if (!writeOut(text)) {
      // Backpressure: wait for the client; the idle watchdog does not count this time.
      state.paused = true
      body.pause()
      sink.onDrain(onDrain)
    }
  })
  // `on`, not `once`, for the end and an error: each comes once, and the handlers ignore anything
  // after the relay finished (no wrapper made per stream).
  body.on("end", () => {
    if (finished) return
    let text = ""
    try {
      // An idle SSE parser (nothing held: the last chunk ended on a blank line) has nothing left to give.
      if (sse === undefined || !sse.idle()) for (const frame of parser.end()) text += relay.frame(frame)
      text += relay.end()
    } catch (e) {
      return finish(
        e instanceof StreamFailure
          ? e.error
          : {
              status: 502,
              kind: "upstream",
              message: `upstream stream could not be parsed: ${(e as Error).message}`,
              code: "stream_interrupted"
            }
      )
    }
    write(text)
    finish(undefined, "")
  })
  body.on("error", (err: Error) =>
    finish({ status: 502, kind: "upstream", message: `upstream stream ended unexpectedly: ${err.message}`, code: "stream_interrupted" })
  )
  // The client went away: the upstream body is destroyed, which aborts the upstream request.
  // Tied to the sink's own event (an HTTP response's close) rather than to interruption: no
  // interruptible region per stream.
  function onGone() {
    if (finished) return
    finished = true
    unwatch()
    sink.offDrain(onDrain)
    body.destroy()
    done({ _tag: "gone" })
  }
  if (sink.onGone) sink.onGone(onGone)
  return () => {
    if (finished) return
    finished = true
    unwatch()
    sink.offDrain(onDrain)
    body.destroy()
  }
}
