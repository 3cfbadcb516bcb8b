import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Base schema. Timestamps are epoch milliseconds (INTEGER) so that window queries compare
 * numbers; the API renders them as ISO 8601.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE kv (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, key)
  )`
  yield* sql`CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    masked TEXT NOT NULL,
    scopes TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    last_used_at INTEGER
  )`
  yield* sql`CREATE TABLE admin_sessions (
    token_hash TEXT PRIMARY KEY,
    csrf_token TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ip TEXT,
    user_agent TEXT
  )`
  yield* sql`CREATE TABLE connections (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    name TEXT NOT NULL COLLATE NOCASE UNIQUE,
    base_url TEXT,
    api_key_enc TEXT,
    default_model TEXT,
    models TEXT NOT NULL DEFAULT '[]',
    max_concurrent INTEGER,
    priority INTEGER NOT NULL DEFAULT 1,
    enabled INTEGER NOT NULL DEFAULT 1,
    test_status TEXT,
    last_tested_at INTEGER,
    rate_limited_until INTEGER,
    last_error TEXT,
    last_error_type TEXT,
    error_code TEXT,
    backoff_level INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    api_key_id TEXT,
    connection_id TEXT,
    provider TEXT,
    model TEXT,
    endpoint TEXT NOT NULL,
    stream INTEGER NOT NULL DEFAULT 0,
    status INTEGER NOT NULL,
    tokens_in INTEGER,
    tokens_out INTEGER,
    tokens_cached INTEGER,
    tokens_reasoning INTEGER,
    latency_ms INTEGER,
    ttft_ms INTEGER,
    error TEXT
  )`
  yield* sql`CREATE INDEX usage_ts ON usage (ts)`
  yield* sql`CREATE INDEX usage_key_ts ON usage (api_key_id, ts)`
  yield* sql`CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT,
    detail TEXT
  )`
  yield* sql`CREATE INDEX audit_log_ts ON audit_log (ts)`
})
