import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Routing combos (a name used as a model id, a strategy, targets, config), and the account tier of a connection (auto scoring). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE combos (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL COLLATE NOCASE UNIQUE,
    strategy TEXT NOT NULL,
    targets TEXT NOT NULL DEFAULT '[]',
    config TEXT NOT NULL DEFAULT '{}',
    description TEXT,
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`ALTER TABLE connections ADD COLUMN account_tier TEXT`
})
