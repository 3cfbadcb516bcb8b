import * as Config from "effect/Config"
import * as Option from "effect/Option"
import type * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { EventBus } from "../../platform/events/EventBus.js"
import type { Connection, ResolvedTarget } from "../../upstream/providers/connection.js"
import { Connections, type ConnectionsShape } from "../../upstream/providers/Connections.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { Resilience, type ResilienceShape } from "../resilience/Resilience.js"
import { isAutoId, parseAutoId } from "./auto/variants.js"
import { Aliases, type AliasesShape } from "./Aliases.js"
import { type AutoDescription, makeAutoPlans } from "./autoPlans.js"
import { AutoEngine } from "./AutoEngine.js"
import { Combos, type CombosShape } from "./Combos.js"
import { makeComboPlans, makeComboTargets } from "./comboPlans.js"
import { makeDirectPlans, makeQuotaSharePlan } from "./directPlans.js"
import { notFound, type PlanInput, type RouteError, type RoutePlan, routeError } from "./plan.js"
import { makePlanOutcomes } from "./planOutcomes.js"
import { RoutingMemory } from "./RoutingMemory.js"
import { makeStateFor } from "./routingState.js"
import type { Candidate } from "./types.js"
import { type VirtualModel, virtualModels } from "./virtualModels.js"

export { type AutoDescription, DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT, dispatchModel } from "./autoPlans.js"
export { admit, type PlanInput, RouteError } from "./plan.js"
export type { VirtualModel } from "./virtualModels.js"

export interface RouterShape {
  readonly plan: (model: string, input: PlanInput) => Effect.Effect<RoutePlan, RouteError>
  /**
   * The plan when it is built from memory alone (a direct route with fresh caches, the usual
   * request), else undefined (use `plan`, which always builds it through the stores).
   */
  readonly peekPlan: (model: string, input: PlanInput) => Either.Either<RoutePlan, RouteError> | undefined
  /** The candidate that answered (lkgp, relay legs, sticky sessions, combo.switched). */
  readonly served: (plan: RoutePlan, c: Candidate) => Effect.Effect<void>
  /** `served` without an effect (the common path). */
  readonly servedNow: (plan: RoutePlan, c: Candidate) => void
  /** A candidate's attempt failed (a self-healing probe that failed excludes it again). */
  readonly failed: (plan: RoutePlan, c: Candidate) => Effect.Effect<void>
  /** An auto id and its pool, as the router would use it now. */
  readonly describeAuto: (id: string) => Effect.Effect<AutoDescription, RouteError>
  /** Combos and advertised auto ids, for model lists. */
  readonly virtualModels: Effect.Effect<ReadonlyArray<VirtualModel>>
}

const QUOTA_SHARE = /^qtsd\/([^/]+)\/(.+)$/i

interface PeekPlanDeps {
  readonly aliases: AliasesShape
  readonly combos: CombosShape
  readonly connections: ConnectionsShape
  readonly resilience: ResilienceShape
  readonly clock: Clock.Clock
  readonly peekComboPlan: ReturnType<typeof makeComboPlans>["peek"]
  readonly directOf: ReturnType<typeof makeDirectPlans>["directOf"]
}

/** Model ids whose direct plan is kept (they come from clients: bounded). */
const MAX_DIRECT_PLANS = 1_000

/**
 * A model id's direct route, kept for the connections snapshot it was resolved in (`all`, whose
 * identity changes with the snapshot): its targets, and the plan of the usual request once built.
 */
interface DirectRoute {
  readonly all: ReadonlyArray<Connection>
  readonly targets: ReadonlyArray<ResolvedTarget>
  /** The plan with every candidate admitted, no session id and no conversation to keep warm. */
  usual: Either.Either<RoutePlan, RouteError> | undefined
}

/**
 * Whether `input` gets the direct plan of the usual request (`directOf` reads nothing else of
 * it): no session id, and no conversation to put where its cache is warm.
 */
const usualInput = (input: PlanInput, targets: ReadonlyArray<ResolvedTarget>): boolean =>
  input.sessionId === undefined && (targets.length <= 1 || input.conversation === undefined)

/**
 * The usual request names `<provider>/<model>` (or a bare id that is no combo) and the
 * connections and combos in memory are fresh: its plan is built without an effect. A direct
 * route's plan is built once per connections snapshot and reused while every candidate is
 * admitted (the plan it would build again, identical), not rebuilt (its candidates, arrays and
 * set) per request.
 */
