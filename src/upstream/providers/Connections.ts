import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as crypto from "node:crypto"
import { type ConnectionTimeouts, type CreateConnection, TLS_PROFILES, type TlsProfile, type UpdateConnection } from "../../domain/connections.js"
import type { FormatId } from "../../domain/canonical.js"
import type { AccountTier } from "../../services/routing/types.js"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { maskSecret } from "../../kernel/redact.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { findProvider, PROVIDERS, type ProviderSpec } from "../../domain/catalog/catalog.js"
import { CC_COMPATIBLE_PROVIDER_ID } from "../../domain/catalog/ccCompatible.js"
import { applyRecords, type CustomModelRecord, parseRecords, PROVIDER_MODELS_NAMESPACE } from "./customModels.js"
import { type NodeRecord, nodeSpec, parseNodes, PROVIDER_NODES_NAMESPACE } from "./nodeRecords.js"
import { checkProviderUrl, type UrlPolicyFlags } from "./urlPolicy.js"
import { type Connection, connectionModelIds, ModelNotFound, type ResolvedTarget } from "./connection.js"

export { type Connection, type ConnectionOAuth, connectionModelIds, connectionView, ModelNotFound, type ResolvedTarget } from "./connection.js"

export interface ConnectionsShape {
  readonly list: Effect.Effect<ReadonlyArray<Connection>>
  readonly get: (idOrName: string) => Effect.Effect<Connection, NotFound>
  readonly create: (input: CreateConnection, actor?: string) => Effect.Effect<Connection, BadRequest | Conflict>
  readonly update: (idOrName: string, patch: UpdateConnection, actor?: string) => Effect.Effect<Connection, BadRequest | NotFound | Conflict>
  readonly remove: (idOrName: string, actor?: string) => Effect.Effect<Connection, NotFound>
  readonly recordTest: (id: string, result: { readonly ok: boolean; readonly error: string | null }) => Effect.Effect<void>
  /** Resolves `<name or provider>/<model>`, or a bare model id that exactly one catalog entry serves. */
  readonly resolve: (model: string) => Effect.Effect<ResolvedTarget, ModelNotFound>
  /**
   * Every enabled connection that can serve a model id, best priority first: a connection
   * name gives that connection; a provider id gives all of the provider's connections (account
   * failover); a bare id gives every connection serving exactly that id.
   */
  readonly targets: (model: string) => Effect.Effect<ReadonlyArray<ResolvedTarget>, ModelNotFound>
  /** `targets` answered from memory when the cached connections are known fresh, else undefined (use `targets`). */
  readonly peekTargets: (model: string) => Either.Either<ReadonlyArray<ResolvedTarget>, ModelNotFound> | undefined
  readonly urlPolicy: Effect.Effect<UrlPolicyFlags>
  /** `urlPolicy` when the flags are known fresh, else undefined (use `urlPolicy`). */
  readonly peekUrlPolicy: () => UrlPolicyFlags | undefined
  /** Every connection when the cached snapshot is known fresh, else undefined (use `list`). */
  readonly peekList: () => ReadonlyArray<Connection> | undefined
  /** The list last loaded, fresh or not: what a request that has just routed through `list` saw. */
  readonly lastList: () => ReadonlyArray<Connection> | undefined
  /** Custom models and catalog overrides (`/api/provider-models`), as stored. */
  readonly customModels: Effect.Effect<ReadonlyArray<CustomModelRecord>>
  /** Drops the snapshot after a write elsewhere (custom models, provider nodes): the next read rebuilds it. */
  readonly reload: Effect.Effect<void>
  /** Provider nodes (`/api/provider-nodes`), as stored, and the provider spec each defines. */
  readonly nodes: Effect.Effect<ReadonlyArray<{ readonly record: NodeRecord; readonly spec: ProviderSpec }>>
  /** A catalog provider or a provider node, by id (a node also by its prefix). */
  readonly provider: (idOrPrefix: string) => Effect.Effect<ProviderSpec | undefined>
}

