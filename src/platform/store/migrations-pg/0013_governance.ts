import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Governance (docs/guardrails.md): versioned policies, the audit
 * log's request columns (before and after as masked JSON), eval sets and their runs.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    deleted_at BIGINT
  )`
  yield* sql`CREATE UNIQUE INDEX policies_name_version ON policies (name, version)`
  yield* sql`ALTER TABLE audit_log ADD COLUMN kind TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN ip TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN method TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN route TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN status BIGINT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN before_json TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN after_json TEXT`
  yield* sql`CREATE INDEX audit_log_actor_ts ON audit_log (actor, ts)`
  yield* sql`CREATE TABLE eval_sets (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    document TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    created_by TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE eval_runs (
    id TEXT PRIMARY KEY,
    set_id TEXT NOT NULL,
    status TEXT NOT NULL,
    models TEXT NOT NULL,
    result TEXT,
    error TEXT,
    created_at BIGINT NOT NULL,
    finished_at BIGINT
  )`
  yield* sql`CREATE INDEX eval_runs_set ON eval_runs (set_id, created_at)`
  yield* notifyOnChange(sql, "policies")
})
