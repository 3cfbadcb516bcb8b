import type { Strategy } from "../types.js"
import { quotaOrder } from "./common.js"

/**
 * `reset-window`: the soonest reset first (ascending `resetAt`; unknown after known); exhausted
 * candidates last, ordered among themselves the same way; ties in given order.
 */
export const resetWindow: Strategy = {
  name: "reset-window",
  order: (candidates, ctx) => quotaOrder(candidates, ctx, (q) => q?.resetAt)
}
