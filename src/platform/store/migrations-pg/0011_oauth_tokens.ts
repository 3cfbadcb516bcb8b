import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). An OAuth connection's grant beside its access token
 * (`connections.api_key_enc`): refresh and id tokens (encrypted), expiry, account, endpoint overrides, last refresh and its
 * error (docs/operations.md#oauth-connections).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE oauth_tokens (
    connection_id TEXT PRIMARY KEY REFERENCES connections(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,
    flow TEXT NOT NULL,
    refresh_token_enc TEXT,
    id_token_enc TEXT,
    expires_at BIGINT,
    email TEXT,
    account_id TEXT,
    scopes TEXT,
    endpoints TEXT,
    obtained_at BIGINT NOT NULL,
    refreshed_at BIGINT,
    refresh_error TEXT,
    updated_at BIGINT NOT NULL
  )`
  yield* notifyOnChange(sql, "oauth_tokens")
})
