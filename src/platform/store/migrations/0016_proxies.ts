import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The proxy registry (docs/egress.md) and the proxy a connection names. `family` is text, not
 * null, default `auto` (spec document 2); an unknown stored value reads as `auto`.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE proxies (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    username TEXT,
    password_enc TEXT,
    family TEXT NOT NULL DEFAULT 'auto',
    free INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`ALTER TABLE connections ADD COLUMN proxy_id TEXT`
})
