import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types: the configured OAuth client of an MCP server (`mcp_servers.oauth_enc`) and the
 * sign-ins (`mcp_oauth`), with change notifications for the connections' cache.
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
    expires_at BIGINT,
    obtained_at BIGINT,
    signed_in_at BIGINT,
    refresh_error TEXT,
    updated_at BIGINT NOT NULL
  )`
  yield* notifyOnChange(sql, "mcp_oauth")
})
