/**
 * The 12 scoring factors of the auto engine and the weighted score. Every factor is in
 * [0, 1]; pool-relative factors (costInv, latencyInv) are normalised over the pool passed in.
 * Formulas and the choices the spec leaves open are listed in docs (Auto routing).
 */
import {
  FACTORS,
  type AccountTier,
  type BreakerState,
  type Factor,
  type PoolEntry,
  type RequestFeatures,
  type RoutingContext,
  type Weights
} from "../types.js"
import { taskFit } from "./taskFit.js"

export type ModelTier = PoolEntry["modelTier"]

/** Breaker state → health. DEGRADED is not in the spec's list: 0.75 (still serving, but failing more than usual). */
export const HEALTH_SCORES: Readonly<Record<BreakerState, number>> = { CLOSED: 1, DEGRADED: 0.75, HALF_OPEN: 0.5, OPEN: 0 }

/** Account tier → tierPriority (spec: Ultra 1.0, Pro 0.67, Standard 0.33, Free 0.0). */
export const TIER_PRIORITY: Readonly<Record<AccountTier, number>> = { ultra: 1, pro: 0.67, standard: 0.33, free: 0 }

/** Model tier on a 0..1 line (specificityMatch) and as steps (tierAffinity). */
export const TIER_LEVEL: Readonly<Record<ModelTier, number>> = { free: 0, standard: 0.5, premium: 1 }
const TIER_STEP: Readonly<Record<ModelTier, number>> = { free: 0, standard: 1, premium: 2 }

/** resetWindowAffinity: a reset this far away (or further) scores 0. */
export const RESET_HORIZON_MS = 24 * 60 * 60 * 1000
/** connectionDensity of a provider's only connection: in-flight requests at which it reaches 0. */
export const SINGLE_CONNECTION_SATURATION = 32

const clamp01 = (x: number): number => (Number.isNaN(x) ? 0 : Math.min(1, Math.max(0, x)))

/** The tier a request should go to: the "manifest-recommended tier" of tierAffinity. */
export const recommendedTier = (f: RequestFeatures): ModelTier => {
  const heavy = f.taskType === "coding" || f.taskType === "debugging" || f.taskType === "planning" || f.taskType === "review"
  if (heavy && f.specificity >= 0.5) return "premium"
  if (f.taskType === "chat" && f.specificity < 0.3) return "free"
  return "standard"
}

/** Pool-wide inputs of the relative factors; compute once per pool when scoring many entries. */
export interface PoolStats {
  readonly minCost: number
  readonly maxCost: number
  /** Over entries with a known p95; undefined when none is known. */
  readonly minP95: number | undefined
  readonly maxP95: number | undefined
}

const known = (x: number | undefined): x is number => x !== undefined && Number.isFinite(x)

export const poolStats = (pool: ReadonlyArray<PoolEntry>): PoolStats => {
  let minCost = Infinity
  let maxCost = -Infinity
  let minP95: number | undefined
  let maxP95: number | undefined
  for (const e of pool) {
    const c = e.costPer1MTokens
    if (Number.isFinite(c)) {
      if (c < minCost) minCost = c
      if (c > maxCost) maxCost = c
    }
    const p = e.p95LatencyMs
    if (known(p)) {
      if (minP95 === undefined || p < minP95) minP95 = p
      if (maxP95 === undefined || p > maxP95) maxP95 = p
    }
  }
  return { minCost, maxCost, minP95, maxP95 }
}

/** 1 at the pool's minimum, 0 at its maximum, linear between; 1 when all are equal. */
const inverseNormalized = (value: number, min: number, max: number): number => (!(max > min) ? 1 : clamp01((max - value) / (max - min)))

/** stability = 1 − min(1, stddev/p95)·0.5 − min(1, errorRate)·0.5; unknown latency: 1 − errorRate·0.5 − 0.25. */
export const stabilityScore = (e: Pick<PoolEntry, "p95LatencyMs" | "latencyStdDevMs" | "errorRate">): number => {
  const err = clamp01(e.errorRate)
  if (known(e.p95LatencyMs) && known(e.latencyStdDevMs)) {
    const ratio = e.p95LatencyMs > 0 ? Math.min(1, Math.max(0, e.latencyStdDevMs) / e.p95LatencyMs) : 0
    return clamp01(1 - ratio * 0.5 - err * 0.5)
  }
  return clamp01(1 - err * 0.5 - 0.25)
}

