import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Sign-ins to remote MCP servers (docs/mcp.md, "Signing in to a remote server (OAuth)"):
 * `mcp_servers.oauth_enc`, the configured OAuth client (sealed JSON); `mcp_oauth`, a server's grant
 * (registered client and tokens sealed, discovery, expiry; `client_key`: the url and client it was
 * made for). No foreign key: a bundle replaces `mcp_servers` rows (same ids) and keeps the sign-ins;
 * removing a server removes its row. The change counter's triggers (0021) reload the cache.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE mcp_servers ADD COLUMN oauth_enc TEXT`
  yield* sql`CREATE TABLE mcp_oauth (
    server_id TEXT PRIMARY KEY,
    client_key TEXT NOT NULL,
    redirect_uri TEXT,
    client_enc TEXT,
    tokens_enc TEXT,
    discovery TEXT,
    expires_at INTEGER,
    obtained_at INTEGER,
    signed_in_at INTEGER,
    refresh_error TEXT,
    updated_at INTEGER NOT NULL
  )`
  for (const op of ["INSERT", "UPDATE", "DELETE"])
    yield* sql.unsafe(
      `CREATE TRIGGER mcp_oauth_changed_${op.toLowerCase()} AFTER ${op} ON mcp_oauth BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
    )
})
