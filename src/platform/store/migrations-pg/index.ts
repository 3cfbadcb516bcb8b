import * as Migrator from "@effect/sql/Migrator"
import m0001 from "./0001_init.js"
import m0002 from "./0002_upstream_format.js"
import m0003 from "./0003_combos.js"
import m0004 from "./0004_accounting.js"
import m0005 from "./0005_connection_timeouts.js"
import m0006 from "./0006_usage_inflight.js"
import m0007 from "./0007_name_keys.js"
import m0008 from "./0008_media_jobs.js"
import m0009 from "./0009_files_batches.js"
import m0010 from "./0010_native_batches.js"
import m0011 from "./0011_oauth_tokens.js"
import m0012 from "./0012_cloud_bundles.js"
import m0013 from "./0013_governance.js"
import m0014 from "./0014_key_rate_limits.js"
import m0015 from "./0015_webhooks.js"
import m0016 from "./0016_proxies.js"
import m0017 from "./0017_file_chunks.js"
import m0018 from "./0018_context.js"
import m0019 from "./0019_shadow.js"
import m0020 from "./0020_key_shadow.js"
import m0021 from "./0021_store_changes.js"
import m0022 from "./0022_connection_tls_profile.js"
import m0023 from "./0023_mcp_servers.js"
import m0024 from "./0024_mcp_oauth.js"
import m0025 from "./0025_teams.js"
import m0026 from "./0026_level_limits.js"
import m0027 from "./0027_oidc.js"
import m0028 from "./0028_key_queue_wait.js"
import m0029 from "./0029_key_last_used_hint.js"

/**
 * The PostgreSQL migration set (Db.ts, with DATABASE_URL): the SQLite set's numbers, names, tables, columns and indexes in
 * PostgreSQL types; every schema change adds a migration to both (docs/internals.md#seam-3-the-store-dialect; docs/scale-out.md#running).
 */
export const loader = Migrator.fromRecord({
  "0001_init": m0001,
  "0002_upstream_format": m0002,
  "0003_combos": m0003,
  "0004_accounting": m0004,
  "0005_connection_timeouts": m0005,
  "0006_usage_inflight": m0006,
  "0007_name_keys": m0007,
  "0008_media_jobs": m0008,
  "0009_files_batches": m0009,
  "0010_native_batches": m0010,
  "0011_oauth_tokens": m0011,
  "0012_cloud_bundles": m0012,
  "0013_governance": m0013,
  "0014_key_rate_limits": m0014,
  "0015_webhooks": m0015,
  "0016_proxies": m0016,
  "0017_file_chunks": m0017,
  "0018_context": m0018,
  "0019_shadow": m0019,
  "0020_key_shadow": m0020,
  "0021_store_changes": m0021,
  "0022_connection_tls_profile": m0022,
  "0023_mcp_servers": m0023,
  "0024_mcp_oauth": m0024,
  "0025_teams": m0025,
  "0026_level_limits": m0026,
  "0027_oidc": m0027,
  "0028_key_queue_wait": m0028,
  "0029_key_last_used_hint": m0029
})
