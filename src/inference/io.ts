import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as http from "node:http"
import type { Readable } from "node:stream"
import { jsonTooDeep, safeHeaderValue, TOO_DEEP_MESSAGE } from "../kernel/untrusted.js"
import { VERSION } from "../kernel/version.js"
import { badRequest, InferenceError } from "../kernel/errors.js"
import { observe } from "../kernel/hooks.js"
import { type Progress, type RequestContext, requestHeader, type Transport } from "../kernel/request.js"

export { requestHeader }

/** Largest JSON body accepted on inference routes (images travel inline as base64). */
export const MAX_JSON_BODY_BYTES = 32 * 1024 * 1024

/** A body of no bytes (one object: it has nothing to change). */
const EMPTY_BODY = Buffer.alloc(0)

/**
 * One request of the inference plane over HTTP: the core's request context (src/kernel/request.ts)
 * with node's request and response, which only the code that reads bodies and writes answers
 * touches. Answers are written through `writeWhole`, `startStream`, `writeStream` and
 * `endStream` below, which the hooks observe.
 */
export interface HttpRequestContext extends RequestContext {
  readonly req: http.IncomingMessage
  readonly res: http.ServerResponse
}

export type { Progress, RequestContext }

/** The HTTP transport: one object for every request, so a request's context carries no closure of its own. */
export const HTTP_TRANSPORT: Transport = { readBody: (ctx) => readBody((ctx as HttpRequestContext).req) }

/**
 * Whether the answer is committed: something of it reached the client, so the request can no
 * longer go to another target or be answered with an HTTP error status. Progress events alone
 * (headers and comments) do not commit it.
 */
export const committed = (ctx: HttpRequestContext): boolean =>
  ctx.res.headersSent && (ctx.progress === undefined || ctx.progress.contentStarted)

/**
 * Opens an SSE answer early so progress events can flow while the gateway routes and waits;
 * each event is an SSE comment (`: progress {...}`) that SDKs ignore.
 */
export const openProgress = (ctx: HttpRequestContext, contentType: string): Progress => {
  startStream(ctx, { ...responseHeaders(ctx), "content-type": contentType, "cache-control": "no-cache", "x-accel-buffering": "no" })
  const progress: Progress = {
    contentStarted: false,
    emit: (stage, data = {}) => {
      if (!ctx.res.destroyed && !ctx.res.writableEnded) writeStream(ctx, `: progress ${JSON.stringify({ stage, ...data })}\n\n`)
    }
  }
  ctx.progress = progress
  progress.emit("accepted", { requestId: ctx.requestId })
  return progress
}

export const gatewayHeaders = (requestId: string): Record<string, string> => ({
  "x-gateway-version": VERSION,
  "x-gateway-request-id": requestId
})

/**
 * Every header an answer carries: version, request id, what the pipeline added, then `extra`. One
 * object, built once. Values pass through safeHeaderValue: several come from outside (the
 * client's session id or prompt_cache_key, model names, an upstream's rate-limit headers), and
 * node throws on a bad one after the upstream was already called and billed.
 */
export const responseHeaders = (
  ctx: RequestContext,
  extra?: Readonly<Record<string, string | number>>
): Record<string, string | number> => {
  const h = new AnswerHeaders(ctx.requestId)
  for (const k in ctx.responseHeaders) put(h, k, ctx.responseHeaders[k]!)
  if (extra) for (const k in extra) put(h, k, extra[k]!)
  return h
}

/**
 * An answer's headers, starting with the version and the request id: a plain object (its prototype
 * is Object's), made by a constructor so that V8 gives it room for about ten headers inside it. A
 * literal has room for the two it names, and each header added later grows a side array again
 * (four arrays for an answer's dozen headers, every answer).
 */
type HeadersByName = Record<string, string | number>
type MakeHeaders = new (requestId: string) => HeadersByName
const AnswerHeaders = function (this: HeadersByName, requestId: string) {
  this["x-gateway-version"] = VERSION
  this["x-gateway-request-id"] = requestId
} as unknown as MakeHeaders
AnswerHeaders.prototype = Object.prototype

/**
 * `responseHeaders` of a whole JSON answer (its type and length last): the two are set on the one
 * object rather than passed in an `extra` object made for every answer.
 */
export const jsonResponseHeaders = (ctx: RequestContext, contentLength: number): Record<string, string | number> => {
  const h = responseHeaders(ctx)
  h["content-type"] = "application/json"
  h["content-length"] = contentLength
  return h
}

/**
 * `responseHeaders` of a streamed answer (SSE and the like: its type, no caching, no proxy
 * buffering, last), set on the one object as `jsonResponseHeaders` does.
 */
