/**
 * When each key was last used: collected in memory on the request path, written to the database
 * every 30 s and at shutdown (a hint, lost with a store that is down). Its write is not a change
 * of a cached table (migration 0029): no process loads its caches again for it, and the keys'
 * listing reads the times from the database.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { transaction } from "../../platform/store/dialect.js"
import type { StoreHealthShape } from "../../platform/store/StoreHealth.js"

/** The last-used times not yet written (`touched`: key id → ms) and what writes them (`flushTouched`). */
export const makeKeyUsage = ({ sql, health }: { readonly sql: SqlClient.SqlClient; readonly health: StoreHealthShape }) => {
  const touched = new Map<string, number>()
  const flushTouched = Effect.suspend(() => {
    if (touched.size === 0) return Effect.void
    const entries = Array.from(touched)
    touched.clear()
    return transaction(
      sql,
      // Never back in time: another process may have written a later use.
      Effect.forEach(
        entries,
        ([id, at]) => sql`UPDATE api_keys SET last_used_at = ${at} WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at < ${at})`,
        { discard: true }
      )
    ).pipe(
      // Last-used times are a hint: lost with a store that is down (said once, by StoreHealth).
      Effect.catchAll((e) =>
        health.failed(e) === undefined ? Effect.logWarning("could not record key usage times", e.message) : Effect.void
      )
    )
  })
  return { touched, flushTouched }
}
