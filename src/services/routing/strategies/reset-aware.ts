import type { Strategy } from "../types.js"
import { quotaOrder } from "./common.js"

/**
 * `reset-aware`: short quota windows first (ascending `windowMs`; unknown windows after known
 * ones); exhausted candidates last, ordered among themselves the same way; ties in given order.
 */
export const resetAware: Strategy = {
  name: "reset-aware",
  order: (candidates, ctx) => quotaOrder(candidates, ctx, (q) => q?.windowMs)
}
