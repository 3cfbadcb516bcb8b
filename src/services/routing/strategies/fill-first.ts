import type { Candidate, Strategy } from "../types.js"
import { isExhausted } from "./common.js"

/**
 * `fill-first`: the given order, except candidates whose quota is exhausted (flagged, or
 * `remaining <= 0`) move to the end, keeping their relative order. Unknown quota is not exhausted.
 */
export const fillFirst: Strategy = {
  name: "fill-first",
  order: (candidates, ctx) => {
    const open: Array<Candidate> = []
    const spent: Array<Candidate> = []
    for (const c of candidates) (isExhausted(ctx.state.quota(c)) ? spent : open).push(c)
    return [...open, ...spent]
  }
}
