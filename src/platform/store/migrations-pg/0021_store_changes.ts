import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The SQLite migration of the same number adds a change counter that triggers on the cached
 * tables move, for StoreVersion to poll. PostgreSQL's StoreVersion listens to the tables' change
 * notifications instead (./notify.ts): the table is made so that both sets have the same tables
 * (and `gateway db migrate-to-postgres` copies it), and nothing moves it here.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE store_changes (id INTEGER PRIMARY KEY CHECK (id = 1), n BIGINT NOT NULL)`
  yield* sql`INSERT INTO store_changes (id, n) VALUES (1, 0)`
})
