import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Single sign-on with OpenID Connect (docs/sso.md): `oidc_providers`, the providers an admin
 * configured through the API (`client_secret_enc` sealed with the storage key; `scopes` and
 * `mappings` JSON); `oidc_logins`, the sign-ins in progress (a browser's state, nonce and PKCE
 * verifier, a CLI's device code, a session waiting for the CLI to take it), keyed by the SHA-256 of
 * their one-time handle, sealed, and short-lived (`expires_at`), so the callback or the poll may
 * reach another gateway process on the same database. The providers get the change counter's
 * triggers (0021) so every process reloads them.
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
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE oidc_logins (
    handle_hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    provider_id TEXT NOT NULL,
    data_enc TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX oidc_logins_expires ON oidc_logins (expires_at)`
  for (const op of ["INSERT", "UPDATE", "DELETE"])
    yield* sql.unsafe(
      `CREATE TRIGGER oidc_providers_changed_${op.toLowerCase()} AFTER ${op} ON oidc_providers BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
    )
})
