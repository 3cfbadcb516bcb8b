import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). The database file store (src/inference/files/dbFileStore.ts;
 * docs/scale-out.md#files): the bytes of `/v1/files` in chunks of at most 1 MiB. No change trigger: no cache loads from them.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE file_objects (
    id TEXT PRIMARY KEY,
    bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    created_at BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE file_chunks (
    object_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (object_id, seq)
  )`
})
