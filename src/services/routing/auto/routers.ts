/**
 * Router strategies of the auto engine (spec document 1, "Auto routing strategies"): rules,
 * cost/eco, latency/fast, sla-aware/sla and lkgp, plus a registry for custom strategies.
 * Each picks one entry of a non-empty pool; ties go to the earlier entry of the pool.
 */
import type { PoolEntry, RouterDecision, RouterStrategy, RoutingContext, SlaPolicy } from "../types.js"
import { HEALTH_SCORES, poolStats, scoreEntry, stabilityScore } from "./scorer.js"

/** Pool without OPEN entries; the whole pool when every entry is OPEN (fail-open). */
export const dropOpen = (pool: ReadonlyArray<PoolEntry>): ReadonlyArray<PoolEntry> => {
  const kept = pool.filter((e) => e.breaker !== "OPEN")
  return kept.length > 0 ? kept : pool
}

const requireEntries = (pool: ReadonlyArray<PoolEntry>, name: string): void => {
  if (pool.length === 0) throw new Error(`router strategy '${name}': the candidate pool is empty`)
}

const decide = (entry: PoolEntry, strategy: string, reason: string, candidatesConsidered: number, score: number): RouterDecision => ({
  provider: entry.provider,
  model: entry.model,
  key: entry.candidate.key,
  strategy,
  reason,
  candidatesConsidered,
  score
})

/** Index of the first minimum of `key` (ties → earlier entry). */
const argMin = <A>(xs: ReadonlyArray<A>, key: (a: A) => number): number => {
  let best = 0
  let bestValue = Infinity
  for (let i = 0; i < xs.length; i++) {
    const v = key(xs[i]!)
    const value = Number.isNaN(v) ? Infinity : v
    if (i === 0 || value < bestValue) {
      best = i
      bestValue = value
    }
  }
  return best
}

const fmt = (x: number): string => (Number.isFinite(x) ? String(Math.round(x * 1000) / 1000) : String(x))

/** Scores of every entry against `pool` with ctx.weights. */
export const scoreAll = (pool: ReadonlyArray<PoolEntry>, ctx: RoutingContext): ReadonlyArray<number> => {
  const stats = poolStats(pool)
  return pool.map((e) => scoreEntry(e, pool, ctx, stats))
}

const rulesSelect = (name: string, pool: ReadonlyArray<PoolEntry>, ctx: RoutingContext, prefix = ""): RouterDecision => {
  requireEntries(pool, name)
  const considered = dropOpen(pool)
  const scores = scoreAll(considered, ctx)
  const i = argMin(scores, (s) => -s)
  const allOpen = considered.length === pool.length && pool.every((e) => e.breaker === "OPEN")
  return decide(
    considered[i]!,
    name,
    `${prefix}highest weighted score ${fmt(scores[i]!)} of ${considered.length} candidate(s) for task '${ctx.request.taskType}'` +
      (allOpen ? " (every candidate OPEN: whole pool used)" : ""),
    considered.length,
    scores[i]!
  )
}

/** `rules` (default): drop OPEN (whole pool if none remain), take the highest weighted score. */
export const rulesStrategy: RouterStrategy = {
  name: "rules",
  description: "Weighted 12-factor score for the task type; OPEN breakers dropped (whole pool if all are OPEN).",
  select: (pool, ctx) => rulesSelect("rules", pool, ctx)
}

/** `cost` / `eco`: drop OPEN, lowest costPer1MTokens. */
export const costStrategy: RouterStrategy = {
  name: "cost",
  description: "Lowest blended cost per 1M tokens (alias eco); OPEN breakers dropped.",
  select: (pool, ctx) => {
    requireEntries(pool, "cost")
    const considered = dropOpen(pool)
    const i = argMin(considered, (e) => e.costPer1MTokens)
    const e = considered[i]!
    return decide(
      e,
      "cost",
      `lowest cost ${fmt(e.costPer1MTokens)} USD/1M tokens of ${considered.length} candidate(s)`,
      considered.length,
      scoreEntry(e, considered, ctx)
    )
  }
}

/** The latency strategy's sort key: p95 + errorRate × 1000 (unknown p95 → +Infinity). */
export const latencyKey = (e: PoolEntry): number =>
  e.p95LatencyMs === undefined || !Number.isFinite(e.p95LatencyMs) ? Infinity : e.p95LatencyMs + e.errorRate * 1000

/** `latency` / `fast`: drop OPEN, ascending by p95LatencyMs + errorRate × 1000. */
export const latencyStrategy: RouterStrategy = {
  name: "latency",
  description: "Lowest p95 latency + errorRate × 1000 ms (alias fast); unknown latency last; OPEN breakers dropped.",
  select: (pool, ctx) => {
    requireEntries(pool, "latency")
    const considered = dropOpen(pool)
    const i = argMin(considered, latencyKey)
    const e = considered[i]!
    return decide(
      e,
      "latency",
      `lowest p95 + errorRate×1000 = ${fmt(latencyKey(e))} ms of ${considered.length} candidate(s)`,
      considered.length,
      scoreEntry(e, considered, ctx)
    )
  }
}

