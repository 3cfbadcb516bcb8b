import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import type { FormatId } from "../../domain/canonical.js"
import { findProvider, type ProviderSpec } from "../../domain/catalog/catalog.js"
import { type ConnectionTimeouts, TLS_PROFILES, type TlsProfile } from "../../domain/connections.js"
import { maskSecret } from "../../kernel/redact.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import type { AccountTier } from "../../services/routing/types.js"
import { type Connection, CONNECTION_COMPACTION_NAMESPACE, connectionModelIds } from "./connection.js"
import { applyRecords, type CustomModelRecord, parseRecords, PROVIDER_MODELS_NAMESPACE } from "./customModels.js"
import { type NodeRecord, nodeSpec, parseNodes, PROVIDER_NODES_NAMESPACE } from "./nodeRecords.js"

/** A `connections` row joined with its grant. */
export interface Row {
  readonly id: string
  readonly provider: string
  readonly name: string
  readonly base_url: string | null
  readonly api_key_enc: string | null
  readonly default_model: string | null
  readonly models: string
  readonly max_concurrent: number | null
  readonly priority: number
  readonly enabled: number
  readonly test_status: string | null
  readonly last_tested_at: number | null
  readonly rate_limited_until: number | null
  readonly last_error: string | null
  readonly last_error_type: string | null
  readonly error_code: string | null
  readonly backoff_level: number
  readonly created_at: number
  readonly updated_at: number
  readonly upstream_format: string | null
  readonly account_tier: string | null
  /** JSON of ConnectionTimeouts, or null. */
  readonly timeouts: string | null
  readonly proxy_id: string | null
  /** A TlsProfile, or null (migration 0022). */
  readonly tls_profile: string | null
  /** From `oauth_tokens` (LEFT JOIN): null for API-key connections. */
  readonly oauth_flow: string | null
  readonly oauth_expires_at: number | null
  readonly oauth_email: string | null
  readonly oauth_account_id: string | null
  readonly oauth_has_refresh: number | null
  readonly oauth_refreshed_at: number | null
}

/** Every connection, decrypted once, with the indexes the request path reads. */
export interface Snapshot {
  readonly all: ReadonlyArray<Connection>
  readonly byName: ReadonlyMap<string, Connection>
  /** Enabled connections per provider id, best priority first. */
  readonly byProvider: ReadonlyMap<string, ReadonlyArray<Connection>>
  /** For each model id, the enabled connections that serve it, best priority first. */
  readonly byModel: ReadonlyMap<string, ReadonlyArray<Connection>>
  readonly custom: ReadonlyArray<CustomModelRecord>
  readonly nodes: ReadonlyArray<{ readonly record: NodeRecord; readonly spec: ProviderSpec }>
  /** Node specs by id and by prefix. */
  readonly nodeBy: ReadonlyMap<string, ProviderSpec>
}

const UNKNOWN_PROVIDER: ProviderSpec = {
  id: "unknown",
  name: "Unknown provider",
  format: "openai-chat",
  baseUrl: null,
  authStyle: "bearer",
  authClass: "apikey",
  category: "custom",
  requiresApiKey: false,
  requiresBaseUrl: true,
  docsUrl: "",
  models: []
}

const timeoutsOf = (json: string | null): ConnectionTimeouts | null => {
  if (!json) return null
  try {
    const t = JSON.parse(json) as ConnectionTimeouts
    return {
      ...(typeof t.headersMs === "number" ? { headersMs: t.headersMs } : {}),
      ...(typeof t.idleMs === "number" ? { idleMs: t.idleMs } : {}),
      ...(t.nonStreamed === "auto" || t.nonStreamed === "stream" || t.nonStreamed === "whole" ? { nonStreamed: t.nonStreamed } : {})
    }
  } catch {
    return null
  }
}

const byPriority = (a: Connection, b: Connection) => a.priority - b.priority || a.createdAt - b.createdAt

/** A connection from its row: the provider (catalog or node) with its custom models applied, the key decrypted (a key that does not decrypt
 * is kept as the error). */
