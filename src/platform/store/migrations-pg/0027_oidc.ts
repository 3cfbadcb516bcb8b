import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { notifyOnChange } from "./notify.js"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * Single sign-on with OpenID Connect (docs/sso.md): the configured providers and the sign-ins in progress.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE oidc_providers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    issuer TEXT NOT NULL,
    client_id TEXT NOT NULL,
    client_secret_enc TEXT,
    scopes TEXT NOT NULL,
    groups_claim TEXT NOT NULL,
    mappings TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE oidc_logins (
    handle_hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    provider_id TEXT NOT NULL,
    data_enc TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX oidc_logins_expires ON oidc_logins (expires_at)`
  yield* notifyOnChange(sql, "oidc_providers")
})
