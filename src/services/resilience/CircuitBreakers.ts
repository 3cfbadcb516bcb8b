import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BreakerProfile } from "../../domain/resilience.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { type Entry, makeBreakerMachine, withNow } from "./breakerMachine.js"
import { makeBreakerViews } from "./breakerViews.js"
import { ResilienceConfig } from "./ResilienceConfig.js"
import type { BreakerState, BreakerView, ProviderClass, ProviderRef } from "./types.js"

export type { BreakerChange } from "./breakerMachine.js"

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

/**
 * Provider circuit breakers, in memory, one per provider and upstream origin so a broken host does not block the
 * provider's others (docs/resilience.md#provider-circuit-breaker); verdicts also go out on the `breakers` channel.
 * Transitions: breakerMachine.ts; views: breakerViews.ts.
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

      const { unsafeAcquire, unsafeOnSuccess, onFailure, unsafeReleaseProbe, reset } = makeBreakerMachine({ entries, profile, bus, shared })
      const { stateAt, openUntil, list } = makeBreakerViews({ entries, profile })

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
