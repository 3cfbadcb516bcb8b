/**
 * The upgrade of a single-user install (docs/teams.md, "Upgrading a single-user install"): while
 * `users` is empty, the first admin (`usr_admin`) is made and becomes the owner of every key that
 * has none. Idempotent, and safe with two processes starting on one database: the insert does
 * nothing when the row is there, and the keys' update only fills owners that are still empty.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { FIRST_ADMIN } from "../../domain/teams.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import type { DirectoryUser } from "./directoryRows.js"

/** Makes the first admin when there is no user yet; answers whether this call made it. */
export const ensureFirstAdmin = (sql: SqlClient.SqlClient): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const any = yield* sql<{ id: string }>`SELECT id FROM users LIMIT 1`
    if (any.length > 0) return false
    const t = Date.now()
    const made = yield* sql`INSERT INTO users ${sql.insert({
      id: FIRST_ADMIN.id,
      email: FIRST_ADMIN.email,
      name: FIRST_ADMIN.name,
      role: "admin",
      disabled: 0,
      created_at: t,
      updated_at: t
    })} ON CONFLICT DO NOTHING`.raw
    // Whichever process made it (this one, or another starting beside it), the keys made before
    // people existed are the first admin's: only owners still empty are filled, so running it twice changes nothing.
    const owned = yield* sql`UPDATE api_keys SET user_id = ${FIRST_ADMIN.id} WHERE user_id IS NULL AND team_id IS NULL`.raw
    const n = rowsChanged(owned)
    if (rowsChanged(made) > 0)
      yield* Effect.logInfo(
        `people and teams: made the first admin ${FIRST_ADMIN.id} (${FIRST_ADMIN.email}), owner of ${n} existing key(s)`
      )
    return rowsChanged(made) > 0
  }).pipe(Effect.orDie)

/** What `firstAdmin()` answers should no admin exist (every admin removed from the database by hand). */
export const fallbackAdmin: DirectoryUser = {
  id: FIRST_ADMIN.id,
  email: FIRST_ADMIN.email,
  name: FIRST_ADMIN.name,
  role: "admin",
  disabled: false,
  teams: [],
  oidcProvider: null,
  oidcSubject: null,
  createdAt: 0,
  lastLoginAt: null
}
