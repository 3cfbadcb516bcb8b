/**
 * The two dispatch handlers that read an upstream's answer for `UpstreamHttp` (`WholeAnswer`, and
 * `StreamedAnswer` with its body `StreamedBody`), and what they share (`AnswerCall`): undici's
 * dispatch handler interface used directly, with no request handler of undici's, no abort emitter
 * and one timer until the headers.
 */
import type { Readable } from "node:stream"
import { Readable as NodeReadable } from "node:stream"
import type { Dispatcher } from "undici"
import { errors as undiciErrors, util as undiciUtil } from "./undici.js"
import { bodyFailure, ERROR_BODY_MAX_BYTES, tooLarge, type UpstreamBody } from "./upstreamBody.js"
import { classify, UpstreamTransportError } from "./transportErrors.js"
import type { UpstreamOutcome, UpstreamResponse } from "./UpstreamHttp.js"

/**
 * The `body` of an answer read whole: its bytes are in `bytes` (or its failure in `bodyError`),
 * so there is nothing left to read. One ended, destroyed stream shared by every such answer.
 */
const READ_WHOLE: UpstreamBody = (() => {
  const body = new NodeReadable({ read: () => undefined })
  body.push(null)
  body.on("error", () => undefined)
  body.destroy()
  return body as unknown as UpstreamBody
})()

const NO_CHUNKS: ReadonlyArray<Buffer> = []

const headersTimedOut = () => new UpstreamTransportError({ kind: "timeout", message: "no response headers from upstream in time" })

const GONE: UpstreamOutcome = { _tag: "gone" }

const ignore = () => undefined

/**
 * What both handlers do before the headers: the timer until they come, the caller watched
 * (`unwatch`), the call's abort kept from `onConnect`, and settling once (`done` told at most once).
 */
abstract class AnswerCall implements Dispatcher.DispatchHandler {
  abortCall: ((reason: Error) => void) | undefined
  protected settled = false
  /** The headers' timer; undefined once they came or the call ended. */
  private timer: NodeJS.Timeout | undefined
  unwatch: (() => void) | undefined

  constructor(protected readonly done: (outcome: UpstreamOutcome) => void) {}

  /** The headers did not come within `ms`: answered at once (undici acts on an abort only once it has a connection). */
  startTimer(ms: number): void {
    if (Number.isFinite(ms)) this.timer = setTimeout(() => this.timedOut(), Math.max(0, ms))
  }

  /**
   * The timer's verdict waits for the loop's next read of its sockets (`setImmediate` runs after
   * it): timers run before sockets are read, so after the process was held up past the deadline the
   * headers may be waiting unread. It holds only if they are still missing then.
   */
  private timedOut(): void {
    setImmediate(() => {
      if (!this.settled && this.timer !== undefined) this.abortWith({ _tag: "failed", error: headersTimedOut() })
    })
  }

  get ended(): boolean {
    return this.settled
  }

  protected stopTimer(): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }

  protected settle(): void {
    this.settled = true
    this.stopTimer()
    this.unwatch?.()
  }

  /** Settles, aborts the call and tells `done` the outcome (when there is one to tell). */
  protected abortWith(outcome: UpstreamOutcome | undefined): void {
    this.settle()
    this.abortCall?.(new undiciErrors.RequestAbortedError())
    if (outcome !== undefined) this.done(outcome)
  }

  onConnect(abort: (reason?: Error) => void): void {
    if (this.settled) abort(new undiciErrors.RequestAbortedError())
    else this.abortCall = abort
  }
}

/**
 * A whole answer, read by undici's dispatch handler interface directly: no body stream, no
 * abort emitter, no listeners; the chunks are kept as they come and joined once. The limits and
 * outcomes are `collect`'s: past the size limit the call is aborted (the connection dropped) and
 * the answer is cut (an error answer) or a `too_large` failure (a successful one); a body that
 * breaks or goes silent after the headers is the answer's `bodyError`.
 */
export class WholeAnswer extends AnswerCall {
  private status = 0
  private headers: UpstreamResponse["headers"] | undefined
  /** The body's first chunk; `more` only once a second one comes (a short answer is one chunk: no array, no copy). */
  private first: Buffer | undefined
  private more: Array<Buffer> | undefined
  private size = 0
  private limit = 0
  private ok = false

  constructor(
    private readonly maxOk: number,
    private readonly bodyTimeout: number | undefined,
    done: (outcome: UpstreamOutcome) => void
  ) {
    super(done)
  }

  /** The caller went away: the call is aborted and `done` hears `gone`, unless it has ended. */
  cancel(): void {
    if (!this.settled) this.abortWith(GONE)
  }

