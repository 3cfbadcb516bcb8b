import type { Candidate, Strategy } from "../types.js"
import { positiveWeight, shuffle } from "./common.js"

/**
 * `weighted`: weighted random without replacement. Each position is drawn from the candidates
 * not yet placed with probability weight / (sum of their weights), so fallbacks are weighted
 * too. Candidates whose weight is not a finite positive number come last in given order; when
 * no candidate has one, the order is a uniform random permutation.
 */
export const weighted: Strategy = {
  name: "weighted",
  order: (candidates, ctx) => {
    const pool: Array<{ readonly c: Candidate; readonly w: number }> = []
    const rest: Array<Candidate> = []
    for (const c of candidates) {
      const w = positiveWeight(c)
      if (w === undefined) rest.push(c)
      else pool.push({ c, w })
    }
    if (pool.length === 0) return shuffle(candidates, ctx.random)
    const out: Array<Candidate> = []
    while (pool.length > 1) {
      const sum = pool.reduce((s, p) => s + p.w, 0)
      const r = ctx.random.next() * sum
      let acc = 0
      // Floating-point rounding can leave r just above the last cumulative sum: take the last one then.
      let chosen = pool.length - 1
      for (let i = 0; i < pool.length; i++) {
        acc += (pool[i] as { w: number }).w
        if (r < acc) {
          chosen = i
          break
        }
      }
      out.push((pool[chosen] as { c: Candidate }).c)
      pool.splice(chosen, 1)
    }
    for (const p of pool) out.push(p.c)
    return [...out, ...rest]
  }
}
