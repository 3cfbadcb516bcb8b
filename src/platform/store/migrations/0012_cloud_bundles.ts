import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The sync server's store (docs/operations.md, "Cloud sync"): every version of each sync space's
 * bundle, as the clients sealed it (the server cannot read it). The latest versions are kept,
 * older ones pruned (GATEWAY_CLOUD_KEEP_VERSIONS).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE cloud_bundles (
    space TEXT NOT NULL,
    version INTEGER NOT NULL,
    ciphertext TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (space, version)
  )`
})
