import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** A connection may say which wire format its upstream speaks (for compatible servers). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE connections ADD COLUMN upstream_format TEXT`
})
