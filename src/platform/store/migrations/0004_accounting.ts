import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Accounting and caching: cost and routing facts on usage rows, price overrides, per-key
 * budgets and token limits, and the response cache's database tier.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE usage ADD COLUMN cost_usd REAL`
  yield* sql`ALTER TABLE usage ADD COLUMN fallback_attempts INTEGER NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE usage ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0`
  yield* sql`ALTER TABLE usage ADD COLUMN requested_model TEXT`
  yield* sql`ALTER TABLE usage ADD COLUMN tokens_cache_write INTEGER`
  yield* sql`CREATE INDEX usage_connection_ts ON usage (connection_id, ts)`
  yield* sql`CREATE TABLE pricing_overrides (
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input REAL,
    output REAL,
    cached_input REAL,
    cache_write REAL,
    per_image REAL,
    per_second REAL,
    per_character REAL,
    per_search REAL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (provider, model)
  )`
  yield* sql`CREATE TABLE budgets (
    api_key_id TEXT PRIMARY KEY,
    daily_limit_usd REAL,
    weekly_limit_usd REAL,
    monthly_limit_usd REAL,
    warning_threshold REAL NOT NULL DEFAULT 0.8,
    reset_interval TEXT NOT NULL DEFAULT 'monthly',
    reset_time TEXT NOT NULL DEFAULT '00:00',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE token_limits (
    id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    target TEXT,
    max_tokens INTEGER NOT NULL,
    window TEXT NOT NULL,
    created_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX token_limits_key ON token_limits (api_key_id)`
  yield* sql`CREATE TABLE cache_entries (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    format TEXT NOT NULL,
    body TEXT NOT NULL,
    usage TEXT,
    cost_usd REAL NOT NULL DEFAULT 0,
    provider TEXT,
    embedding BLOB,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX cache_entries_expires ON cache_entries (expires_at)`
})
