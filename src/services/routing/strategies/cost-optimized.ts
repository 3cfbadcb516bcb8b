import type { Strategy } from "../types.js"
import { ascendingUnknownLast, blendedCost, stableSort } from "./common.js"

/**
 * `cost-optimized`: ascending by blended price (0.6 × input + 0.4 × output, USD per 1M tokens);
 * candidates without catalog pricing go after all priced ones; ties in given order.
 */
export const costOptimized: Strategy = {
  name: "cost-optimized",
  order: (candidates) => stableSort(candidates, ascendingUnknownLast(blendedCost))
}
