/**
 * One upstream attempt, as the dispatcher sees it: what an answered attempt reports, how an
 * attempt that failed before the client saw anything is described to the resilience layer.
 */
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { WireFormat } from "../upstream/formats/format.js"
import type { RoutePlan } from "../services/routing/plan.js"
import type { UsageRecord, UsageShape } from "../services/usage/Usage.js"
import type { CanonicalError, Usage } from "../domain/canonical.js"
import type { Reservation } from "../services/accounting/Accounting.js"
import type { FailureInfo } from "../services/resilience/types.js"
import type { Candidate } from "../services/routing/types.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { clientError, type InferenceError } from "./errors.js"
import type { RequestContext } from "./request.js"

/** One attempt that produced an answer (possibly broken off after it started). */
export interface AttemptOutcome {
  readonly status: number
  readonly usage: Partial<Usage> | undefined
  readonly ttftMs: number | null
  /** An error after the answer started (the client got it in-stream). */
  readonly error: string | null
  /** That error as the resilience layer classifies it. */
  readonly streamFailure?: FailureInfo
  /** The upstream's response headers, lower-cased (rate-limit headroom). */
  readonly headers?: Readonly<Record<string, string>>
  /** The answer's cost, when the attempt already priced it (for its cost header). */
  readonly costUsd?: number
}

/** The cost of the answer a candidate gave: priced once per request. */
export const outcomeCost = (accounting: AccountingShape, tried: Candidate, outcome: AttemptOutcome): number =>
  outcome.costUsd ?? accounting.cost(tried.connection.provider.id, tried.model, outcome.usage)

/**
 * One attempt that failed before anything reached the client. `failure` describes the upstream's
 * failure for the resilience layer; without it the error is the request's own (not retried)
 * unless `skip` says the target could not be used at all (misconfigured, URL blocked).
 */
export class AttemptFailed extends Data.Error<{
  readonly error: InferenceError
  readonly failure: FailureInfo | undefined
  readonly skip: boolean
}> {
  readonly _tag = "AttemptFailed"
}
export const attemptFailed = (error: InferenceError, failure: FailureInfo | undefined, skip = false) =>
  new AttemptFailed({ error, failure, skip })

/**
 * The upstream's response headers, lower-cased, each one string. undici's already are, but for a
 * header sent more than once (an array): such headers (nearly every answer's) are answered as they
 * are, not copied.
 */
export const headerValue = (headers: UpstreamResponse["headers"]): Readonly<Record<string, string>> => {
  if (plainHeaders(headers)) return headers as Readonly<Record<string, string>>
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value)
  return out
}

/** Whether every header is one string under a lower-case name (walked with `for...in`: no array of entries). */
const plainHeaders = (headers: UpstreamResponse["headers"]): boolean => {
  for (const name in headers) if (typeof headers[name] !== "string" || name.toLowerCase() !== name) return false
  return true
}

/** The failure description of an error the pipeline produced itself (transport, stream). */
export const failureOfError = (e: InferenceError): FailureInfo | undefined => {
  switch (e.code) {
    case "upstream_timeout":
      return { status: 504, kind: "timeout", message: e.message, code: e.code }
    case "upstream_unreachable":
      return { status: 502, kind: "unreachable", message: e.message, code: e.code }
    case "upstream_tls_error":
      return { status: 502, kind: "tls", message: e.message, code: e.code }
    case "upstream_malformed":
      return { status: 502, kind: "malformed", message: e.message, code: e.code }
    case "upstream_stalled":
      return { status: 504, kind: "stalled", message: e.message, code: e.code }
    default:
      return undefined
  }
}

export const failureOfStream = (e: CanonicalError): FailureInfo =>
  e.code === "upstream_stalled"
    ? { status: 504, kind: "stalled", message: e.message, code: e.code }
    : e.code === "upstream_malformed"
      ? { status: 502, kind: "malformed", message: e.message, code: e.code }
      : e.code === "stream_interrupted" ||
          (e.status === 502 && e.kind === "upstream" && /ended unexpectedly|could not be parsed/.test(e.message))
        ? { status: 502, kind: "cut", message: e.message, code: e.code ?? null }
        : { status: e.status, kind: "http", message: e.message, code: e.code ?? null }

