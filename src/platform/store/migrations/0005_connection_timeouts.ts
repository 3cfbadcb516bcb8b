import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** A connection may have its own upstream timeouts (JSON: `{headersMs?, idleMs?}`). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE connections ADD COLUMN timeouts TEXT`
})
