import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * Native batches (docs/files-batches.md, "Native batches"): a batch forwarded whole to its
 * provider's batch API keeps that upstream's state (connection, upstream batch and file ids, its
 * last status and counts) as JSON in `batches.native`; NULL for a batch the gateway runs itself.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE batches ADD COLUMN native TEXT`
})
