import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * The registry of upstream MCP servers (docs/mcp.md, "MCP servers behind the gateway"), its change
 * notifications for the registry's cache, and a key's MCP ceiling (`api_keys.mcp_allow`).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mcp_servers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    transport TEXT NOT NULL,
    command TEXT,
    args TEXT NOT NULL DEFAULT '[]',
    env_enc TEXT,
    cwd TEXT,
    url TEXT,
    headers_enc TEXT,
    allowed_tools TEXT NOT NULL DEFAULT '[]',
    timeout_ms BIGINT NOT NULL,
    rpm BIGINT,
    enabled BIGINT NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* notifyOnChange(sql, "mcp_servers")
  yield* sql`ALTER TABLE api_keys ADD COLUMN mcp_allow TEXT`
})
