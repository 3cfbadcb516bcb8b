import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { ComboConfig } from "../../domain/combos.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { type Connection, Connections, connectionModelIds, type ResolvedTarget } from "../../upstream/providers/Connections.js"
import { kindOf, type ModelKind, modelDoes, type ModelSpec } from "../../domain/catalog/catalog.js"
import { Resilience } from "../resilience/Resilience.js"
import { budgetFromHeader, resolveWeights } from "./auto/weights.js"
import { ADVERTISED_AUTO_IDS, type AutoSpec, filterPool, isAutoId, parseAutoId } from "./auto/variants.js"
import { orderAuto } from "./auto/select.js"
import { Aliases } from "./Aliases.js"
import { AutoEngine } from "./AutoEngine.js"
import { type Combo, Combos } from "./Combos.js"
import { type Blocked, candidateOf, type FusionPlan, type RoutePlan } from "./plan.js"
import { RoutingMemory } from "./RoutingMemory.js"
import { COMBO_STRATEGIES, quotaShare } from "./strategies/index.js"
import type { Candidate, PoolEntry, RequestFeatures, RoutingState, SlaPolicy, StrategyContext } from "./types.js"

/** A model id the router cannot route: 404 (unknown) or 400 (malformed) in the client's format. */
export class RouteError extends Data.TaggedError("RouteError")<{ readonly status: 400 | 404; readonly message: string; readonly code: string }> {}

const routeError = (status: 400 | 404, message: string, code: string) => new RouteError({ status, message, code })

export interface PlanInput {
  /** Request features, computed only when a strategy needs them. */
  readonly features: () => RequestFeatures
  /** `X-Gateway-Mode`, `X-Gateway-Budget`, `X-Session-Id` / `x_session_id`. */
  readonly mode?: string | undefined
  readonly budget?: string | undefined
  readonly sessionId?: string | undefined
  /** The caller's API key id, kept with a sticky session (GET /api/sessions). */
  readonly apiKeyId?: string | null | undefined
}

/** The plan's session fields: nothing for a request without X-Session-Id. */
const sessionOf = (input: PlanInput): { sessionId?: string; sessionKey?: string } =>
  input.sessionId ? (input.apiKeyId ? { sessionId: input.sessionId, sessionKey: input.apiKeyId } : { sessionId: input.sessionId }) : {}

/** A routable model that is not one connection's: a combo or an auto id (model lists). */
export interface VirtualModel {
  readonly id: string
  readonly kind: "combo" | "auto"
  /** What it serves, for model lists: its first target's kind (chat for auto ids). */
  readonly serves: ModelKind
  readonly description: string
  readonly contextWindow: number
  readonly maxOutput: number
  readonly createdAt: number
}

/** An auto id with the candidate pool it resolves to now (GET /api/combos/auto). */
export interface AutoDescription {
  readonly spec: AutoSpec
  readonly pool: ReadonlyArray<Candidate>
  readonly contextWindow: number
  readonly maxOutput: number
}

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

/** Context window and output limit advertised when no pool model declares one (never 0). */
export const DEFAULT_CONTEXT_WINDOW = 128_000
export const DEFAULT_MAX_OUTPUT = 8_192

/** Splits candidates into admissible and blocked at `now`. */
export const admit = (
  candidates: ReadonlyArray<Candidate>,
  admission: (c: Candidate, now: number) => { readonly ok: true } | { readonly ok: false; readonly reason: string; readonly retryAfterMs: number | null },
  now: number
): { ok: Array<Candidate>; blocked: Array<Blocked> } => {
  const ok: Array<Candidate> = []
  const blocked: Array<Blocked> = []
  for (const c of candidates) {
    const a = admission(c, now)
    if (a.ok) ok.push(c)
    else blocked.push({ candidate: c, reason: a.reason, retryAfterMs: a.retryAfterMs })
  }
  return { ok, blocked }
}

/** Blended USD per 1M tokens (60% input, 40% output); unknown prices count as 0. */
const blendedCost = (spec: ModelSpec | undefined): number => (spec ? 0.6 * spec.pricing.input + 0.4 * spec.pricing.output : 0)

