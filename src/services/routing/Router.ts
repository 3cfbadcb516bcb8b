import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { EventBus } from "../../platform/events/EventBus.js"
import { Connections, type ResolvedTarget } from "../../upstream/providers/Connections.js"
import { Resilience } from "../resilience/Resilience.js"
import { isAutoId, parseAutoId } from "./auto/variants.js"
import { Aliases } from "./Aliases.js"
import { type AutoDescription, makeAutoPlans } from "./autoPlans.js"
import { AutoEngine } from "./AutoEngine.js"
import { type Combo, Combos } from "./Combos.js"
import { fusionPlan } from "./fusionPlan.js"
import { admit, candidateOf, notFound, type PlanInput, type RouteError, type RoutePlan, routeError, sessionOf, toFront } from "./plan.js"
import { RoutingMemory } from "./RoutingMemory.js"
import { COMBO_STRATEGIES, quotaShare } from "./strategies/index.js"
import type { Candidate, RoutingState, StrategyContext } from "./types.js"
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

/**
 * The routing engine: turns a model id into a plan. Identifier forms, highest precedence first:
 * `qtSd/<group>/<provider>/<model>` (quota share), `auto` and `auto/...`, a combo name, then
 * `<provider or connection>/<model>` or a bare model id (docs/routing.md).
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

      const stateFor = (now: number): RoutingState => ({
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

      /** Every connection target of a model id (unresolvable ids give none). */
      const targetsOf = (model: string) => connections.targets(model).pipe(Effect.orElseSucceed((): ReadonlyArray<ResolvedTarget> => []))

      /** Candidates of a combo's targets, in target order. */
      const comboCandidates = (combo: Combo) =>
        Effect.map(
          Effect.forEach(combo.targets, (t, i) => Effect.map(targetsOf(t.model), (ts) => ts.map((r) => candidateOf(r, t.weight ?? 1, i)))),
          (lists) => lists.flat()
        )

      const auto = makeAutoPlans({ connections, resilience, memory, engine, comboCandidates })
      const describeAuto: RouterShape["describeAuto"] = auto.describe

      /** A combo's plan (not auto, not fusion) from its candidates: no effect. */
      const comboOf = (combo: Combo, all: ReadonlyArray<Candidate>, input: PlanInput, now: number): Either.Either<RoutePlan, RouteError> => {
        if (all.length === 0) return Either.left(notFound(`combo '${combo.name}' has no target that resolves to an enabled connection`))
        const { ok, blocked } = admit(all, resilience.admission, now)
        const strategy = COMBO_STRATEGIES[combo.strategy as keyof typeof COMBO_STRATEGIES]
        const ctx: StrategyContext = { scope: combo.name, request: input.features(), random: engine.random, now, state: stateFor(now) }
        const ordered = strategy.order(ok, ctx)
        // context-relay keeps its own session legs; other strategies honour X-Session-Id stickiness.
        const sticky = input.sessionId && combo.strategy !== "context-relay" ? memory.sticky(combo.name, input.sessionId, now) : undefined
        return Either.right({
          kind: "combo",
          scope: combo.name,
          strategy: combo.strategy,
          candidates: toFront(ordered, sticky),
          blocked,
          probes: new Set<string>(),
          ...sessionOf(input)
        } satisfies RoutePlan)
      }

      const comboPlan = (combo: Combo, input: PlanInput) =>
        Effect.gen(function* () {
          if (combo.strategy === "auto") return yield* auto.plan(combo.name, parseAutoId("auto")!, combo, input)
          if (combo.strategy === "fusion") return yield* fusionPlan({ targetsOf, admission: resilience.admission }, combo, input)
          const now = yield* Clock.currentTimeMillis
          const all = yield* comboCandidates(combo)
          return yield* comboOf(combo, all, input, now)
        })

      /** A combo's plan when its targets' connections are fresh in memory (not auto, not fusion), else undefined. */
      const peekComboPlan = (combo: Combo, input: PlanInput): Either.Either<RoutePlan, RouteError> | undefined => {
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

      const quotaSharePlan = (group: string, target: string, input: PlanInput) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const targets = yield* connections.targets(target).pipe(Effect.mapError((e) => notFound(e.message)))
          const all = targets.map((t) => candidateOf(t))
          const { ok, blocked } = admit(all, resilience.admission, now)
          const scope = `qtSd/${group}`
          const ordered = quotaShare.order(ok, { scope, request: input.features(), random: engine.random, now, state: stateFor(now) })
          return { kind: "quota-share", scope, strategy: "quota-share", candidates: ordered, blocked, probes: new Set<string>(), ...sessionOf(input) } satisfies RoutePlan
        })

      const directOf = (model: string, targets: ReadonlyArray<ResolvedTarget>, input: PlanInput, now: number): RoutePlan => {
        const { ok, blocked } = admit(
          targets.map((t) => candidateOf(t)),
          resilience.admission,
          now
        )
        return { kind: "direct", scope: model, strategy: "direct", candidates: ok, blocked, probes: new Set<string>(), ...sessionOf(input) }
      }

      const directPlan = (model: string, input: PlanInput) =>
        Effect.flatMap(connections.targets(model).pipe(Effect.mapError((e) => notFound(e.message))), (targets) =>
          Effect.sync(() => directOf(model, targets, input, clock.unsafeCurrentTimeMillis()))
        )

      /**
       * The usual request names `<provider>/<model>` (or a bare id that is no combo) and the
       * connections and combos in memory are fresh: its plan is built without an effect.
       */
      const peekPlan: RouterShape["peekPlan"] = (requested, input) => {
        // An alias (/api/models/alias) is replaced by its target before anything else.
        const model = aliases.peekResolve(requested)
        if (model === undefined) return undefined
        if (isAutoId(model) || QUOTA_SHARE.test(model)) return undefined
        if (!model.includes("/")) {
          const combo = combos.peekByName(model)
          if (combo === undefined) return undefined
          if (combo !== null) return peekComboPlan(combo, input)
        }
        const targets = connections.peekTargets(model)
        if (targets === undefined) return undefined
        return Either.isLeft(targets) ? Either.left(notFound(targets.left.message)) : Either.right(directOf(model, targets.right, input, clock.unsafeCurrentTimeMillis()))
      }

      // The slow path only: callers on the request path try `peekPlan` first.
      const plan: RouterShape["plan"] = (requested, input) =>
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

      const servedAt = (p: RoutePlan, c: Candidate, now: number): void => {
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
        // A direct route keeps no routing memory: nothing to do on every plain request.
        p.kind === "direct" ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => servedAt(p, c, now)))
      const servedNow: RouterShape["servedNow"] = (p, c) => {
        if (p.kind !== "direct") servedAt(p, c, clock.unsafeCurrentTimeMillis())
      }

      const failed: RouterShape["failed"] = (p, c) =>
        p.probes.has(c.key) ? Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => engine.healing.probeDone(c.key, false, now))) : Effect.void

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
