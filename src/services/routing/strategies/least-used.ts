import type { Strategy } from "../types.js"
import { ascendingUnknownLast, stableSort } from "./common.js"

/** `least-used`: ascending by requests sent to the candidate's key since start; ties in given order. */
export const leastUsed: Strategy = {
  name: "least-used",
  order: (candidates, ctx) => {
    const used = new Map(candidates.map((c) => [c, ctx.state.used(c)] as const))
    return stableSort(
      candidates,
      ascendingUnknownLast((c) => used.get(c))
    )
  }
}
