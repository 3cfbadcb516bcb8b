import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * Connection and combo names are unique regardless of case ("Foo" and "foo" collide) through a
 * unique index on lower(name), declared as in SQLite. The columns have no NOCASE here.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE UNIQUE INDEX connections_name_key ON connections (lower(name))`
  yield* sql`CREATE UNIQUE INDEX combos_name_key ON combos (lower(name))`
})
