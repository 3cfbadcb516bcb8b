/**
 * What shadow (and judge) calls spent today (UTC), against the daily budget: restored at start
 * from the pairs already stored today, so a restart keeps the cap.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { ShadowShape } from "./Shadow.js"

const day = () => new Date().toISOString().slice(0, 10)

/** Reads today's spend from the stored pairs; answers `spentToday` and `spend`, which start at zero again on a new day. */
export const loadShadowSpend = ({ sql }: { readonly sql: SqlClient.SqlClient }) =>
  Effect.gen(function* () {
    // Today's spend starts from the pairs already stored today (a restart keeps the cap).
    const startOfDay = Date.parse(`${day()}T00:00:00Z`)
    const [row] = yield* sql<{
      spent: number | null
    }>`SELECT SUM(COALESCE(shadow_cost_usd, 0) + COALESCE(judge_cost_usd, 0)) AS spent FROM shadow_pairs WHERE created_at >= ${startOfDay}`.pipe(
      Effect.orDie
    )
    let spent = { day: day(), usd: Number(row?.spent ?? 0) }

    const spentToday: ShadowShape["spentToday"] = () => {
      if (spent.day !== day()) spent = { day: day(), usd: 0 }
      return spent.usd
    }
    const spend: ShadowShape["spend"] = (usd) => {
      spentToday()
      spent.usd += usd
    }
    return { spentToday, spend }
  })
