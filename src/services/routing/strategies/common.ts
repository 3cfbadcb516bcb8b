/**
 * Helpers shared by the combo strategies: stable ordering, quota exhaustion, blended cost and
 * shuffles. All pure; randomness only through the injected RandomSource.
 */
import { pickIndex } from "../random.js"
import type { Candidate, QuotaInfo, RandomSource, StrategyContext } from "../types.js"

/** A comparator over candidates; 0 means "tie" (the given order then decides). */
export type Compare = (a: Candidate, b: Candidate) => number

/**
 * Sorts by `compare`, ties keeping the given order (explicitly, by original position, so the
 * result does not depend on the engine's sort stability). Returns a new array.
 */
export const stableSort = (candidates: ReadonlyArray<Candidate>, compare: Compare): Array<Candidate> =>
  candidates
    .map((candidate, index) => ({ candidate, index }))
    .sort((x, y) => compare(x.candidate, y.candidate) || x.index - y.index)
    .map((x) => x.candidate)

/** Ascending by a numeric key, candidates whose key is undefined (or NaN) after all known ones. */
export const ascendingUnknownLast =
  (key: (c: Candidate) => number | undefined): Compare =>
  (a, b) => {
    const ka = known(key(a))
    const kb = known(key(b))
    if (ka === undefined) return kb === undefined ? 0 : 1
    if (kb === undefined) return -1
    return ka < kb ? -1 : ka > kb ? 1 : 0
  }

const known = (n: number | undefined): number | undefined => (n === undefined || Number.isNaN(n) ? undefined : n)

/** Chains comparators: the first non-tie answer wins. */
export const thenBy =
  (...compares: ReadonlyArray<Compare>): Compare =>
  (a, b) => {
    for (const compare of compares) {
      const r = compare(a, b)
      if (r !== 0) return r
    }
    return 0
  }

/** Quota used up: flagged exhausted, or nothing remaining. Unknown quota is not exhausted. */
export const isExhausted = (quota: QuotaInfo | undefined): boolean =>
  quota !== undefined && (quota.exhausted === true || quota.remaining <= 0)

/** Blended USD per 1M tokens: 60% input price + 40% output price; undefined without catalog data. */
export const blendedCost = (c: Candidate): number | undefined =>
  c.spec === undefined ? undefined : 0.6 * c.spec.pricing.input + 0.4 * c.spec.pricing.output

/** A finite positive weight, or undefined when the weight is 0, negative or not a finite number. */
export const positiveWeight = (c: Candidate): number | undefined => (Number.isFinite(c.weight) && c.weight > 0 ? c.weight : undefined)

/** A uniform random permutation (Fisher–Yates). Returns a new array. */
export const shuffle = <A>(items: ReadonlyArray<A>, random: RandomSource): Array<A> => {
  const out = items.slice()
  for (let i = out.length - 1; i > 0; i--) {
    const j = pickIndex(random, i + 1)
    const t = out[i] as A
    out[i] = out[j] as A
    out[j] = t
  }
  return out
}

/** The first candidate of each key, in given order. */
export const distinctByKey = (candidates: ReadonlyArray<Candidate>): Array<Candidate> => {
  const seen = new Set<string>()
  const out: Array<Candidate> = []
  for (const c of candidates) {
    if (seen.has(c.key)) continue
    seen.add(c.key)
    out.push(c)
  }
  return out
}

/** The list rotated to start at `start` (the rest follow cyclically). */
export const rotate = <A>(items: ReadonlyArray<A>, start: number): Array<A> => [...items.slice(start), ...items.slice(0, start)]

/** Moves the first candidate with `key` to the front; the rest keep the given order. */
export const moveKeyFirst = (candidates: ReadonlyArray<Candidate>, key: string | undefined): Array<Candidate> => {
  const i = key === undefined ? -1 : candidates.findIndex((c) => c.key === key)
  if (i < 0) return candidates.slice()
  return [candidates[i] as Candidate, ...candidates.slice(0, i), ...candidates.slice(i + 1)]
}

/**
 * The shape shared by `reset-aware`, `reset-window` and `headroom`: non-exhausted candidates
 * before exhausted ones; within each group ascending by `metric` of the quota (undefined after
 * known values); ties in given order.
 */
export const quotaOrder = (
  candidates: ReadonlyArray<Candidate>,
  ctx: StrategyContext,
  metric: (quota: QuotaInfo | undefined) => number | undefined
): Array<Candidate> => {
  const quota = new Map(candidates.map((c) => [c, ctx.state.quota(c)] as const))
  const spent = (c: Candidate) => isExhausted(quota.get(c))
  const byMetric = ascendingUnknownLast((c) => metric(quota.get(c)))
  return stableSort(candidates, (a, b) => Number(spent(a)) - Number(spent(b)) || byMetric(a, b))
}
