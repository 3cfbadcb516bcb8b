import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"
import { ROLES } from "./teams.js"

/**
 * Single sign-on with OpenID Connect (docs/sso.md): the providers an admin configures (or
 * `GATEWAY_OIDC_PROVIDERS` lists), the sign-ins of the dashboard and the CLI, and whether the
 * admin password still signs in. Tables: migration 0027 (`oidc_providers`, `oidc_logins`).
 */

/** A provider's id: in paths (`/api/auth/oidc/{id}/login`), so lower-case letters, digits, `-` and `_`. */
export const OidcProviderId = Schema.String.pipe(
  Schema.filter(
    (s) =>
      /^[a-z0-9][a-z0-9_-]{0,62}$/.test(s)
        ? RESERVED_IDS.includes(s)
          ? `id: '${s}' is reserved (a path segment of /api/auth/oidc)`
          : true
        : `id must be 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter or digit (got ${JSON.stringify(s)})`,
    { identifier: "OidcProviderId" }
  )
)
/** Ids a provider cannot take: the static segments beside `/api/auth/oidc/{id}`. */
export const RESERVED_IDS: ReadonlyArray<string> = ["providers", "config", "cli"]

const Issuer = Schema.String.pipe(
  Schema.filter((s) => {
    try {
      const u = new URL(s)
      return u.protocol === "https:" || u.protocol === "http:" ? true : `issuer must be an https:// address (got ${JSON.stringify(s)})`
    } catch {
      return `issuer must be an https:// address (got ${JSON.stringify(s)})`
    }
  })
)

const NonEmpty = (field: string, max = 512) =>
  Schema.String.pipe(Schema.filter((s) => (s.trim().length > 0 && s.length <= max ? true : `${field} must be 1 to ${max} characters`)))

/**
 * A group the provider puts in the groups claim, and what it gives: `role` across the gateway,
 * and with `team` (a team's name or id) a membership of that team (`team-admin` within it when the
 * role is `team-admin` or `admin`, else `member`).
 */
export const OidcMapping = Schema.Struct({
  group: NonEmpty("mappings[].group", 256),
  team: Schema.optionalWith(Schema.NullOr(NonEmpty("mappings[].team", 256)), { default: () => null }),
  role: oneOf(ROLES, "mappings[].role")
}).annotations(strict)
export type OidcMapping = typeof OidcMapping.Type

const Scopes = Schema.Array(NonEmpty("scopes[]", 128))

/** `POST /api/auth/oidc/config/providers`. */
export const CreateOidcProvider = Schema.Struct({
  id: OidcProviderId,
  name: NonEmpty("name", 128),
  issuer: Issuer,
  clientId: NonEmpty("clientId"),
  /** Absent or null: a public client (PKCE only). */
  clientSecret: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  /** Scopes asked for besides `openid` (default `profile email`; add the one your provider needs for groups). */
  scopes: Schema.optionalWith(Scopes, { default: () => ["openid", "profile", "email"] }),
  /** The claim that lists the user's groups (ID token or userinfo). */
  groupsClaim: Schema.optionalWith(NonEmpty("groupsClaim", 128), { default: () => "groups" }),
  mappings: Schema.optionalWith(Schema.Array(OidcMapping), { default: () => [] })
}).annotations(strict)
export type CreateOidcProvider = typeof CreateOidcProvider.Type

/** `PATCH /api/auth/oidc/config/providers/{id}`: any of the fields; a masked `clientSecret` keeps the stored one. */
export const PatchOidcProvider = Schema.Struct({
  name: Schema.optional(NonEmpty("name", 128)),
  issuer: Schema.optional(Issuer),
  clientId: Schema.optional(NonEmpty("clientId")),
  clientSecret: Schema.optional(Schema.NullOr(Schema.String)),
  scopes: Schema.optional(Scopes),
  groupsClaim: Schema.optional(NonEmpty("groupsClaim", 128)),
  mappings: Schema.optional(Schema.Array(OidcMapping))
}).annotations(strict)
export type PatchOidcProvider = typeof PatchOidcProvider.Type

