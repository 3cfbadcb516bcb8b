import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RoutingMemory } from "../routing/RoutingMemory.js"
import type { BreakerState, Candidate } from "../routing/types.js"
import { CircuitBreakers } from "./CircuitBreakers.js"
import { classify, parseDuration } from "./classify.js"
import { Cooldowns } from "./Cooldowns.js"
import { type LockoutRef, Lockouts } from "./Lockouts.js"
import { breakerKey, type Classification, type FailureInfo, originOf, type ProviderRef } from "./types.js"

/** Whether a candidate may be tried now, and if not why and for how long. */
export type Admission = { readonly ok: true } | { readonly ok: false; readonly reason: string; readonly retryAfterMs: number | null }

/**
 * The resilience gate as the dispatcher sees it: the provider breaker, the connection cooldown
 * and the model lockout behind one interface.
 */
export interface ResilienceShape {
  /** Synchronous admission at `now`: breaker OPEN, connection cooling down or terminal, model locked. */
  readonly admission: (c: Candidate, now: number) => Admission
  readonly breakerState: (c: Candidate, now: number) => BreakerState
  /**
   * Claims the right to send at `now` (a HALF_OPEN breaker lets one probe through at a time).
   * Synchronous, as are `succeeded` and `release`: they run on every request.
   */
  readonly acquire: (c: Candidate, now: number) => { readonly allowed: boolean; readonly probe: boolean }
  /** The attempt succeeded at `now`; `headers` (lower-cased) carry rate-limit headroom when the upstream reports it. */
  readonly succeeded: (c: Candidate, headers: Readonly<Record<string, string>> | undefined, now: number) => void
  /**
   * Classifies a failure and updates breaker, cooldown and lockout; answers the classification.
   * `probe`: this attempt held the breaker's probe slot (a failure that is not the provider's frees it).
   */
  readonly failed: (c: Candidate, f: FailureInfo, probe?: boolean) => Effect.Effect<Classification>
  /** An attempt that held the probe slot ended without a verdict (the client left): frees it. */
  readonly release: (c: Candidate) => void
}

/** Classification reasons of the transient errors that cool a connection down (besides 429s). */
const TRANSIENT_ERRORS: ReadonlySet<string> = new Set([
  "timeout",
  "stalled",
  "unreachable",
  "stream_cut",
  "tls",
  "malformed",
  "server_error",
  "overloaded"
])

/**
 * The breaker's view of a candidate's connection: its provider and upstream origin, built once
 * per connection object (connections are immutable; a changed one is a new object), so the
 * request path neither parses the URL nor allocates on every call.
 */
const refs = new WeakMap<Candidate["connection"], ProviderRef>()
const providerRef = (c: Candidate): ProviderRef => {
  const conn = c.connection
  let ref = refs.get(conn)
  if (ref === undefined) {
    const origin = originOf(conn.effectiveBaseUrl)
    const id = conn.provider.id
    ref = { id, authClass: conn.provider.authClass, origin, key: breakerKey({ id, authClass: conn.provider.authClass, origin }) }
    refs.set(conn, ref)
  }
  return ref
}

/**
 * The lockouts' view of a candidate (provider, connection, model): made once per connection
 * object and model and shared, frozen, by the requests that go there (every success reports one).
 * Models per connection are bounded (a pass-through provider's come from clients).
 */
const lockRefs = new WeakMap<Candidate["connection"], Map<string, LockoutRef>>()
const LOCK_REFS_PER_CONNECTION = 256
const lockRef = (c: Candidate): LockoutRef => {
  const conn = c.connection
  let byModel = lockRefs.get(conn)
  if (byModel === undefined) {
    byModel = new Map()
    lockRefs.set(conn, byModel)
  }
  let ref = byModel.get(c.model)
  if (ref === undefined) {
    ref = Object.freeze({ provider: conn.provider.id, connectionId: conn.id, connectionName: conn.name, model: c.model })
    if (byModel.size < LOCK_REFS_PER_CONNECTION) byModel.set(c.model, ref)
  }
  return ref
}

/** The answers every request gets (admitted; allowed, not the probe), made once. */
const ADMITTED: Admission = Object.freeze({ ok: true })
const ALLOWED = Object.freeze({ allowed: true, probe: false })

const num = (v: string | undefined): number | undefined => {
  if (v === undefined || v.trim() === "") return undefined
  const n = Number(v)
  return Number.isFinite(n) ? n : undefined
}

/** An absolute reset time from a reset header value (duration, RFC 3339, epoch or delta seconds). */
const resetAt = (v: string | undefined, now: number): number | undefined => {
  if (!v) return undefined
  const n = num(v)
  if (n !== undefined) return n > 1e12 ? n : n > 1e9 ? n * 1000 : now + n * 1000
  const d = parseDuration(v)
  if (d !== undefined) return now + d
  const t = Date.parse(v)
  return Number.isFinite(t) ? t : undefined
}

/**
 * Rate-limit headroom from response headers (OpenAI `x-ratelimit-*`, Anthropic
 * `anthropic-ratelimit-*`): the tighter of requests and tokens.
 */
