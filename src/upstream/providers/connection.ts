/**
 * A provider connection as the request path and the listings see it (the stored row decrypted and
 * resolved against the catalog), its management view and the models it serves. The service that
 * stores and caches connections is Connections.ts.
 */
import * as Data from "effect/Data"
import type * as Redacted from "effect/Redacted"
import type { ConnectionCompaction, ConnectionTimeouts, ConnectionView, TlsProfile } from "../../domain/connections.js"
import type { FormatId } from "../../domain/canonical.js"
import type { AccountTier } from "../../services/routing/types.js"
import { toIso } from "../../platform/store/Db.js"
import type { ProviderSpec } from "../../domain/catalog/catalog.js"

export interface Connection {
  readonly id: string
  readonly provider: ProviderSpec
  readonly name: string
  /** The stored override, if any. */
  readonly baseUrl: string | null
  /** The override, else the catalog's default. */
  readonly effectiveBaseUrl: string | null
  readonly apiKey: Redacted.Redacted<string> | null
  readonly apiKeyMasked: string | null
  /** Set when the stored key cannot be decrypted with the current storage key. */
  readonly keyError: string | null
  readonly defaultModel: string | null
  readonly models: ReadonlyArray<string>
  /** The format spoken to the upstream: the connection's override, else the provider's. */
  readonly format: FormatId
  /** Every format the upstream serves natively (a client in one of them is passed through). */
  readonly formats: ReadonlyArray<FormatId>
  readonly maxConcurrent: number | null
  /** The account's plan (auto routing's `tierPriority`). */
  readonly accountTier: AccountTier
  /** The connection's own upstream timeouts (ms), replacing the gateway's; unset: the gateway's. */
  readonly timeouts?: ConnectionTimeouts | null
  /** The registry proxy its upstream calls go through (docs/egress.md); unset: the global default, if any. */
  readonly proxyId?: string | null
  /** The browser TLS handshake its upstream calls make while ENABLE_TLS_FINGERPRINT is on (docs/egress.md); unset: the default. */
  readonly tlsProfile?: TlsProfile | null
  /**
   * Who answers Codex's compaction requests for it (docs/agents.md, "Codex compaction"): `upstream`
   * passes them through to a Responses upstream (OpenAI's own compaction); unset or `gateway`: the gateway.
   */
  readonly compaction?: ConnectionCompaction | null
  readonly priority: number
  readonly enabled: boolean
  readonly testStatus: string | null
  readonly lastTestedAt: number | null
  readonly rateLimitedUntil: number | null
  readonly lastError: string | null
  readonly lastErrorType: string | null
  readonly errorCode: string | null
  readonly backoffLevel: number
  readonly createdAt: number
  readonly updatedAt: number
  /** Models left out of model lists and bare-id routing (`/api/provider-models` hide); still routable as `<connection>/<model>`. */
  readonly hiddenModels?: ReadonlySet<string>
  /** Models only `/api/provider-models` knows (not in the provider catalog). */
  readonly customModels?: ReadonlySet<string>
  /** An OAuth connection's grant (its access token is `apiKey`); absent for API-key connections. */
  readonly oauth?: ConnectionOAuth
}

/** What the request path and listings know of an OAuth grant (the tokens stay in src/services/oauth/OAuth.ts). */
export interface ConnectionOAuth {
  /** When the access token expires (epoch ms); null when the token endpoint did not say. */
  readonly expiresAt: number | null
  readonly email: string | null
  readonly accountId: string | null
  readonly hasRefreshToken: boolean
  readonly refreshedAt: number | null
}

/** What a model id resolved to: a connection and the model name the upstream knows. */
export interface ResolvedTarget {
  readonly connection: Connection
  readonly model: string
}

/**
 * Where a connection's `compaction` setting is kept: `kv` under the connection's id, beside the
 * row (no column of its own); only `upstream` is stored, the default is no entry.
 */
export const CONNECTION_COMPACTION_NAMESPACE = "connection-compaction"

export class ModelNotFound extends Data.TaggedError("ModelNotFound")<{ readonly message: string }> {}

export const connectionView = (c: Connection): ConnectionView => ({
  id: c.id,
  provider: c.provider.id,
  name: c.name,
  baseUrl: c.baseUrl,
  effectiveBaseUrl: c.effectiveBaseUrl,
  apiKey: c.keyError ? "<undecryptable>" : c.apiKeyMasked,
  hasApiKey: c.apiKey !== null || c.keyError !== null,
  defaultModel: c.defaultModel,
  models: c.models,
  upstreamFormat: c.format,
  accountTier: c.accountTier,
  timeouts: c.timeouts ?? null,
  proxyId: c.proxyId ?? null,
  tlsProfile: c.tlsProfile ?? null,
  compaction: c.compaction ?? null,
  max_concurrent: c.maxConcurrent,
  priority: c.priority,
  enabled: c.enabled,
  testStatus: c.testStatus,
  lastTestedAt: toIso(c.lastTestedAt),
  rateLimitedUntil: toIso(c.rateLimitedUntil),
  lastError: c.lastError,
  lastErrorType: c.lastErrorType,
  errorCode: c.errorCode,
  backoffLevel: c.backoffLevel,
  createdAt: toIso(c.createdAt)!,
  updatedAt: toIso(c.updatedAt)!,
  authType: c.provider.authClass === "oauth" ? "oauth" : "apikey",
  ...(c.oauth
    ? {
        oauth: {
          email: c.oauth.email,
          accountId: c.oauth.accountId,
          expiresAt: toIso(c.oauth.expiresAt),
          hasRefreshToken: c.oauth.hasRefreshToken,
          refreshedAt: toIso(c.oauth.refreshedAt)
        }
      }
    : {})
})

/** Every model id a connection serves: catalog models, configured extras and its default. */
export const connectionModelIds = (c: Connection): ReadonlyArray<string> => {
  const ids = new Set<string>(c.provider.models.map((m) => m.id))
  for (const m of c.models) ids.add(m)
  if (c.defaultModel) ids.add(c.defaultModel)
  if (c.hiddenModels) for (const m of c.hiddenModels) ids.delete(m)
  return Array.from(ids)
}
