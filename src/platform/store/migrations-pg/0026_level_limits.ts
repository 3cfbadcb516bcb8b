import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * Limits at every level (docs/accounting.md, "Limits at every level"): rate limits, allowed models
 * and MCP access of the organisation, teams and users (and a key's allowed models); budgets and
 * token limits of every level stay in `budgets` and `token_limits`, keyed by the subject's id.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE level_limits (
    subject_id TEXT PRIMARY KEY,
    rpm BIGINT,
    tpm BIGINT,
    models TEXT,
    mcp_allow TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* notifyOnChange(sql, "level_limits")
})
