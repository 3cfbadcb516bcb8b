import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/**
 * A key's last-used time is a hint written every 30 s while the key is used
 * (src/services/auth/apiKeyUsage.ts). Its write no longer counts as a change of a cached table: it
 * moved `store_changes`, so under traffic every in-memory cache of every process loaded again every
 * 30 s (docs/performance.md, "2026-11-30 (night)"). The update trigger names every other column
 * of `api_keys`; a migration that adds one makes this trigger again with it
 * (test/store.test.ts checks that none is left out).
 */
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TRIGGER api_keys_changed_update`
  yield* sql.unsafe(
    `CREATE TRIGGER api_keys_changed_update AFTER UPDATE OF id, name, key_hash, masked, scopes, enabled, created_at, expires_at, rpm_limit, tpm_limit, shadow, mcp_allow, user_id, team_id, max_queue_wait_s ON api_keys BEGIN UPDATE store_changes SET n = n + 1 WHERE id = 1; END`
  )
})
