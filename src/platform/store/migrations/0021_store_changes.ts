import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The tables some in-memory cache is loaded from: the same as PostgreSQL's change triggers
 * (src/platform/store/migrations-pg/notify.ts). A migration that adds such a table adds it here too.
 */
export const CACHED_TABLES = [
  "kv",
  "api_keys",
  "budgets",
  "combos",
  "compression_assignments",
  "compression_combos",
  "connections",
  "context_memory",
  "context_skills",
  "oauth_tokens",
  "policies",
  "pricing_overrides",
  "proxies",
  "token_limits",
  "webhooks"
] as const

/**
 * A counter the cached tables' triggers move on every change (`StoreVersion` polls it). `PRAGMA
 * data_version`, polled before, moved with every commit of another connection: under
 * `--workers` each worker's usage rows made the others re-read every cache every second.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE store_changes (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)`
  yield* sql`INSERT INTO store_changes (id, n) VALUES (1, 0)`
  for (const table of CACHED_TABLES)
    for (const op of ["INSERT", "UPDATE", "DELETE"])
      yield* sql.unsafe(
        `CREATE TRIGGER ${table}_changed_${op.toLowerCase()} AFTER ${op} ON ${table} BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
      )
})