/** The model an auto pool dispatches to on a connection: its default model, else its provider's first chat model. */
export const dispatchModel = (c: Connection): string | undefined => c.defaultModel ?? c.provider.models.find((m) => m.kind === "chat")?.id ?? connectionModelIds(c)[0]

const slaOf = (config: ComboConfig): SlaPolicy | undefined => {
  const sla: SlaPolicy = {
    ...(config.slaTargetP95Ms !== undefined ? { targetP95Ms: config.slaTargetP95Ms } : {}),
    ...(config.slaMaxErrorRate !== undefined ? { maxErrorRate: config.slaMaxErrorRate } : {}),
    ...(config.slaMaxCostPer1MTokens !== undefined ? { maxCostPer1MTokens: config.slaMaxCostPer1MTokens } : {}),
    ...(config.slaHardConstraints !== undefined ? { hardConstraints: config.slaHardConstraints } : {})
  }
  return Object.keys(sla).length > 0 ? sla : undefined
}

/** Moves the candidate with `key` to the front, if present. */
const toFront = (list: ReadonlyArray<Candidate>, key: string | undefined): ReadonlyArray<Candidate> => {
  if (key === undefined) return list
  const i = list.findIndex((c) => c.key === key)
  return i <= 0 ? list : [list[i]!, ...list.slice(0, i), ...list.slice(i + 1)]
}

