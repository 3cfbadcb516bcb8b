import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BreakerProfile } from "../../domain/resilience.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { ResilienceConfig } from "./ResilienceConfig.js"
import { type BreakerState, type BreakerView, breakerKey, type ProviderClass, type ProviderRef } from "./types.js"

export interface AcquireResult {
  /** Whether a request may go to this provider now. */
  readonly allowed: boolean
  /** This request is the HALF_OPEN probe: report its verdict (onSuccess/onFailure) or releaseProbe. */
  readonly probe: boolean
  /** While OPEN: ms until a probe is let through; null otherwise (also while another probe is out). */
  readonly retryAfterMs: number | null
}

export interface CircuitBreakersShape {
  /** The state in force at `now` (OPEN reads HALF_OPEN once the reset timeout has elapsed). */
  readonly stateAt: (provider: ProviderRef, now: number) => BreakerState
  /** While OPEN at `now`: when a probe will be let through (epoch ms); null otherwise. */
  readonly openUntil: (provider: ProviderRef, now: number) => number | null
  /** Asks to send a request: refused while OPEN, and in HALF_OPEN while the one probe is out. */
  readonly acquire: (provider: ProviderRef) => Effect.Effect<AcquireResult>
  /** `acquire` at `now`, synchronously (the request path). */
  readonly unsafeAcquire: (provider: ProviderRef, now: number) => AcquireResult
  /** A request to the provider succeeded: CLOSED with no failures (except while OPEN, see docs). */
  readonly onSuccess: (provider: ProviderRef) => Effect.Effect<void>
  /** `onSuccess` at `now`, synchronously (the request path). */
  readonly unsafeOnSuccess: (provider: ProviderRef, now: number) => void
  /** A provider-level failure (a classification with `tripsBreaker`) with the upstream status. */
  readonly onFailure: (provider: ProviderRef, status: number) => Effect.Effect<void>
  /** Frees the HALF_OPEN probe slot without a verdict (the client went away). */
  readonly releaseProbe: (provider: ProviderRef) => Effect.Effect<void>
  /** `releaseProbe`, synchronously. */
  readonly unsafeReleaseProbe: (provider: ProviderRef) => void
  /**
   * POST /api/resilience/reset: back to CLOSED; how many were reset. All breakers when `provider`
   * is omitted; else every breaker of that provider id (each origin), or the one breaker whose key
   * it is; `origin` narrows a provider id to that origin.
   */
  readonly reset: (provider?: string, origin?: string) => Effect.Effect<number>
  /** Every breaker with recorded state, sorted by key. */
  readonly list: Effect.Effect<ReadonlyArray<BreakerView>>
}

