import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). A batch forwarded whole to its provider's batch API keeps the
 * upstream's state as JSON in `batches.native`; NULL for a batch the gateway runs itself (docs/files-batches.md#native-batches).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE batches ADD COLUMN native TEXT`
})
