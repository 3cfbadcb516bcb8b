import type * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { PROVIDERS, findProvider } from "../../domain/catalog/catalog.js"
import type { OAuthSpec, ProviderSpec } from "../../domain/catalog/modelSpec.js"
import { BadRequest, type Conflict, NotFound } from "../../domain/errors.js"
import type { EndpointOverrides, OAuthConnected } from "../../domain/oauth.js"
import { upsert } from "../../platform/store/dialect.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { type Connection, type ConnectionsShape, connectionView } from "../../upstream/providers/Connections.js"
import { baseUrlOfResource, oauthOf, resolveEndpoints, type TokenSet } from "../../upstream/providers/oauthWire.js"
import { checkProviderUrl } from "../../upstream/providers/urlPolicy.js"
import type { CooldownsShape } from "../resilience/Cooldowns.js"

/** A grant as `oauth_tokens` keeps it. */
export interface TokenRow {
  readonly connection_id: string
  readonly provider: string
  readonly flow: string
  readonly refresh_token_enc: string | null
  readonly endpoints: string | null
  readonly refresh_error: string | null
}

/** What a flow connects: the connection it names (or creates) and where its endpoints were overridden. */
export interface GrantTarget {
  readonly flow: "pkce" | "device"
  readonly overrides: EndpointOverrides
  readonly name: string | undefined
  readonly connection: string | undefined
  readonly baseUrl: string | undefined
}

/** The provider an OAuth route names, with its OAuth spec; 404 naming the OAuth providers otherwise. */
export const providerOf = (id: string): Effect.Effect<{ provider: ProviderSpec; spec: OAuthSpec }, NotFound> => {
  const provider = findProvider(id)
  const spec = oauthOf(provider)
  if (!provider || !spec) {
    const known = PROVIDERS.filter((p) => oauthOf(p)).map((p) => p.id)
    return Effect.fail(new NotFound({ message: `provider '${id}' does not sign in with OAuth; OAuth providers: ${known.join(", ")}` }))
  }
  return Effect.succeed({ provider, spec })
}

/**
 * What the flows and the refreshes share: a provider's endpoints (its spec, the environment's
 * overrides, a flow's own), the URL policy, the egress of the connection a flow re-authorizes,
 * and the grant kept encrypted beside its connection.
 */
export const makeGrants = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly connections: ConnectionsShape
  readonly cooldowns: CooldownsShape
  /** Each OAuth provider's endpoint settings from the environment (`<PREFIX>_CLIENT_ID`...). */
  readonly env: ReadonlyMap<string, Record<string, string>>
}) => {
  const { sql, secrets, connections, cooldowns, env } = deps

  const endpointsOf = (provider: ProviderSpec, spec: OAuthSpec, overrides: EndpointOverrides) =>
    resolveEndpoints(spec, env.get(provider.id) ?? {}, overrides)

  const checkUrl = (field: string, url: string) =>
    Effect.flatMap(connections.urlPolicy, (policy) => {
      const verdict = checkProviderUrl(url, policy)
      return verdict.ok ? Effect.void : Effect.fail(new BadRequest({ message: `${field} rejected: ${verdict.reason}` }))
    })

  /**
   * The proxy of the connection a flow re-authorizes (or refreshes): token endpoints are
   * control-plane calls through the connection's proxy, else the global default (docs/egress.md).
   */
  const proxyOf = (connection: string | undefined) =>
    connection === undefined
      ? Effect.succeed(undefined)
      : Effect.map(Effect.option(connections.get(connection)), (c) =>
          c._tag === "Some" ? { proxyId: c.value.proxyId, tlsProfile: c.value.tlsProfile } : undefined
        )

  const store = (
    connectionId: string,
    provider: ProviderSpec,
    flow: string,
    tokens: TokenSet,
    overrides: EndpointOverrides | null,
    refreshed: boolean
  ) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const existing = yield* sql<TokenRow>`SELECT * FROM oauth_tokens WHERE connection_id = ${connectionId}`.pipe(Effect.orDie)
      const prev = existing[0]
      yield* sql`UPDATE connections SET api_key_enc = ${secrets.encrypt(tokens.accessToken)}, updated_at = ${now} WHERE id = ${connectionId}`.pipe(
        Effect.orDie
      )
      yield* upsert(
        sql,
        "oauth_tokens",
        {
          connection_id: connectionId,
          provider: provider.id,
          flow,
          // A refresh answer without a new refresh token keeps the old one (RFC 6749 §6).
          refresh_token_enc: tokens.refreshToken
            ? secrets.encrypt(tokens.refreshToken)
            : refreshed
              ? (prev?.refresh_token_enc ?? null)
              : null,
          id_token_enc: tokens.idToken ? secrets.encrypt(tokens.idToken) : null,
          expires_at: tokens.expiresAt,
          email: tokens.email,
          account_id: tokens.accountId,
          scopes: null,
          endpoints: overrides ? JSON.stringify(overrides) : (prev?.endpoints ?? null),
          obtained_at: now,
          refreshed_at: refreshed ? now : null,
          refresh_error: null,
          updated_at: now
        },
        ["connection_id"]
      ).pipe(Effect.orDie)
      yield* connections.reload
    })

  const viewOf = (c: Connection) => {
    const view = connectionView(c)
    const h = cooldowns.healthAt(c.id, Date.now())
    return h.testStatus === null
      ? view
      : { ...view, testStatus: h.testStatus, lastError: h.lastError, lastErrorType: h.lastErrorType, errorCode: h.errorCode }
  }

  /** Creates the connection a flow names, or re-authorizes the existing one, with fresh tokens. */
  const connect = (
    p: GrantTarget,
    provider: ProviderSpec,
    tokens: TokenSet,
    actor: string
  ): Effect.Effect<OAuthConnected, BadRequest | NotFound | Conflict> =>
    Effect.gen(function* () {
      const all = yield* connections.list
      const existing = p.connection
        ? yield* connections.get(p.connection)
        : all.find((c) => c.name.toLowerCase() === (p.name ?? provider.id).toLowerCase() && c.provider.id === provider.id)
      if (existing && existing.provider.id !== provider.id)
        return yield* new BadRequest({
          message: `connection '${existing.name}' is a ${existing.provider.id} connection, not ${provider.id}`
        })
      const baseUrl =
        p.baseUrl ?? (tokens.resourceUrl && !existing?.baseUrl ? (baseUrlOfResource(tokens.resourceUrl) ?? undefined) : undefined)
      const connection = existing
        ? yield* connections.update(existing.id, { apiKey: tokens.accessToken, ...(baseUrl !== undefined ? { baseUrl } : {}) }, actor)
        : yield* connections.create(
            {
              provider: provider.id,
              name: p.name ?? provider.id,
              apiKey: tokens.accessToken,
              ...(baseUrl !== undefined ? { baseUrl } : {})
            },
            actor
          )
      // A new authorization clears the terminal state (and any cooldown) of the old grant.
      yield* cooldowns.forget(connection.id)
      yield* store(connection.id, provider, p.flow, tokens, p.overrides, false)
      yield* Effect.logInfo(
        `oauth: ${provider.id} connection ${connection.name} ${existing ? "re-authorized" : "created"}${tokens.email ? ` for ${tokens.email}` : ""}`
      )
      const fresh = yield* connections.get(connection.id)
      return { connection: viewOf(fresh), created: !existing }
    })

  return { endpointsOf, checkUrl, proxyOf, store, connect }
}

export type Grants = ReturnType<typeof makeGrants>
