import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Media generation jobs (src/inference/media/MediaJobs.ts): each job a client submitted, polled until final; a conditional
 * UPDATE decides who writes its usage row; forgotten at `expires_at` (docs/media.md#store-cost-and-the-sweep).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE media_jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    api_key_id TEXT,
    request_id TEXT NOT NULL,
    requested_model TEXT NOT NULL,
    model TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    family TEXT NOT NULL,
    upstream_id TEXT,
    status TEXT NOT NULL,
    progress INTEGER NOT NULL DEFAULT 0,
    error_code TEXT,
    error_message TEXT,
    size TEXT,
    seconds REAL,
    result_type TEXT,
    result_url TEXT,
    result_file TEXT,
    result_bytes INTEGER,
    cost_usd REAL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    polled_at INTEGER,
    completed_at INTEGER,
    expires_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX media_jobs_status ON media_jobs (status, polled_at)`
  yield* sql`CREATE INDEX media_jobs_expires ON media_jobs (expires_at)`
})
