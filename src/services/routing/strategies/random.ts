import type { Strategy } from "../types.js"
import { distinctByKey, shuffle } from "./common.js"

/**
 * `random`: repeated listings of the same key are collapsed to the first one, then the order is
 * a uniform random permutation.
 */
export const random: Strategy = {
  name: "random",
  order: (candidates, ctx) => shuffle(distinctByKey(candidates), ctx.random)
}
