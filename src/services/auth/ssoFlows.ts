/**
 * The OpenID Connect side of single sign-on (docs/sso.md, "The flow"), through `openid-client`, a
 * certified relying party: discovery (cached ten minutes per provider configuration), the
 * authorization code grant with PKCE, state and nonce, the ID token checked (its signature against
 * the provider's JWKS, issuer, audience, nonce, expiry), the device authorization grant polled one
 * token request at a time, and what the tokens say about the user (the ID token's claims, with the
 * userinfo endpoint's added).
 */
import * as Effect from "effect/Effect"
import type * as client from "openid-client"
import { BadGateway, BadRequest } from "../../domain/errors.js"
import type { OidcProviderRecord } from "./ssoProviders.js"

const DISCOVERY_TTL_MS = 10 * 60_000

/** openid-client (with jose and oauth4webapi under it), loaded by the first sign-in: a start needs none of it. */
export type Openid = typeof client
let loaded: Openid | undefined
const loadOpenid = (): Promise<Openid> => import("openid-client").then((m) => (loaded = m))

/** A message without the secrets it could carry. */
export const scrub = (text: string, secrets: ReadonlyArray<string | null | undefined>): string =>
  secrets.reduce<string>((t, s) => (s && s.length >= 4 ? t.split(s).join("****") : t), text)

const messageOf = (e: unknown): string => {
  // An error of openid-client's comes only once it is loaded.
  if (loaded !== undefined && (e instanceof loaded.ResponseBodyError || e instanceof loaded.AuthorizationResponseError))
    return `${e.error}${e.error_description ? ` (${e.error_description})` : ""}`
  // openid-client's errors say what kind of check failed; the cause (oauth4webapi's, or the network's) says which.
  const err = e as { message?: string; cause?: unknown }
  const cause = err.cause as { message?: string; code?: string } | undefined
  const detail = cause instanceof Error && cause.message ? cause.message : cause?.code
  return `${err.message ?? String(e)}${detail && detail !== err.message ? `: ${detail}` : ""}`
}

/** The provider could not be reached, or answered as a server that failed: 502; anything else it or its tokens said is the sign-in's fault: 400. */
const unreachable = (e: unknown): boolean => {
  if (loaded !== undefined && e instanceof loaded.ResponseBodyError) return e.status >= 500
  const err = e as { name?: string; code?: string; cause?: unknown }
  return (
    (err.name === "TypeError" && err.cause !== undefined) ||
    err.code === "OAUTH_TIMEOUT" ||
    err.name === "AbortError" ||
    err.name === "TimeoutError"
  )
}

export const refusal = (what: string, e: unknown, secrets: ReadonlyArray<string | null | undefined>) => {
  const message = scrub(`${what}: ${messageOf(e)}`, secrets)
  return unreachable(e) ? new BadGateway({ message }) : new BadRequest({ message })
}

export interface Claims {
  readonly sub: string
  readonly [claim: string]: unknown
}

/** A provider's configuration, and openid-client to use it with. */
export interface Oidc {
  readonly config: client.Configuration
  readonly openid: Openid
}

export const makeOidcClient = () => {
  const cache = new Map<string, Oidc & { readonly at: number }>()

  const keyOf = (p: OidcProviderRecord) => JSON.stringify([p.issuer, p.clientId, p.clientSecret])

  /** The provider's configuration from its discovery document (cached); 502 when it cannot be read. */
  const configOf = (p: OidcProviderRecord): Effect.Effect<Oidc, BadGateway | BadRequest> => {
    const hit = cache.get(keyOf(p))
    if (hit !== undefined && Date.now() - hit.at < DISCOVERY_TTL_MS) return Effect.succeed(hit)
    return Effect.tryPromise({
      try: async () => {
        const client = await loadOpenid()
        const auth = p.clientSecret ? client.ClientSecretBasic(p.clientSecret) : client.None()
        const insecure = new URL(p.issuer).protocol === "http:"
        const config = await client.discovery(new URL(p.issuer), p.clientId, undefined, auth, {
          ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
          timeout: 15
        })
        // The ID token's signature checked against the provider's JWKS, whichever grant brought it.
        client.enableNonRepudiationChecks(config)
        return { config, openid: client }
      },
      catch: (e) =>
        new BadGateway({ message: scrub(`provider '${p.id}': discovery at ${p.issuer} failed: ${messageOf(e)}`, [p.clientSecret]) })
    }).pipe(Effect.tap((oidc) => Effect.sync(() => cache.set(keyOf(p), { ...oidc, at: Date.now() }))))
  }

  /** The user's claims: the ID token's, with what the userinfo endpoint adds (best effort: the ID token's alone when it fails). */
  const claimsOf = ({ config, openid }: Oidc, tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers) =>
    Effect.gen(function* () {
      const idClaims = tokens.claims()
      if (idClaims === undefined)
        return yield* new BadRequest({ message: "the provider answered without an ID token (is the openid scope asked for?)" })
      const extra =
        tokens.access_token && config.serverMetadata().userinfo_endpoint
          ? yield* Effect.tryPromise(() => openid.fetchUserInfo(config, tokens.access_token, idClaims.sub)).pipe(
              Effect.orElseSucceed(() => ({}))
            )
          : {}
      return { ...extra, ...idClaims } as Claims
    })

  return { configOf, claimsOf }
}

export type OidcClient = ReturnType<typeof makeOidcClient>
