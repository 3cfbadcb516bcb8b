import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Limits at every level (docs/accounting.md, "Limits at every level"): the organisation (`org`), a
 * team (`team_…`), a user (`usr_…`) and a key. Budgets and token limits of every level stay in
 * `budgets` and `token_limits`, whose `api_key_id` column now holds the subject's id (a key's id, as
 * every row written before this migration, or `org`, `team_…`, `usr_…`; `levelOf` in
 * src/domain/teams.ts tells them apart), so existing per-key rows need no change. `level_limits`
 * holds the other kinds above a key: requests and tokens per minute (`rpm`, `tpm`; a key's stay on
 * `api_keys`), the models and combos a level may use (`models`, a JSON array of patterns; a key's
 * too) and the MCP servers and tools (`mcp_allow`, a JSON array of patterns; a key's stays in
 * `api_keys.mcp_allow`). Null: no limit of that kind. The table gets the change counter's triggers
 * (0021), so every process reloads it.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE level_limits (
    subject_id TEXT PRIMARY KEY,
    rpm INTEGER,
    tpm INTEGER,
    models TEXT,
    mcp_allow TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  for (const op of ["INSERT", "UPDATE", "DELETE"])
    yield* sql.unsafe(
      `CREATE TRIGGER level_limits_changed_${op.toLowerCase()} AFTER ${op} ON level_limits BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
    )
})
