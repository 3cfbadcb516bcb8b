/**
 * One auto routing decision: the pool filters (OPEN breakers, budget, self-healing
 * exclusions), incident mode, the router strategy, bandit exploration and the fallback order.
 * Pure apart from the SelfHealing state it is handed; time and randomness come from the context.
 */
import { pickIndex } from "../random.js"
import type { PoolEntry, RequestFeatures, RouterDecision, RouterStrategy, RoutingContext } from "../types.js"
import { poolStats, scoreEntry } from "./scorer.js"
import type { SelfHealing } from "./selfHealing.js"
import { MODE_PACKS } from "./weights.js"

/** Output tokens assumed by the budget estimate when the request does not say. */
export const DEFAULT_BUDGET_OUTPUT_TOKENS = 1024

/**
 * Estimated USD cost of the request on an entry:
 * (tokenEstimate × input price + (maxOutputTokens ?? 1024) × output price) / 1e6, prices from
 * the catalog spec (unknown price = 0).
 */
export const estimateCostUsd = (entry: PoolEntry, request: RequestFeatures): number => {
  const pricing = entry.candidate.spec?.pricing
  const input = pricing !== undefined && Number.isFinite(pricing.input) ? Math.max(0, pricing.input) : 0
  const output = pricing !== undefined && Number.isFinite(pricing.output) ? Math.max(0, pricing.output) : 0
  const out = request.maxOutputTokens ?? DEFAULT_BUDGET_OUTPUT_TOKENS
  return (Math.max(0, request.tokenEstimate) * input + Math.max(0, out) * output) / 1e6
}

export interface AutoOrderOptions {
  readonly strategy: RouterStrategy
  readonly context: RoutingContext
  /** Share of requests sent to a random other candidate, in [0, 1]. */
  readonly explorationRate: number
  /** Max USD per request (X-Gateway-Budget, else the combo's budgetCap). */
  readonly budgetUsd?: number | undefined
  readonly healing: SelfHealing
}

export interface AutoOrder {
  /** Candidates in the order to try them; the first is the decision's. */
  readonly order: Array<PoolEntry>
  readonly decision: RouterDecision
  /** Keys in `order` whose next request is a self-healing probe (use probeTimeoutMs, then probeDone). */
  readonly probes: ReadonlyArray<string>
  readonly incident: boolean
  /** Keys dropped because self-healing excludes them. */
  readonly excluded: ReadonlyArray<string>
}

const keep = (pool: ReadonlyArray<PoolEntry>, pred: (e: PoolEntry) => boolean): ReadonlyArray<PoolEntry> => {
  const kept = pool.filter(pred)
  return kept.length > 0 ? kept : pool
}

/** The entry a decision names: by key, else by provider + model, else the first. */
const entryOf = (pool: ReadonlyArray<PoolEntry>, d: RouterDecision): number => {
  const byKey = pool.findIndex((e) => e.candidate.key === d.key)
  if (byKey >= 0) return byKey
  const byModel = pool.findIndex((e) => e.provider === d.provider && e.model === d.model)
  return byModel >= 0 ? byModel : 0
}

/**
 * Orders an auto pool: breakers, budget, self-healing, incident mode, then the strategy's picks with exploration
 * (the seven steps: docs/routing.md#one-decision-orderauto). Throws when the pool is empty.
 */
export const orderAuto = (pool: ReadonlyArray<PoolEntry>, opts: AutoOrderOptions): AutoOrder => {
  if (pool.length === 0) throw new Error("orderAuto: the candidate pool is empty")
  const { healing, strategy } = opts
  const now = opts.context.now

  // 1. breakers
  const healthy = keep(pool, (e) => e.breaker !== "OPEN")

  // 2. budget
  let affordable = healthy
  const budget = opts.budgetUsd
  if (budget !== undefined && Number.isFinite(budget) && budget > 0) {
    const costs = healthy.map((e) => estimateCostUsd(e, opts.context.request))
    const within = healthy.filter((_, i) => costs[i]! <= budget)
    if (within.length > 0) affordable = within
    else {
      let cheapest = 0
      for (let i = 1; i < costs.length; i++) if (costs[i]! < costs[cheapest]!) cheapest = i
      affordable = [healthy[cheapest]!]
    }
  }

  // 3. self-healing
  const notExcluded = affordable.filter((e) => !healing.isExcluded(e.candidate.key, now))
  const remaining = notExcluded.length > 0 ? notExcluded : affordable
  const excluded =
    notExcluded.length > 0 ? affordable.filter((e) => healing.isExcluded(e.candidate.key, now)).map((e) => e.candidate.key) : []
  const probes = remaining.filter((e) => healing.needsProbe(e.candidate.key, now)).map((e) => e.candidate.key)

  // 4. incident mode
  const incident = healing.isIncident(pool)
  const context: RoutingContext = incident ? { ...opts.context, weights: MODE_PACKS["reliability-first"] } : opts.context
  const rate = incident ? 0 : Math.min(1, Math.max(0, Number.isFinite(opts.explorationRate) ? opts.explorationRate : 0))

  // 5. decision and exploration
  const chosen = strategy.select(remaining, context)
  let firstIndex = entryOf(remaining, chosen)
  let decision = chosen
  const stats = poolStats(remaining)
  if (remaining.length >= 2 && rate > 0 && context.random.next() < rate) {
    const j = pickIndex(context.random, remaining.length - 1)
    const index = j >= firstIndex ? j + 1 : j
    const e = remaining[index]!
    firstIndex = index
    decision = {
      provider: e.provider,
      model: e.model,
      key: e.candidate.key,
      strategy: chosen.strategy,
      reason: "exploration",
      candidatesConsidered: remaining.length,
      score: scoreEntry(e, remaining, context, stats)
    }
  }

  // 6. fallback order
  const order: Array<PoolEntry> = [remaining[firstIndex]!]
  let rest = remaining.filter((_, i) => i !== firstIndex)
  while (rest.length > 0) {
    const i = entryOf(rest, strategy.select(rest, context))
    order.push(rest[i]!)
    rest = rest.filter((_, k) => k !== i)
  }

  // 7. self-healing observations
  for (const e of remaining) healing.observe(e.candidate.key, scoreEntry(e, remaining, context, stats), now)

  return { order, decision, probes, incident, excluded }
}
