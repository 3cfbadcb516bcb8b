import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * OAuth connections (docs/operations.md, "OAuth connections"): the access token is the
 * connection's credential (`connections.api_key_enc`, encrypted like an API key); this table
 * keeps the rest of the grant, one row per connection: the refresh and id tokens (encrypted),
 * the expiry, the account the id token names, the endpoint overrides the flow was started with
 * (JSON), and the last refresh and its error.
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
