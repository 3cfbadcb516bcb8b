/**
 * The plans of a model id that names its connections: a direct route (`<provider or
 * connection>/<model>` or a bare model id), and quota share (`qtSd/<group>/<target>`), which
 * orders the target's connections by what each has left.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { ConnectionsShape, ResolvedTarget } from "../../upstream/providers/Connections.js"
import type { ResilienceShape } from "../resilience/Resilience.js"
import type { AutoEngineShape } from "./AutoEngine.js"
import { admit, candidateOf, notFound, type PlanInput, type RoutePlan, sessionOf, toFront } from "./plan.js"
import type { RoutingMemoryShape } from "./RoutingMemory.js"
import { quotaShare } from "./strategies/index.js"
import type { RoutingState } from "./types.js"

export interface DirectPlansDeps {
  readonly connections: ConnectionsShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  /** Read synchronously where a plan is built from memory alone (a TestClock in tests). */
  readonly clock: Clock.Clock
}

/** A direct route's plan: `directOf` (from its resolved targets, no effect) and `directPlan` (resolving them). */
export const makeDirectPlans = ({ connections, resilience, memory, clock }: DirectPlansDeps) => {
  const directOf = (model: string, targets: ReadonlyArray<ResolvedTarget>, input: PlanInput, now: number): RoutePlan => {
    const { ok, blocked } = admit(
      targets.map((t) => candidateOf(t)),
      resilience.admission,
      now
    )
    // A model served by several connections (accounts): a conversation without a session id goes
    // first where its prompt cache is warm (docs/routing.md, "Prompt-cache affinity").
    const conversation = input.sessionId === undefined && targets.length > 1 ? input.conversation : undefined
    return {
      kind: "direct",
      scope: model,
      strategy: "direct",
      candidates: conversation === undefined ? ok : toFront(ok, memory.warm(model, conversation, now)),
      blocked,
      probes: new Set<string>(),
      ...sessionOf(input),
      ...(conversation === undefined ? {} : { conversation })
    }
  }

  const directPlan = (model: string, input: PlanInput) =>
    Effect.flatMap(connections.targets(model).pipe(Effect.mapError((e) => notFound(e.message))), (targets) =>
      Effect.sync(() => directOf(model, targets, input, clock.unsafeCurrentTimeMillis()))
    )

  return { directOf, directPlan }
}

export interface QuotaSharePlanDeps {
  readonly connections: ConnectionsShape
  readonly resilience: ResilienceShape
  readonly engine: AutoEngineShape
  readonly stateFor: (now: number) => RoutingState
}

/** A quota-share plan (`qtSd/<group>/<target>`): the target's connections, admitted, in quota-share order. */
export const makeQuotaSharePlan =
  ({ connections, resilience, engine, stateFor }: QuotaSharePlanDeps) =>
  (group: string, target: string, input: PlanInput) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const targets = yield* connections.targets(target).pipe(Effect.mapError((e) => notFound(e.message)))
      const all = targets.map((t) => candidateOf(t))
      const { ok, blocked } = admit(all, resilience.admission, now)
      const scope = `qtSd/${group}`
      const ordered = quotaShare.order(ok, { scope, request: input.features(), random: engine.random, now, state: stateFor(now) })
      return {
        kind: "quota-share",
        scope,
        strategy: "quota-share",
        candidates: ordered,
        blocked,
        probes: new Set<string>(),
        ...sessionOf(input)
      } satisfies RoutePlan
    })
