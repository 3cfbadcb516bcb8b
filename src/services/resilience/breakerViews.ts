/** What the circuit breakers show: a breaker's state and open time at an instant, and every breaker with its profile (`GET
 * /api/resilience`). */
import type { BreakerProfile } from "../../domain/resilience.js"
import { effectiveState, type Entry, withNow } from "./breakerMachine.js"
import type { CircuitBreakersShape } from "./CircuitBreakers.js"
import { type BreakerView, breakerKey, type ProviderClass } from "./types.js"

export interface BreakerViewsDeps {
  readonly entries: ReadonlyMap<string, Entry>
  readonly profile: (cls: ProviderClass) => BreakerProfile
}

/** `stateAt`, `openUntil` and `list`, read from the breakers' stored state. */
export const makeBreakerViews = ({ entries, profile }: BreakerViewsDeps) => {
  const stateAt: CircuitBreakersShape["stateAt"] = (provider, now) => {
    const e = entries.get(breakerKey(provider))
    return e === undefined ? "CLOSED" : effectiveState(e, now)
  }

  const openUntil: CircuitBreakersShape["openUntil"] = (provider, now) => {
    const e = entries.get(breakerKey(provider))
    return e !== undefined && effectiveState(e, now) === "OPEN" ? e.retryAt : null
  }

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

  return { stateAt, openUntil, list }
}