  onHeaders(statusCode: number, rawHeaders: Array<Buffer>): boolean {
    if (statusCode < 200 || this.settled) return true
    this.stopTimer()
    this.status = statusCode
    this.headers = undiciUtil.parseHeaders(rawHeaders) as UpstreamResponse["headers"]
    this.ok = statusCode < 300
    this.limit = this.ok ? this.maxOk : ERROR_BODY_MAX_BYTES
    return true
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return false
    const room = this.limit - this.size
    if (chunk.length <= room) {
      this.keep(chunk)
      this.size += chunk.length
      return true
    }
    this.abortWith(undefined)
    if (this.ok) this.failed(tooLarge(this.limit))
    else {
      this.keep(chunk.subarray(0, room))
      this.read(this.limit)
    }
    return false
  }

  onComplete(): void {
    if (this.settled) return
    this.settle()
    this.read(this.size)
  }

  onError(err: Error): void {
    if (this.settled) return
    this.settle()
    if (this.headers === undefined) return this.done({ _tag: "failed", error: classify(err) })
    this.failed(bodyFailure(err, this.bodyTimeout))
  }

  private keep(chunk: Buffer): void {
    if (this.first === undefined) this.first = chunk
    else (this.more ??= [this.first]).push(chunk)
  }

  /** The body read, `size` bytes: a lone chunk as it came (undici's view of its own read, never reused), else the chunks joined once. */
  private read(size: number): void {
    const bytes =
      this.more !== undefined ? Buffer.concat(this.more, size) : this.first !== undefined ? this.first : Buffer.concat(NO_CHUNKS, 0)
    this.first = undefined
    this.more = undefined
    this.done({ _tag: "answered", response: { status: this.status, headers: this.headers!, body: READ_WHOLE, bytes } })
  }

  private failed(bodyError: Error): void {
    this.first = undefined
    this.more = undefined
    this.done({ _tag: "answered", response: { status: this.status, headers: this.headers!, body: READ_WHOLE, bodyError } })
  }
}

/**
 * What reads a streamed answer's body as it comes, without its Readable (`takeBody`): each chunk
 * is handed over in the turn the upstream's bytes are read, with no buffering and no event.
 */
export interface BodyReader {
  /** A chunk of the body; false: the call is paused until the body's `resume()`. */
  chunk(chunk: Buffer): boolean
  /** The body ended whole. */
  end(): void
  /** The body broke off (the connection failed or went silent past the body timeout). */
  error(err: Error): void
}

/**
 * A streamed answer's body: a Readable fed by `StreamedAnswer` as the upstream's chunks come, with
 * undici's own body stream's behaviour (src/upstream/client/upstreamBody.ts and every reader rely
 * on it): destroying it before its end aborts the call and emits a RequestAbortedError; reading
 * (`_read`) resumes a call paused because the reader fell behind (`push` answered false). A reader
 * that takes it (`takeBody`) gets the chunks directly instead; `pause` and `resume` then stop and
 * restart the call, and destroying it still aborts a call not yet ended.
 */
class StreamedBody extends NodeReadable {
  constructor(private readonly answer: StreamedAnswer) {
    // undici's own body's high-water mark (node's fs streams'); destroyed once ended, as undici's.
    super({ autoDestroy: true, highWaterMark: 64 * 1024 })
  }

  /** Hands the body to `reader`, if nothing has read it yet (answers whether it took it). */
  handTo(reader: BodyReader): boolean {
    const state = this.state()
    const answer = this.answer
    if (
      answer.reader !== undefined ||
      answer.over ||
      this.destroyed ||
      state.flowing !== null ||
      state.readableListening ||
      this.readableLength > 0
    )
      return false
    answer.reader = reader
    // Destroying it (the reader's own way to stop the call) reports the abort as an error: the reader has ended by then.
    this.on("error", ignore)
    return true
  }

  override pause(): this {
    // A reader pauses the call by answering false for a chunk.
    return this.answer.reader === undefined ? super.pause() : this
  }

  override resume(): this {
    if (this.answer.reader === undefined) return super.resume()
    this.answer.resumeCall?.()
    return this
  }

