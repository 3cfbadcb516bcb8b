import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StoreVersionShape } from "../../platform/store/StoreVersion.js"
import type { BudgetsShape } from "./Budgets.js"
import type { LevelsShape } from "./Levels.js"
import type { PricingShape } from "./Pricing.js"
import type { TokenLimitsShape } from "./TokenLimits.js"

/**
 * Prices, budgets and limits brought up to date before a request. They change under this process
 * only when another one commits: with the database version unchanged since the last full refresh,
 * `prepared()` says so and a request's check is one step. Made once per layer.
 */
export const makePrepare = (deps: {
  readonly pricing: PricingShape
  readonly budgets: BudgetsShape
  readonly limits: TokenLimitsShape
  /** Who owns each key and the levels' own limits (before budgets and limits, which ask it which levels a key counts toward). */
  readonly levels: LevelsShape
  readonly version: Option.Option<StoreVersionShape>
}) => {
  const { pricing, budgets, limits, levels, version } = deps
  let refreshedAt: number | undefined
  const refreshAll = Effect.zipRight(levels.refresh, Effect.zipRight(pricing.refresh, Effect.zipRight(budgets.refresh, limits.refresh)))
  const prepared = () => {
    if (Option.isNone(version)) return false
    const known = version.value.peek()
    return known !== undefined && known === refreshedAt
  }
  const prepare = Effect.suspend(() => {
    if (prepared()) return Effect.void
    if (Option.isNone(version)) return refreshAll
    // The version known before the refresh: a commit seen while it ran is picked up next time.
    const before = version.value.peek()
    return Effect.tap(refreshAll, () => {
      refreshedAt = before
    })
  })
  return { prepare, prepared }
}