/**
 * A stream that failed before anything reached the client, as the client is answered: a stall
 * (504 `upstream_stalled`) or a cut (502 `stream_interrupted`) as is; an error the upstream
 * reported in its 200 stream is a 502 `upstream_error`, like an error inside a whole 200 answer
 * (the resilience layer still hears the status the upstream reported).
 */
export const clientFacing = (e: CanonicalError): CanonicalError =>
  e.code === "upstream_stalled" || e.code === "stream_interrupted"
    ? e
    : { ...e, status: 502, kind: "upstream", code: e.code ?? "upstream_error" }

/** What one request's usage row will say: the last candidate tried, how it went, how many fallbacks. */
export interface Tracking {
  tried: Candidate | undefined
  outcome:
    | AttemptOutcome
    | { readonly status: number; readonly usage: Partial<Usage> | undefined; readonly ttftMs: null; readonly error: string | null }
  fallbacks: number
  /** Answered from the response cache. */
  cacheHit: boolean
  cachedProvider?: string | null
  /** The model the request was routed as (the emergency model when the budget was spent). */
  model: string
  /** The request's hold on its key's budget and token limits. */
  hold?: Reservation
  /** Cost of fusion panel calls (already settled on their own rows), added to the answer's cost header. */
  panelCostUsd: number
}

/** A request's tracking before its first attempt. */
export const newTracking = (model: string): Tracking => ({
  tried: undefined,
  outcome: { status: 0, usage: undefined, ttftMs: null, error: null },
  fallbacks: 0,
  cacheHit: false,
  model,
  panelCostUsd: 0
})

/** What a usage row names of its request (an `InferenceCall` is one). */
export interface RecordedRequest {
  readonly ctx: RequestContext
  /** Usage label: `chat.completions`, `embeddings`, `responses.ws`, ... */
  readonly endpoint: string
  readonly stream: boolean
  /** The model id as the client asked for it. */
  readonly model: string
}

/**
 * Nothing could be tried: every candidate is blocked (breaker open, cooling down, locked, terminal).
 * `tokenLimit`: the level whose token limit blocked candidates, when one did (its answer names it).
 */
export const allBlocked = (
  format: WireFormat,
  plan: RoutePlan,
  tokenLimit?: { readonly level: string; readonly subject: string }
): InferenceError => {
  if (plan.blocked.length === 0) {
    return clientError(format, {
      status: 503,
      kind: "overloaded",
      message: `no target of '${plan.scope}' is available`,
      code: "no_available_target"
    })
  }
  const waits = plan.blocked.map((b) => b.retryAfterMs).filter((w): w is number => w !== null)
  const retryAfter = waits.length > 0 ? Math.max(1, Math.ceil(Math.min(...waits) / 1000)) : undefined
  const onlyCooldown = plan.blocked.every((b) => b.reason === "cooldown")
  const why = plan.blocked.map((b) => `${b.candidate.key}: ${b.reason.replace(/_/g, " ")}${b.detail ? ` (${b.detail})` : ""}`).join("; ")
  if (
    plan.blocked.every((b) => b.reason === "token_limit" || b.reason === "cooldown") &&
    plan.blocked.some((b) => b.reason === "token_limit")
  ) {
    return clientError(
      format,
      {
        status: 429,
        kind: "rate_limit",
        message: `token limit reached for ${tokenLimit?.subject ?? "this API key"}: ${why}`,
        code: "token_limit_exceeded",
        level: tokenLimit?.level ?? "key"
      },
      retryAfter !== undefined ? { "retry-after": String(retryAfter) } : undefined
    )
  }
  return clientError(
    format,
    onlyCooldown
      ? {
          status: 429,
          kind: "rate_limit",
          message: `every target of '${plan.scope}' is cooling down after rate limits (${why})`,
          code: "all_targets_cooling_down"
        }
      : {
          status: 503,
          kind: "overloaded",
          message: `every target of '${plan.scope}' is unavailable (${why})`,
          code: "no_available_target"
        },
    retryAfter !== undefined ? { "retry-after": String(retryAfter) } : undefined
  )
}

