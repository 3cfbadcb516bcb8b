import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * Accounting and caching: cost and routing facts on usage rows, price overrides, per-key
 * budgets and token limits, and the response cache's database tier.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE usage ADD COLUMN cost_usd DOUBLE PRECISION`
  yield* sql`ALTER TABLE usage ADD COLUMN fallback_attempts BIGINT NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE usage ADD COLUMN cache_hit BIGINT NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE usage ADD COLUMN requested_model TEXT`
  yield* sql`ALTER TABLE usage ADD COLUMN tokens_cache_write BIGINT`
  yield* sql`CREATE INDEX usage_connection_ts ON usage (connection_id, ts)`
  yield* sql`CREATE TABLE pricing_overrides (
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input DOUBLE PRECISION,
    output DOUBLE PRECISION,
    cached_input DOUBLE PRECISION,
    cache_write DOUBLE PRECISION,
    per_image DOUBLE PRECISION,
    per_second DOUBLE PRECISION,
    per_character DOUBLE PRECISION,
    per_search DOUBLE PRECISION,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (provider, model)
  )`
  yield* sql`CREATE TABLE budgets (
    api_key_id TEXT PRIMARY KEY,
    daily_limit_usd DOUBLE PRECISION,
    weekly_limit_usd DOUBLE PRECISION,
    monthly_limit_usd DOUBLE PRECISION,
    warning_threshold DOUBLE PRECISION NOT NULL DEFAULT 0.8,
    reset_interval TEXT NOT NULL DEFAULT 'monthly',
    reset_time TEXT NOT NULL DEFAULT '00:00',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE token_limits (
    id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    target TEXT,
    max_tokens BIGINT NOT NULL,
    "window" TEXT NOT NULL,
    created_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX token_limits_key ON token_limits (api_key_id)`
  yield* sql`CREATE TABLE cache_entries (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    format TEXT NOT NULL,
    body TEXT NOT NULL,
    usage TEXT,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
    provider TEXT,
    embedding BYTEA,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX cache_entries_expires ON cache_entries (expires_at)`
  yield* notifyOnChange(sql, "pricing_overrides")
  yield* notifyOnChange(sql, "budgets")
  yield* notifyOnChange(sql, "token_limits")
})
