/**
 * What a plan's outcome changes: the candidate that answered becomes the scope's last good one
 * (and a session's sticky one, a relay's leg, a healed probe; a switch is published as
 * combo.switched); a failed probe excludes its candidate again. A direct route keeps no memory.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { EventBusShape } from "../../platform/events/EventBus.js"
import type { AutoEngineShape } from "./AutoEngine.js"
import type { RouterShape } from "./Router.js"
import type { RoutingMemoryShape } from "./RoutingMemory.js"
import type { RoutePlan } from "./plan.js"
import { promptCacheTtlMs as promptCacheTtlMs0 } from "./promptCache.js"
import type { Candidate } from "./types.js"

export interface PlanOutcomesDeps {
  readonly memory: RoutingMemoryShape
  /** `GATEWAY_PROMPT_CACHE_TTL_SECONDS` in ms: every provider's prompt-cache lifetime, when set. */
  readonly promptCacheTtlMs?: number | undefined
  readonly engine: AutoEngineShape
  readonly bus: EventBusShape
  /** Read synchronously by `servedNow` (a TestClock in tests). */
  readonly clock: Clock.Clock
}

/** `served` (an effect), `servedNow` (the common path, synchronous) and `failed`. */
export const makePlanOutcomes = ({ memory, engine, bus, clock, promptCacheTtlMs }: PlanOutcomesDeps) => {
  /** The conversation's prompt cache is warm where it was served (a plan with a choice to make only). */
  const warmed = (p: RoutePlan, c: Candidate, now: number): void => {
    if (p.conversation !== undefined) memory.setWarm(p.scope, p.conversation, c.key, now, promptCacheTtlMs0(c, promptCacheTtlMs))
  }
  const servedAt = (p: RoutePlan, c: Candidate, now: number): void => {
    warmed(p, c, now)
    const previous = memory.setLastGood(p.scope, c.key)
    if (p.sessionId) {
      memory.setSticky(p.scope, p.sessionId, c.key, now, p.sessionKey)
      if (p.strategy === "context-relay") memory.setRelayLeg(p.scope, p.sessionId, c.key)
    }
    if (p.probes.has(c.key)) engine.healing.probeDone(c.key, true, now)
    if (previous !== undefined && previous !== c.key && (p.kind === "combo" || p.kind === "auto")) {
      bus.publish("combo.switched", { combo: p.scope, strategy: p.strategy, from: previous, to: c.key })
    }
  }
  const served: RouterShape["served"] = (p, c) =>
    // A direct route keeps no routing memory (but where a conversation's cache is warm, when
    // several connections serve its model): nothing to do on every plain request.
    p.kind === "direct"
      ? p.conversation === undefined
        ? Effect.void
        : Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => warmed(p, c, now)))
      : Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => servedAt(p, c, now)))
  const servedNow: RouterShape["servedNow"] = (p, c) => {
    if (p.kind !== "direct") servedAt(p, c, clock.unsafeCurrentTimeMillis())
    else if (p.conversation !== undefined) warmed(p, c, clock.unsafeCurrentTimeMillis())
  }

  const failed: RouterShape["failed"] = (p, c) =>
    p.probes.has(c.key)
      ? Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => engine.healing.probeDone(c.key, false, now)))
      : Effect.void

  return { served, servedNow, failed }
}
