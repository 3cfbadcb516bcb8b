/**
 * The circuit breakers' state machine (docs/resilience.md): the stored state of each breaker,
 * its transitions on a request's admission, success and failure, the HALF_OPEN probe slot, the
 * operator's reset, and the same transitions run for the changes of the other gateway processes
 * (the `breakers` channel of `SharedState`).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { BreakerProfile } from "../../domain/resilience.js"
import type { EventBusShape } from "../../platform/events/EventBus.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"
import type { CircuitBreakersShape } from "./CircuitBreakers.js"
import { type BreakerState, breakerKey, type ProviderClass } from "./types.js"

/** Stored state; HALF_OPEN is derived from OPEN and the time (no timer). */
export interface Entry {
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

/** The state in force at `now`: OPEN reads HALF_OPEN once its reset timeout has elapsed. */
export const effectiveState = (e: Entry, now: number): BreakerState =>
  e.state === "OPEN" && e.retryAt !== null && now >= e.retryAt ? "HALF_OPEN" : e.state

/** `f` at the Clock's time, as an effect. */
export const withNow = <A>(f: (now: number) => A): Effect.Effect<A> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => f(now)))

export interface BreakerMachineDeps {
  /** The breakers by key (`breakerKey`), shared with their views. */
  readonly entries: Map<string, Entry>
  /** The thresholds and reset timeout in force for a provider class. */
  readonly profile: (cls: ProviderClass) => BreakerProfile
  readonly bus: EventBusShape
  /** Where the `breakers` channel is opened (once, here). */
  readonly shared: SharedStateShape
}

/** The transitions: admission (`unsafeAcquire`), verdicts, the probe slot's release and the reset, each told to the other processes. */
export const makeBreakerMachine = ({ entries, profile, bus, shared }: BreakerMachineDeps) => {
  const recovered = (e: Entry, key: string, previous: BreakerState, now: number) =>
    bus.publish("provider.recovered", {
      provider: e.provider,
      origin: e.origin,
      breaker: key,
      previous_state: previous,
      recovered_at: new Date(now).toISOString()
    })

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
  const fail = (
    key: string,
    provider: string,
    origin: string | null,
    providerClass: ProviderClass,
    status: number,
    now: number,
    local: boolean
  ) => {
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
      if (channel.shared)
        channel.publish({ op: "reset", ...(provider !== undefined ? { provider } : {}), ...(origin !== undefined ? { origin } : {}) })
      return n
    })

  return { unsafeAcquire, unsafeOnSuccess, onFailure, unsafeReleaseProbe, reset }
}
