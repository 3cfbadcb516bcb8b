import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL set (src/platform/store/migrations-pg/index.ts): the SQLite migration of the same number in
 * PostgreSQL types.
 *
 * The database file store (src/inference/files/dbFileStore.ts; docs/scale-out.md, "Files"): the bytes of
 * `/v1/files` in the shared database, in chunks of at most 1 MiB. No change trigger: no cache
 * loads from these tables (each read goes to the database).
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
