/**
 * A combo's plan: its targets' candidates, admitted, then ordered by its strategy (auto and fusion
 * have plans of their own), a sticky session's candidate first. Built from memory alone when the
 * targets' connections are fresh (`peek`, the common path), else through the stores (`plan`).
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { ConnectionsShape, ResolvedTarget } from "../../upstream/providers/Connections.js"
import type { ResilienceShape } from "../resilience/Resilience.js"
import { parseAutoId } from "./auto/variants.js"
import type { AutoEngineShape } from "./AutoEngine.js"
import type { makeAutoPlans } from "./autoPlans.js"
import type { Combo } from "./Combos.js"
import { fusionPlan } from "./fusionPlan.js"
import { admit, candidateOf, notFound, type PlanInput, type RouteError, type RoutePlan, sessionOf, toFront } from "./plan.js"
import { comboAffinity } from "./promptCache.js"
import type { RoutingMemoryShape } from "./RoutingMemory.js"
import { COMBO_STRATEGIES } from "./strategies/index.js"
import type { Candidate, RoutingState, StrategyContext } from "./types.js"

/** `targetsOf`: every connection target of a model id (unresolvable ids give none); `comboCandidates`: a combo's, in target order. */
export const makeComboTargets = ({ connections }: { readonly connections: ConnectionsShape }) => {
  const targetsOf = (model: string) => connections.targets(model).pipe(Effect.orElseSucceed((): ReadonlyArray<ResolvedTarget> => []))

  const comboCandidates = (combo: Combo) =>
    Effect.map(
      Effect.forEach(combo.targets, (t, i) => Effect.map(targetsOf(t.model), (ts) => ts.map((r) => candidateOf(r, t.weight ?? 1, i)))),
      (lists) => lists.flat()
    )

  return { targetsOf, comboCandidates }
}

type ComboTargets = ReturnType<typeof makeComboTargets>

export interface ComboPlansDeps extends ComboTargets {
  readonly connections: ConnectionsShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  readonly engine: AutoEngineShape
  /** Read synchronously where a plan is built from memory alone (a TestClock in tests). */
  readonly clock: Clock.Clock
  readonly stateFor: (now: number) => RoutingState
  readonly auto: ReturnType<typeof makeAutoPlans>
}

/** A combo's plan: `plan` (any strategy, through the stores) and `peek` (the ordering strategies, from memory, else undefined). */
export const makeComboPlans = ({
  connections,
  resilience,
  memory,
  engine,
  clock,
  stateFor,
  auto,
  targetsOf,
  comboCandidates
}: ComboPlansDeps) => {
  /** A combo's plan (not auto, not fusion) from its candidates: no effect. */
  const comboOf = (combo: Combo, all: ReadonlyArray<Candidate>, input: PlanInput, now: number): Either.Either<RoutePlan, RouteError> => {
    if (all.length === 0) return Either.left(notFound(`combo '${combo.name}' has no target that resolves to an enabled connection`))
    const { ok, blocked } = admit(all, resilience.admission, now)
    const strategy = COMBO_STRATEGIES[combo.strategy as keyof typeof COMBO_STRATEGIES]
    const ctx: StrategyContext = { scope: combo.name, request: input.features(), random: engine.random, now, state: stateFor(now) }
    const ordered = strategy.order(ok, ctx)
    // context-relay keeps its own session legs; other strategies honour X-Session-Id stickiness.
    const sticky = input.sessionId && combo.strategy !== "context-relay" ? memory.sticky(combo.name, input.sessionId, now) : undefined
    // Without a session id, a conversation goes first where its prompt cache is warm, when the
    // combo has a choice to make and its strategy (or its own setting) keeps conversations.
    const conversation =
      input.sessionId === undefined &&
      input.conversation !== undefined &&
      all.length > 1 &&
      comboAffinity(combo.strategy, combo.config.promptCacheAffinity)
        ? input.conversation
        : undefined
    return Either.right({
      kind: "combo",
      scope: combo.name,
      strategy: combo.strategy,
      candidates: toFront(ordered, sticky ?? (conversation === undefined ? undefined : memory.warm(combo.name, conversation, now))),
      blocked,
      probes: new Set<string>(),
      ...sessionOf(input),
      ...(conversation === undefined ? {} : { conversation })
    } satisfies RoutePlan)
  }

  const plan = (combo: Combo, input: PlanInput) =>
    Effect.gen(function* () {
      if (combo.strategy === "auto") return yield* auto.plan(combo.name, parseAutoId("auto")!, combo, input)
      if (combo.strategy === "fusion") return yield* fusionPlan({ targetsOf, admission: resilience.admission }, combo, input)
      const now = yield* Clock.currentTimeMillis
      const all = yield* comboCandidates(combo)
      return yield* comboOf(combo, all, input, now)
    })

  /** A combo's plan when its targets' connections are fresh in memory (not auto, not fusion), else undefined. */
  const peek = (combo: Combo, input: PlanInput): Either.Either<RoutePlan, RouteError> | undefined => {
    if (combo.strategy === "auto" || combo.strategy === "fusion") return undefined
    const all: Array<Candidate> = []
    for (let i = 0; i < combo.targets.length; i++) {
      const t = combo.targets[i]!
      const targets = connections.peekTargets(t.model)
      if (targets === undefined) return undefined
      // As `targetsOf`: a target that resolves to nothing adds no candidate.
      if (Either.isRight(targets)) for (const r of targets.right) all.push(candidateOf(r, t.weight ?? 1, i))
    }
    return comboOf(combo, all, input, clock.unsafeCurrentTimeMillis())
  }

  return { plan, peek }
}
