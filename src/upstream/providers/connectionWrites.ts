import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import { findProvider, PROVIDERS, type ProviderSpec } from "../../domain/catalog/catalog.js"
import { CC_COMPATIBLE_PROVIDER_ID } from "../../domain/catalog/ccCompatible.js"
import type { ConnectionTimeouts, CreateConnection, UpdateConnection } from "../../domain/connections.js"
import { BadRequest, Conflict, type NotFound } from "../../domain/errors.js"
import type { FeatureFlagsShape } from "../../platform/flags/FeatureFlags.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { type Connection, CONNECTION_COMPACTION_NAMESPACE } from "./connection.js"
import type { Snapshot } from "./connectionSnapshot.js"
import { checkProviderUrl, type UrlPolicyFlags } from "./urlPolicy.js"

/** A connection's `compaction` setting, in `kv` under its id (`CONNECTION_COMPACTION_NAMESPACE`); null removes it (the default). */
const writeCompaction = (sql: SqlClient.SqlClient, id: string, value: string | null) =>
  value === null
    ? sql`DELETE FROM kv WHERE namespace = ${CONNECTION_COMPACTION_NAMESPACE} AND key = ${id}`.pipe(Effect.asVoid, Effect.orDie)
    : sql`INSERT INTO kv (namespace, key, value, updated_at) VALUES (${CONNECTION_COMPACTION_NAMESPACE}, ${id}, ${value}, ${Date.now()})
        ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

/**
 * The name check reads the cached snapshot, which can trail another process's commit by up
 * to a second; the UNIQUE constraint is the final word and answers 409, not 500.
 */
const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, Conflict, R> =>
    Effect.catchAll(effect, (e) =>
      isUniqueViolation(e) ? Effect.fail(new Conflict({ message: `a provider connection named '${name}' already exists` })) : Effect.die(e)
    )

const originOf = (url: string | null): string | null => {
  if (!url) return null
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}

/** Stored timeouts: null when none is set (an empty object is stored as null). */
const storedTimeouts = (t: ConnectionTimeouts | null | undefined): string | null =>
  t && (t.headersMs !== undefined || t.idleMs !== undefined || t.nonStreamed !== undefined) ? JSON.stringify(t) : null

/**
 * Writing connections: each create and edit checked (the provider, its flags, the base URL
 * against the URL policy, the name against providers and other connections, the proxy), the key
 * encrypted, an audit row; the snapshot dropped so the next read sees the change.
 */
export const makeConnectionWrites = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly flags: FeatureFlagsShape
  readonly writer: BatchWriterShape
  readonly snapshot: Effect.Effect<Snapshot>
  readonly invalidate: Effect.Effect<void>
  readonly get: (idOrName: string) => Effect.Effect<Connection, NotFound>
  readonly urlPolicy: Effect.Effect<UrlPolicyFlags>
}) => {
  const { sql, secrets, flags, writer, get, urlPolicy } = deps
  const snapshot = { get: deps.snapshot, invalidate: deps.invalidate }

  const checkUrl = (url: string | null | undefined) =>
    Effect.gen(function* () {
      if (!url) return
      const verdict = checkProviderUrl(url, yield* urlPolicy)
      if (!verdict.ok) return yield* new BadRequest({ message: `baseUrl rejected: ${verdict.reason}` })
    })

  const checkName = (s: Snapshot, name: string, provider: ProviderSpec, selfId?: string) =>
    Effect.gen(function* () {
      const other = findProvider(name) ?? s.nodeBy.get(name.toLowerCase())
      if (other && other.id !== provider.id) {
        return yield* new BadRequest({
          message: `name '${name}' is the id of provider ${other.id}; pick another name so that model prefixes stay unambiguous`
        })
      }
      const clash = s.byName.get(name.toLowerCase())
      if (clash && clash.id !== selfId) {
        return yield* new Conflict({ message: `a provider connection named '${clash.name}' already exists (${clash.id})` })
      }
    })

  /** A connection may only name a proxy of the registry (read from its table: no dependency on the egress layer). */
  const checkProxy = (proxyId: string) =>
    Effect.flatMap(sql<{ id: string }>`SELECT id FROM proxies WHERE id = ${proxyId}`.pipe(Effect.orDie), (rows) =>
      rows.length > 0
        ? Effect.void
        : Effect.fail(new BadRequest({ message: `proxyId: no proxy with id '${proxyId}' (GET /api/v1/management/proxies lists them)` }))
    )

  const audit = (actor: string, action: string, target: string) =>
    writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

  const create = (input: CreateConnection, actor = "system"): Effect.Effect<Connection, BadRequest | Conflict> =>
    Effect.gen(function* () {
      const s = yield* snapshot.get
      const provider = findProvider(input.provider) ?? s.nodeBy.get(input.provider.toLowerCase())
      if (!provider) {
        return yield* new BadRequest({
          message: `unknown provider '${input.provider}'; known providers: ${PROVIDERS.map((p) => p.id)
            .concat(s.nodes.map((n) => n.record.id))
            .join(", ")}`
        })
      }
      if (provider.id === CC_COMPATIBLE_PROVIDER_ID && !(yield* flags.enabled("ENABLE_CC_COMPATIBLE_PROVIDER"))) {
        return yield* new BadRequest({
          message: `provider ${provider.id} needs the flag ENABLE_CC_COMPATIBLE_PROVIDER (takes effect after restart)`
        })
      }
      if (provider.node) {
        const existing = s.all.filter((c) => c.provider.id === provider.id)
        if (existing.length > 0 && !(yield* flags.enabled("ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE"))) {
          return yield* new Conflict({
            message: `provider node ${provider.id} already has a connection (${existing.map((c) => c.name).join(", ")}); more than one needs the flag ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE (takes effect after restart)`
          })
        }
      }
      const baseUrl = input.baseUrl ?? null
      if (provider.requiresBaseUrl && !baseUrl) {
        return yield* new BadRequest({ message: `baseUrl is required for provider ${provider.id} (for example http://127.0.0.1:8000/v1)` })
      }
      const apiKey = input.apiKey?.trim() || null
      if (provider.requiresApiKey && !apiKey) {
        return yield* new BadRequest({ message: `apiKey is required for provider ${provider.id}` })
      }
      yield* checkUrl(baseUrl ?? provider.baseUrl)
      // A node's first connection is named by the node's prefix, so its models list as `<prefix>/<model>`.
      const name = input.name ?? provider.node?.prefix ?? provider.id
      yield* checkName(s, name, provider)
      if (input.proxyId) yield* checkProxy(input.proxyId)
      const t = Date.now()
      const id = "conn_" + crypto.randomBytes(8).toString("hex")
      yield* sql`INSERT INTO connections ${sql.insert({
        id,
        provider: provider.id,
        name,
        base_url: baseUrl,
        api_key_enc: apiKey ? secrets.encrypt(apiKey) : null,
        default_model: input.defaultModel ?? null,
        models: JSON.stringify(input.models ?? []),
        max_concurrent: input.max_concurrent ?? null,
        priority: input.priority ?? 1,
        enabled: input.enabled === false ? 0 : 1,
        upstream_format: input.upstreamFormat ?? null,
        account_tier: input.accountTier ?? null,
        timeouts: storedTimeouts(input.timeouts),
        proxy_id: input.proxyId ?? null,
        tls_profile: input.tlsProfile ?? null,
        created_at: t,
        updated_at: t
      })}`.pipe(nameTaken(name))
      if (input.compaction) yield* writeCompaction(sql, id, input.compaction)
      yield* snapshot.invalidate
      audit(actor, "connection.create", id)
      yield* Effect.logInfo(`provider connection created: ${name} (${provider.id})`)
      return yield* get(id).pipe(Effect.orDie)
    })

  const update = (
    idOrName: string,
    patch: UpdateConnection,
    actor = "system"
  ): Effect.Effect<Connection, BadRequest | NotFound | Conflict> =>
    Effect.gen(function* () {
      const current = yield* get(idOrName)
      if (patch.provider !== undefined && patch.provider.toLowerCase() !== current.provider.id) {
        return yield* new BadRequest({ message: "provider cannot be changed; create a new connection instead" })
      }
      const s = yield* snapshot.get
      if (patch.name !== undefined) yield* checkName(s, patch.name, current.provider, current.id)
      const baseUrl = patch.baseUrl === undefined ? current.baseUrl : patch.baseUrl
      if (current.provider.requiresBaseUrl && !baseUrl) {
        return yield* new BadRequest({ message: `baseUrl is required for provider ${current.provider.id}` })
      }
      if (patch.apiKey === null && current.provider.requiresApiKey) {
        return yield* new BadRequest({ message: `apiKey is required for provider ${current.provider.id}` })
      }
      if (patch.baseUrl !== undefined) yield* checkUrl(baseUrl ?? current.provider.baseUrl)
      const hasStoredKey = current.apiKey !== null || current.keyError !== null
      if (
        hasStoredKey &&
        patch.apiKey === undefined &&
        originOf(baseUrl ?? current.provider.baseUrl) !== originOf(current.effectiveBaseUrl)
      ) {
        // The stored key is never sent to a new host on an edit alone: masked listings would
        // mean little if pointing the connection elsewhere revealed the key to that host.
        return yield* new BadRequest({
          message: "the new baseUrl points at another host; send apiKey again with it (or apiKey: null to drop the key)"
        })
      }
      const fields: Record<string, string | number | null> = { updated_at: Date.now() }
      if (patch.name !== undefined) fields["name"] = patch.name
      if (patch.baseUrl !== undefined) fields["base_url"] = patch.baseUrl
      if (patch.apiKey !== undefined) {
        const key = patch.apiKey?.trim() || null
        fields["api_key_enc"] = key ? secrets.encrypt(key) : null
      }
      if (patch.apiKey !== undefined || patch.baseUrl !== undefined) {
        // New credentials or endpoint: earlier failures (even terminal ones) no longer apply.
        Object.assign(fields, {
          test_status: null,
          rate_limited_until: null,
          last_error: null,
          last_error_type: null,
          error_code: null,
          backoff_level: 0
        })
      }
      if (patch.defaultModel !== undefined) fields["default_model"] = patch.defaultModel
      if (patch.models !== undefined) fields["models"] = JSON.stringify(patch.models)
      if (patch.max_concurrent !== undefined) fields["max_concurrent"] = patch.max_concurrent
      if (patch.priority !== undefined) fields["priority"] = patch.priority
      if (patch.enabled !== undefined) fields["enabled"] = patch.enabled ? 1 : 0
      if (patch.upstreamFormat !== undefined) fields["upstream_format"] = patch.upstreamFormat
      if (patch.accountTier !== undefined) fields["account_tier"] = patch.accountTier
      if (patch.timeouts !== undefined) fields["timeouts"] = storedTimeouts(patch.timeouts)
      if (patch.proxyId !== undefined) {
        if (patch.proxyId !== null) yield* checkProxy(patch.proxyId)
        fields["proxy_id"] = patch.proxyId
      }
      if (patch.tlsProfile !== undefined) fields["tls_profile"] = patch.tlsProfile
      if (patch.compaction !== undefined) yield* writeCompaction(sql, current.id, patch.compaction === "upstream" ? "upstream" : null)
      yield* sql`UPDATE connections SET ${sql.update(fields)} WHERE id = ${current.id}`.pipe(nameTaken(patch.name ?? current.name))
      yield* snapshot.invalidate
      audit(actor, "connection.update", current.id)
      return yield* get(current.id).pipe(Effect.orDie)
    })

  const remove = (idOrName: string, actor = "system"): Effect.Effect<Connection, NotFound> =>
    Effect.gen(function* () {
      const current = yield* get(idOrName)
      yield* sql`DELETE FROM connections WHERE id = ${current.id}`.pipe(Effect.orDie)
      yield* writeCompaction(sql, current.id, null)
      yield* snapshot.invalidate
      audit(actor, "connection.remove", current.id)
      return current
    })

  const recordTest = (id: string, result: { readonly ok: boolean; readonly error: string | null }): Effect.Effect<void> =>
    Effect.gen(function* () {
      const t = Date.now()
      yield* (
        result.ok
          ? sql`UPDATE connections SET test_status = 'active', last_tested_at = ${t}, last_error = NULL, last_error_type = NULL, error_code = NULL WHERE id = ${id}`
          : sql`UPDATE connections SET test_status = 'error', last_tested_at = ${t}, last_error = ${result.error}, last_error_type = 'test_failed' WHERE id = ${id}`
      ).pipe(Effect.orDie)
      yield* snapshot.invalidate
    })

  return { create, update, remove, recordTest }
}