  override _read(): void {
    this.answer.resumeCall?.()
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    const state = this.state()
    if (!err && !state.endEmitted && !this.answer.finished) err = new undiciErrors.RequestAbortedError()
    const answer = this.answer
    if (err) answer.abortCall?.(new undiciErrors.RequestAbortedError())
    answer.bodyClosed()
    // Destroyed by someone other than its reader (the caller went away): the reader hears the
    // abort as a stream's reader would, as its error a tick later.
    const reader = answer.reader
    if (reader !== undefined && !answer.finished && err) {
      answer.finished = true
      const abort = err
      process.nextTick(() => reader.error(abort))
    }
    // As undici's: a body destroyed before anyone read it reports its error a turn later, so a
    // reader that attaches its error listener after a microtask still gets it.
    if (state.flowing === null && !state.readableListening && reader === undefined) setImmediate(callback, err)
    else callback(err)
  }

  private state(): { endEmitted: boolean; flowing: boolean | null; readableListening: boolean } {
    return (this as unknown as { _readableState: { endEmitted: boolean; flowing: boolean | null; readableListening: boolean } })
      ._readableState
  }
}

/**
 * Reads a streamed answer's body through `reader` rather than as a stream, when it can (an answer
 * of `request`/`requestNow` not yet read): a chunk then goes to its reader in the turn its bytes
 * came, without the stream's buffering, events and ticks. False: read it as a stream.
 */
export const takeBody = (body: UpstreamBody, reader: BodyReader): boolean =>
  (body as unknown) instanceof StreamedBody && (body as unknown as StreamedBody).handTo(reader)

/**
 * A streamed answer, read by undici's dispatch handler interface directly, as `WholeAnswer`: no
 * request handler of undici's (an async resource, an abort listener, a callback hop), no abort
 * emitter; one timer until the headers. Once the headers came the body (`StreamedBody`) is
 * handed over and each chunk pushed into it as it comes, the call paused while the reader is behind.
 */
export class StreamedAnswer extends AnswerCall {
  resumeCall: (() => void) | undefined
  /** The body's reader when one took it (`takeBody`). */
  reader: BodyReader | undefined
  /** A taken body's call ended (whole or broken off): nothing left to abort. */
  finished = false
  /** The call ended (whole or broken off): a body not yet taken is read as a stream, which has it all. */
  over = false
  private body: StreamedBody | undefined

  constructor(
    done: (outcome: UpstreamOutcome) => void,
    /** A request body sent as a stream (an upload): destroyed when the call fails, as undici's request API does. */
    private readonly upload: Readable | undefined
  ) {
    super(done)
  }

  /**
   * The caller went away (or the effect was interrupted): before the headers the call is aborted
   * and `done` hears `gone` (`tell`); after, a body not yet read to its end is destroyed, which
   * aborts the call (its reader may not have taken it up yet).
   */
  cancel(tell: boolean): void {
    if (!this.settled) return this.abortWith(tell ? GONE : undefined)
    const body = this.body
    if (body !== undefined && !body.destroyed && !body.readableEnded && !this.finished) body.destroy()
  }

  /** The body is done with (read to its end or destroyed): the caller is no longer watched. */
  bodyClosed(): void {
    this.unwatch?.()
  }

  onHeaders(statusCode: number, rawHeaders: Array<Buffer>, resume: () => void): boolean {
    if (statusCode < 200 || this.settled) return true
    // Answered: the caller is watched on until the body is done with (`bodyClosed`).
    this.settled = true
    this.stopTimer()
    this.resumeCall = resume
    const body = (this.body = new StreamedBody(this))
    const headers = undiciUtil.parseHeaders(rawHeaders) as UpstreamResponse["headers"]
    this.done({ _tag: "answered", response: { status: statusCode, headers, body: body as unknown as UpstreamBody } })
    return true
  }

  onData(chunk: Buffer): boolean {
    const body = this.body
    if (body === undefined || body.destroyed) return false
    return this.reader !== undefined ? this.reader.chunk(chunk) : body.push(chunk)
  }

  onComplete(): void {
    this.over = true
    const reader = this.reader
    if (reader === undefined) return void this.body?.push(null)
    this.finished = true
    this.bodyClosed()
    reader.end()
  }

  onError(err: Error): void {
    this.over = true
    if (this.upload !== undefined && !this.upload.destroyed) {
      this.upload.on("error", ignore)
      this.upload.destroy(err)
    }
    const body = this.body
    if (body === undefined) {
      if (this.settled) return
      this.settle()
      return this.done({ _tag: "failed", error: classify(err) })
    }
    const reader = this.reader
    if (reader !== undefined) {
      if (body.destroyed) return
      this.finished = true
      this.bodyClosed()
      return reader.error(err)
    }
    // As undici's request API: after what is already queued, and never an uncaught error.
    body.on("error", ignore)
    queueMicrotask(() => {
      if (!body.destroyed) body.destroy(err)
    })
  }
}
