/**
 * The resilience layer's vocabulary: what an upstream failure looked like, how it is
 * classified, and the three layers of protection (provider circuit breaker, connection
 * cooldown, model lockout). docs/resilience.md has the tables.
 */
import type { BreakerState } from "../routing/types.js"

export type { BreakerState }

/** Breaker and cooldown profiles differ per provider class (spec document 1). */
export type ProviderClass = "oauth" | "apikey" | "local"

/**
 * A provider as the breaker sees it: the provider and the upstream origin its connection talks
 * to. The breaker is keyed by both (`breakerKey`), so one failing host never blocks another
 * host of the same provider (two local Ollama servers, two self-hosted OpenAI-compatible
 * endpoints); the connections of a cloud provider share its origin and so share one breaker.
 */
export interface ProviderRef {
  readonly id: string
  readonly authClass: ProviderClass
  /** `scheme://host:port` of the connection's base URL; absent or null: the provider alone. */
  readonly origin?: string | null
  /** `breakerKey` computed once (the request path builds one ref per connection and keeps it). */
  readonly key?: string
}

/** The breaker's key: `<provider>@<origin>`, or the provider id when no origin is known. */
export const breakerKey = (p: ProviderRef): string => p.key ?? (p.origin ? `${p.id}@${p.origin}` : p.id)

/**
 * The origin (`scheme://host:port`, default ports left out as URL does) of a base URL; null
 * when there is none or it does not parse.
 */
export const originOf = (url: string | null | undefined): string | null => {
  if (!url) return null
  try {
    const o = new URL(url).origin
    return o === "null" ? null : o
  } catch {
    return null
  }
}

/** A connection as the cooldown layer sees it. */
export interface ConnectionRef {
  readonly id: string
  readonly name: string
  readonly provider: ProviderRef
}

/** How an attempt failed, as observed by the dispatcher. */
export interface FailureInfo {
  /**
   * The upstream's HTTP status. Transport failures use the status the client gets:
   * 504 for a timeout before headers or a stalled stream, 502 for a refused or cut connection,
   * a failed TLS handshake or an answer not in the format it promised.
   */
  readonly status: number
  /**
   * `http`: the upstream answered with an error status (or an error in a 200 body). `tls`: the
   * TLS handshake failed (certificate expired, for another name, untrusted). `malformed`: a 2xx
   * whose body is not the format it promised (not JSON, HTML, JSON without the answer's fields,
   * a stream with no event of its format).
   */
  readonly kind: "http" | "timeout" | "unreachable" | "stalled" | "cut" | "tls" | "malformed"
  /** Error code from the upstream's body, when it had one (`insufficient_quota`, `rate_limit_error`...). */
  readonly code?: string | null
  readonly message: string
  /** Lower-cased response headers (Retry-After, x-ratelimit-*, anthropic-ratelimit-*). */
  readonly headers?: Readonly<Record<string, string>>
  /** The raw error body (first KB is enough), for reset text and ban keywords. */
  readonly body?: string
}

/** Terminal connection states: only new credentials or an operator reset leave them. */
export type TerminalState = "banned" | "expired" | "credits_exhausted"

/**
 * Where a failure belongs and what follows from it. Exactly one place decides this
 * (src/services/resilience/classify.ts).
 */
export interface Classification {
  /**
   * `provider`: the provider is failing (counts toward its breaker); `connection`: this account
   * (rate limit, ban, credentials); `model`: this model on this connection (not found, no access);
   * `client`: the request itself is wrong (a 400 is never a provider failure, never a 429).
   */
  readonly scope: "provider" | "connection" | "model" | "client"
  /** Whether another target may be tried (a client error is not retried anywhere). */
  readonly retryable: boolean
  /** Counts toward the provider breaker: only 408, 500, 502, 503, 504 (transport failures map to 502/504). */
  readonly tripsBreaker: boolean
  /** Puts the connection into a transient cooldown. */
  readonly cooldown: boolean
  /** A terminal state for the connection. */
  readonly terminal?: TerminalState
  /** Quota is used up until a reset (never worth a short wait). */
  readonly quotaExhausted: boolean
  /** How long the upstream asked to wait: Retry-After, reset headers, or reset text in the body. */
  readonly retryAfterMs?: number
  /** Short label for logs, usage rows and `lastErrorType`: `rate_limited`, `server_error`, `auth`... */
  readonly reason: string
}

/** Connection cooldown state, as listed by the management API and connection views. */
export interface ConnectionHealth {
  /** Epoch ms until which the connection is cooling down; null when available. */
  readonly rateLimitedUntil: number | null
  /** `unavailable` during cooldown, a terminal state, or null. */
  readonly testStatus: "unavailable" | TerminalState | null
  readonly lastError: string | null
  readonly lastErrorType: string | null
  readonly errorCode: string | null
  readonly backoffLevel: number
}

/** One active model lockout (GET /api/resilience/model-cooldowns). */
export interface LockoutView {
  readonly provider: string
  readonly connection: string
  readonly model: string
  readonly reason: string
  readonly status: number
  readonly failures: number
  readonly expiresAt: number
  readonly remainingMs: number
}

/** One breaker (GET /api/resilience): a provider at one upstream origin. */
export interface BreakerView {
  /** `<provider>@<origin>` (the provider id alone when no origin is known): what `reset` also takes. */
  readonly key: string
  readonly provider: string
  /** The upstream origin this breaker covers; null when the provider has none. */
  readonly origin: string | null
  readonly providerClass: ProviderClass
  readonly state: BreakerState
  readonly consecutiveFailures: number
  readonly degradationThreshold: number
  readonly failureThreshold: number
  readonly resetTimeoutMs: number
  /** When an OPEN breaker lets a probe through (epoch ms), else null. */
  readonly retryAt: number | null
  readonly lastFailureAt: number | null
  readonly lastStatus: number | null
  /** HALF_OPEN: a probe is out (this process's, or another's it was told of), the others wait for its verdict. */
  readonly probing: boolean
}
