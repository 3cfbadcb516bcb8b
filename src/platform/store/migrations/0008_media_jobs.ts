import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Media generation jobs (video and music, src/inference/media/MediaJobs.ts): the gateway's record of each
 * job a client submitted, tied to the API key that created it and the connection that took it.
 * Asynchronous upstreams (OpenAI videos, Gemini Veo operations) are polled through it until they
 * finish; synchronous ones (ElevenLabs music, Lyria) finish at once and keep their bytes in a
 * file under the data directory (`result_file`). The usage row priced per second of the result
 * is written when `status` first becomes final (a conditional UPDATE decides who writes it).
 * Times are epoch ms; a job is forgotten (and its file deleted) at `expires_at`.
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
