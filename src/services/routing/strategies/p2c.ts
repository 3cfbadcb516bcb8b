import { pickIndex } from "../random.js"
import type { Candidate, Strategy, StrategyContext } from "../types.js"
import { ascendingUnknownLast, stableSort, thenBy, type Compare } from "./common.js"

/**
 * Load comparison: fewer requests in flight, then lower error rate, then lower p95 latency
 * (unknown latency is worse than any number); remaining ties go to the given order.
 */
const byLoad = (candidates: ReadonlyArray<Candidate>, ctx: StrategyContext): Compare => {
  const load = new Map<Candidate, { inFlight: number; errorRate: number; p95: number | undefined }>()
  for (const c of candidates) {
    const s = ctx.state.stats(c)
    load.set(c, { inFlight: ctx.state.inFlight(c), errorRate: s.errorRate, p95: s.p95LatencyMs })
  }
  return thenBy(
    ascendingUnknownLast((c) => load.get(c)?.inFlight),
    ascendingUnknownLast((c) => load.get(c)?.errorRate),
    ascendingUnknownLast((c) => load.get(c)?.p95)
  )
}

/**
 * `p2c` (power of two choices): two distinct candidates drawn uniformly at random; the less
 * loaded of the two goes first (ties: earlier in the combo). All others follow by the same load
 * comparison.
 */
export const p2c: Strategy = {
  name: "p2c",
  order: (candidates, ctx) => {
    const n = candidates.length
    if (n <= 1) return candidates.slice()
    const i = pickIndex(ctx.random, n)
    let j = pickIndex(ctx.random, n - 1)
    if (j >= i) j++
    const compare = byLoad(candidates, ctx)
    const a = candidates[Math.min(i, j)] as Candidate
    const b = candidates[Math.max(i, j)] as Candidate
    // a is earlier in the given order, so it wins a full tie.
    const first = compare(a, b) <= 0 ? a : b
    return [
      first,
      ...stableSort(
        candidates.filter((c) => c !== first),
        compare
      )
    ]
  }
}