/** need = tokenEstimate + maxOutputTokens; 1 up to 50% of the window, linear to 0.5 at 100%, 0 above; unknown window 0.5. */
export const contextAffinityScore = (f: RequestFeatures, contextWindow: number | undefined): number => {
  if (!known(contextWindow) || contextWindow <= 0) return 0.5
  const need = Math.max(0, f.tokenEstimate) + Math.max(0, f.maxOutputTokens ?? 0)
  if (need > contextWindow) return 0
  const ratio = need / contextWindow
  return ratio <= 0.5 ? 1 : clamp01(1 - (ratio - 0.5))
}

/**
 * Several connections of the provider in the pool: 1 / (1 + inFlight), so the less loaded
 * connection wins. The provider's only connection: 1 − min(1, inFlight / 32), a mild penalty
 * that only bites near saturation.
 */
export const connectionDensityScore = (e: Pick<PoolEntry, "inFlight" | "providerConnections">): number => {
  const inFlight = Math.max(0, Number.isFinite(e.inFlight) ? e.inFlight : 0)
  return e.providerConnections > 1 ? 1 / (1 + inFlight) : clamp01(1 - inFlight / SINGLE_CONNECTION_SATURATION)
}

/** Sooner reset → higher: 1 − min(1, resetInMs / 24 h); unknown 0.5. */
export const resetWindowScore = (resetInMs: number | undefined): number =>
  known(resetInMs) ? clamp01(1 - Math.max(0, resetInMs) / RESET_HORIZON_MS) : 0.5

/** Equal tiers 1, adjacent 0.5, two apart 0. */
export const tierAffinityScore = (modelTier: ModelTier, recommended: ModelTier): number => {
  const d = Math.abs(TIER_STEP[modelTier] - TIER_STEP[recommended])
  return d === 0 ? 1 : d === 1 ? 0.5 : 0
}

/** Every factor of one entry, each in [0, 1]. `stats` may be passed when scoring many entries of one pool. */
export const factorScores = (
  entry: PoolEntry,
  pool: ReadonlyArray<PoolEntry>,
  ctx: RoutingContext,
  stats: PoolStats = poolStats(pool)
): Record<Factor, number> => {
  const f = ctx.request
  return {
    health: HEALTH_SCORES[entry.breaker] ?? 0,
    quota: clamp01(entry.quotaRemaining),
    costInv: Number.isFinite(entry.costPer1MTokens) ? inverseNormalized(entry.costPer1MTokens, stats.minCost, stats.maxCost) : 0,
    latencyInv:
      known(entry.p95LatencyMs) && stats.minP95 !== undefined && stats.maxP95 !== undefined
        ? inverseNormalized(entry.p95LatencyMs, stats.minP95, stats.maxP95)
        : 0.5,
    taskFit: ctx.fitness?.(entry.model, entry.provider) ?? taskFit(entry.model, entry.provider, f.taskType),
    stability: stabilityScore(entry),
    tierPriority: TIER_PRIORITY[entry.accountTier] ?? 0,
    tierAffinity: tierAffinityScore(entry.modelTier, recommendedTier(f)),
    specificityMatch: clamp01(1 - Math.abs(clamp01(f.specificity) - (TIER_LEVEL[entry.modelTier] ?? 0.5))),
    contextAffinity: contextAffinityScore(f, entry.contextWindow),
    connectionDensity: connectionDensityScore(entry),
    resetWindowAffinity: resetWindowScore(entry.resetInMs)
  }
}

/** Σ weight × factor / Σ weight over factors with a positive finite weight; 0 when no weight is positive. */
export const weightedScore = (factors: Readonly<Record<Factor, number>>, weights: Weights): number => {
  let num = 0
  let den = 0
  for (const k of FACTORS) {
    const w = weights[k]
    if (w === undefined || !Number.isFinite(w) || w <= 0) continue
    num += w * factors[k]
    den += w
  }
  return den > 0 ? num / den : 0
}

/** The weighted score of one entry against its pool, with ctx.weights. */
export const scoreEntry = (
  entry: PoolEntry,
  pool: ReadonlyArray<PoolEntry>,
  ctx: RoutingContext,
  stats: PoolStats = poolStats(pool)
): number => weightedScore(factorScores(entry, pool, ctx, stats), ctx.weights)
