import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Files and batches: `files` (metadata; `api_key_id` '' without keys), `batches` (`request_counts` as columns) and
 * `batch_lines` (`status_code` set: done, never run again). docs/files-batches.md.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE files (
    id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    purpose TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER
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
    total INTEGER NOT NULL DEFAULT 0,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    in_progress_at INTEGER,
    expires_at INTEGER NOT NULL,
    finalizing_at INTEGER,
    completed_at INTEGER,
    failed_at INTEGER,
    expired_at INTEGER,
    cancelling_at INTEGER,
    cancelled_at INTEGER
  )`
  yield* sql`CREATE INDEX batches_owner ON batches (api_key_id, created_at, id)`
  yield* sql`CREATE INDEX batches_status ON batches (status)`
  yield* sql`CREATE TABLE batch_lines (
    batch_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    request TEXT NOT NULL,
    status_code INTEGER,
    result TEXT,
    PRIMARY KEY (batch_id, line)
  )`
})
