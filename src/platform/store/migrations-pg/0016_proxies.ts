import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
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
    port BIGINT NOT NULL,
    username TEXT,
    password_enc TEXT,
    family TEXT NOT NULL DEFAULT 'auto',
    free BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`ALTER TABLE connections ADD COLUMN proxy_id TEXT`
  yield* notifyOnChange(sql, "proxies")
})
