import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { EventEmitter } from "node:events"
import { Agent, errors as undiciErrors, type request } from "undici"
import { VERSION } from "../version.js"

export type UpstreamBody = Awaited<ReturnType<typeof request>>["body"]

export interface UpstreamResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: UpstreamBody
}

/** The upstream could not be reached or did not answer in time; no HTTP status exists. */
export class UpstreamTransportError extends Data.TaggedError("UpstreamTransportError")<{
  readonly kind: "connect" | "timeout" | "network"
  readonly message: string
}> {}

export interface UpstreamRequest {
  readonly url: string
  readonly method: "GET" | "POST"
  readonly headers: Record<string, string>
  readonly body?: string | Buffer
  /** Time allowed until response headers arrive. */
  readonly headersTimeout?: Duration.DurationInput
}

export interface UpstreamHttpShape {
  /**
   * Sends one request. Interrupting the effect aborts it. The body of the returned response
   * must be consumed or destroyed by the caller.
   */
  readonly request: (req: UpstreamRequest) => Effect.Effect<UpstreamResponse, UpstreamTransportError>
  readonly userAgent: string
}

/**
 * Reads an upstream body whole (up to `maxBytes`, beyond which it is cut). Interruption (the
 * client went away) destroys the body, which aborts the upstream request.
 */
export const readUpstreamBody = (body: UpstreamResponse["body"], maxBytes = Number.POSITIVE_INFINITY) =>
  Effect.async<Buffer, Error>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    body.on("data", (chunk: Buffer) => {
      if (size >= maxBytes) return
      chunks.push(chunk)
      size += chunk.length
    })
    body.once("end", () => resume(Effect.succeed(Buffer.concat(chunks, size).subarray(0, Math.min(size, maxBytes)))))
    body.once("error", (e: Error) => resume(Effect.fail(e)))
    return Effect.sync(() => body.destroy())
  })

export const DEFAULT_HEADERS_TIMEOUT = Duration.minutes(5)
/** Longest silence allowed between two body chunks. */
export const BODY_IDLE_TIMEOUT_MS = 5 * 60 * 1000

const classify = (cause: unknown): UpstreamTransportError => {
  const err = cause as { code?: string; message?: string; cause?: { code?: string; message?: string } }
  const code = err.code ?? err.cause?.code ?? ""
  const message = err.cause?.message ?? err.message ?? String(cause)
  if (cause instanceof undiciErrors.HeadersTimeoutError) {
    return new UpstreamTransportError({ kind: "timeout", message: "no response headers from upstream in time" })
  }
  if (cause instanceof undiciErrors.BodyTimeoutError) {
    return new UpstreamTransportError({ kind: "timeout", message })
  }
  if (cause instanceof undiciErrors.ConnectTimeoutError || code === "UND_ERR_CONNECT_TIMEOUT") {
    return new UpstreamTransportError({ kind: "timeout", message: `connect timeout: ${message}` })
  }
  if (["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ECONNRESET"].includes(code)) {
    return new UpstreamTransportError({ kind: "connect", message: `${code}: ${message}` })
  }
  return new UpstreamTransportError({ kind: "network", message: code ? `${code}: ${message}` : message })
}

/** Origin and path of an upstream URL, parsed once per distinct URL (a handful per connection). */
const parsed = new Map<string, { readonly origin: string; readonly path: string } | string>()
const splitUrl = (url: string): { readonly origin: string; readonly path: string } | string => {
  let hit = parsed.get(url)
  if (hit === undefined) {
    try {
      const u = new URL(url)
      hit = u.protocol === "http:" || u.protocol === "https:" ? { origin: u.origin, path: u.pathname + u.search } : `unsupported upstream URL scheme ${u.protocol}`
    } catch {
      hit = `invalid upstream URL: ${url}`
    }
    if (parsed.size >= 1000) parsed.clear()
    parsed.set(url, hit)
  }
  return hit
}

/**
 * The one HTTP client for provider traffic: an undici Agent with keep-alive pools per origin
 * (node's http client and the platform client cost measurably more per request).
 */
export class UpstreamHttp extends Context.Tag("gateway/UpstreamHttp")<UpstreamHttp, UpstreamHttpShape>() {
  static readonly layer = Layer.scoped(
    UpstreamHttp,
    Effect.gen(function* () {
      const agent = new Agent({
        keepAliveTimeout: 30_000,
        keepAliveMaxTimeout: 600_000,
        connect: { timeout: 10_000 },
        bodyTimeout: BODY_IDLE_TIMEOUT_MS,
        headersTimeout: 0
      })
      yield* Effect.addFinalizer(() => Effect.promise(() => agent.destroy().catch(() => undefined)))
      const userAgent = `gateway/${VERSION}`
      return {
        userAgent,
        request: (req) =>
          Effect.async<UpstreamResponse, UpstreamTransportError>((resume) => {
            const target = splitUrl(req.url)
            if (typeof target === "string") return resume(Effect.fail(new UpstreamTransportError({ kind: "network", message: target })))
            // One plain timer covers connecting, sending and waiting for the headers, and undici
            // takes an EventEmitter as abort signal: no timer fiber and no AbortController per call.
            const abort = new EventEmitter()
            const ms = Duration.toMillis(Duration.decode(req.headersTimeout ?? DEFAULT_HEADERS_TIMEOUT))
            // The timeout answers at once: undici only acts on an abort once it has a connection,
            // so a connect or TLS handshake that hangs would otherwise hold the caller until the
            // agent's connect timeout.
            let settled = false
            const timer = Number.isFinite(ms)
              ? setTimeout(() => {
                  settled = true
                  abort.emit("abort")
                  resume(Effect.fail(new UpstreamTransportError({ kind: "timeout", message: "no response headers from upstream in time" })))
                }, Math.max(0, ms))
              : undefined
            agent.request(
              { origin: target.origin, path: target.path, method: req.method, headers: req.headers, body: req.body ?? null, signal: abort },
              (err, data) => {
                clearTimeout(timer)
                if (settled) {
                  if (!err) data?.body?.destroy()
                  return
                }
                settled = true
                if (err) resume(Effect.fail(classify(err)))
                else resume(Effect.succeed({ status: data.statusCode, headers: data.headers, body: data.body }))
              }
            )
            return Effect.sync(() => {
              settled = true
              clearTimeout(timer)
              abort.emit("abort")
            })
          })
      }
    })
  )
}
