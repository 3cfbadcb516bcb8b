/**
 * One request as the gateway's core sees it, whatever carried it (HTTP, a WebSocket frame, an internal call). No transport object is
 * reachable from here: `HttpRequestContext` (src/inference/io.ts) adds node's request and response for the code that writes answers.
 */
import type * as Effect from "effect/Effect"
import type { Span as OtelSpan } from "@opentelemetry/api"
import type { UsageRecord } from "../services/usage/Usage.js"
import type { InferenceError } from "./errors.js"
import type { HookHost } from "./hooks.js"

export interface RequestContext extends HookHost {
  readonly requestId: string
  readonly startedAt: number
  /** Path without the query string. */
  readonly path: string
  readonly query: URLSearchParams
  /** The gateway API key that authenticated the request, if one did. */
  apiKeyId: string | null
  /**
   * Without a client session id: the conversation's key, derived once from its stable prefix
   * (src/inference/session.ts, `conversationOf`); it names the session in the answer's headers and
   * keeps the conversation where its prompt cache is warm.
   */
  conversation?: string | undefined
  /** Headers the pipeline adds to the answer (session, fallback attempts, cost telemetry). */
  readonly responseHeaders: Record<string, string>
  /** X-Gateway-Progress on a streamed request: headers went out early, events go as SSE comments. */
  progress?: Progress
  /** The request body, when it was read before the route ran (idempotency fingerprints it). */
  body?: Buffer
  /** What carried the request (HTTP, a WebSocket frame): one shared object per transport. */
  readonly transport: Transport
  /** The usage label of a request that writes a usage row (`chat.completions`, `images.generations`, ...). */
  endpoint?: string
  /** Observability (src/services/observability/Observability.ts): the route's label (its template, never the concrete path). */
  route?: string
  /** The request's span, while tracing is on. */
  span?: OtelSpan | undefined
  /** Milliseconds spent in upstream attempts so far (the rest is the gateway's own). */
  upstreamMs?: number
  /** The usage row the request wrote (its metrics' provider, model, tokens and cost). */
  usageRow?: UsageRecord
  /** Set while the traffic inspector records this request's bodies: the upstream exchange is told to it. */
  tap?: ExchangeTap
  /** The traffic inspector's record of this request, between its begin and end (src/services/inspector/agentBridge.ts). */
  inspection?: unknown
}

/**
 * What the guarded attempt tells a watcher of the upstream exchange (the traffic inspector's
 * agent-bridge source), only when one is set on the request: what was sent after translation and
 * what came back. Synchronous, must not throw, must not hold on to more than it means to keep.
 */
export interface ExchangeTap {
  /** An attempt's request goes upstream: its target (the endpoint's URL) and its body's text, exactly as sent. */
  readonly sent: (
    target: { readonly provider: string; readonly connection: string; readonly model: string; readonly url: string | null },
    body: string
  ) => void
  /** The upstream answered: its status and head; a whole answer's text (undefined for a stream: `chunk` follows). */
  readonly answered: (status: number, headers: Readonly<Record<string, string>>, body: string | undefined) => void
  /** A piece of a streamed answer, as received. */
  readonly chunk: (bytes: Buffer) => void
  /** The attempt failed: the upstream's status (null: no answer) and what it said. */
  readonly failed: (status: number | null, message: string, body: string | undefined) => void
}

/** What the core asks of the transport that carried a request. */
export interface Transport {
  /**
   * Reads the whole request body, bounded by the transport's limit (413 above it). It does not
   * keep it: a caller that needs it again sets `body` (what later readers look at first).
   */
  readonly readBody: (ctx: RequestContext) => Effect.Effect<Buffer, InferenceError>
}

/** Progress events of one streamed request (`X-Gateway-Progress: true`). */
export interface Progress {
  /** Set once the answer itself began (after that, failures are in-stream errors). */
  contentStarted: boolean
  readonly emit: (stage: string, data?: Readonly<Record<string, unknown>>) => void
}

/** A request header's value (the first, when it was sent more than once). */
export const requestHeader = (ctx: RequestContext, name: string): string | undefined => {
  const v = ctx.headers[name]
  return typeof v === "string" || v === undefined ? v : v[0]
}