const QUOTA_SHARE = /^qtsd\/([^/]+)\/(.+)$/i
const FUSION_DEFAULTS = { minPanel: 2, stragglerGraceMs: 8000, panelHardTimeoutMs: 90_000 }

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

      const notFound = (message: string) => routeError(404, message, "model_not_found")

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

      /** The auto pool: each enabled connection's dispatch model (or the combo's targets). */
      const autoCandidates = (combo: Combo | undefined) =>
        Effect.gen(function* () {
          let pool: Array<Candidate>
          if (combo && combo.targets.length > 0) pool = [...(yield* comboCandidates(combo))]
          else {
            const all = (yield* connections.list).filter((c) => c.enabled)
            pool = all.flatMap((c) => {
              const model = dispatchModel(c)
              // A media-only connection (Cohere, ElevenLabs...) has no chat model to offer the pool.
              return model && modelDoes(c.provider, model, "chat") ? [candidateOf({ connection: c, model })] : []
            })
          }
          const restrict = combo?.config.auto?.candidatePool
          if (restrict && restrict.length > 0) {
            const names = new Set(restrict.map((r) => r.toLowerCase()))
            const kept = pool.filter((c) => names.has(c.connection.provider.id) || names.has(c.connection.name.toLowerCase()))
            pool = kept
          }
          // One entry per key (a provider listed twice is one candidate).
          const seen = new Set<string>()
          return pool.filter((c) => (seen.has(c.key) ? false : (seen.add(c.key), true)))
        })

      const poolEntry = (c: Candidate, all: ReadonlyArray<Candidate>, now: number): PoolEntry => {
        const stats = memory.stats(c.key, now)
        const quota = memory.quota(c.connection.id, c.model, now)
        const providerConnections = new Set(all.filter((o) => o.connection.provider.id === c.connection.provider.id).map((o) => o.connection.id))
        return {
          candidate: c,
          provider: c.connection.provider.id,
          model: c.model,
          breaker: resilience.breakerState(c, now),
          costPer1MTokens: blendedCost(c.spec),
          p95LatencyMs: stats.p95LatencyMs,
          latencyStdDevMs: stats.latencyStdDevMs,
          errorRate: stats.errorRate,
          quotaRemaining: quota ? quota.remaining : 1,
          resetInMs: quota?.resetAt !== undefined ? Math.max(0, quota.resetAt - now) : undefined,
          accountTier: c.connection.accountTier,
          modelTier: c.spec?.tier ?? "standard",
          contextWindow: c.spec?.contextWindow,
          capabilities: {
            tools: c.spec?.capabilities.tools ?? true,
            vision: c.spec?.capabilities.vision ?? false,
            reasoning: c.spec?.capabilities.reasoning ?? false
          },
          inFlight: memory.inFlight(c.connection.id),
          providerInFlight: [...providerConnections].reduce((n, id) => n + memory.inFlight(id), 0),
          providerConnections: providerConnections.size
        }
      }

      /** An auto plan over `pool` (a persisted auto combo or a virtual auto id). */
      const autoPlan = (scope: string, spec: AutoSpec, combo: Combo | undefined, input: PlanInput) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const config: ComboConfig = combo?.config ?? {}
          const all = yield* autoCandidates(combo)
          if (all.length === 0) return yield* notFound(`'${scope}' has no candidates: no provider is connected yet (add one with POST /api/providers or \`gateway setup\`)`)
          // Breaker-open candidates stay in the pool (incident detection and fail-open); other blocks leave it.
          const admitted = admit(all, resilience.admission, now)
          const pool = [...admitted.ok, ...admitted.blocked.filter((b) => b.reason === "circuit_open").map((b) => b.candidate)]
          const blocked = admitted.blocked
          if (pool.length === 0) {
            return { kind: "auto", scope, strategy: spec.routerStrategy, candidates: [], blocked, probes: new Set<string>(), ...sessionOf(input) } satisfies RoutePlan
          }
          const features = input.features()
          const entries = filterPool(
            pool.map((c) => poolEntry(c, pool, now)),
            spec
          )
          const routerName = config.routerStrategy ?? config.auto?.routerStrategy ?? spec.routerStrategy
          const strategy = engine.registry.get(routerName) ?? engine.registry.get("rules")!
          const weights = resolveWeights({ base: spec.weights, comboWeights: config.auto?.weights, modePack: config.modePack, header: input.mode })
          const sla = slaOf(config)
          const lastKnownGood = memory.lastGood(scope)
          const order = orderAuto(entries, {
            strategy,
            context: {
              request: features,
              weights,
              ...(sla ? { sla } : {}),
              ...(lastKnownGood ? { lastKnownGood } : {}),
              lkgpEnabled: true,
              now,
              random: engine.random,
              ...(engine.leaderboard.size > 0 ? { fitness: (m: string, p: string) => engine.leaderboard.lookup(m, p) } : {})
            },
            explorationRate: config.explorationRate ?? spec.explorationRate,
            budgetUsd: budgetFromHeader(input.budget) ?? config.budgetCap,
            healing: engine.healing
          })
          const okKeys = new Set(admitted.ok.map((c) => c.key))
          const candidates = order.order.map((e) => e.candidate).filter((c) => okKeys.has(c.key))
          return {
            kind: "auto",
            scope,
            strategy: order.decision.strategy,
            candidates: toFront(candidates, input.sessionId ? memory.sticky(scope, input.sessionId, now) : undefined),
            blocked,
            probes: new Set(order.probes),
            decision: order.decision,
            ...sessionOf(input)
          } satisfies RoutePlan
        })

      const fusionPlan = (combo: Combo, input: PlanInput) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const panel: Array<Candidate> = []
          const members: Array<ReadonlyArray<Candidate>> = []
          const blocked: Array<Blocked> = []
          // One panel member per target: its first admissible connection, the others its fallbacks.
          for (const [i, t] of combo.targets.entries()) {
            const cands = (yield* targetsOf(t.model)).map((r) => candidateOf(r, t.weight ?? 1, i))
            const a = admit(cands, resilience.admission, now)
            if (a.ok[0]) {
              panel.push(a.ok[0])
              members.push(a.ok)
            } else blocked.push(...a.blocked)
          }
          const judgeId = combo.config.judgeModel
          let judge: Candidate | undefined = panel[0]
          if (judgeId) {
            const cands = (yield* targetsOf(judgeId)).map((r) => candidateOf(r))
            judge = admit(cands, resilience.admission, now).ok[0] ?? judge
          }
          const tuning = combo.config.fusionTuning ?? {}
          const fusion: FusionPlan | undefined = judge
            ? {
                panel,
                members,
                judge,
                minPanel: Math.max(Math.min(tuning.minPanel ?? FUSION_DEFAULTS.minPanel, panel.length), Math.min(2, panel.length)),
                stragglerGraceMs: tuning.stragglerGraceMs ?? FUSION_DEFAULTS.stragglerGraceMs,
                panelHardTimeoutMs: tuning.panelHardTimeoutMs ?? FUSION_DEFAULTS.panelHardTimeoutMs
              }
            : undefined
          return {
            kind: "combo",
            scope: combo.name,
            strategy: "fusion",
            candidates: panel,
            blocked,
            probes: new Set<string>(),
            ...(fusion ? { fusion } : {}),
            ...sessionOf(input)
          } satisfies RoutePlan
        })

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
          if (combo.strategy === "auto") return yield* autoPlan(combo.name, parseAutoId("auto")!, combo, input)
          if (combo.strategy === "fusion") return yield* fusionPlan(combo, input)
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
            return yield* autoPlan(spec.id, spec, undefined, input)
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

      const describeAuto: RouterShape["describeAuto"] = (id) =>
        Effect.gen(function* () {
          const spec = parseAutoId(id)
          if (!spec) return yield* routeError(400, `'${id}' is not an auto model`, "invalid_auto_model")
          const all = yield* autoCandidates(undefined)
          const now = yield* Clock.currentTimeMillis
          const pool =
            all.length === 0
              ? []
              : filterPool(
                  all.map((c) => poolEntry(c, all, now)),
                  spec
                ).map((e) => e.candidate)
          const windows = pool.map((c) => c.spec?.contextWindow ?? 0).filter((n) => n > 0)
          const outputs = pool.map((c) => c.spec?.maxOutput ?? 0).filter((n) => n > 0)
          return {
            spec,
            pool,
            contextWindow: windows.length > 0 ? Math.max(...windows) : DEFAULT_CONTEXT_WINDOW,
            maxOutput: outputs.length > 0 ? Math.max(...outputs) : DEFAULT_MAX_OUTPUT
          }
        })

      const virtualModels: RouterShape["virtualModels"] = Effect.gen(function* () {
        const out: Array<VirtualModel> = []
        const enabled = (yield* connections.list).filter((c) => c.enabled)
        if (enabled.length > 0) {
          for (const id of ADVERTISED_AUTO_IDS) {
            const d = yield* Effect.either(describeAuto(id))
            if (d._tag === "Right")
              out.push({
                id,
                kind: "auto",
                serves: "chat",
                description: d.right.spec.description,
                contextWindow: d.right.contextWindow,
                maxOutput: d.right.maxOutput,
                createdAt: 0
              })
          }
        }
        for (const combo of yield* combos.list) {
          if (!combo.enabled) continue
          const cands = combo.strategy === "auto" ? yield* autoCandidates(combo) : yield* comboCandidates(combo)
          const windows = cands.map((c) => c.spec?.contextWindow ?? 0).filter((n) => n > 0)
          const outputs = cands.map((c) => c.spec?.maxOutput ?? 0).filter((n) => n > 0)
          out.push({
            id: combo.name,
            kind: "combo",
            serves: cands[0] ? kindOf(cands[0].connection.provider, cands[0].model) : "chat",
            description: combo.description ?? `combo (${combo.strategy}) of ${combo.targets.map((t) => t.model).join(", ") || "every connected model"}`,
            // As for auto pools: the largest target (a prompt too long for one target falls back to the next).
            contextWindow: windows.length > 0 ? Math.max(...windows) : DEFAULT_CONTEXT_WINDOW,
            maxOutput: outputs.length > 0 ? Math.max(...outputs) : DEFAULT_MAX_OUTPUT,
            createdAt: combo.createdAt
          })
        }
        return out
      })

      const failed: RouterShape["failed"] = (p, c) =>
        p.probes.has(c.key) ? Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => engine.healing.probeDone(c.key, false, now))) : Effect.void

      return { plan, peekPlan, served, servedNow, failed, describeAuto, virtualModels }
    })
  )
}
