import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"

/** Connection names double as model prefixes (`<name>/<model>`), so no slashes or spaces. */
export const ConnectionName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(64, { message: () => "name must be at most 64 characters" }),
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
    message: () => "name may hold letters, digits, '.', '_' and '-' only (it is used as the model prefix <name>/<model>)"
  }),
  Schema.filter((s) =>
    ["auto", "qtsd", "claude-3-gateway-no-thinking"].includes(s.toLowerCase())
      ? `name '${s}' is reserved (it starts model ids of the router)`
      : true
  )
)

export const BaseUrl = Schema.Trim.pipe(
  Schema.filter(
    (s) => {
      let url: URL
      try {
        url = new URL(s)
      } catch {
        return `baseUrl '${s}' is not a valid URL`
      }
      if (url.protocol !== "http:" && url.protocol !== "https:") return "baseUrl must use http or https"
      if (url.username || url.password) return "baseUrl must not embed credentials; use apiKey"
      if (url.search || url.hash) return "baseUrl must not have a query string or fragment"
      return true
    },
    { identifier: "BaseUrl" }
  )
)

export const ModelId = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "model id must not be empty" }),
  Schema.maxLength(256, { message: () => "model id must be at most 256 characters" })
)

export const MaxConcurrent = Schema.NullOr(
  Schema.Int.pipe(Schema.positive({ message: () => "max_concurrent must be a positive integer or null" }))
)

const Priority = Schema.Int.pipe(Schema.between(0, 1_000_000, { message: () => "priority must be an integer between 0 and 1000000" }))

const TimeoutMs = Schema.Int.pipe(
  Schema.between(100, 3_600_000, { message: () => "a timeout must be a whole number of milliseconds between 100 and 3600000" })
)

/**
 * A connection's own upstream timeouts, replacing the gateway's (docs/resilience.md, "Upstream timeouts and limits"), and how a
 * non-streamed request is asked of it (docs/formats.md, "Non-streamed answers from streams").
 */
export const ConnectionTimeouts = Schema.Struct({
  headersMs: Schema.optional(TimeoutMs),
  idleMs: Schema.optional(TimeoutMs),
  nonStreamed: Schema.optional(
    Schema.Literal("auto", "stream", "whole").annotations({
      message: () =>
        'nonStreamed must be "auto" (whole when short for this upstream, the default), "stream" (collect a stream) or "whole" (wait for the whole answer)'
    })
  )
}).annotations({ ...strict, identifier: "ConnectionTimeouts" })
export type ConnectionTimeouts = typeof ConnectionTimeouts.Type

export const UpstreamFormat = oneOf(["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"], "upstreamFormat").annotations({
  description: "The wire format the upstream speaks, when it is not the provider's usual one (for compatible servers)."
})

/**
 * The browser whose TLS handshake (ClientHello: ciphers, extensions and their order, GREASE,
 * groups, ALPN) this connection's upstream calls make while ENABLE_TLS_FINGERPRINT is on
 * (docs/egress.md, "TLS fingerprint"). Unset: `chrome151`.
 */
export const TLS_PROFILES = [
  "chrome151",
  "chrome142",
  "chrome136",
  "chrome131",
  "chrome124",
  "firefox144",
  "firefox135",
  "firefox133",
  "firefox128",
  "ios18"
] as const
export const TlsProfile = oneOf(TLS_PROFILES, "tlsProfile").annotations({
  description: "The browser TLS handshake of this connection's upstream calls while ENABLE_TLS_FINGERPRINT is on; null: chrome151."
})
export type TlsProfile = (typeof TLS_PROFILES)[number]
export const DEFAULT_TLS_PROFILE: TlsProfile = "chrome151"

/**
 * Who answers Codex's compaction requests for a connection (docs/agents.md, "Codex compaction"):
 * `gateway` (the default) summarises with the model and seals the summary; `upstream` passes them
 * through to a Responses upstream that compacts itself (OpenAI).
 */
export const ConnectionCompaction = oneOf(["gateway", "upstream"], "compaction").annotations({
  description:
    'Who answers Codex compaction for this connection: "gateway" (the default: a summary by the model, sealed by the gateway) or "upstream" (passed through to a Responses upstream such as OpenAI, which compacts itself).'
})
export type ConnectionCompaction = typeof ConnectionCompaction.Type

/** The plan of the account behind a connection (auto routing's `tierPriority`); standard when not set. */
export const AccountTier = oneOf(["free", "standard", "pro", "ultra"], "accountTier")

