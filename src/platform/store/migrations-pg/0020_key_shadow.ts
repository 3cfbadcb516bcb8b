import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Shadow targets per gateway key (docs/shadow.md): a JSON array of `{model, sampleRate}`; NULL: none. */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN shadow TEXT`
})
