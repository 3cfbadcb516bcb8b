import type { Strategy } from "../types.js"
import { moveKeyFirst } from "./common.js"

/** `lkgp`: the last candidate that succeeded for this combo first (when present), then the given order. */
export const lkgp: Strategy = {
  name: "lkgp",
  order: (candidates, ctx) => moveKeyFirst(candidates, ctx.state.lastGood(ctx.scope))
}