interface Row {
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

interface Snapshot {
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

/**
 * The name check reads the cached snapshot, which can trail another process's commit by up
 * to a second; the UNIQUE constraint is the final word and answers 409, not 500.
 */
const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, Conflict, R> =>
    Effect.catchAll(effect, (e) => (isUniqueViolation(e) ? Effect.fail(new Conflict({ message: `a provider connection named '${name}' already exists` })) : Effect.die(e)))

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

/**
 * Provider connections: a provider from the catalog plus credentials, base URL and limits.
 * Reads are served from an in-memory snapshot (decrypted once) that is rebuilt when this
 * process writes or another process commits.
 */
export class Connections extends Context.Tag("gateway/Connections")<Connections, ConnectionsShape>() {
  static readonly layer = Layer.effect(
    Connections,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const flags = yield* FeatureFlags
      const version = yield* StoreVersion
      const writer = yield* BatchWriter

      const fromRow = (row: Row, custom: ReadonlyArray<CustomModelRecord>, nodeBy: ReadonlyMap<string, ProviderSpec>): Effect.Effect<Connection> =>
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

      const snapshot = makeCachedLoad(
        version,
        Effect.gen(function* () {
          const rows = yield* sql<Row>`SELECT c.*, o.flow AS oauth_flow, o.expires_at AS oauth_expires_at, o.email AS oauth_email, o.account_id AS oauth_account_id,
            CASE WHEN o.refresh_token_enc IS NULL THEN 0 ELSE 1 END AS oauth_has_refresh, o.refreshed_at AS oauth_refreshed_at
            FROM connections c LEFT JOIN oauth_tokens o ON o.connection_id = c.id ORDER BY c.priority, c.created_at`.pipe(Effect.orDie)
          const kv = yield* sql<{ key: string; value: string }>`SELECT key, value FROM kv WHERE namespace = ${PROVIDER_MODELS_NAMESPACE} ORDER BY key`.pipe(Effect.orDie)
          const custom = parseRecords(kv.map((r) => [r.key, r.value] as const)).sort((a, b) => a.createdAt - b.createdAt)
          const nodeRows = yield* sql<{ key: string; value: string }>`SELECT key, value FROM kv WHERE namespace = ${PROVIDER_NODES_NAMESPACE} ORDER BY key`.pipe(Effect.orDie)
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
          const all = yield* Effect.forEach(rows, (row) => fromRow(row, custom, nodeBy))
          const byName = new Map(all.map((c) => [c.name.toLowerCase(), c]))
          const byProvider = new Map<string, Array<Connection>>()
          const byModel = new Map<string, Array<Connection>>()
          for (const c of all.filter((c) => c.enabled).sort(byPriority)) {
            // A node's connections answer to its prefix too (`<prefix>/<model>`).
            for (const key of c.provider.node && c.provider.node.prefix !== c.provider.id ? [c.provider.id, c.provider.node.prefix] : [c.provider.id]) {
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
      )

      const peekUrlPolicy = (): UrlPolicyFlags | undefined => {
        const guard = flags.peekEnabled("OUTBOUND_SSRF_GUARD_ENABLED")
        const allowLocal = flags.peekEnabled("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS")
        const allowPrivate = flags.peekEnabled("GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS")
        return guard !== undefined && allowLocal !== undefined && allowPrivate !== undefined ? { guard, allowLocal, allowPrivate } : undefined
      }
      const urlPolicy = Effect.suspend(() => {
        const known = peekUrlPolicy()
        return known ? Effect.succeed(known) : urlPolicyRead
      })
      const urlPolicyRead = Effect.flatMap(flags.enabled("OUTBOUND_SSRF_GUARD_ENABLED"), (guard) =>
        Effect.zipWith(flags.enabled("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS"), flags.enabled("GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS"), (allowLocal, allowPrivate) => ({
          guard,
          allowLocal,
          allowPrivate
        }))
      )

      const find = (s: Snapshot, idOrName: string) => s.all.find((c) => c.id === idOrName) ?? s.byName.get(idOrName.toLowerCase())

      const get = (idOrName: string) =>
        Effect.flatMap(snapshot.get, (s) => {
          const c = find(s, idOrName)
          return c ? Effect.succeed(c) : Effect.fail(new NotFound({ message: `no provider connection with id or name '${idOrName}'` }))
        })

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
          rows.length > 0 ? Effect.void : Effect.fail(new BadRequest({ message: `proxyId: no proxy with id '${proxyId}' (GET /api/v1/management/proxies lists them)` }))
        )

      const audit = (actor: string, action: string, target: string) => writer.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

      const create: ConnectionsShape["create"] = (input, actor = "system") =>
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
            return yield* new BadRequest({ message: `provider ${provider.id} needs the flag ENABLE_CC_COMPATIBLE_PROVIDER (takes effect after restart)` })
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
          yield* snapshot.invalidate
          audit(actor, "connection.create", id)
          yield* Effect.logInfo(`provider connection created: ${name} (${provider.id})`)
          return yield* get(id).pipe(Effect.orDie)
        })

      const update: ConnectionsShape["update"] = (idOrName, patch, actor = "system") =>
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
          if (hasStoredKey && patch.apiKey === undefined && originOf(baseUrl ?? current.provider.baseUrl) !== originOf(current.effectiveBaseUrl)) {
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
          yield* sql`UPDATE connections SET ${sql.update(fields)} WHERE id = ${current.id}`.pipe(nameTaken(patch.name ?? current.name))
          yield* snapshot.invalidate
          audit(actor, "connection.update", current.id)
          return yield* get(current.id).pipe(Effect.orDie)
        })

      const remove: ConnectionsShape["remove"] = (idOrName, actor = "system") =>
        Effect.gen(function* () {
          const current = yield* get(idOrName)
          yield* sql`DELETE FROM connections WHERE id = ${current.id}`.pipe(Effect.orDie)
          yield* snapshot.invalidate
          audit(actor, "connection.remove", current.id)
          return current
        })

      const recordTest: ConnectionsShape["recordTest"] = (id, result) =>
        Effect.gen(function* () {
          const t = Date.now()
          yield* (
            result.ok
              ? sql`UPDATE connections SET test_status = 'active', last_tested_at = ${t}, last_error = NULL, last_error_type = NULL, error_code = NULL WHERE id = ${id}`
              : sql`UPDATE connections SET test_status = 'error', last_tested_at = ${t}, last_error = ${result.error}, last_error_type = 'test_failed' WHERE id = ${id}`
          ).pipe(Effect.orDie)
          yield* snapshot.invalidate
        })

      const targetsIn = (s: Snapshot, model: string): Either.Either<ReadonlyArray<ResolvedTarget>, ModelNotFound> => {
        const slash = model.indexOf("/")
        if (slash > 0) {
          const prefix = model.slice(0, slash)
          const rest = model.slice(slash + 1)
          const named = s.byName.get(prefix.toLowerCase())
          // A node's prefix names all its connections, even when one of them is named by it.
          const nodeWide = named?.provider.node !== undefined && named.provider.node.prefix === prefix.toLowerCase()
          if (named?.enabled && rest && !nodeWide) return Either.right([{ connection: named, model: rest }])
          // A disabled connection named like its provider does not hide the provider's others.
          const forProvider = s.byProvider.get(prefix.toLowerCase())
          if (forProvider && forProvider.length > 0 && rest) return Either.right(forProvider.map((connection) => ({ connection, model: rest })))
          if (named && rest) {
            return Either.left(new ModelNotFound({ message: `provider connection '${named.name}' is disabled` }))
          }
        }
        // A bare id (or one whose slash belongs to the model, as on OpenRouter): the enabled
        // connections that serve exactly this model id, best priority first.
        const serving = s.byModel.get(model)
        if (serving) return Either.right(serving.map((connection) => ({ connection, model })))
        const known = findProvider(slash > 0 ? model.slice(0, slash) : "") ?? (slash > 0 ? s.nodeBy.get(model.slice(0, slash).toLowerCase()) : undefined)
        const prefixes = Array.from(new Set(s.all.filter((c) => c.enabled).map((c) => c.name))).sort()
        return Either.left(
          new ModelNotFound({
            message: known
              ? `model '${model}' is not available: provider ${known.id} has no enabled connection (add one with POST /api/providers or \`gateway setup\`)`
              : prefixes.length === 0
                ? `model '${model}' is not available: no provider is connected yet (add one with POST /api/providers or \`gateway setup\`)`
                : `model '${model}' is not available: use <provider>/<model> with one of: ${prefixes.join(", ")}`
          })
        )
      }

      const targets: ConnectionsShape["targets"] = (model) => Effect.flatMap(snapshot.get, (s) => targetsIn(s, model))

      const peekTargets: ConnectionsShape["peekTargets"] = (model) => {
        const s = snapshot.peek()
        return s === undefined ? undefined : targetsIn(s, model)
      }

      const resolve: ConnectionsShape["resolve"] = (model) => Effect.map(targets(model), (all) => all[0]!)

      return {
        list: Effect.map(snapshot.get, (s) => s.all),
        get,
        create,
        update,
        remove,
        recordTest,
        resolve,
        targets,
        peekTargets,
        urlPolicy,
        peekUrlPolicy,
        peekList: () => snapshot.peek()?.all,
        lastList: () => snapshot.last()?.all,
        customModels: Effect.map(snapshot.get, (s) => s.custom),
        reload: snapshot.invalidate,
        nodes: Effect.map(snapshot.get, (s) => s.nodes),
        provider: (idOrPrefix) => Effect.map(snapshot.get, (s) => findProvider(idOrPrefix) ?? s.nodeBy.get(idOrPrefix.toLowerCase()))
      }
    })
  )
}
