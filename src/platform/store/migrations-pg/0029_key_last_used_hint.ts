import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * As the SQLite migration of the same number: writing a key's last-used time (a hint, every 30 s
 * while the key is used) no longer notifies the other processes, which loaded every cache again on
 * each notification. The update trigger names every other column of `api_keys`; a migration that
 * adds one makes this trigger again with it (test/scale/store.pg.test.ts checks it).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TRIGGER api_keys_notify ON api_keys`
  yield* sql.unsafe(
    `CREATE TRIGGER api_keys_notify AFTER INSERT OR DELETE OR TRUNCATE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION gateway_notify_change()`
  )
  yield* sql.unsafe(
    `CREATE TRIGGER api_keys_notify_update AFTER UPDATE OF id, name, key_hash, masked, scopes, enabled, created_at, expires_at, rpm_limit, tpm_limit, shadow, mcp_allow, user_id, team_id, max_queue_wait_s ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION gateway_notify_change()`
  )
})
