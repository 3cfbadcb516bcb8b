/**
 * One upstream attempt, as the dispatcher sees it: what an answered attempt reports, how an
 * attempt that failed before the client saw anything is described to the resilience layer.
 */
import * as Data from "effect/Data"
import type { CanonicalError, Usage } from "../formats/canonical.js"
import type { Reservation } from "../accounting/Accounting.js"
import type { FailureInfo } from "../resilience/types.js"
import type { Candidate } from "../routing/types.js"
import type { UpstreamResponse } from "../upstream/UpstreamHttp.js"
import type { InferenceError } from "./errors.js"

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
}

/**
 * One attempt that failed before anything reached the client. `failure` describes the upstream's
 * failure for the resilience layer; without it the error is the request's own (not retried)
 * unless `skip` says the target could not be used at all (misconfigured, URL blocked).
 */
export class AttemptFailed extends Data.Error<{ readonly error: InferenceError; readonly failure: FailureInfo | undefined; readonly skip: boolean }> {
  readonly _tag = "AttemptFailed"
}
export const attemptFailed = (error: InferenceError, failure: FailureInfo | undefined, skip = false) => new AttemptFailed({ error, failure, skip })

export const headerValue = (headers: UpstreamResponse["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value)
  return out
}

/** The failure description of an error the pipeline produced itself (transport, stream). */
export const failureOfError = (e: InferenceError): FailureInfo | undefined => {
  switch (e.code) {
    case "upstream_timeout":
      return { status: 504, kind: "timeout", message: e.message, code: e.code }
    case "upstream_unreachable":
      return { status: 502, kind: "unreachable", message: e.message, code: e.code }
    case "upstream_stalled":
      return { status: 504, kind: "stalled", message: e.message, code: e.code }
    default:
      return undefined
  }
}

export const failureOfStream = (e: CanonicalError): FailureInfo =>
  e.code === "upstream_stalled"
    ? { status: 504, kind: "stalled", message: e.message, code: e.code }
    : e.status === 502 && e.kind === "upstream" && /ended unexpectedly|could not be parsed/.test(e.message)
      ? { status: 502, kind: "cut", message: e.message, code: e.code ?? null }
      : { status: e.status, kind: "http", message: e.message, code: e.code ?? null }

/** What one request's usage row will say: the last candidate tried, how it went, how many fallbacks. */
export interface Tracking {
  tried: Candidate | undefined
  outcome: AttemptOutcome | { readonly status: number; readonly usage: Partial<Usage> | undefined; readonly ttftMs: null; readonly error: string | null }
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
