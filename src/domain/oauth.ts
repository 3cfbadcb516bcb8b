import * as Schema from "effect/Schema"
import { BaseUrl, ConnectionName, ConnectionView } from "./connections.js"
import { strict } from "./parse.js"

/**
 * OAuth connections (docs/operations.md, "OAuth connections"): the payloads and answers of
 * `/api/oauth/{provider}/{action}`. No answer ever carries a token: connections are listed as
 * everywhere else (the access token masked), the rest of the grant stays server-side.
 */

const HttpUrl = (field: string) =>
  Schema.Trim.pipe(
    Schema.filter(
      (s) => {
        let url: URL
        try {
          url = new URL(s)
        } catch {
          return `${field} '${s}' is not a valid URL`
        }
        if (url.protocol !== "http:" && url.protocol !== "https:") return `${field} must use http or https`
        if (url.username || url.password) return `${field} must not embed credentials`
        return true
      },
      { identifier: field }
    )
  )

const NonEmpty = (field: string) =>
  Schema.Trim.pipe(
    Schema.minLength(1, { message: () => `${field} must not be empty` }),
    Schema.maxLength(4096, { message: () => `${field} is too long` })
  )

/**
 * Per-connection overrides of the catalog's OAuth endpoints (a self-hosted or test authorization
 * server); kept with the connection, so its refreshes use them too.
 */
const endpointOverrides = {
  authorizeUrl: Schema.optional(HttpUrl("authorizeUrl")),
  tokenUrl: Schema.optional(HttpUrl("tokenUrl")),
  deviceAuthorizationUrl: Schema.optional(HttpUrl("deviceAuthorizationUrl")),
  clientId: Schema.optional(NonEmpty("clientId")),
  scopes: Schema.optional(Schema.Array(NonEmpty("scopes")))
}
export type EndpointOverrides = {
  readonly authorizeUrl?: string | undefined
  readonly tokenUrl?: string | undefined
  readonly deviceAuthorizationUrl?: string | undefined
  readonly clientId?: string | undefined
  readonly scopes?: ReadonlyArray<string> | undefined
}

/** Which connection a flow creates or re-authorizes. */
const target = {
  /** Name of the connection to create (default: the provider id); an existing one of this provider is re-authorized. */
  name: Schema.optional(ConnectionName),
  /** Re-authorize this connection (id or name) instead. */
  connection: Schema.optional(NonEmpty("connection")),
  /** The upstream's base URL, when not the catalog's. */
  baseUrl: Schema.optional(BaseUrl)
}

export const StartAuthorize = Schema.Struct({
  ...target,
  ...endpointOverrides,
  /** Where the authorization server sends the browser back (default: the provider's own, or this gateway's callback). */
  redirectUri: Schema.optional(HttpUrl("redirectUri"))
}).annotations(strict)
export type StartAuthorize = typeof StartAuthorize.Type

export const AuthorizeStarted = Schema.Struct({
  provider: Schema.String,
  flow: Schema.Literal("pkce"),
  /** Open this in a browser. */
  authorizeUrl: Schema.String,
  /** One-time; it names the flow in the callback. */
  state: Schema.String,
  redirectUri: Schema.String,
  expiresAt: Schema.String
})

/** The browser's redirect (GET): what the authorization server appends. */
export const CallbackQuery = Schema.Struct({
  code: Schema.optional(Schema.String),
  state: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  error_description: Schema.optional(Schema.String)
})

/** Headless completion (POST): the redirect URL the browser ended on, or the code (and state) shown to the user. */
export const CompleteAuthorize = Schema.Struct({
  url: Schema.optional(NonEmpty("url")),
  code: Schema.optional(NonEmpty("code")),
  state: Schema.optional(NonEmpty("state"))
}).annotations(strict)
export type CompleteAuthorize = typeof CompleteAuthorize.Type

export const OAuthConnected = Schema.Struct({
  connection: ConnectionView,
  /** false: an existing connection was re-authorized. */
  created: Schema.Boolean
})
export type OAuthConnected = typeof OAuthConnected.Type

export const StartDevice = Schema.Struct({ ...target, ...endpointOverrides }).annotations(strict)
export type StartDevice = typeof StartDevice.Type

export const DeviceStarted = Schema.Struct({
  provider: Schema.String,
  flow: Schema.Literal("device"),
  /** Names the flow in `poll` (the device code itself stays in the gateway). */
  state: Schema.String,
  userCode: Schema.String,
  verificationUri: Schema.String,
  verificationUriComplete: Schema.NullOr(Schema.String),
  /** Seconds between polls. */
  interval: Schema.Number,
  expiresAt: Schema.String
})

export const PollDevice = Schema.Struct({
  state: NonEmpty("state"),
  /** Keep polling (at the server's interval) until the user answers or `timeoutSeconds` pass. */
  wait: Schema.optional(Schema.Boolean),
  timeoutSeconds: Schema.optional(
    Schema.Int.pipe(Schema.between(1, 900, { message: () => "timeoutSeconds must be an integer between 1 and 900" }))
  )
}).annotations(strict)
export type PollDevice = typeof PollDevice.Type

export const PollResult = Schema.Struct({
  /** `pending`: not answered yet; `slow_down`: the server asked for a longer interval; `complete`: connected. */
  status: Schema.Literal("pending", "slow_down", "complete"),
  /** Seconds until the next poll is useful. */
  interval: Schema.Number,
  connection: Schema.optional(ConnectionView),
  created: Schema.optional(Schema.Boolean)
})
export type PollResult = typeof PollResult.Type

/** Which of the provider's OAuth connections: needed when it has more than one. */
export const ConnectionRefPayload = Schema.Struct({ connection: Schema.optional(NonEmpty("connection")) }).annotations(strict)

export const OAuthConnectionStatus = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** `active`; `expiring` (refreshed soon); `expired` (terminal: authorize again); `unauthorized` (no token yet). */
  state: Schema.Literal("active", "expiring", "expired", "unauthorized"),
  email: Schema.NullOr(Schema.String),
  accountId: Schema.NullOr(Schema.String),
  expiresAt: Schema.NullOr(Schema.String),
  refreshedAt: Schema.NullOr(Schema.String),
  hasRefreshToken: Schema.Boolean,
  lastRefreshError: Schema.NullOr(Schema.String)
})
export type OAuthConnectionStatus = typeof OAuthConnectionStatus.Type

export const OAuthStatus = Schema.Struct({
  provider: Schema.String,
  flows: Schema.Array(Schema.Literal("pkce", "device")),
  connections: Schema.Array(OAuthConnectionStatus)
})
export type OAuthStatus = typeof OAuthStatus.Type

export const ProviderPath = Schema.Struct({ provider: Schema.String })
