import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Webhooks (docs/webhooks.md): the receivers with their aggregated
 * delivery state, and the deliveries not yet finished, so they survive a restart (deleted once done).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    secret TEXT NOT NULL,
    enabled BIGINT NOT NULL DEFAULT 1,
    description TEXT,
    created_at BIGINT NOT NULL,
    last_triggered_at BIGINT,
    last_status BIGINT,
    failure_count BIGINT NOT NULL DEFAULT 0
  )`
  yield* sql`CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    seq BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at, seq)`
  yield* notifyOnChange(sql, "webhooks")
})
