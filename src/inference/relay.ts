import * as Effect from "effect/Effect"
import { StringDecoder } from "node:string_decoder"
import { readUpstreamBody, type UpstreamResponse } from "../upstream/UpstreamHttp.js"
import { NO_USAGE, openAiUsage, type TokenUsage } from "../usage/Usage.js"
import { errorTypeForStatus, InferenceError } from "./errors.js"
import { gatewayHeaders, type RequestContext } from "./io.js"

export interface RelayOutcome {
  readonly status: number
  readonly usage: TokenUsage
  readonly ttftMs: number | null
  readonly error: string | null
}

/** Upstream headers worth passing to the client alongside an error (rate-limit hints). */
const forwardedErrorHeaders = (headers: UpstreamResponse["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    if (name === "retry-after" || name.startsWith("x-ratelimit-")) {
      out[name] = Array.isArray(value) ? value.join(", ") : String(value)
    }
  }
  return out
}

const headerValue = (headers: UpstreamResponse["headers"], name: string): string | undefined => {
  const v = headers[name]
  return Array.isArray(v) ? v[0] : (v as string | undefined)
}

/** An upstream error body is read up to this size; the rest is dropped. */
const MAX_ERROR_BODY_BYTES = 1024 * 1024

/**
 * Turns a non-2xx upstream answer into the client's error, keeping the upstream status. An
 * upstream error object in OpenAI shape is passed on as it is; anything else is wrapped.
 */
export const upstreamFailure = (res: UpstreamResponse, providerName: string): Effect.Effect<InferenceError> =>
  readUpstreamBody(res.body, MAX_ERROR_BODY_BYTES).pipe(
    Effect.map((buf) => buf.toString("utf8")),
    Effect.orElseSucceed(() => ""),
    Effect.map((text) => {
      const headers = forwardedErrorHeaders(res.headers)
      let parsed: unknown
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = undefined
      }
      const err = (parsed as { error?: unknown } | undefined)?.error
      if (err && typeof err === "object" && typeof (err as { message?: unknown }).message === "string") {
        const e = err as { message: string; type?: string; code?: string | number | null; param?: string | null }
        return new InferenceError({
          status: res.status,
          type: e.type ?? errorTypeForStatus(res.status),
          code: e.code === undefined || e.code === null ? null : String(e.code),
          message: e.message,
          param: e.param ?? null,
          headers,
          body: { error: { message: e.message, type: e.type ?? errorTypeForStatus(res.status), code: e.code ?? null, param: e.param ?? null } }
        })
      }
      const detail = typeof err === "string" ? err : text.trim().slice(0, 500)
      return new InferenceError({
        status: res.status,
        type: errorTypeForStatus(res.status),
        code: "upstream_error",
        message: `${providerName} returned HTTP ${res.status}${detail ? `: ${detail}` : ""}`,
        headers
      })
    })
  )

/** Non-streaming success: the body is read whole (usage feeds the telemetry headers), then sent. */
export const relayJson = (ctx: RequestContext, res: UpstreamResponse, readUsage: (body: unknown) => TokenUsage) =>
  readUpstreamBody(res.body).pipe(
    Effect.mapError(
      (e) =>
        new InferenceError({
          status: 502,
          type: "upstream_error",
          code: "upstream_body_failed",
          message: `upstream response body could not be read: ${e.message}`
        })
    ),
    Effect.map((body): RelayOutcome => {
      let usage = NO_USAGE
      try {
        usage = readUsage(JSON.parse(body.toString("utf8")))
      } catch {
        // Not JSON: relayed unchanged, no usage.
      }
      ctx.res.writeHead(res.status, {
        ...gatewayHeaders(ctx.requestId),
        "content-type": headerValue(res.headers, "content-type") ?? "application/json",
        "content-length": body.length
      })
      ctx.res.end(body)
      return { status: res.status, usage, ttftMs: null, error: null }
    })
  )

/**
 * Reads `usage` from SSE `data:` lines as they pass, without holding the stream: only the
 * current partial line is kept.
 */
const USAGE_OBJECT = /"usage"\s*:\s*\{/

export class SseUsageScanner {
  private readonly decoder = new StringDecoder("utf8")
  private partial = ""
  usage: TokenUsage = NO_USAGE

  constructor(private readonly read: (event: unknown) => TokenUsage | undefined) {}

  push(chunk: Buffer): void {
    const text = this.partial + this.decoder.write(chunk)
    let start = 0
    for (let nl = text.indexOf("\n", start); nl !== -1; nl = text.indexOf("\n", start)) {
      this.line(text.slice(start, nl))
      start = nl + 1
    }
    this.partial = text.slice(start)
    // A pathological line without newlines must not grow without bound.
    if (this.partial.length > 1_000_000) this.partial = ""
  }

  private line(line: string): void {
    // Only events that carry a usage object are parsed (OpenAI sends "usage":null in the others).
    if (!line.startsWith("data:") || !USAGE_OBJECT.test(line)) return
    try {
      const found = this.read(JSON.parse(line.slice(5)))
      if (found) this.usage = found
    } catch {
      // not JSON: ignore
    }
  }
}

export const openAiStreamUsage = (event: unknown): TokenUsage | undefined => {
  const usage = (event as { usage?: unknown } | null)?.usage
  return usage ? openAiUsage(usage) : undefined
}

/**
 * Streams an SSE answer to the client chunk by chunk as it arrives (backpressure respected).
 * If the upstream breaks off mid-stream, the client gets an error event in its format and
 * the stream ends. Interruption (the client went away) destroys the upstream body.
 */
export const relaySse = (
  ctx: RequestContext,
  res: UpstreamResponse,
  scanner: SseUsageScanner,
  errorEvent: (message: string) => string
) =>
  Effect.async<RelayOutcome>((resume) => {
    const started = ctx.startedAt
    let ttftMs: number | null = null
    let done = false
    ctx.res.writeHead(res.status, {
      ...gatewayHeaders(ctx.requestId),
      "content-type": headerValue(res.headers, "content-type") ?? "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no"
    })
    ctx.res.flushHeaders()
    const body = res.body
    const onDrain = () => body.resume()
    body.on("data", (chunk: Buffer) => {
      if (ttftMs === null) ttftMs = Date.now() - started
      scanner.push(chunk)
      if (!ctx.res.write(chunk)) {
        body.pause()
        ctx.res.once("drain", onDrain)
      }
    })
    body.once("end", () => {
      if (done) return
      done = true
      ctx.res.end()
      resume(Effect.succeed({ status: res.status, usage: scanner.usage, ttftMs, error: null }))
    })
    body.once("error", (err: Error) => {
      if (done) return
      done = true
      const message = `upstream stream ended unexpectedly: ${err.message}`
      if (!ctx.res.destroyed) ctx.res.end(errorEvent(message))
      resume(Effect.succeed({ status: res.status, usage: scanner.usage, ttftMs, error: message }))
    })
    return Effect.sync(() => {
      done = true
      ctx.res.off("drain", onDrain)
      body.destroy()
    })
  })