/** A provider as the admin API shows it: the secret masked; `source` env entries are read-only. */
export const OidcProviderView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  issuer: Schema.String,
  clientId: Schema.String,
  clientSecret: Schema.NullOr(Schema.String),
  scopes: Schema.Array(Schema.String),
  groupsClaim: Schema.String,
  mappings: Schema.Array(OidcMapping),
  source: Schema.Literal("api", "env"),
  createdAt: Schema.NullOr(Schema.String),
  updatedAt: Schema.NullOr(Schema.String)
})
export type OidcProviderView = typeof OidcProviderView.Type

export const OidcProviderList = Schema.Struct({ providers: Schema.Array(OidcProviderView) })
export const OidcProviderRemoved = Schema.Struct({ removed: OidcProviderView })

/** `GET /api/auth/oidc/providers` (no authentication: the login page's buttons). */
export const PublicOidcProviders = Schema.Struct({
  providers: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String }))
})

export const OidcIdPath = Schema.Struct({ id: Schema.String })

/** `GET /api/auth/oidc/{id}/login`: where to go after the sign-in, and a CLI's loopback hand-off. */
export const OidcLoginQuery = Schema.Struct({
  /** A path of this gateway (default `/`). */
  returnTo: Schema.optional(Schema.String),
  /** `gateway login` without a device grant: its loopback address (http://127.0.0.1:<port>/...). */
  cliRedirect: Schema.optional(Schema.String),
  /** With `cliRedirect`: base64url SHA-256 of the CLI's secret, which it shows when it takes the session. */
  cliChallenge: Schema.optional(Schema.String)
})
export type OidcLoginQuery = typeof OidcLoginQuery.Type

/** `GET /api/auth/oidc/{id}/callback`: what the provider put on the browser's redirect. */
export const OidcCallbackQuery = Schema.Struct({
  code: Schema.optional(Schema.String),
  state: Schema.optional(Schema.String),
  iss: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  error_description: Schema.optional(Schema.String),
  session_state: Schema.optional(Schema.String)
})
export type OidcCallbackQuery = typeof OidcCallbackQuery.Type

/** A signed-in user, as the CLI's sign-in answers it. */
export const SsoUser = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  name: Schema.String,
  role: Schema.String
})

/** The session a CLI sign-in ends with: sent back as the `gw_session` cookie, with `X-CSRF-Token` on writes. */
export const SsoSession = Schema.Struct({
  session: Schema.String,
  csrfToken: Schema.String,
  expiresAt: Schema.String,
  user: SsoUser
})
export type SsoSession = typeof SsoSession.Type

/** `POST /api/auth/oidc/{id}/device`: the provider's device authorization, its device code kept by the gateway. */
export const OidcDeviceStarted = Schema.Struct({
  /** What the CLI polls with (`POST /api/auth/oidc/{id}/device/poll`). */
  handle: Schema.String,
  userCode: Schema.String,
  verificationUri: Schema.String,
  verificationUriComplete: Schema.NullOr(Schema.String),
  expiresAt: Schema.String,
  interval: Schema.Number
})
export type OidcDeviceStarted = typeof OidcDeviceStarted.Type

export const OidcDevicePoll = Schema.Struct({ handle: Schema.String }).annotations(strict)

/** Pending until the user approved at the provider; then the session, given once. */
export const OidcDevicePollResult = Schema.Struct({
  status: Schema.Literal("pending", "complete"),
  session: Schema.optional(SsoSession)
})
export type OidcDevicePollResult = typeof OidcDevicePollResult.Type

/** `POST /api/auth/oidc/cli/token`: the loopback hand-off's one-time code and the CLI's secret. */
export const OidcCliToken = Schema.Struct({ code: Schema.String, verifier: Schema.String }).annotations(strict)

/** `GET|PUT /api/auth/password-login`: whether the admin password still signs in to the dashboard. */
export const PasswordLogin = Schema.Struct({ enabled: Schema.Boolean }).annotations(strict)
