import type { Strategy } from "../types.js"
import { quotaOrder } from "./common.js"

/**
 * `headroom`: the most remaining quota first (descending `remaining`; unknown quota counts as
 * 1.0, a full quota); exhausted candidates last, ordered among themselves the same way; ties in
 * given order.
 */
export const headroom: Strategy = {
  name: "headroom",
  order: (candidates, ctx) => quotaOrder(candidates, ctx, (q) => -(q === undefined ? 1 : q.remaining))
}
