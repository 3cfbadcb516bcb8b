import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * Webhooks (docs/webhooks.md): the registered receivers with their aggregated delivery state
 * (the spec keeps no per-delivery history), and the deliveries not yet finished, so that they
 * survive a restart (a row is deleted once its delivery succeeded or finally failed).
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
