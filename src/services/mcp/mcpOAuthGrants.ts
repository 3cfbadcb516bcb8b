/**
 * The `mcp_oauth` table as McpOAuth keeps it (migration 0024): one grant per server, the
 * registered client and the tokens sealed with the storage key, held in memory and read again
 * when the store says it changed. A grant belongs to the configuration it was made for
 * (`clientKey`: the server's url and configured client); one made for another reads as none.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js"
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { createHash } from "node:crypto"
import type { McpServerRecord } from "../../domain/mcpServers.js"
import { upsert } from "../../platform/store/dialect.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { makeVersionedReload, type StoreVersionShape } from "../../platform/store/StoreVersion.js"
import type { GrantAccess } from "./oauthProvider.js"

export interface Grant {
  readonly serverId: string
  readonly clientKey: string
  /** The redirect URI of the last sign-in (the registered client's). */
  readonly redirectUri: string | null
  /** The client registered dynamically (stamped by the SDK with its authorization server). */
  readonly client: OAuthClientInformationMixed | null
  readonly tokens: OAuthTokens | null
  readonly discovery: OAuthDiscoveryState | null
  /** When the access token expires (ms), null when the server did not say. */
  readonly expiresAt: number | null
  /** When the access token was obtained (a sign-in or a refresh). */
  readonly obtainedAt: number | null
  readonly signedInAt: number | null
  readonly refreshError: string | null
  readonly updatedAt: number
}

interface GrantRow {
  readonly server_id: string
  readonly client_key: string
  readonly redirect_uri: string | null
  readonly client_enc: string | null
  readonly tokens_enc: string | null
  readonly discovery: string | null
  readonly expires_at: number | string | null
  readonly obtained_at: number | string | null
  readonly signed_in_at: number | string | null
  readonly refresh_error: string | null
  readonly updated_at: number | string
}

/** The configuration a grant is made for: the server's url and its configured client (not its secret). */
export const clientKeyOf = (r: McpServerRecord): string =>
  createHash("sha256")
    .update(JSON.stringify([r.url, r.oauth?.clientId ?? null, r.oauth?.scopes ?? []]))
    .digest("hex")
    .slice(0, 32)

export const emptyGrant = (r: McpServerRecord): Grant => ({
  serverId: r.id,
  clientKey: clientKeyOf(r),
  redirectUri: null,
  client: null,
  tokens: null,
  discovery: null,
  expiresAt: null,
  obtainedAt: null,
  signedInAt: null,
  refreshError: null,
  updatedAt: 0
})

const numberOrNull = (v: number | string | null) => (v === null ? null : Number(v))

const parse = <A>(text: string | null): A | null => {
  if (text === null) return null
  try {
    return JSON.parse(text) as A
  } catch {
    return null
  }
}

/** A sealed JSON value opened; one that does not open with this storage key reads as none. */
const open = <A>(secrets: SecretsShape, sealed: string | null): Effect.Effect<A | null> =>
  sealed === null
    ? Effect.succeed(null)
    : secrets.decrypt(sealed).pipe(
        Effect.map((plain) => parse<A>(Redacted.value(plain))),
        Effect.orElseSucceed(() => null)
      )

/** Every grant, by server id. */
export const readGrants = (sql: SqlClient.SqlClient, secrets: SecretsShape): Effect.Effect<Map<string, Grant>> =>
  Effect.gen(function* () {
    const rows = yield* sql<GrantRow>`SELECT * FROM mcp_oauth`.pipe(Effect.orDie)
    const grants = new Map<string, Grant>()
    for (const row of rows)
      grants.set(row.server_id, {
        serverId: row.server_id,
        clientKey: row.client_key,
        redirectUri: row.redirect_uri,
        client: yield* open<OAuthClientInformationMixed>(secrets, row.client_enc),
        tokens: yield* open<OAuthTokens>(secrets, row.tokens_enc),
        discovery: parse<OAuthDiscoveryState>(row.discovery),
        expiresAt: numberOrNull(row.expires_at),
        obtainedAt: numberOrNull(row.obtained_at),
        signedInAt: numberOrNull(row.signed_in_at),
        refreshError: row.refresh_error,
        updatedAt: Number(row.updated_at)
      })
    return grants
  })

/** The grant written (its secrets sealed). */
export const writeGrant = (sql: SqlClient.SqlClient, secrets: SecretsShape, g: Grant) =>
  upsert(
    sql,
    "mcp_oauth",
    {
      server_id: g.serverId,
      client_key: g.clientKey,
      redirect_uri: g.redirectUri,
      client_enc: g.client === null ? null : secrets.encrypt(JSON.stringify(g.client)),
      tokens_enc: g.tokens === null ? null : secrets.encrypt(JSON.stringify(g.tokens)),
      discovery: g.discovery === null ? null : JSON.stringify(g.discovery),
      expires_at: g.expiresAt,
      obtained_at: g.obtainedAt,
      signed_in_at: g.signedInAt,
      refresh_error: g.refreshError,
      updated_at: g.updatedAt
    },
    ["server_id"]
  ).pipe(Effect.orDie)

