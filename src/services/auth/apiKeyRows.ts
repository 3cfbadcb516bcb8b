/**
 * The api_keys table as the service keeps it: a row, the record it is read as, the view the
 * management API shows, and every key loaded into memory by its hash.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type { ShadowTarget } from "../../domain/shadow.js"
import type { ApiKeyScope, ApiKeyView } from "../../domain/keys.js"
import { toIso } from "../../platform/store/Db.js"
import { makeCachedLoad, type StoreVersionShape } from "../../platform/store/StoreVersion.js"
import type { ApiKeyRecord } from "./ApiKeys.js"

interface Row {
  readonly id: string
  readonly name: string
  readonly key_hash: string
  readonly masked: string
  readonly scopes: string
  readonly enabled: number
  readonly created_at: number
  readonly expires_at: number | null
  readonly last_used_at: number | null
  readonly rpm_limit: number | null
  readonly tpm_limit: number | null
  readonly shadow: string | null
  readonly mcp_allow: string | null
  readonly user_id?: string | null
  readonly team_id?: string | null
  readonly max_queue_wait_s?: number | null
}

/** The `mcp_allow` column: the patterns as JSON, NULL for no ceiling. */
export const mcpAllowColumn = (allow: ReadonlyArray<string> | null): string | null => (allow === null ? null : JSON.stringify(allow))

const mcpAllowOf = (text: string | null | undefined): ReadonlyArray<string> | null => {
  if (text === null || text === undefined) return null
  try {
    const v: unknown = JSON.parse(text)
    return Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : null
  } catch {
    return null
  }
}

/** The `shadow` column: the targets as JSON, NULL for none. */
export const shadowColumn = (targets: ReadonlyArray<ShadowTarget>): string | null => (targets.length > 0 ? JSON.stringify(targets) : null)

const toRecord = (row: Row): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  masked: row.masked,
  scopes: JSON.parse(row.scopes) as Array<ApiKeyScope>,
  enabled: row.enabled === 1,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  lastUsedAt: row.last_used_at,
  rpm: row.rpm_limit ?? null,
  tpm: row.tpm_limit ?? null,
  shadow: row.shadow ? (JSON.parse(row.shadow) as ReadonlyArray<ShadowTarget>) : [],
  mcpAllow: mcpAllowOf(row.mcp_allow),
  userId: row.user_id ?? null,
  teamId: row.team_id ?? null,
  maxQueueWaitSeconds: row.max_queue_wait_s ? row.max_queue_wait_s : null
})

export const toView = (r: ApiKeyRecord): ApiKeyView => ({
  id: r.id,
  name: r.name,
  key: r.masked,
  scopes: r.scopes,
  enabled: r.enabled,
  createdAt: toIso(r.createdAt)!,
  expiresAt: toIso(r.expiresAt),
  lastUsedAt: toIso(r.lastUsedAt),
  rpm: r.rpm,
  tpm: r.tpm,
  shadow: r.shadow,
  mcp: r.mcpAllow === null ? null : { allow: r.mcpAllow },
  userId: r.userId,
  teamId: r.teamId,
  maxQueueWaitSeconds: r.maxQueueWaitSeconds
})

/** Every key by the SHA-256 of its secret, loaded once and kept until a write here or another process's commit. */
export const loadKeysByHash = ({ sql, version }: { readonly sql: SqlClient.SqlClient; readonly version: StoreVersionShape }) =>
  makeCachedLoad(
    version,
    sql<Row>`SELECT * FROM api_keys`.pipe(
      Effect.map((rows) => new Map(rows.map((r) => [r.key_hash, toRecord(r)]))),
      Effect.orDie
    )
  )

/** The keys in memory (`get`, `peek` on the request path, `invalidate` after a write). */
export type KeysByHash = ReturnType<typeof loadKeysByHash>
