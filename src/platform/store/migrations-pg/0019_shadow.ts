import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Shadow traffic (docs/shadow.md): each sampled request's pair of
 * answers, primary and shadow, with their measures and comparison; kept `shadowOptions.retentionDays`.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE shadow_pairs (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    request_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    format TEXT NOT NULL,
    request_excerpt TEXT NOT NULL,
    primary_model TEXT,
    shadow_model TEXT NOT NULL,
    primary_answer TEXT NOT NULL,
    shadow_answer TEXT,
    shadow_error TEXT,
    primary_latency_ms INTEGER,
    shadow_latency_ms INTEGER,
    primary_ttft_ms INTEGER,
    shadow_ttft_ms INTEGER,
    primary_tokens_in INTEGER,
    primary_tokens_out INTEGER,
    shadow_tokens_in INTEGER,
    shadow_tokens_out INTEGER,
    primary_cost_usd DOUBLE PRECISION,
    shadow_cost_usd DOUBLE PRECISION,
    primary_finish TEXT,
    shadow_finish TEXT,
    primary_tools TEXT NOT NULL DEFAULT '[]',
    shadow_tools TEXT NOT NULL DEFAULT '[]',
    primary_schema_valid INTEGER,
    shadow_schema_valid INTEGER,
    exact_match INTEGER NOT NULL DEFAULT 0,
    normalized_match INTEGER NOT NULL DEFAULT 0,
    tools_match INTEGER,
    similarity DOUBLE PRECISION NOT NULL DEFAULT 0,
    judge_model TEXT,
    judge_verdict TEXT,
    judge_cost_usd DOUBLE PRECISION
  )`
  yield* sql`CREATE INDEX shadow_pairs_scope ON shadow_pairs (scope, shadow_model, created_at)`
  yield* sql`CREATE INDEX shadow_pairs_created ON shadow_pairs (created_at)`
})
