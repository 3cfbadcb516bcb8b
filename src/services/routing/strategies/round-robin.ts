import type { Strategy } from "../types.js"
import { rotate } from "./common.js"

/**
 * `round-robin`: the combo's counter (`nextTurn(scope)`, advanced on every call) picks the
 * start; the others follow cyclically. An empty list does not advance the counter.
 */
export const roundRobin: Strategy = {
  name: "round-robin",
  order: (candidates, ctx) => {
    const n = candidates.length
    if (n === 0) return []
    const turn = Math.trunc(ctx.state.nextTurn(ctx.scope))
    const start = Number.isFinite(turn) ? ((turn % n) + n) % n : 0
    return rotate(candidates, start)
  }
}
