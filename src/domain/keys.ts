import * as Schema from "effect/Schema"
import { MaxQueueWaitSeconds } from "./quotaQueue.js"
import { MCP_SCOPES } from "./mcp.js"
import { McpKeyAllow } from "./mcpServers.js"
import { oneOf, strict } from "./parse.js"
import { ShadowTarget, ShadowTargets } from "./shadow.js"

/**
 * `inference` keys call the model routes; `admin` keys also manage the gateway. The MCP scopes
 * (docs/mcp.md) let a non-admin key call those MCP tools; every valid key calls the model routes.
 */
export const API_KEY_SCOPES = ["inference", "admin", ...MCP_SCOPES] as const
export const ApiKeyScope = oneOf(API_KEY_SCOPES, "scope")
export type ApiKeyScope = typeof ApiKeyScope.Type

export const ApiKeyName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(64, { message: () => "name must be at most 64 characters" })
)

/** A per-minute rate: a positive integer. */
export const PerMinute = Schema.Int.pipe(
  Schema.between(1, 1_000_000_000, { message: () => "a rate limit must be an integer from 1 to 1000000000, or null for none" })
)

/** A per-minute limit: a positive integer, or null for none. */
export const PerMinuteLimit = Schema.NullOr(PerMinute)

/** A key's owner as given: a user's id or email, a team's id or name. */
export const KeyOwnerRef = Schema.Trim.pipe(Schema.minLength(1, { message: () => "an owner must not be empty (null: none)" }))

/** When a key stops working: an ISO 8601 date. */
export const ApiKeyExpiry = Schema.DateFromString.pipe(Schema.validDate({ message: () => "expiresAt must be an ISO 8601 date" }))

export const CreateApiKey = Schema.Struct({
  /** Requests per minute this key may make (inbound rate limit); null or absent: none (or the automatic default). */
  rpm: Schema.optional(PerMinuteLimit),
  /** Tokens (input plus output) per minute. */
  tpm: Schema.optional(PerMinuteLimit),
  name: Schema.optional(ApiKeyName),
  scopes: Schema.optional(Schema.Array(ApiKeyScope).pipe(Schema.minItems(1, { message: () => "scopes must not be empty" }))),
  expiresAt: Schema.optional(Schema.NullOr(ApiKeyExpiry)),
  /** The key's owner (docs/teams.md, "Keys and their owners"): a user (id or email) or a team (id or name), not both; neither: the caller's user. */
  userId: Schema.optional(Schema.NullOr(KeyOwnerRef)),
  teamId: Schema.optional(Schema.NullOr(KeyOwnerRef)),
  /** Shadow targets for this key's requests (docs/shadow.md); null or []: none. */
  shadow: Schema.optional(Schema.NullOr(ShadowTargets)),
  /** The MCP servers and tools this key may use through the gateway (docs/mcp.md); null or absent: every allowed tool. */
  mcp: Schema.optional(Schema.NullOr(McpKeyAllow)),
  /** Longest wait for a quota to reset (docs/resilience.md, "Waiting out a quota"); null, 0 or absent: off. */
  maxQueueWaitSeconds: Schema.optional(Schema.NullOr(MaxQueueWaitSeconds))
}).annotations(strict)
export type CreateApiKey = typeof CreateApiKey.Type

/** `PATCH /api/keys/{id}`: the fields given change; null removes a limit (or the expiry). */
export const UpdateApiKey = Schema.Struct({
  name: Schema.optional(ApiKeyName),
  rpm: Schema.optional(PerMinuteLimit),
  tpm: Schema.optional(PerMinuteLimit),
  /** false: the key stops verifying (kept, can be enabled again). */
  enabled: Schema.optional(Schema.Boolean),
  /** A new expiry; null: never expires. */
  expiresAt: Schema.optional(Schema.NullOr(ApiKeyExpiry)),
  /** A new owner: a user (id or email) or a team (id or name), not both; the other is cleared; null on both: nobody's. */
  userId: Schema.optional(Schema.NullOr(KeyOwnerRef)),
  teamId: Schema.optional(Schema.NullOr(KeyOwnerRef)),
  /** New shadow targets for this key's requests; null or []: none. */
  shadow: Schema.optional(Schema.NullOr(ShadowTargets)),
  /** A new MCP ceiling for this key; null: none (every allowed tool). */
  mcp: Schema.optional(Schema.NullOr(McpKeyAllow)),
  /** A new longest wait for a quota to reset, in seconds; null or 0: off. */
  maxQueueWaitSeconds: Schema.optional(Schema.NullOr(MaxQueueWaitSeconds))
}).annotations(strict)
export type UpdateApiKey = typeof UpdateApiKey.Type

export const ApiKeyView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** The key with all but its first and last characters hidden. */
  key: Schema.String,
  scopes: Schema.Array(ApiKeyScope),
  enabled: Schema.Boolean,
  createdAt: Schema.String,
  expiresAt: Schema.NullOr(Schema.String),
  lastUsedAt: Schema.NullOr(Schema.String),
  /** The key's own inbound limits (null: none set; RATE_LIMIT_AUTO_ENABLE may apply a default). */
  rpm: Schema.NullOr(Schema.Number),
  tpm: Schema.NullOr(Schema.Number),
  /** The user who owns the key (docs/teams.md, "Keys and their owners"); null: none. */
  userId: Schema.NullOr(Schema.String),
  /** The team that owns the key; null: none. */
  teamId: Schema.NullOr(Schema.String),
  /** The key's shadow targets (docs/shadow.md); [] for none. */
  shadow: Schema.Array(ShadowTarget),
  /** The key's MCP ceiling (docs/mcp.md); null: none (every allowed tool). */
  mcp: Schema.NullOr(Schema.Struct({ allow: Schema.Array(Schema.String) })),
  /** Longest wait for a quota to reset, in seconds (docs/resilience.md, "Waiting out a quota"); null: off. */
  maxQueueWaitSeconds: Schema.NullOr(Schema.Number)
})
export type ApiKeyView = typeof ApiKeyView.Type

/** Returned once, at creation: the only time the full key is shown. */
export const CreatedApiKey = Schema.Struct({
  ...ApiKeyView.fields,
  secret: Schema.String
})
export type CreatedApiKey = typeof CreatedApiKey.Type

export const API_KEY_MIN_LENGTH = 16