const connectionFields = {
  name: Schema.optional(ConnectionName),
  /** Overrides the catalog's base URL. Includes `/v1` for OpenAI-compatible upstreams. */
  baseUrl: Schema.optional(Schema.NullOr(BaseUrl)),
  apiKey: Schema.optional(Schema.NullOr(Schema.String)),
  defaultModel: Schema.optional(Schema.NullOr(ModelId)),
  /** Extra model ids served by this connection (beyond the catalog), e.g. for openai-compatible. */
  models: Schema.optional(Schema.Array(ModelId)),
  max_concurrent: Schema.optional(MaxConcurrent),
  /** Lower numbers are preferred when several connections serve one provider. */
  priority: Schema.optional(Priority),
  enabled: Schema.optional(Schema.Boolean),
  upstreamFormat: Schema.optional(Schema.NullOr(UpstreamFormat)),
  accountTier: Schema.optional(Schema.NullOr(AccountTier)),
  /** Upstream timeouts for this connection; null (or {}) uses the gateway's. */
  timeouts: Schema.optional(Schema.NullOr(ConnectionTimeouts)),
  /** The registry proxy this connection's upstream calls go through (docs/egress.md); null: the global default, if any. */
  proxyId: Schema.optional(
    Schema.NullOr(Schema.Trim.pipe(Schema.minLength(1, { message: () => "proxyId must not be empty (null: no proxy of its own)" })))
  ),
  /** The browser handshake its upstream calls make while ENABLE_TLS_FINGERPRINT is on (docs/egress.md); null: the default, chrome151. */
  tlsProfile: Schema.optional(Schema.NullOr(TlsProfile)),
  /** Who answers Codex's compaction requests (docs/agents.md, "Codex compaction"); null: the gateway. */
  compaction: Schema.optional(Schema.NullOr(ConnectionCompaction))
}

export const CreateConnection = Schema.Struct({
  provider: Schema.Trim.pipe(Schema.minLength(1, { message: () => "provider is required" })),
  ...connectionFields
}).annotations(strict)
export type CreateConnection = typeof CreateConnection.Type

export const UpdateConnection = Schema.Struct({
  provider: Schema.optional(Schema.String),
  ...connectionFields
}).annotations(strict)
export type UpdateConnection = typeof UpdateConnection.Type

export const ConnectionView = Schema.Struct({
  id: Schema.String,
  provider: Schema.String,
  name: Schema.String,
  baseUrl: Schema.NullOr(Schema.String),
  effectiveBaseUrl: Schema.NullOr(Schema.String),
  /** Masked: first and last characters only. */
  apiKey: Schema.NullOr(Schema.String),
  hasApiKey: Schema.Boolean,
  defaultModel: Schema.NullOr(Schema.String),
  models: Schema.Array(Schema.String),
  /** The format the gateway speaks to this connection's upstream. */
  upstreamFormat: UpstreamFormat,
  accountTier: AccountTier,
  /** The connection's own upstream timeouts (ms); null: the gateway's. */
  timeouts: Schema.NullOr(ConnectionTimeouts),
  /** The registry proxy its calls go through; null: the global default (`/api/settings/proxy`), if any. */
  proxyId: Schema.NullOr(Schema.String),
  /** The browser TLS handshake its calls make while ENABLE_TLS_FINGERPRINT is on; null: the default (chrome151). */
  tlsProfile: Schema.NullOr(TlsProfile),
  /** Who answers Codex's compaction requests: null or `gateway`, the gateway; `upstream`, the upstream itself. */
  compaction: Schema.optional(Schema.NullOr(ConnectionCompaction)),
  max_concurrent: Schema.NullOr(Schema.Number),
  priority: Schema.Number,
  enabled: Schema.Boolean,
  testStatus: Schema.NullOr(Schema.String),
  lastTestedAt: Schema.NullOr(Schema.String),
  rateLimitedUntil: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  lastErrorType: Schema.NullOr(Schema.String),
  errorCode: Schema.NullOr(Schema.String),
  backoffLevel: Schema.Number,
  createdAt: Schema.String,
  updatedAt: Schema.String,
  /** `oauth`: the credential is an OAuth access token the gateway refreshes (docs/operations.md, "OAuth connections"). */
  authType: Schema.Literal("apikey", "oauth"),
  /** An OAuth connection's grant: the account, when the access token expires, the last refresh. No token is ever listed. */
  oauth: Schema.optional(
    Schema.Struct({
      email: Schema.NullOr(Schema.String),
      accountId: Schema.NullOr(Schema.String),
      expiresAt: Schema.NullOr(Schema.String),
      hasRefreshToken: Schema.Boolean,
      refreshedAt: Schema.NullOr(Schema.String)
    })
  )
})
export type ConnectionView = typeof ConnectionView.Type

export const ValidateProvider = Schema.Struct({
  provider: Schema.Trim.pipe(Schema.minLength(1, { message: () => "provider is required" })),
  baseUrl: Schema.optional(Schema.NullOr(BaseUrl)),
  apiKey: Schema.optional(Schema.NullOr(Schema.String))
}).annotations(strict)
export type ValidateProvider = typeof ValidateProvider.Type

export const ProbeResult = Schema.Struct({
  ok: Schema.Boolean,
  /** Upstream HTTP status, null when the upstream could not be reached. */
  status: Schema.NullOr(Schema.Number),
  latencyMs: Schema.Number,
  modelCount: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String)
})
export type ProbeResult = typeof ProbeResult.Type

export const ConnectionTestResult = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  provider: Schema.String,
  ...ProbeResult.fields
})
export type ConnectionTestResult = typeof ConnectionTestResult.Type

export const ProviderModel = Schema.Struct({
  id: Schema.String,
  name: Schema.NullOr(Schema.String),
  contextWindow: Schema.NullOr(Schema.Number),
  maxOutput: Schema.NullOr(Schema.Number)
})

export const ConnectionModels = Schema.Struct({
  connection: Schema.String,
  provider: Schema.String,
  /** `upstream` when the provider's own model list answered, else `catalog`. */
  source: Schema.Literal("upstream", "catalog"),
  error: Schema.NullOr(Schema.String),
  models: Schema.Array(ProviderModel)
})
export type ConnectionModels = typeof ConnectionModels.Type
