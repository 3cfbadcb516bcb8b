import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Connection and combo names are unique regardless of case ("Foo" and "foo" collide) through a
 * unique index on lower(name), which SQLite and PostgreSQL both declare the same way. In SQLite
 * databases the columns keep the COLLATE NOCASE of 0001 and 0003: rebuilding both tables to drop
 * it would change nothing (names are ASCII, where NOCASE and lower() agree, so this index cannot
 * fail on existing rows), and no query relies on that collation any more.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE UNIQUE INDEX connections_name_key ON connections (lower(name))`
  yield* sql`CREATE UNIQUE INDEX combos_name_key ON combos (lower(name))`
})