/** How long before its expiry a token is refreshed: 10% of its lifetime, at least a minute, at most half of it. */
export const refreshLeadMs = (lifetimeMs: number): number => Math.min(Math.max(60_000, lifetimeMs / 10), lifetimeMs / 2)

/** When the grant's token is due for a refresh (ms), or undefined: it has no refresh token or no expiry. */
export const refreshDueAt = (g: Grant): number | undefined => {
  if (g.tokens?.refresh_token === undefined || g.expiresAt === null) return undefined
  const lifetime = Math.max(0, g.expiresAt - (g.obtainedAt ?? g.expiresAt))
  return g.expiresAt - refreshLeadMs(lifetime)
}

/**
 * The grants in memory: read at build, read again when the store says they changed (`refresh`),
 * changed one write at a time (`save`: each merges into what the last one left); `accessOf` is a
 * server's grant as its OAuth provider reads and writes it. `tokensChanged` runs after a write
 * that changed a server's tokens.
 */
export const makeGrantStore = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly version: Option.Option<StoreVersionShape>
  readonly run: <A>(effect: Effect.Effect<A>) => Promise<A>
  readonly tokensChanged: Effect.Effect<void>
}) =>
  Effect.gen(function* () {
    const { sql, secrets, run } = deps
    let grants = new Map<string, Grant>()
    const refresh = yield* makeVersionedReload(
      deps.version,
      Effect.map(readGrants(sql, secrets), (g) => void (grants = g))
    )
    /** The grant of `r` made for its configuration as it is now. */
    const grantOf = (r: McpServerRecord): Grant | undefined => {
      const g = grants.get(r.id)
      return g !== undefined && g.clientKey === clientKeyOf(r) ? g : undefined
    }
    const lock = yield* Effect.makeSemaphore(1)
    const save = (r: McpServerRecord, patch: (g: Grant) => Partial<Grant>) =>
      lock.withPermits(1)(
        Effect.gen(function* () {
          const current = grantOf(r) ?? emptyGrant(r)
          const next: Grant = { ...current, ...patch(current), clientKey: clientKeyOf(r), updatedAt: Date.now() }
          yield* writeGrant(sql, secrets, next)
          grants = new Map(grants).set(r.id, next)
          if (next.tokens !== current.tokens) yield* deps.tokensChanged
        })
      )
    /**
     * Tokens kept (with when they expire) or forgotten; a sign-in's also say when it was. Tokens
     * that are not a sign-in's (a refresh: the schedule's or a connection's) replace tokens only:
     * a refresh that ends after a sign-out does not sign the server back in.
     */
    const tokensPatch =
      (tokens: OAuthTokens | null, signIn: boolean) =>
      (g: Grant): Partial<Grant> => {
        if (tokens === null) return { tokens: null, expiresAt: null, obtainedAt: null }
        if (!signIn && g.tokens === null) return {}
        const now = Date.now()
        return {
          tokens,
          obtainedAt: now,
          expiresAt: typeof tokens.expires_in === "number" ? now + tokens.expires_in * 1000 : null,
          refreshError: null,
          signedInAt: signIn ? now : g.signedInAt
        }
      }
    const accessOf = (r: McpServerRecord): GrantAccess => ({
      client: () => grantOf(r)?.client ?? undefined,
      // Read again first when another process changed them (a refresh there).
      tokens: () => run(Effect.ignore(refresh)).then(() => grantOf(r)?.tokens ?? undefined),
      discovery: () => grantOf(r)?.discovery ?? undefined,
      saveClient: (client) => run(save(r, () => ({ client }))),
      saveTokens: (tokens, signIn) => run(save(r, tokensPatch(tokens, signIn))),
      saveDiscovery: (discovery) => run(save(r, () => ({ discovery })))
    })
    return { grantOf, save, accessOf, refresh }
  })

export type GrantStore = Effect.Effect.Success<ReturnType<typeof makeGrantStore>>

/** The secrets a message about `r`'s grant must not show (masked by `describe`). */
export const secretsOf = (r: McpServerRecord, g: Grant | undefined) => [
  g?.tokens?.access_token,
  g?.tokens?.refresh_token,
  r.oauth?.clientSecret ?? undefined,
  g?.client?.client_secret
]

/** The redirect URI a connection's provider names (the last sign-in's; a connection never begins one). */
export const redirectUriOf = (g: Grant | undefined) => g?.redirectUri ?? "http://127.0.0.1/api/mcp/oauth/callback"
