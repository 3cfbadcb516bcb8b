import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** A key's longest wait for a quota to reset, in seconds (docs/resilience.md, "Waiting out a quota"); NULL: off. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN max_queue_wait_s INTEGER`
})
