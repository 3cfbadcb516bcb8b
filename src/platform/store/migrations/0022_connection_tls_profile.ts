import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** A connection may name the browser TLS handshake its calls make while ENABLE_TLS_FINGERPRINT is on (docs/egress.md). */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE connections ADD COLUMN tls_profile TEXT`
})
