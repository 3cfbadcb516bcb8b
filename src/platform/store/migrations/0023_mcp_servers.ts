import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The registry of upstream MCP servers (docs/mcp.md, "MCP servers behind the gateway"): `args` and
 * `allowed_tools` JSON arrays, `env_enc` and `headers_enc` the env and header maps as JSON sealed
 * with the storage key (null: none). Its cache reloads on the change counter of 0021, so the table
 * gets the same triggers. A key's MCP ceiling: `api_keys.mcp_allow`, a JSON array of patterns
 * (null: none).
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
    timeout_ms INTEGER NOT NULL,
    rpm INTEGER,
    enabled INTEGER NOT NULL DEFAULT 1,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  for (const op of ["INSERT", "UPDATE", "DELETE"])
    yield* sql.unsafe(
      `CREATE TRIGGER mcp_servers_changed_${op.toLowerCase()} AFTER ${op} ON mcp_servers BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
    )
  yield* sql`ALTER TABLE api_keys ADD COLUMN mcp_allow TEXT`
})
