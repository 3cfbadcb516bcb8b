import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { BUDGET_WINDOWS, DAY_MS, windowStart } from "../accounting/windows.js"
import type { PurgeResult } from "../../domain/settings.js"

const CHUNK = 5000

/**
 * The start of the oldest accounting window still open at `now`: budgets (daily, weekly,
 * monthly, at any reset time) and token limits (up to the calendar month) sum `usage` rows from
 * their window's start, so rows after this are kept and spend and limits stay right.
 */
export const oldestOpenWindow = (now: number): number => {
  let oldest = now
  for (const w of BUDGET_WINDOWS) for (const reset of ["00:00", "23:59"]) oldest = Math.min(oldest, windowStart(w, reset, now))
  return oldest
}

/**
 * `POST /api/settings/purge-request-history`: deletes request history (the `usage` rows: one per
 * request, with its model, status, tokens, cost and error) older than `olderThanDays` (all when
 * absent), but never a row inside an open budget or token-limit window. In chunks, like the
 * retention sweep, so a large purge does not stall the event loop.
 */
export const purgeRequestHistory = (sql: SqlClient.SqlClient, olderThanDays: number | undefined, now: number): Effect.Effect<PurgeResult> =>
  Effect.gen(function* () {
    const kept = oldestOpenWindow(now)
    const cutoff = olderThanDays === undefined ? kept : Math.min(kept, now - olderThanDays * DAY_MS)
    let removed = 0
    for (;;) {
      const rows = yield* sql`DELETE FROM usage WHERE id IN (SELECT id FROM usage WHERE ts < ${cutoff} LIMIT ${CHUNK}) RETURNING 1 AS n`
      removed += rows.length
      if (rows.length < CHUNK) break
      yield* Effect.sleep("5 millis")
    }
    return { removed, keptSince: new Date(cutoff).toISOString() }
  }).pipe(Effect.orDie)
