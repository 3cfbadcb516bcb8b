import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Files and batches: `files` (metadata; `api_key_id` '' without keys),
 * `batches` (`request_counts` as columns) and `batch_lines` (`status_code` set: done, never run again). docs/files-batches.md.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE files (
    id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    purpose TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT
  )`
  yield* sql`CREATE INDEX files_owner ON files (api_key_id, created_at, id)`
  yield* sql`CREATE INDEX files_expires ON files (expires_at)`
  yield* sql`CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    input_file_id TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    metadata TEXT,
    status TEXT NOT NULL,
    errors TEXT,
    output_file_id TEXT,
    error_file_id TEXT,
    total BIGINT NOT NULL DEFAULT 0,
    completed BIGINT NOT NULL DEFAULT 0,
    failed BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    in_progress_at BIGINT,
    expires_at BIGINT NOT NULL,
    finalizing_at BIGINT,
    completed_at BIGINT,
    failed_at BIGINT,
    expired_at BIGINT,
    cancelling_at BIGINT,
    cancelled_at BIGINT
  )`
  yield* sql`CREATE INDEX batches_owner ON batches (api_key_id, created_at, id)`
  yield* sql`CREATE INDEX batches_status ON batches (status)`
  yield* sql`CREATE TABLE batch_lines (
    batch_id TEXT NOT NULL,
    line BIGINT NOT NULL,
    custom_id TEXT NOT NULL,
    request TEXT NOT NULL,
    status_code BIGINT,
    result TEXT,
    PRIMARY KEY (batch_id, line)
  )`
})