/** Stored state; HALF_OPEN is derived from OPEN and the time (no timer). */
interface Entry {
  readonly provider: string
  readonly origin: string | null
  providerClass: ProviderClass
  state: "CLOSED" | "DEGRADED" | "OPEN"
  consecutiveFailures: number
  /** While OPEN: when the reset timeout has elapsed (a probe may go). */
  retryAt: number | null
  /** When the HALF_OPEN probe slot was taken; null when free. */
  probeSince: number | null
  lastFailureAt: number | null
  lastStatus: number | null
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): the verdicts, which every
 * process runs through the same state machine at the verdict's time, so failures seen by several
 * processes add up to one count; and the HALF_OPEN probe slot, taken and freed, so that the
 * processes behind a load balancer send one probe between them, not one each (two taken within
 * the channel's delivery time, a millisecond or so, both go).
 */
export type BreakerChange =
  | {
      readonly op: "failure"
      readonly key: string
      readonly provider: string
      readonly origin: string | null
      readonly providerClass: ProviderClass
      readonly status: number
      readonly at: number
    }
  | { readonly op: "success"; readonly key: string; readonly at: number }
  | { readonly op: "reset"; readonly provider?: string; readonly origin?: string }
  | { readonly op: "probe"; readonly key: string; readonly at: number }
  | { readonly op: "release"; readonly key: string }

const effectiveState = (e: Entry, now: number): BreakerState => (e.state === "OPEN" && e.retryAt !== null && now >= e.retryAt ? "HALF_OPEN" : e.state)

/**
 * Provider circuit breakers (spec document 1, "Provider circuit breaker"), in memory, one per
 * provider and upstream origin (`breakerKey`: a broken host does not block the provider's other
 * hosts; docs/resilience.md). Counts
 * consecutive provider-level failures: DEGRADED at `degradationThreshold`, OPEN at
 * `failureThreshold`; OPEN reads HALF_OPEN once `resetTimeoutMs` has passed, where one probe
 * at a time decides: success closes, failure re-opens for a full reset timeout. Verdicts also
 * go to the other gateway processes on the `breakers` channel (`SharedState`).
 */
export class CircuitBreakers extends Context.Tag("gateway/CircuitBreakers")<CircuitBreakers, CircuitBreakersShape>() {
  static readonly layer = Layer.effect(
    CircuitBreakers,
    Effect.gen(function* () {
      const config = yield* ResilienceConfig
      const bus = yield* EventBus
      const shared = yield* SharedState.orLocal
      const entries = new Map<string, Entry>()

      const profile = (cls: ProviderClass): BreakerProfile => config.current().providerBreaker[cls]

      const withNow = <A>(f: (now: number) => A): Effect.Effect<A> => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => f(now)))

      const recovered = (e: Entry, key: string, previous: BreakerState, now: number) =>
        bus.publish("provider.recovered", { provider: e.provider, origin: e.origin, breaker: key, previous_state: previous, recovered_at: new Date(now).toISOString() })

      // Changes of the other processes, run through the same transitions without announcing them again.
      const channel = shared.channel<BreakerChange>("breakers", (c) => {
        if (c.op === "failure") fail(c.key, c.provider, c.origin, c.providerClass, c.status, c.at, false)
        else if (c.op === "success") succeed(c.key, c.at, false)
        else if (c.op === "probe") {
          // Another process sends the probe: this one waits for its verdict like for its own.
          const e = entries.get(c.key)
          if (e !== undefined && e.state === "OPEN") e.probeSince = c.at
        } else if (c.op === "release") {
          const e = entries.get(c.key)
          if (e !== undefined) e.probeSince = null
        } else clear(c.provider, c.origin)
      })

      const stateAt: CircuitBreakersShape["stateAt"] = (provider, now) => {
        const e = entries.get(breakerKey(provider))
        return e === undefined ? "CLOSED" : effectiveState(e, now)
      }

      const unsafeAcquire: CircuitBreakersShape["unsafeAcquire"] = (provider, now) => {
        const e = entries.get(breakerKey(provider))
        if (e === undefined) return { allowed: true, probe: false, retryAfterMs: null }
        e.providerClass = provider.authClass
        const state = effectiveState(e, now)
        if (state === "CLOSED" || state === "DEGRADED") return { allowed: true, probe: false, retryAfterMs: null }
        if (state === "OPEN") return { allowed: false, probe: false, retryAfterMs: Math.max(0, e.retryAt! - now) }
        // HALF_OPEN: one probe at a time; a slot held longer than the reset timeout is lost.
        if (e.probeSince !== null && now - e.probeSince <= profile(e.providerClass).resetTimeoutMs) {
          return { allowed: false, probe: false, retryAfterMs: null }
        }
        e.probeSince = now
        if (channel.shared) channel.publish({ op: "probe", key: breakerKey(provider), at: now })
        return { allowed: true, probe: true, retryAfterMs: null }
      }

      /** A success at `now`; `local`: this process's own (announced on the bus and to the other processes). */
      const succeed = (key: string, now: number, local: boolean) => {
        const e = entries.get(key)
        if (e === undefined) return
        const previous = effectiveState(e, now)
        // A straggler that succeeds while OPEN (sent before the breaker opened) proves little:
        // only the probe (or any success once HALF_OPEN) closes an open breaker.
        if (previous === "OPEN") return
        const changed = previous !== "CLOSED" || e.consecutiveFailures > 0
        e.state = "CLOSED"
        e.consecutiveFailures = 0
        e.retryAt = null
        e.probeSince = null
        if (!local) return
        if (previous !== "CLOSED") recovered(e, key, previous, now)
        if (changed && channel.shared) channel.publish({ op: "success", key, at: now })
      }

      const unsafeOnSuccess: CircuitBreakersShape["unsafeOnSuccess"] = (provider, now) => {
        const key = breakerKey(provider)
        const e = entries.get(key)
        if (e === undefined) return
        e.providerClass = provider.authClass
        succeed(key, now, true)
      }

      /** A provider-level failure at `now`; `local` as for `succeed`. */
      const fail = (key: string, provider: string, origin: string | null, providerClass: ProviderClass, status: number, now: number, local: boolean) => {
        let e = entries.get(key)
        if (e === undefined) {
          e = {
            provider,
            origin,
            providerClass,
            state: "CLOSED",
            consecutiveFailures: 0,
            retryAt: null,
            probeSince: null,
            lastFailureAt: null,
            lastStatus: null
          }
          entries.set(key, e)
        }
        e.providerClass = providerClass
        const p = profile(e.providerClass)
        const before = effectiveState(e, now)
        e.consecutiveFailures += 1
        e.lastFailureAt = now
        e.lastStatus = status
        if (before === "HALF_OPEN") {
          // The probe (or any request let through while HALF_OPEN) failed: another full timeout.
          e.state = "OPEN"
          e.retryAt = now + p.resetTimeoutMs
          e.probeSince = null
        } else if (before !== "OPEN") {
          if (e.consecutiveFailures >= p.failureThreshold) {
            e.state = "OPEN"
            e.retryAt = now + p.resetTimeoutMs
            e.probeSince = null
          } else if (e.consecutiveFailures >= p.degradationThreshold) {
            e.state = "DEGRADED"
          }
        }
        // While OPEN a straggler failure counts but does not push the probe time back.
        if (!local) return
        if (channel.shared) channel.publish({ op: "failure", key, provider, origin, providerClass, status, at: now })
        bus.publish("provider.error", {
          provider,
          origin: e.origin,
          breaker: key,
          status,
          consecutive_failures: e.consecutiveFailures,
          circuit_state: effectiveState(e, now)
        })
      }

      const onFailure: CircuitBreakersShape["onFailure"] = (provider, status) =>
        withNow((now) => fail(breakerKey(provider), provider.id, provider.origin ?? null, provider.authClass, status, now, true))

      const unsafeReleaseProbe: CircuitBreakersShape["unsafeReleaseProbe"] = (provider) => {
        const key = breakerKey(provider)
        const e = entries.get(key)
        if (e === undefined || e.probeSince === null) return
        e.probeSince = null
        if (channel.shared) channel.publish({ op: "release", key })
      }

      const clear = (provider: string | undefined, origin: string | undefined): number => {
        if (provider === undefined) {
          const n = entries.size
          entries.clear()
          return n
        }
        const wanted = provider.toLowerCase()
        let n = 0
        for (const [key, e] of entries) {
          const match = key.toLowerCase() === wanted || (e.provider.toLowerCase() === wanted && (origin === undefined || e.origin === origin))
          if (match && entries.delete(key)) n++
        }
        return n
      }

      const reset: CircuitBreakersShape["reset"] = (provider, origin) =>
        Effect.sync(() => {
          const n = clear(provider, origin)
          if (channel.shared) channel.publish({ op: "reset", ...(provider !== undefined ? { provider } : {}), ...(origin !== undefined ? { origin } : {}) })
          return n
        })

      const list: CircuitBreakersShape["list"] = withNow((now) =>
        [...entries.entries()]
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([key, e]): BreakerView => {
            const p = profile(e.providerClass)
            const state = effectiveState(e, now)
            return {
              key,
              provider: e.provider,
              origin: e.origin,
              providerClass: e.providerClass,
              state,
              consecutiveFailures: e.consecutiveFailures,
              degradationThreshold: p.degradationThreshold,
              failureThreshold: p.failureThreshold,
              resetTimeoutMs: p.resetTimeoutMs,
              retryAt: state === "OPEN" ? e.retryAt : null,
              lastFailureAt: e.lastFailureAt,
              lastStatus: e.lastStatus,
              probing: state === "HALF_OPEN" && e.probeSince !== null && now - e.probeSince <= p.resetTimeoutMs
            }
          })
      )

      const openUntil: CircuitBreakersShape["openUntil"] = (provider, now) => {
        const e = entries.get(breakerKey(provider))
        return e !== undefined && effectiveState(e, now) === "OPEN" ? e.retryAt : null
      }

      return {
        stateAt,
        openUntil,
        acquire: (provider) => withNow((now) => unsafeAcquire(provider, now)),
        unsafeAcquire,
        onSuccess: (provider) => withNow((now) => unsafeOnSuccess(provider, now)),
        unsafeOnSuccess,
        onFailure,
        releaseProbe: (provider) => Effect.sync(() => unsafeReleaseProbe(provider)),
        unsafeReleaseProbe,
        reset,
        list
      }
    })
  )
}