export const streamResponseHeaders = (ctx: RequestContext, contentType: string): Record<string, string | number> => {
  const h = responseHeaders(ctx)
  // A pass-through stream's type is the upstream's own header: made safe like any from outside.
  put(h, "content-type", contentType)
  h["cache-control"] = "no-cache"
  h["x-accel-buffering"] = "no"
  return h
}

/** A header value from outside, made safe; one that cannot be (too long) is left out. */
const put = (h: Record<string, string | number>, k: string, v: string | number): void => {
  if (typeof v === "number") h[k] = v
  else {
    const safe = safeHeaderValue(v)
    if (safe !== undefined) h[k] = safe
  }
}

/**
 * When the client goes away (its response closes), calls `abort`; answers a function that stops
 * watching. The request path ties its waits on the upstream to this instead of to interruption.
 * `on`, not `once`: a response closes once (node emits its `close` once), and `once` wraps each
 * listener in a state object and a bound function, every upstream call.
 */
export const clientGone =
  (ctx: HttpRequestContext) =>
  (abort: () => void): (() => void) => {
    // Already gone (it left while this request was between two waits): at once.
    if (ctx.res.closed) {
      abort()
      return () => {}
    }
    ctx.res.on("close", abort)
    return () => ctx.res.off("close", abort)
  }

/** Reads the whole request body, refusing bodies over `limit` with 413. */
export const readBody = (req: http.IncomingMessage, limit = MAX_JSON_BODY_BYTES) =>
  Effect.async<Buffer, InferenceError>((resume) => {
    const declared = Number(req.headers["content-length"] ?? NaN)
    if (declared > limit) {
      req.resume()
      resume(Effect.fail(tooLarge(limit)))
      return
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let settled = false
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        settled = true
        cleanup()
        req.resume()
        resume(Effect.fail(tooLarge(limit)))
        return
      }
      chunks.push(chunk)
    }
    const onEnd = () => {
      if (settled) return
      settled = true
      cleanup()
      resume(Effect.succeed(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)))
    }
    const onError = () => {
      if (settled) return
      settled = true
      cleanup()
      resume(Effect.fail(badRequest("request body could not be read")))
    }
    const cleanup = () => {
      req.off("data", onData)
      req.off("end", onEnd)
      req.off("error", onError)
    }
    req.on("data", onData)
    req.on("end", onEnd)
    req.on("error", onError)
    // No canceler: the fiber is interrupted when the client goes away, and then the request
    // (and these listeners with it) is gone too; a late event cannot resume an interrupted wait.
    // Without one, the wait costs no interruptible region (it runs on every request).
  })

/** What reads a body without an effect: told once, with the body or the 413 / 400 (an object of its own, not a closure per request). */
export interface BodyReader {
  readonly bodyRead: (read: { readonly body: Buffer } | { readonly error: InferenceError }) => void
}

/**
 * `readBody` without an effect (the common path): `reader.bodyRead` once, with the body or the 413 / 400.
 * The client leaving while it sends is an `error` of the request (`aborted`): a 400 no one reads.
 */
export const readBodyNow = (req: http.IncomingMessage, reader: BodyReader, limit = MAX_JSON_BODY_BYTES): void => {
  const declared = Number(req.headers["content-length"] ?? NaN)
  if (declared > limit) {
    req.resume()
    return reader.bodyRead({ error: tooLarge(limit) })
  }
  // A message the parser already has whole (a request that waited for its turn: docs/ARCHITECTURE.md,
  // "New requests per turn") is taken from the stream's buffer now, so the reader is told before
  // this returns and the turn's budget counts what the request then does. Read on its events, that
  // ran in the ticks after the turn's budget had been checked, for every request the turn started.
  if (req.complete && req.readableFlowing === null && req.readableLength <= limit) {
    // Read even when empty: the stream then ends as one read on events would (its `end` on a tick).
    const body = (req.read() as Buffer | null) ?? EMPTY_BODY
    if (req.readableLength === 0) return reader.bodyRead({ body })
  }
  ;(req as ReadingRequest)[BODY_READ] = new BodyRead(reader, limit)
  req.on("data", onBodyData)
  req.on("end", onBodyEnd)
  req.on("error", onBodyError)
}

/**
 * A body being read by `readBodyNow`, kept on its request (`BODY_READ`) so that the request's
 * listeners can be the module's own three functions (a listener is called with the request as
 * `this`), not three closures and a fourth to finish, every request. A body mostly arrives in one
 * chunk: an array only from the second (an empty one grows to 16 slots on its first push).
 */