/** The rate-limit headers read, per kind (requests, tokens) and style (OpenAI's, Anthropic's): names built once. */
const QUOTA_HEADERS = ["requests", "tokens"].flatMap((kind) => [
  { remaining: `x-ratelimit-remaining-${kind}`, limit: `x-ratelimit-limit-${kind}`, reset: `x-ratelimit-reset-${kind}` },
  {
    remaining: `anthropic-ratelimit-${kind}-remaining`,
    limit: `anthropic-ratelimit-${kind}-limit`,
    reset: `anthropic-ratelimit-${kind}-reset`
  }
])

export const quotaFromHeaders = (h: Readonly<Record<string, string>>, now: number) => {
  let pairs: Array<{ remaining: number; limit: number; reset: number | undefined }> | undefined
  for (const names of QUOTA_HEADERS) {
    const v = h[names.remaining]
    if (v === undefined) continue
    const remaining = num(v)
    const limit = num(h[names.limit])
    if (remaining !== undefined && limit !== undefined && limit > 0)
      (pairs ??= []).push({ remaining, limit, reset: resetAt(h[names.reset], now) })
  }
  if (pairs === undefined) return undefined
  const tightest = pairs.reduce((a, b) => (b.remaining / b.limit < a.remaining / a.limit ? b : a))
  const remaining = Math.max(0, Math.min(1, tightest.remaining / tightest.limit))
  return {
    remaining,
    ...(tightest.reset !== undefined ? { resetAt: tightest.reset, windowMs: Math.max(0, tightest.reset - now) } : {}),
    ...(remaining <= 0 ? { exhausted: true } : {}),
    at: now,
    limit: tightest.limit,
    remainingCount: tightest.remaining
  }
}

/**
 * Breakers per provider and upstream origin, cooldowns per connection and lockouts per (provider, connection,
 * model), fed by one classification of each failure (docs/resilience.md).
 */
export class Resilience extends Context.Tag("gateway/Resilience")<Resilience, ResilienceShape>() {
  static readonly layer = Layer.effect(
    Resilience,
    Effect.gen(function* () {
      const breakers = yield* CircuitBreakers
      const cooldowns = yield* Cooldowns
      const lockouts = yield* Lockouts
      const memory = yield* RoutingMemory

      const admission: ResilienceShape["admission"] = (c, now) => {
        const p = providerRef(c)
        if (breakers.stateAt(p, now) === "OPEN") {
          const until = breakers.openUntil(p, now)
          return { ok: false, reason: "circuit_open", retryAfterMs: until === null ? null : Math.max(0, until - now) }
        }
        const a = cooldowns.availability(c.connection.id, now)
        if (!a.ok) {
          // `cooldown` is a rate limit's (a 429 when every target is in it, and what quota-share
          // may wait out); `error_cooldown` follows a 5xx, a timeout or a transport failure.
          const reason =
            a.state === "cooldown" && TRANSIENT_ERRORS.has(cooldowns.healthAt(c.connection.id, now).lastErrorType ?? "")
              ? "error_cooldown"
              : a.state
          return { ok: false, reason, retryAfterMs: a.until === null ? null : Math.max(0, a.until - now) }
        }
        const lock = lockouts.lockedAt(c.connection.provider.id, c.connection.id, c.model, now)
        if (lock.locked)
          return { ok: false, reason: "model_locked", retryAfterMs: lock.until === null ? null : Math.max(0, lock.until - now) }
        return ADMITTED
      }

      return {
        admission,
        breakerState: (c, now) => breakers.stateAt(providerRef(c), now),
        acquire: (c, now) => {
          const r = breakers.unsafeAcquire(providerRef(c), now)
          return r.allowed && !r.probe ? ALLOWED : { allowed: r.allowed, probe: r.probe }
        },
        succeeded: (c, headers, now) => {
          breakers.unsafeOnSuccess(providerRef(c), now)
          cooldowns.unsafeOnSuccess(c.connection.id)
          lockouts.unsafeOnSuccess(lockRef(c))
          if (headers) {
            const q = quotaFromHeaders(headers, now)
            if (q) memory.setQuota(c.connection.id, undefined, q)
          }
        },
        failed: (c, f, probe = false) =>
          Effect.gen(function* () {
            const now = yield* Clock.currentTimeMillis
            const cls = classify(f, now)
            const p = providerRef(c)
            if (cls.tripsBreaker) yield* breakers.onFailure(p, f.status)
            // Not the provider's fault: a probe that ended this way says nothing about its health.
            else if (probe) yield* breakers.releaseProbe(p)
            if (cls.scope !== "client") yield* cooldowns.onFailure({ id: c.connection.id, name: c.connection.name, provider: p }, cls, f)
            yield* lockouts.onFailure(lockRef(c), f.status, cls.reason)
            const q = f.headers ? quotaFromHeaders(f.headers, now) : undefined
            if (cls.quotaExhausted) {
              memory.setQuota(c.connection.id, undefined, {
                remaining: 0,
                exhausted: true,
                ...(cls.retryAfterMs !== undefined ? { resetAt: now + cls.retryAfterMs, windowMs: cls.retryAfterMs } : {}),
                at: now
              })
            } else if (q) memory.setQuota(c.connection.id, undefined, q)
            return cls
          }),
        release: (c) => breakers.unsafeReleaseProbe(providerRef(c))
      }
    })
  )
}
