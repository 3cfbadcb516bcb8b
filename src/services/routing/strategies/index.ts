/**
 * The combo strategies by name (all but `auto` and `fusion`, which are built elsewhere), and the
 * internal quota-share mode of the `qtSd/...` model form.
 */
import type { Strategy, StrategyName } from "../types.js"
import { contextOptimized } from "./context-optimized.js"
import { contextRelay } from "./context-relay.js"
import { costOptimized } from "./cost-optimized.js"
import { fillFirst } from "./fill-first.js"
import { headroom } from "./headroom.js"
import { leastUsed } from "./least-used.js"
import { lkgp } from "./lkgp.js"
import { p2c } from "./p2c.js"
import { priority } from "./priority.js"
import { quotaShare } from "./quota-share.js"
import { random } from "./random.js"
import { resetAware } from "./reset-aware.js"
import { resetWindow } from "./reset-window.js"
import { roundRobin } from "./round-robin.js"
import { strictRandom } from "./strict-random.js"
import { weighted } from "./weighted.js"

export const COMBO_STRATEGIES: Readonly<Record<Exclude<StrategyName, "auto" | "fusion">, Strategy>> = {
  priority,
  weighted,
  "round-robin": roundRobin,
  "context-relay": contextRelay,
  "fill-first": fillFirst,
  p2c,
  random,
  "least-used": leastUsed,
  "cost-optimized": costOptimized,
  "reset-aware": resetAware,
  "reset-window": resetWindow,
  headroom,
  "strict-random": strictRandom,
  lkgp,
  "context-optimized": contextOptimized
}

export { quotaShare }