class BodyRead {
  first: Buffer | undefined = undefined
  chunks: Array<Buffer> | undefined = undefined
  size = 0
  constructor(
    readonly reader: BodyReader,
    readonly limit: number
  ) {}
}

const BODY_READ = Symbol("gateway.bodyRead")
type ReadingRequest = http.IncomingMessage & { [BODY_READ]?: BodyRead | undefined }

/** The read's end: the listeners off, the state dropped, the reader told (once: a request read whole has no further events). */
const finishBody = (req: ReadingRequest, read: { readonly body: Buffer } | { readonly error: InferenceError }): void => {
  const state = req[BODY_READ]
  if (state === undefined) return
  req[BODY_READ] = undefined
  req.off("data", onBodyData)
  req.off("end", onBodyEnd)
  req.off("error", onBodyError)
  state.reader.bodyRead(read)
}

function onBodyData(this: ReadingRequest, chunk: Buffer): void {
  const state = this[BODY_READ]
  if (state === undefined) return
  state.size += chunk.length
  if (state.size > state.limit) {
    this.resume()
    return finishBody(this, { error: tooLarge(state.limit) })
  }
  if (state.first === undefined) state.first = chunk
  else if (state.chunks === undefined) state.chunks = [state.first, chunk]
  else state.chunks.push(chunk)
}

function onBodyEnd(this: ReadingRequest): void {
  const state = this[BODY_READ]
  if (state === undefined) return
  const { first, chunks, size } = state
  finishBody(this, { body: chunks !== undefined ? Buffer.concat(chunks, size) : first !== undefined ? first : Buffer.concat([], 0) })
}

function onBodyError(this: ReadingRequest): void {
  finishBody(this, { error: badRequest("request body could not be read") })
}

const tooLarge = (limit: number) =>
  new InferenceError({
    status: 413,
    kind: "too_large",
    code: "request_too_large",
    message: `request body exceeds ${Math.round(limit / 1024 / 1024)} MiB`
  })

/** A JSON object body, or a 400 that says what was wrong. */
export const parseJsonObject = (buf: Buffer): Either.Either<Record<string, unknown>, InferenceError> => {
  if (buf.length === 0) return Either.left(badRequest("request body is empty; expected a JSON object"))
  const text = buf.toString("utf8")
  if (jsonTooDeep(text)) return Either.left(badRequest(`request body is ${TOO_DEEP_MESSAGE}`, null, "json_too_deep"))
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    return Either.left(badRequest(`request body is not valid JSON: ${(e as Error).message}`))
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return Either.left(badRequest("request body must be a JSON object"))
  }
  return Either.right(value as Record<string, unknown>)
}

/** Parses a JSON object body; anything else is a 400 that says what was wrong. */
export const readJsonObject = (ctx: HttpRequestContext): Effect.Effect<Record<string, unknown>, InferenceError> =>
  withJsonObject(ctx, Effect.succeed)

/** The body as a JSON object, then `handle` with it, in one step after the read (the request path). */
export const withJsonObject = <A, E>(
  ctx: HttpRequestContext,
  handle: (body: Record<string, unknown>) => Effect.Effect<A, E>
): Effect.Effect<A, E | InferenceError> =>
  Effect.flatMap(ctx.body ? Effect.succeed(ctx.body) : readBody(ctx.req), (buf): Effect.Effect<A, E | InferenceError> => {
    const body = parseJsonObject(buf)
    return Either.isLeft(body) ? Effect.fail(body.left) : handle(body.right)
  })

