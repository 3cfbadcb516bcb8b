import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * PostgreSQL twin of the SQLite migration of this number (index.ts). Requests written ahead while they run
 * (src/services/usage/InFlight.ts): the next start turns those a dead process left into usage rows, so a kill -9 loses
 * none that ran over about 100 ms.
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE usage_inflight (
    request_id TEXT PRIMARY KEY,
    ts BIGINT NOT NULL,
    instance TEXT NOT NULL,
    api_key_id TEXT,
    endpoint TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX usage_inflight_instance ON usage_inflight (instance)`
})
