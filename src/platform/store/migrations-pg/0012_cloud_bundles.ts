import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). The sync server's store: every version of each space's
 * bundle, sealed by the clients (the server cannot read it); older ones pruned (GATEWAY_CLOUD_KEEP_VERSIONS). See
 * docs/operations.md#cloud-sync.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE cloud_bundles (
    space TEXT NOT NULL,
    version BIGINT NOT NULL,
    ciphertext TEXT NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (space, version)
  )`
})