const makePeekPlan = ({
  aliases,
  combos,
  connections,
  resilience,
  clock,
  peekComboPlan,
  directOf
}: PeekPlanDeps): RouterShape["peekPlan"] => {
  const directs = new BoundedMap<string, DirectRoute>({ maxEntries: MAX_DIRECT_PLANS })

  /** Whether every candidate of `plan` is admitted at `now` (admission allocates nothing when it admits). */
  const allAdmitted = (plan: RoutePlan, now: number): boolean => {
    for (const c of plan.candidates) if (!resilience.admission(c, now).ok) return false
    return true
  }

  return (requested, input) => {
    // An alias (/api/models/alias) is replaced by its target before anything else.
    const model = aliases.peekResolve(requested)
    if (model === undefined) return undefined
    if (isAutoId(model) || QUOTA_SHARE.test(model)) return undefined
    if (!model.includes("/")) {
      const combo = combos.peekByName(model)
      if (combo === undefined) return undefined
      if (combo !== null) return peekComboPlan(combo, input)
    }
    const all = connections.peekList()
    if (all === undefined) return undefined
    let route = directs.peek(model)
    if (route === undefined || route.all !== all) {
      const targets = connections.peekTargets(model)
      if (targets === undefined) return undefined
      if (Either.isLeft(targets)) return Either.left(notFound(targets.left.message))
      route = { all, targets: targets.right, usual: undefined }
      directs.set(model, route)
    }
    const now = clock.unsafeCurrentTimeMillis()
    if (!usualInput(input, route.targets)) return Either.right(directOf(model, route.targets, input, now))
    const usual = route.usual
    if (usual !== undefined && Either.isRight(usual) && allAdmitted(usual.right, now)) return usual
    const plan = directOf(model, route.targets, input, now)
    const built = Either.right(plan)
    // Kept only with every candidate admitted: a plan with blocked ones is rebuilt until they are back.
    if (plan.blocked.length === 0) route.usual = built
    return built
  }
}

interface PlanDeps {
  readonly aliases: AliasesShape
  readonly combos: CombosShape
  readonly auto: ReturnType<typeof makeAutoPlans>
  readonly comboPlan: ReturnType<typeof makeComboPlans>["plan"]
  readonly quotaSharePlan: ReturnType<typeof makeQuotaSharePlan>
  readonly directPlan: ReturnType<typeof makeDirectPlans>["directPlan"]
}

/** A model id's plan through the stores, by its form. The slow path only: callers on the request path try `peekPlan` first. */
const makePlan =
  ({ aliases, combos, auto, comboPlan, quotaSharePlan, directPlan }: PlanDeps): RouterShape["plan"] =>
  (requested, input) =>
    Effect.gen(function* () {
      const model = yield* aliases.resolve(requested)
      const qs = QUOTA_SHARE.exec(model)
      if (qs) return yield* quotaSharePlan(qs[1]!, qs[2]!, input)
      if (isAutoId(model)) {
        const spec = parseAutoId(model)
        if (!spec) {
          return yield* routeError(
            400,
            `'${model}' is not an auto model: use auto, auto/<variant> (coding, fast, cheap, offline, smart, lkgp) or auto/<category>[:<tier>] (categories coding, reasoning, vision, chat, multimodal; tiers fast, cheap, floor, reliable, free, pro)`,
            "invalid_auto_model"
          )
        }
        return yield* auto.plan(spec.id, spec, undefined, input)
      }
      if (!model.includes("/")) {
        const combo = yield* combos.byName(model)
        if (combo) return yield* comboPlan(combo, input)
      }
      return yield* directPlan(model, input)
    })

/**
 * The routing engine: turns a model id into a plan. Identifier forms, highest precedence first:
 * `qtSd/<group>/<provider>/<model>` (quota share), `auto` and `auto/...`, a combo name, then
 * `<provider or connection>/<model>` or a bare model id (docs/routing.md). The plans are built by
 * autoPlans.ts, comboPlans.ts, fusionPlan.ts and directPlans.ts; what a plan's outcome changes is
 * planOutcomes.ts's.
 */
export class Router extends Context.Tag("gateway/Router")<Router, RouterShape>() {
  static readonly layer = Layer.effect(
    Router,
    Effect.gen(function* () {
      const connections = yield* Connections
      const combos = yield* Combos
      const aliases = yield* Aliases
      const resilience = yield* Resilience
      const memory = yield* RoutingMemory
      const engine = yield* AutoEngine
      const bus = yield* EventBus
      // Read synchronously where a plan is built from memory alone (a TestClock in tests).
      const clock = yield* Effect.clock
      const stateFor = makeStateFor({ resilience, memory })

      // The parts: the targets, the auto, combo, direct and quota-share plans, the dispatch by id form, the outcomes.
      const { targetsOf, comboCandidates } = makeComboTargets({ connections })
      const auto = makeAutoPlans({ connections, resilience, memory, engine, comboCandidates })
      const combo = makeComboPlans({ connections, resilience, memory, engine, clock, stateFor, auto, targetsOf, comboCandidates })
      const { directOf, directPlan } = makeDirectPlans({ connections, resilience, memory, clock })
      const quotaSharePlan = makeQuotaSharePlan({ connections, resilience, engine, stateFor })
      const peekPlan = makePeekPlan({ aliases, combos, connections, resilience, clock, peekComboPlan: combo.peek, directOf })
      const plan = makePlan({ aliases, combos, auto, comboPlan: combo.plan, quotaSharePlan, directPlan })
      // Every provider's prompt-cache lifetime, when the operator knows better than promptCache.ts's table.
      const promptCacheTtl = yield* Config.option(Config.integer("GATEWAY_PROMPT_CACHE_TTL_SECONDS")).pipe(Effect.orDie)
      const { served, servedNow, failed } = makePlanOutcomes({
        memory,
        engine,
        bus,
        clock,
        promptCacheTtlMs: Option.match(promptCacheTtl, { onNone: () => undefined, onSome: (s) => Math.max(0, s) * 1000 })
      })
      const describeAuto: RouterShape["describeAuto"] = auto.describe

      return {
        plan,
        peekPlan,
        served,
        servedNow,
        failed,
        describeAuto,
        virtualModels: virtualModels({ connections, combos, describeAuto, autoCandidates: auto.candidates, comboCandidates })
      }
    })
  )
}
