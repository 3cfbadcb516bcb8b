import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Governance (docs/guardrails.md): versioned policy documents, the audit log's request columns
 * (kind, client address, method, route, status, before and after as masked JSON), eval sets and
 * their runs.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    document TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    deleted_at INTEGER
  )`
  yield* sql`CREATE UNIQUE INDEX policies_name_version ON policies (name, version)`
  yield* sql`ALTER TABLE audit_log ADD COLUMN kind TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN ip TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN method TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN route TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN status INTEGER`
  yield* sql`ALTER TABLE audit_log ADD COLUMN before_json TEXT`
  yield* sql`ALTER TABLE audit_log ADD COLUMN after_json TEXT`
  yield* sql`CREATE INDEX audit_log_actor_ts ON audit_log (actor, ts)`
  yield* sql`CREATE TABLE eval_sets (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    document TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE eval_runs (
    id TEXT PRIMARY KEY,
    set_id TEXT NOT NULL,
    status TEXT NOT NULL,
    models TEXT NOT NULL,
    result TEXT,
    error TEXT,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
  )`
  yield* sql`CREATE INDEX eval_runs_set ON eval_runs (set_id, created_at)`
})
