import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Media generation jobs (src/inference/media/MediaJobs.ts): each job
 * a client submitted, polled until final; a conditional UPDATE decides who writes its usage row (docs/media.md#store-cost-and-the-sweep).
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
    progress BIGINT NOT NULL DEFAULT 0,
    error_code TEXT,
    error_message TEXT,
    size TEXT,
    seconds DOUBLE PRECISION,
    result_type TEXT,
    result_url TEXT,
    result_file TEXT,
    result_bytes BIGINT,
    cost_usd DOUBLE PRECISION,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    polled_at BIGINT,
    completed_at BIGINT,
    expires_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX media_jobs_status ON media_jobs (status, polled_at)`
  yield* sql`CREATE INDEX media_jobs_expires ON media_jobs (expires_at)`
})