/**
 * The end of every request: its usage row, then its settlement (spend, tokens, the request
 * event), synchronously; the budget hold is released whatever happened. A request that ended
 * without an outcome (the client left) is recorded as 499. `seen` gets the row as it is queued
 * (the lifecycle's end hooks read it).
 */
export const recordRequest = (
  usage: UsageShape,
  accounting: AccountingShape,
  call: RecordedRequest,
  track: Tracking,
  seen?: (row: UsageRecord) => void
): Effect.Effect<void> => {
  const record = usageRecordOf(accounting, call, track)
  seen?.(record)
  const row = usage.record(record)
  return Effect.flatMap(Effect.exit(row), (written) => {
    try {
      settleRecorded(accounting, record, track)
    } finally {
      track.hold?.release()
    }
    return written
  })
}

/**
 * `recordRequest` without an effect (the common path, whose usage row is plain data written at
 * its end, no hook attached): false, and nothing done, when usage logging's flag is not known
 * fresh (the caller records through `recordRequest` then). The row written is kept as the
 * request's `ctx.usageRow`.
 */
export const recordRequestNow = (usage: UsageShape, accounting: AccountingShape, call: RecordedRequest, track: Tracking): boolean => {
  const record = usageRecordOf(accounting, call, track)
  if (!usage.recordNow(record)) return false
  // Kept on the context for the request's end (the inspector and the traces read it), set here
  // rather than through a callback the caller would make for every request.
  call.ctx.usageRow = record
  try {
    settleRecorded(accounting, record, track)
  } finally {
    track.hold?.release()
  }
  return true
}

/** A request's usage row, from its tracking. */
const usageRecordOf = (accounting: AccountingShape, call: RecordedRequest, track: Tracking): UsageRecord => {
  const { ctx } = call
  const { tried, outcome } = track
  const provider = tried?.connection.provider.id ?? track.cachedProvider ?? null
  const costUsd = track.cacheHit || !tried ? 0 : outcomeCost(accounting, tried, outcome)
  const status = outcome.status || 499
  const error = outcome.status ? outcome.error : (outcome.error ?? "client closed the request")
  return {
    requestId: ctx.requestId,
    apiKeyId: ctx.apiKeyId,
    connectionId: tried?.connection.id ?? null,
    provider,
    model: tried?.model ?? track.model,
    endpoint: call.endpoint,
    stream: call.stream,
    status,
    usage: {
      input: outcome.usage?.inputTokens ?? null,
      output: outcome.usage?.outputTokens ?? null,
      cached: outcome.usage?.cachedInputTokens ?? null,
      reasoning: outcome.usage?.reasoningTokens ?? null,
      cacheWrite: outcome.usage?.cacheCreationTokens ?? null
    },
    latencyMs: Date.now() - ctx.startedAt,
    ttftMs: outcome.ttftMs,
    error,
    costUsd,
    fallbackAttempts: track.fallbacks,
    cacheHit: track.cacheHit,
    requestedModel: call.model
  }
}

/** Its settlement (spend, tokens, the request event), from the row. */
const settleRecorded = (accounting: AccountingShape, record: UsageRecord, track: Tracking): void =>
  accounting.settle({
    requestId: record.requestId,
    apiKeyId: record.apiKeyId,
    provider: record.provider,
    model: track.tried?.model ?? null,
    requestedModel: record.requestedModel ?? record.model ?? "",
    connection: track.tried?.connection.name ?? null,
    status: record.status,
    usage: track.cacheHit ? undefined : track.outcome.usage,
    costUsd: record.costUsd ?? 0,
    error: record.error
  })
