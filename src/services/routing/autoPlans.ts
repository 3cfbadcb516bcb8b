import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { ComboConfig } from "../../domain/combos.js"
import { modelDoes, type ModelSpec } from "../../domain/catalog/catalog.js"
import { type Connection, type ConnectionsShape, connectionModelIds } from "../../upstream/providers/Connections.js"
import type { ResilienceShape } from "../resilience/Resilience.js"
import { orderAuto } from "./auto/select.js"
import { type AutoSpec, filterPool, parseAutoId } from "./auto/variants.js"
import { budgetFromHeader, resolveWeights } from "./auto/weights.js"
import type { AutoEngineShape } from "./AutoEngine.js"
import type { Combo } from "./Combos.js"
import { admit, candidateOf, notFound, type PlanInput, type RoutePlan, routeError, sessionOf, toFront } from "./plan.js"
import type { RoutingMemoryShape } from "./RoutingMemory.js"
import type { Candidate, PoolEntry, SlaPolicy } from "./types.js"

/** Context window and output limit advertised when no pool model declares one (never 0). */
export const DEFAULT_CONTEXT_WINDOW = 128_000
export const DEFAULT_MAX_OUTPUT = 8_192

/** An auto id with the candidate pool it resolves to now (GET /api/combos/auto). */
export interface AutoDescription {
  readonly spec: AutoSpec
  readonly pool: ReadonlyArray<Candidate>
  readonly contextWindow: number
  readonly maxOutput: number
}

/** The model an auto pool dispatches to on a connection: its default model, else its provider's first chat model. */
export const dispatchModel = (c: Connection): string | undefined =>
  c.defaultModel ?? c.provider.models.find((m) => m.kind === "chat")?.id ?? connectionModelIds(c)[0]

/** Blended USD per 1M tokens (60% input, 40% output); unknown prices count as 0. */
const blendedCost = (spec: ModelSpec | undefined): number => (spec ? 0.6 * spec.pricing.input + 0.4 * spec.pricing.output : 0)

const slaOf = (config: ComboConfig): SlaPolicy | undefined => {
  const sla: SlaPolicy = {
    ...(config.slaTargetP95Ms !== undefined ? { targetP95Ms: config.slaTargetP95Ms } : {}),
    ...(config.slaMaxErrorRate !== undefined ? { maxErrorRate: config.slaMaxErrorRate } : {}),
    ...(config.slaMaxCostPer1MTokens !== undefined ? { maxCostPer1MTokens: config.slaMaxCostPer1MTokens } : {}),
    ...(config.slaHardConstraints !== undefined ? { hardConstraints: config.slaHardConstraints } : {})
  }
  return Object.keys(sla).length > 0 ? sla : undefined
}

/** What an auto router weighs of a candidate now: its breaker, prices, latency, errors, quota, load, capabilities. */
const poolEntry = (
  deps: { readonly memory: RoutingMemoryShape; readonly resilience: ResilienceShape },
  c: Candidate,
  all: ReadonlyArray<Candidate>,
  now: number
): PoolEntry => {
  const { memory, resilience } = deps
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

/**
 * Auto routing (docs/routing.md, "Auto"): the pool of every enabled connection's dispatch model
 * (or an auto combo's targets), ordered by the auto router's strategy over each candidate's
 * state now.
 */
export const makeAutoPlans = (deps: {
  readonly connections: ConnectionsShape
  readonly resilience: ResilienceShape
  readonly memory: RoutingMemoryShape
  readonly engine: AutoEngineShape
  /** Candidates of a combo's targets, in target order. */
  readonly comboCandidates: (combo: Combo) => Effect.Effect<ReadonlyArray<Candidate>>
}) => {
  const { connections, resilience, memory, engine, comboCandidates } = deps

  /** The auto pool: each enabled connection's dispatch model (or the combo's targets). */
  const candidates = (combo: Combo | undefined) =>
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
        pool = pool.filter((c) => names.has(c.connection.provider.id) || names.has(c.connection.name.toLowerCase()))
      }
      // One entry per key (a provider listed twice is one candidate).
      const seen = new Set<string>()
      return pool.filter((c) => (seen.has(c.key) ? false : (seen.add(c.key), true)))
    })

  /** An auto plan (a persisted auto combo or a virtual auto id). */
  const plan = (scope: string, spec: AutoSpec, combo: Combo | undefined, input: PlanInput) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const config: ComboConfig = combo?.config ?? {}
      const all = yield* candidates(combo)
      if (all.length === 0)
        return yield* notFound(
          `'${scope}' has no candidates: no provider is connected yet (add one with POST /api/providers or \`gateway setup\`)`
        )
      // Breaker-open candidates stay in the pool (incident detection and fail-open); other blocks leave it.
      const admitted = admit(all, resilience.admission, now)
      const pool = [...admitted.ok, ...admitted.blocked.filter((b) => b.reason === "circuit_open").map((b) => b.candidate)]
      const blocked = admitted.blocked
      if (pool.length === 0) {
        return {
          kind: "auto",
          scope,
          strategy: spec.routerStrategy,
          candidates: [],
          blocked,
          probes: new Set<string>(),
          ...sessionOf(input)
        } satisfies RoutePlan
      }
      const features = input.features()
      const entries = filterPool(
        pool.map((c) => poolEntry(deps, c, pool, now)),
        spec
      )
      const routerName = config.routerStrategy ?? config.auto?.routerStrategy ?? spec.routerStrategy
      const strategy = engine.registry.get(routerName) ?? engine.registry.get("rules")!
      const weights = resolveWeights({
        base: spec.weights,
        comboWeights: config.auto?.weights,
        modePack: config.modePack,
        header: input.mode
      })
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
      const ordered = order.order.map((e) => e.candidate).filter((c) => okKeys.has(c.key))
      return {
        kind: "auto",
        scope,
        strategy: order.decision.strategy,
        candidates: toFront(ordered, input.sessionId ? memory.sticky(scope, input.sessionId, now) : undefined),
        blocked,
        probes: new Set(order.probes),
        decision: order.decision,
        ...sessionOf(input)
      } satisfies RoutePlan
    })

  /** An auto id and its pool, as the router would use it now. */
  const describe = (id: string) =>
    Effect.gen(function* () {
      const spec = parseAutoId(id)
      if (!spec) return yield* routeError(400, `'${id}' is not an auto model`, "invalid_auto_model")
      const all = yield* candidates(undefined)
      const now = yield* Clock.currentTimeMillis
      const pool =
        all.length === 0
          ? []
          : filterPool(
              all.map((c) => poolEntry(deps, c, all, now)),
              spec
            ).map((e) => e.candidate)
      const windows = pool.map((c) => c.spec?.contextWindow ?? 0).filter((n) => n > 0)
      const outputs = pool.map((c) => c.spec?.maxOutput ?? 0).filter((n) => n > 0)
      return {
        spec,
        pool,
        contextWindow: windows.length > 0 ? Math.max(...windows) : DEFAULT_CONTEXT_WINDOW,
        maxOutput: outputs.length > 0 ? Math.max(...outputs) : DEFAULT_MAX_OUTPUT
      } satisfies AutoDescription
    })

  return { candidates, plan, describe }
}
