/**
 * What a routing strategy reads of the gateway at an instant: breakers, quotas, latency and error
 * statistics, load, turns, the last good candidate, relay legs and deficits.
 */
import type { ResilienceShape } from "../resilience/Resilience.js"
import type { RoutingMemoryShape } from "./RoutingMemory.js"
import type { RoutingState } from "./types.js"

/** The routing state at `now`, read from the resilience layer and the routing memory (made once per router). */
export const makeStateFor =
  ({ resilience, memory }: { readonly resilience: ResilienceShape; readonly memory: RoutingMemoryShape }) =>
  (now: number): RoutingState => ({
    breaker: (c) => resilience.breakerState(c, now),
    quota: (c) => memory.quota(c.connection.id, c.model, now),
    stats: (c) => memory.stats(c.key, now),
    inFlight: (c) => memory.inFlight(c.connection.id),
    used: (c) => memory.used(c.key),
    nextTurn: memory.nextTurn,
    lastGood: memory.lastGood,
    relayLeg: memory.relayLeg,
    deficits: memory.deficits
  })