/** SLA thresholds when the policy does not set them. */
export const SLA_DEFAULTS = { targetP95Ms: 5000, maxErrorRate: 0.05, maxCostPer1MTokens: 10 } as const
/** Epsilons of the SLA ratios: error rate, latency (ms), cost (USD per 1M tokens). */
export const SLA_EPSILON = { errorRate: 1e-9, latencyMs: 1, costUsd: 0.001 } as const
/** Composite weights of sla-aware. */
export const SLA_COMPOSITE = { latency: 0.35, error: 0.35, health: 0.15, cost: 0.1, stability: 0.05 } as const

const positiveOr = (v: number | undefined, d: number): number => (v !== undefined && Number.isFinite(v) && v > 0 ? v : d)

export interface SlaEvaluation {
  readonly composite: number
  /** Thresholds violated (0..3). */
  readonly violations: number
  readonly latency: number
  readonly error: number
  readonly cost: number
}

/**
 * The sla-aware composite of one entry: latency, error and cost scores are
 * threshold / max(value, epsilon), capped at 1; unknown p95 scores 0.5 and is no violation.
 */
export const slaEvaluate = (e: PoolEntry, sla: SlaPolicy | undefined): SlaEvaluation => {
  const target = positiveOr(sla?.targetP95Ms, SLA_DEFAULTS.targetP95Ms)
  const maxErr = positiveOr(sla?.maxErrorRate, SLA_DEFAULTS.maxErrorRate)
  const maxCost = positiveOr(sla?.maxCostPer1MTokens, SLA_DEFAULTS.maxCostPer1MTokens)
  const p95Known = e.p95LatencyMs !== undefined && Number.isFinite(e.p95LatencyMs)
  const latency = p95Known ? Math.min(1, target / Math.max(e.p95LatencyMs!, SLA_EPSILON.latencyMs)) : 0.5
  const errorRate = Number.isFinite(e.errorRate) ? Math.max(0, e.errorRate) : 1
  const error = Math.min(1, maxErr / Math.max(errorRate, SLA_EPSILON.errorRate))
  const costValue = Number.isFinite(e.costPer1MTokens) ? Math.max(0, e.costPer1MTokens) : Infinity
  const cost = Math.min(1, maxCost / Math.max(costValue, SLA_EPSILON.costUsd))
  const composite =
    SLA_COMPOSITE.latency * latency +
    SLA_COMPOSITE.error * error +
    SLA_COMPOSITE.health * (HEALTH_SCORES[e.breaker] ?? 0) +
    SLA_COMPOSITE.cost * cost +
    SLA_COMPOSITE.stability * stabilityScore(e)
  const violations = (p95Known && e.p95LatencyMs! > target ? 1 : 0) + (errorRate > maxErr ? 1 : 0) + (costValue > maxCost ? 1 : 0)
  return { composite, violations, latency, error, cost }
}

/** `sla-aware` / `sla`: composite descending; with hard constraints, fewest violations first. OPEN dropped (fail-open). */
export const slaStrategy: RouterStrategy = {
  name: "sla-aware",
  description:
    "SLA composite: latency 35%, error 35%, health 15%, cost 10%, stability 5% (alias sla); with hard constraints fewest violations first.",
  select: (pool, ctx) => {
    requireEntries(pool, "sla-aware")
    const considered = dropOpen(pool)
    const hard = ctx.sla?.hardConstraints === true
    const evals = considered.map((e) => slaEvaluate(e, ctx.sla))
    let best = 0
    for (let i = 1; i < evals.length; i++) {
      const a = evals[i]!
      const b = evals[best]!
      const better = hard
        ? a.violations < b.violations || (a.violations === b.violations && a.composite > b.composite)
        : a.composite > b.composite
      if (better) best = i
    }
    const ev = evals[best]!
    return decide(
      considered[best]!,
      "sla-aware",
      `best SLA composite ${fmt(ev.composite)}` +
        (hard ? ` with ${ev.violations} violation(s) (hard constraints)` : "") +
        ` of ${considered.length} candidate(s)`,
      considered.length,
      ev.composite
    )
  }
}

/**
 * `lkgp`: rules when lkgp is disabled; else the last known good entry when it is in the pool and
 * not OPEN (matched by candidate key, or — when the context names a provider id — the best
 * non-OPEN entry of that provider); otherwise rules.
 */
