import { pickIndex } from "../random.js"
import type { Candidate, Strategy } from "../types.js"
import { distinctByKey, shuffle } from "./common.js"

/**
 * `strict-random`: random without de-duplication of repeats. The first candidate is a uniform
 * draw over the raw list, so a model listed twice is twice as likely to go first. The fallbacks
 * are the other distinct keys (first listing of each) in uniform random order: no key appears
 * twice in the result.
 */
export const strictRandom: Strategy = {
  name: "strict-random",
  order: (candidates, ctx) => {
    const n = candidates.length
    if (n === 0) return []
    const first = candidates[pickIndex(ctx.random, n)] as Candidate
    const others = distinctByKey(candidates).filter((c) => c.key !== first.key)
    return [first, ...shuffle(others, ctx.random)]
  }
}