const fromRow = (
  secrets: SecretsShape,
  row: Row,
  custom: ReadonlyArray<CustomModelRecord>,
  nodeBy: ReadonlyMap<string, ProviderSpec>
): Effect.Effect<Connection> =>
  Effect.gen(function* () {
    const catalogProvider = findProvider(row.provider) ?? nodeBy.get(row.provider) ?? { ...UNKNOWN_PROVIDER, id: row.provider }
    const records = custom
      .filter((r) => r.scope === "provider" && r.scopeId === catalogProvider.id)
      .concat(custom.filter((r) => r.scope === "connection" && r.scopeId === row.id))
    const applied = applyRecords(catalogProvider, records)
    const provider = applied.provider
    let apiKey: Redacted.Redacted<string> | null = null
    let keyError: string | null = null
    if (row.api_key_enc) {
      const decrypted = yield* Effect.either(secrets.decrypt(row.api_key_enc))
      if (decrypted._tag === "Right") apiKey = decrypted.right
      else keyError = decrypted.left.message
    }
    return {
      id: row.id,
      provider,
      name: row.name,
      baseUrl: row.base_url,
      effectiveBaseUrl: row.base_url ?? provider.baseUrl,
      apiKey,
      apiKeyMasked: apiKey ? maskSecret(Redacted.value(apiKey)) : null,
      keyError,
      defaultModel: row.default_model,
      models: JSON.parse(row.models) as Array<string>,
      format: (row.upstream_format as FormatId | null) ?? provider.format,
      formats: row.upstream_format ? [row.upstream_format as FormatId] : [provider.format, ...(provider.alsoSpeaks ?? [])],
      maxConcurrent: row.max_concurrent,
      accountTier: (row.account_tier as AccountTier | null) ?? "standard",
      timeouts: timeoutsOf(row.timeouts),
      proxyId: row.proxy_id ?? null,
      tlsProfile: (TLS_PROFILES as ReadonlyArray<string>).includes(row.tls_profile ?? "") ? (row.tls_profile as TlsProfile) : null,
      priority: row.priority,
      enabled: row.enabled === 1,
      testStatus: row.test_status,
      lastTestedAt: row.last_tested_at,
      rateLimitedUntil: row.rate_limited_until,
      lastError: row.last_error,
      lastErrorType: row.last_error_type,
      errorCode: row.error_code,
      backoffLevel: row.backoff_level,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      ...(applied.hidden.size > 0 ? { hiddenModels: applied.hidden } : {}),
      ...(applied.custom.size > 0 ? { customModels: applied.custom } : {}),
      ...(row.oauth_flow !== null
        ? {
            oauth: {
              expiresAt: row.oauth_expires_at === null ? null : Number(row.oauth_expires_at),
              email: row.oauth_email,
              accountId: row.oauth_account_id,
              hasRefreshToken: Number(row.oauth_has_refresh ?? 0) === 1,
              refreshedAt: row.oauth_refreshed_at === null ? null : Number(row.oauth_refreshed_at)
            }
          }
        : {})
    }
  })

/**
 * The connections as the request path reads them: every row, its grant, the custom models and
 * the provider nodes, loaded at once (a cached load: rebuilt when this process writes or
 * another commits).
 */
export const loadSnapshot = (deps: { readonly sql: SqlClient.SqlClient; readonly secrets: SecretsShape }): Effect.Effect<Snapshot> => {
  const { sql, secrets } = deps
  return Effect.gen(function* () {
    const rows =
      yield* sql<Row>`SELECT c.*, o.flow AS oauth_flow, o.expires_at AS oauth_expires_at, o.email AS oauth_email, o.account_id AS oauth_account_id,
      CASE WHEN o.refresh_token_enc IS NULL THEN 0 ELSE 1 END AS oauth_has_refresh, o.refreshed_at AS oauth_refreshed_at
      FROM connections c LEFT JOIN oauth_tokens o ON o.connection_id = c.id ORDER BY c.priority, c.created_at`.pipe(Effect.orDie)
    const kv = yield* sql<{
      key: string
      value: string
    }>`SELECT key, value FROM kv WHERE namespace = ${PROVIDER_MODELS_NAMESPACE} ORDER BY key`.pipe(Effect.orDie)
    const custom = parseRecords(kv.map((r) => [r.key, r.value] as const)).sort((a, b) => a.createdAt - b.createdAt)
    const nodeRows = yield* sql<{
      key: string
      value: string
    }>`SELECT key, value FROM kv WHERE namespace = ${PROVIDER_NODES_NAMESPACE} ORDER BY key`.pipe(Effect.orDie)
    const nodes = yield* Effect.forEach(parseNodes(nodeRows.map((r) => [r.key, r.value] as const)), (record) =>
      Effect.map(
        Effect.forEach(Object.entries(record.headers), ([name, enc]) =>
          Effect.map(
            Effect.orElseSucceed(secrets.decrypt(enc), () => Redacted.make("")),
            (v) => [name, v] as const
          )
        ),
        (headers) => ({ record, spec: nodeSpec(record, Object.fromEntries(headers)) })
      )
    )
    const nodeBy = new Map<string, ProviderSpec>()
    for (const n of nodes) {
      nodeBy.set(n.record.id, n.spec)
      if (!nodeBy.has(n.record.prefix)) nodeBy.set(n.record.prefix, n.spec)
    }
    const compactionRows = yield* sql<{
      key: string
      value: string
    }>`SELECT key, value FROM kv WHERE namespace = ${CONNECTION_COMPACTION_NAMESPACE}`.pipe(Effect.orDie)
    const compaction = new Map(compactionRows.map((r) => [r.key, r.value] as const))
    const all = yield* Effect.forEach(rows, (row) =>
      Effect.map(fromRow(secrets, row, custom, nodeBy), (c) =>
        compaction.get(c.id) === "upstream" ? { ...c, compaction: "upstream" as const } : c
      )
    )
    const byName = new Map(all.map((c) => [c.name.toLowerCase(), c]))
    const byProvider = new Map<string, Array<Connection>>()
    const byModel = new Map<string, Array<Connection>>()
    for (const c of all.filter((c) => c.enabled).sort(byPriority)) {
      // A node's connections answer to its prefix too (`<prefix>/<model>`).
      for (const key of c.provider.node && c.provider.node.prefix !== c.provider.id
        ? [c.provider.id, c.provider.node.prefix]
        : [c.provider.id]) {
        const list = byProvider.get(key) ?? []
        list.push(c)
        byProvider.set(key, list)
      }
      for (const id of connectionModelIds(c)) {
        const serving = byModel.get(id)
        if (serving) serving.push(c)
        else byModel.set(id, [c])
      }
    }
    return { all, byName, byProvider, byModel, custom, nodes, nodeBy } satisfies Snapshot
  })
}