export const lkgpStrategy: RouterStrategy = {
  name: "lkgp",
  description: "Sticks to the last known good candidate while it is not OPEN; otherwise rules.",
  select: (pool, ctx) => {
    requireEntries(pool, "lkgp")
    if (!ctx.lkgpEnabled) return rulesSelect("lkgp", pool, ctx, "lkgp disabled, rules: ")
    const lkg = ctx.lastKnownGood
    if (lkg === undefined || lkg === "") return rulesSelect("lkgp", pool, ctx, "no last known good, rules: ")
    const considered = dropOpen(pool)
    const byKey = pool.find((e) => e.candidate.key === lkg && e.breaker !== "OPEN")
    if (byKey !== undefined) return decide(byKey, "lkgp", `last known good ${lkg}`, considered.length, scoreEntry(byKey, considered, ctx))
    const lower = lkg.toLowerCase()
    if (considered.some((e) => e.provider.toLowerCase() === lower && e.breaker !== "OPEN")) {
      const scores = scoreAll(considered, ctx)
      let best = -1
      for (let i = 0; i < considered.length; i++) {
        const e = considered[i]!
        if (e.provider.toLowerCase() !== lower || e.breaker === "OPEN") continue
        if (best < 0 || scores[i]! > scores[best]!) best = i
      }
      return decide(considered[best]!, "lkgp", `last known good provider ${lkg}`, considered.length, scores[best]!)
    }
    return rulesSelect("lkgp", pool, ctx, `last known good ${lkg} unavailable, rules: `)
  }
}

export const BUILTIN_ROUTERS: ReadonlyArray<{ readonly strategy: RouterStrategy; readonly aliases: ReadonlyArray<string> }> = [
  { strategy: rulesStrategy, aliases: [] },
  { strategy: costStrategy, aliases: ["eco"] },
  { strategy: latencyStrategy, aliases: ["fast"] },
  { strategy: slaStrategy, aliases: ["sla"] },
  { strategy: lkgpStrategy, aliases: [] }
]

export const ROUTER_NAME_PATTERN = /^[a-z0-9][a-z0-9._-]*$/i

export interface RouterListing {
  readonly name: string
  readonly description: string
  readonly aliases: ReadonlyArray<string>
  readonly builtIn: boolean
}

/**
 * Router strategies by name (case-insensitive). Built-ins and their aliases are registered
 * at construction and cannot be replaced; a custom strategy may be registered again under
 * its own name (the later one wins).
 */
export class RouterRegistry {
  private readonly byName = new Map<string, RouterStrategy>()
  private readonly builtInNames = new Set<string>()
  private readonly listing: Array<{ strategy: RouterStrategy; aliases: ReadonlyArray<string>; builtIn: boolean }> = []

  constructor() {
    for (const { strategy, aliases } of BUILTIN_ROUTERS) {
      for (const n of [strategy.name, ...aliases]) {
        this.byName.set(n.toLowerCase(), strategy)
        this.builtInNames.add(n.toLowerCase())
      }
      this.listing.push({ strategy, aliases, builtIn: true })
    }
  }

  /** Registers a custom strategy; throws an Error saying what is wrong with it. */
  register(strategy: RouterStrategy): void {
    const s = strategy as Partial<RouterStrategy> | null | undefined
    if (s === null || typeof s !== "object") throw new Error("router strategy must be an object with name, description and select")
    if (typeof s.name !== "string" || s.name.trim() === "") throw new Error("router strategy name must be a non-empty string")
    if (!ROUTER_NAME_PATTERN.test(s.name))
      throw new Error(`router strategy name '${s.name}' is invalid: use letters, digits, '.', '_' and '-', starting with a letter or digit`)
    const key = s.name.toLowerCase()
    if (this.builtInNames.has(key)) throw new Error(`router strategy '${s.name}' is built in and cannot be replaced`)
    if (typeof s.description !== "string" || s.description.trim() === "")
      throw new Error(`router strategy '${s.name}' needs a non-empty description`)
    if (typeof s.select !== "function") throw new Error(`router strategy '${s.name}' needs a select(pool, context) function`)
    this.byName.set(key, strategy)
    const at = this.listing.findIndex((l) => !l.builtIn && l.strategy.name.toLowerCase() === key)
    const item = { strategy, aliases: [], builtIn: false }
    if (at >= 0) this.listing[at] = item
    else this.listing.push(item)
  }

  /** The strategy registered under a name or alias (case-insensitive, trimmed), or undefined. */
  get(name: string | undefined): RouterStrategy | undefined {
    if (typeof name !== "string") return undefined
    return this.byName.get(name.trim().toLowerCase())
  }

  has(name: string | undefined): boolean {
    return this.get(name) !== undefined
  }

  /** Every strategy once, built-ins first, with its aliases. */
  list(): ReadonlyArray<RouterListing> {
    return this.listing.map((l) => ({
      name: l.strategy.name,
      description: l.strategy.description,
      aliases: l.aliases,
      builtIn: l.builtIn
    }))
  }
}