export const sendJson = (ctx: HttpRequestContext, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void => {
  const payload = typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  writeWhole(
    ctx,
    status,
    responseHeaders(ctx, { "content-type": "application/json", "content-length": Buffer.byteLength(payload), ...headers }),
    payload
  )
}

// ---------------------------------------------------------------- the answer's writes (the lifecycle's sink)

/**
 * A whole answer: head and body in one go. Kept on the context for the request's end (onResponse / onError carry it).
 * `bytes`: the text `payload` exactly as UTF-8 (an upstream's own bytes, passed through), written instead of encoding
 * it again, unless a rewrite changed the text.
 */
export const writeWhole = (
  ctx: HttpRequestContext,
  status: number,
  headers: Readonly<Record<string, string | number>>,
  payload: string | Buffer,
  bytes?: Buffer
): void => {
  const given = payload
  const rewrite = ctx.rewrite
  if (rewrite?.whole !== undefined && typeof payload === "string") {
    const out = rewrite.whole({ status, headers, body: payload })
    headers = out.headers
    if (out.body !== payload) {
      ctx.answerUnrewritten = payload
      if (headers["content-length"] !== undefined) headers = { ...headers, "content-length": Buffer.byteLength(out.body) }
    }
    status = out.status
    payload = out.body
  }
  ctx.res.writeHead(status, headers)
  ctx.res.end(typeof payload !== "string" ? payload : bytes !== undefined && payload === given ? bytes : bodyBytes(payload))
  ctx.answerHeaders = headers
  ctx.answerBody = payload
}

/**
 * A whole answer's text as the bytes node writes (the same bytes it would encode). Handed a
 * string, node joins its head and the text into one string that the socket write then copies
 * whole into a new string on the heap (head and body, every answer); handed bytes, only the head
 * is a string (a small text's bytes come from node's shared pool, off the heap).
 */
const bodyBytes = (text: string): Buffer => Buffer.from(text, "utf8")

/** The head of a streamed answer (status 200); fires onStreamStart. */
export const startStream = (ctx: HttpRequestContext, headers: Readonly<Record<string, string | number>>): void => {
  if (ctx.rewrite?.head !== undefined) headers = ctx.rewrite.head(headers)
  ctx.res.writeHead(200, headers)
  ctx.answerHeaders = headers
  const hooks = ctx.hooks
  if (hooks !== undefined && hooks.onStreamStart.length !== 0) observe(ctx, "onStreamStart", hooks.onStreamStart, { status: 200, headers })
}

/** A piece of a streamed answer (text, or bytes of a binary answer such as media content); fires onFrame. Answers `res.write`'s verdict
 * (false: wait for drain). */
export const writeStream = (ctx: HttpRequestContext, text: string | Uint8Array): boolean => {
  if (ctx.rewrite?.frame !== undefined && typeof text === "string") {
    text = ctx.rewrite.frame(text)
    if (text === "") return true
  }
  const ok = ctx.res.write(text)
  const hooks = ctx.hooks
  if (hooks !== undefined && hooks.onFrame.length !== 0)
    observe(ctx, "onFrame", hooks.onFrame, typeof text === "string" ? { text } : { text: "", bytes: text })
  return ok
}

/**
 * A binary streamed answer broken off by its upstream: a byte stream has no error event, so the
 * connection is cut (the client sees an incomplete transfer, not a shorter file that looks whole);
 * fires onStreamEnd with the error. Call it last: the client's close interrupts the request.
 */
export const abortStream = (ctx: HttpRequestContext, error: string): void => {
  ctx.res.destroy()
  const hooks = ctx.hooks
  if (hooks !== undefined && hooks.onStreamEnd.length !== 0) observe(ctx, "onStreamEnd", hooks.onStreamEnd, { text: "", error })
}

/** The end of a streamed answer, with its last text; fires onStreamEnd (`error`: it ended with an error event). */
export const endStream = (ctx: HttpRequestContext, text: string, error: string | null = null): void => {
  if (ctx.rewrite?.end !== undefined) ({ text, error } = ctx.rewrite.end(text, error))
  ctx.res.end(text)
  const hooks = ctx.hooks
  if (hooks !== undefined && hooks.onStreamEnd.length !== 0) observe(ctx, "onStreamEnd", hooks.onStreamEnd, { text, error })
}

/**
 * A byte source (a stored file, an upstream's body) relayed as the answer: its head, then its
 * chunks as they are read, with backpressure from the client. A source that breaks off cuts the
 * connection (a byte answer has no error event: the client must not take it for a whole one);
 * the client leaving destroys the source. `what` names it in the stream-end error.
 */
export const relayBytes = (
  ctx: HttpRequestContext,
  readable: Readable,
  headers: Readonly<Record<string, string | number>>,
  what: string
): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    startStream(ctx, headers)
    const onDrain = () => readable.resume()
    const onData = (chunk: Buffer) => {
      if (!writeStream(ctx, chunk)) readable.pause()
    }
    const cleanup = () => {
      readable.off("data", onData)
      readable.off("end", onEnd)
      readable.off("error", onError)
      ctx.res.off("drain", onDrain)
    }
    const onEnd = () => {
      cleanup()
      endStream(ctx, "")
      resume(Effect.void)
    }
    const onError = (e: Error) => {
      cleanup()
      ctx.res.destroy()
      endStream(ctx, "", `${what} broke off: ${e.message}`)
      resume(Effect.void)
    }
    ctx.res.on("drain", onDrain)
    readable.on("data", onData)
    readable.on("end", onEnd)
    readable.on("error", onError)
    return Effect.sync(() => {
      cleanup()
      // The client left: the source is dropped, and its abort error has no one to tell.
      readable.on("error", () => {})
      readable.destroy()
    })
  })
