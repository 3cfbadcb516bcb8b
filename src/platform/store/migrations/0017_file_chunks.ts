import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * The database file store (src/inference/files/dbFileStore.ts; docs/scale-out.md, "Files"): the bytes of
 * `/v1/files` in the shared database, so every gateway on it sees every file. A SQLite store
 * keeps files on disk and leaves these tables empty; they exist in both sets so that
 * `schema_migrations` reads alike.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE file_objects (
    id TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    created_at INTEGER NOT NULL
  )`
  yield* sql`CREATE TABLE file_chunks (
    object_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (object_id, seq)
  )`
})
