import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** Inbound rate limits per gateway key: requests and tokens per minute (NULL: none set). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN rpm_limit BIGINT`
  yield* sql`ALTER TABLE api_keys ADD COLUMN tpm_limit BIGINT`
})
