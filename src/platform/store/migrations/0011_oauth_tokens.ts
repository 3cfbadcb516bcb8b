import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
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
    expires_at INTEGER,
    email TEXT,
    account_id TEXT,
    scopes TEXT,
    endpoints TEXT,
    obtained_at INTEGER NOT NULL,
    refreshed_at INTEGER,
    refresh_error TEXT,
    updated_at INTEGER NOT NULL
  )`
})
