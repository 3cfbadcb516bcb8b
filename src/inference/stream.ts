import * as Effect from "effect/Effect"
import type { CanonicalError } from "../domain/canonical.js"
import { type Frame, NdjsonParser, SseParser } from "../upstream/formats/frames.js"
import { type BodyReader, takeBody, type UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { committed, endStream, type HttpRequestContext, startStream, streamResponseHeaders, writeStream } from "./io.js"
import type { StreamProgress, StreamStalled, StreamWatchdogShape, Watched } from "./StreamWatchdog.js"

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
  /**
   * Where the run of the upstream's usual text events from `from` of `frames` (whole SSE events,
   * decoded; their lines ending in \r\n when `crlf`, else in \n) ends, their text for the client
   * in `out.text`: what `frame` would answer for each, read in place (`from` itself: none). Only a
   * translating relay has it.
   */
  textRun?(frames: string, from: number, crlf: boolean, out: { text: string }): number
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
  /**
   * Whether what was written before has not all been taken yet (a write answered false and the
   * client has not drained since). With it, a relay writes the chunk in hand before it waits
   * (`RelayRun.onData`); without it, a relay waits as soon as a write answers false.
   */
  behind?(): boolean
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

  behind(): boolean {
    return this.ctx.res.writableNeedDrain
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
 * event's bytes: the same characters as the bytes, all ASCII (whose UTF-8 is one byte each, the
 * chunk's own). Compared in place: the event is not decoded into a string of its own first.
 */
const asItCame = (out: string, chunk: Buffer, start: number, end: number): boolean => {
  if (out.length !== end - start) return false
  for (let i = 0; i < out.length; i++) {
    const c = out.charCodeAt(i)
    if (c > 0x7f || c !== chunk[start + i]) return false
  }
  return true
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
    const run = new RelayRun(res, framing, relay, sink, watchdog, startedAt, silenceMs, onChunk, (ended) =>
      resume(ended._tag === "ended" ? Effect.succeed(ended.outcome) : ended._tag === "gone" ? Effect.interrupt : Effect.die(ended.defect))
    )
    // A sink without its own event: the relay ends when its fiber is interrupted.
    return sink.onGone ? undefined : Effect.sync(() => run.stop())
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
 * called once.
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
): void => {
  new RelayRun(res, framing, relay, sink, watchdog, startedAt, silenceMs, onChunk, done)
}

/**
 * How many events in a row a chunk sends through the parser one at a time, between its runs of
 * usual text events (`RelayRun.translating`), before it gives the parser the rest at once: a
 * stream's opening (start, block start, a ping, the first text that teaches the template) and
 * then some.
 */
const MISSES_BEFORE_REST = 8

/** A relay's stream that could not be parsed, as the error it ends with. */
const unparsable = (e: unknown): CanonicalError =>
  e instanceof StreamFailure
    ? e.error
    : {
        status: 502,
        kind: "upstream",
        message: `upstream stream could not be parsed: ${(e as Error).message}`,
        code: "stream_interrupted"
      }

/**
 * One upstream stream being relayed to a sink (`relayFramesNow`). It is its own progress for the
 * watchdog and its own `Watched` entry, and its steps are its methods: one object per stream
 * rather than a closure for each step and an object for the progress and the watchdog's entry.
 * Only what the body and the sink call back (their listeners) are functions of their own.
 */
class RelayRun implements StreamProgress, Watched, BodyReader {
  readonly headersAt: number
  lastChunkAt: number
  firstContentAt = 0
  paused = false
  readonly state: StreamProgress = this
  private ttftMs: number | null = null
  private finished = false
  /** Whether chunks of whole events may pass as bytes (`passing`); decided on the first chunk. */
  private passes: boolean | undefined
  private readonly parser: SseParser | NdjsonParser
  /** Same-format SSE: stretches of whole events with nothing to look at pass as they came. */
  private readonly sse: SseParser | undefined
  private readonly body: UpstreamResponse["body"]
  private readonly unwatch: () => void
  /** Made the first time the client stops taking more (backpressure), which most streams never see. */
  private drained: (() => void) | undefined

  constructor(
    res: UpstreamResponse,
    framing: "sse" | "ndjson",
    private readonly relay: FrameRelay,
    private readonly sink: StreamSink,
    watchdog: StreamWatchdogShape,
    private readonly startedAt: number,
    readonly silenceMs: number | undefined,
    private readonly onChunk: ((chunk: Buffer) => void) | undefined,
    private readonly done: (ended: RelayEnd) => void
  ) {
    this.sse = framing === "sse" ? new SseParser() : undefined
    this.parser = this.sse ?? new NdjsonParser()
    this.headersAt = Date.now()
    this.lastChunkAt = this.headersAt
    const body = (this.body = res.body)
    // A stall before anything was written leaves the request free to go elsewhere; after, the
    // client gets its format's error event (`stalled`).
    this.unwatch = watchdog.watch(this)
    // The upstream's chunks straight from the HTTP client (`chunk`, `end`, `error`), each relayed
    // in the turn its bytes came; a body that cannot be taken so is read as a stream: `on`, not
    // `once`, for the end and an error (each comes once, and the handlers ignore anything after
    // the relay finished: no wrapper made per stream).
    if (!takeBody(body, this)) {
      body.on("data", this.onData)
      body.on("end", this.onEnd)
      body.on("error", this.onError)
    }
    // The client going away destroys the upstream body, which aborts the upstream request. Tied to
    // the sink's own event (an HTTP response's close) rather than to interruption: no
    // interruptible region per stream.
    if (sink.onGone) sink.onGone(this.onGone)
  }

  private readonly onData = (chunk: Buffer): void => {
    this.lastChunkAt = Date.now()
    if (this.onChunk !== undefined) this.onChunk(chunk)
    if (this.passes === undefined)
      this.passes = this.sse !== undefined && this.relay.quietUpTo !== undefined && this.sink.takesBytes?.() === true
    let text: string | Buffer = ""
    try {
      const out = this.passes ? this.passing(chunk) : this.relay.textRun !== undefined ? this.translating(chunk) : undefined
      if (out !== undefined) text = out
      else {
        let t = ""
        for (const frame of this.parser.push(chunk)) t += this.relay.frame(frame)
        text = t
      }
    } catch (e) {
      this.body.destroy()
      return this.finish(unparsable(e))
    }
    // The relay waits for the client once a write answers false while it was already behind: the
    // chunk that fills the client's buffer goes on without a wait, so the rest of the upstream's
    // read is taken in the same turn. A burst read whole (its chunks and its end) then goes out
    // with its last chunk and the answer's terminator in one write, not the terminator alone a
    // drain later; the client's buffer may hold one chunk more than when the relay waited at once.
    const behind = this.sink.behind?.() ?? true
    if (!this.writeOut(text) && behind) {
      // Backpressure: wait for the client; the idle watchdog does not count this time.
      this.paused = true
      this.body.pause()
      this.sink.onDrain((this.drained ??= () => this.onDrain()))
    }
  }

  /** A chunk from the HTTP client (`takeBody`): false while the client is not taking more. */
  chunk(chunk: Buffer): boolean {
    this.onData(chunk)
    return !this.paused && !this.finished
  }

  end(): void {
    this.onEnd()
  }

  error(err: Error): void {
    this.onError(err)
  }

  private readonly onEnd = (): void => {
    if (this.finished) return
    let text = ""
    try {
      // An idle SSE parser (nothing held: the last chunk ended on a blank line) has nothing left to give.
      if (this.sse === undefined || !this.sse.idle()) for (const frame of this.parser.end()) text += this.relay.frame(frame)
      text += this.relay.end()
    } catch (e) {
      return this.finish(unparsable(e))
    }
    this.write(text)
    this.finish(undefined, "")
  }

  private readonly onError = (err: Error): void =>
    this.finish({
      status: 502,
      kind: "upstream",
      message: `upstream stream ended unexpectedly: ${err.message}`,
      code: "stream_interrupted"
    })

  /** The client went away: the upstream body is destroyed, which aborts the upstream request. */
  private readonly onGone = (): void => {
    if (this.finished) return
    this.finished = true
    this.unwatch()
    this.offDrain()
    this.body.destroy()
    this.done({ _tag: "gone" })
  }

  private onDrain(): void {
    this.paused = false
    this.lastChunkAt = Date.now()
    this.body.resume()
  }

  private offDrain(): void {
    if (this.drained !== undefined) this.sink.offDrain(this.drained)
  }

  /** The watchdog's verdict: the stream stalled (it is no longer watched). */
  stalled(e: StreamStalled): void {
    if (this.finished) return
    this.finished = true
    const { sink } = this
    this.offDrain()
    sink.offGone?.(this.onGone)
    this.body.destroy()
    const error: CanonicalError = { status: 504, kind: "timeout", message: e.message, code: "upstream_stalled" }
    if (!sink.committed()) return this.ended({ ttftMs: this.ttftMs, error: e.message, failedBeforeOutput: error })
    try {
      if (!sink.gone()) sink.end(this.relay.broken(error), e.message)
      this.ended({ ttftMs: this.ttftMs, error: e.message })
    } catch (thrown) {
      this.done({ _tag: "defect", defect: thrown })
    }
  }

  /** Stops the relay (for a sink without `onGone`: its fiber was interrupted). */
  stop(): void {
    if (this.finished) return
    this.finished = true
    this.unwatch()
    this.offDrain()
    this.body.destroy()
  }

  private ended(outcome: StreamOutcome): void {
    this.done({ _tag: "ended", outcome })
  }

  private finish(error: CanonicalError | undefined, endText?: string): void {
    if (this.finished) return
    this.finished = true
    const { sink, relay } = this
    this.unwatch()
    this.offDrain()
    sink.offGone?.(this.onGone)
    if (error && !sink.committed()) return this.ended({ ttftMs: this.ttftMs, error: error.message, failedBeforeOutput: error })
    const tail = error ? relay.broken(error) : (endText ?? relay.end())
    if (!sink.gone()) sink.end(tail, error?.message ?? null)
    this.ended({ ttftMs: this.ttftMs, error: error?.message ?? null })
  }

  /** The first content is going out now: time to first token, and the watchdog's first content. */
  private contentGoes(): void {
    if (this.ttftMs === null) this.ttftMs = Date.now() - this.startedAt
    if (!this.firstContentAt) this.firstContentAt = Date.now()
  }

  private write(text: string): boolean {
    if (!text || this.sink.gone()) return true
    this.contentGoes()
    return this.sink.write(text)
  }

  /** Writes what `passing` made of a chunk; answers whether the client takes more. */
  private writeOut(out: Buffer | string): boolean {
    if (typeof out === "string") return this.write(out)
    if (out.length === 0 || this.sink.gone()) return true
    this.contentGoes()
    return this.sink.writeBytes!(out)
  }

  /**
   * What one chunk of whole SSE events comes to for a translating relay (undefined: it is not one,
   * parse it): the runs of usual text events `textRun` reads in place, the events between them
   * through the parser one by one (docs/ARCHITECTURE.md, "Translated text runs").
   */
  private translating(chunk: Buffer): string | undefined {
    const sse = this.sse
    const n = chunk.length
    if (sse === undefined || n < 2 || chunk[n - 1] !== 0x0a || !sse.idle()) return undefined
    // Events end at a blank line: \n\n, or \r\n\r\n where lines end in \r\n (Gemini's). A chunk
    // ending in either ends at an event's end; its text runs are read for that line end (events
    // written with the other are parsed), and the events between them end at the next such blank
    // line (a slice of the chunk up to one ends where an event does, whatever lines it holds).
    const crlf = chunk[n - 2] === 0x0d
    if (crlf ? n < 4 || chunk[n - 3] !== 0x0a || chunk[n - 4] !== 0x0d : chunk[n - 2] !== 0x0a) return undefined
    const blankLine = crlf ? "\r\n\r\n" : "\n\n"
    // Ends with a newline, so no character is cut: decoded as the parser would decode it.
    const frames = chunk.toString()
    const relay = this.relay
    const run = (this.run ??= { text: "" })
    let out = ""
    // Events in a row that were not the usual one: past MISSES_BEFORE_REST, the rest of the chunk
    // goes to the parser in one push (a stream whose usual event is never read in place, such as
    // one whose every chunk differs, pays for the slices of a few events, not of all of them).
    let misses = 0
    for (let pos = 0; pos < frames.length; ) {
      const upTo = relay.textRun!(frames, pos, crlf, run)
      if (upTo > pos) {
        out += run.text
        pos = upTo
        misses = 0
        continue
      }
      if (++misses > MISSES_BEFORE_REST) {
        for (const frame of sse.push(pos === 0 ? frames : frames.slice(pos))) out += relay.frame(frame)
        break
      }
      // The event's blank line; none left after a last, extra line end (a blank line of its own).
      const blank = frames.indexOf(blankLine, pos)
      const end = blank === -1 ? frames.length : blank + blankLine.length
      for (const frame of sse.push(frames.slice(pos, end))) out += relay.frame(frame)
      pos = end
    }
    return out
  }

  /** What `textRun` read, reused chunk after chunk. */
  private run: { text: string } | undefined

  /**
   * What one chunk of whole events comes to for the client (undefined: it is not one, parse it).
   * The stretches `quietUpTo` passes go as they came; the events around them go through the
   * parser one by one. An event the relay gave back as it came (`asItCame`: the first, which opens
   * the answer, and the usage one, nearly always) goes on as its bytes too: a chunk changed
   * nowhere is written as it is, without a copy.
   */
  private passing(chunk: Buffer): Buffer | string | undefined {
    const sse = this.sse!
    const relay = this.relay
    const n = chunk.length
    if (n < 2 || chunk[n - 1] !== 0x0a || chunk[n - 2] !== 0x0a || !sse.idle()) return undefined
    // The pieces the chunk comes to, once an event in it was changed (made then: most chunks have none).
    let parts: Array<Buffer> | undefined
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
      for (const frame of sse.push(chunk.subarray(pos, end))) event += relay.frame(frame)
      if (!asItCame(event, chunk, pos, end)) {
        if (pos > same) {
          parts ??= []
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
    if (parts === undefined && same === n) return out
    parts ??= []
    if (out !== "") parts.push(Buffer.from(out))
    if (same < n) parts.push(chunk.subarray(same, n))
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts)
  }
}
