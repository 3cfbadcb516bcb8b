import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"
import { oneOf, strict } from "./parse.js"

/**
 * The MCP gateway's contract (docs/mcp.md, "MCP servers behind the gateway"): the registry of
 * upstream MCP servers, their health, what they offer, and what a gateway key may use of them.
 */

/** A server's name: what `<server>__<tool>` and `/v1/mcp/{server}` use. */
export const MCP_SERVER_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/
export const McpServerName = Schema.String.pipe(
  Schema.filter((s) => MCP_SERVER_NAME_PATTERN.test(s), {
    message: (i) =>
      `name must match ^[a-z0-9][a-z0-9-]{0,31}$ (lower-case letters, digits and dashes, at most 32, not starting with a dash; got ${JSON.stringify(i.actual)})`
  })
)

export const MCP_SERVER_TRANSPORTS = ["stdio", "http", "sse"] as const
export const McpServerTransport = oneOf(MCP_SERVER_TRANSPORTS, "transport")
export type McpServerTransport = (typeof MCP_SERVER_TRANSPORTS)[number]

/** The separator between a server's name and its tool's (or prompt's) name on `/v1/mcp`. */
export const MCP_NAME_SEPARATOR = "__"
/** Clients refuse tool names longer than this: longer exposed names are shortened with a hash suffix. */
export const MCP_MAX_TOOL_NAME = 64

const StringMap = Schema.Record({ key: Schema.String, value: Schema.String })
/** `["*"]` for every tool (resource and prompt), or names of tools, prompts and resource URIs; `[]`: nothing exposed yet. */
export const McpAllowedTools = Schema.Array(Schema.String.pipe(Schema.minLength(1)))

/**
 * The OAuth client an http or sse server is signed in with (docs/mcp.md, "Signing in to a remote
 * server (OAuth)"): one registered beforehand (`clientId`, `clientSecret` for a confidential
 * client: sealed at rest, masked in listings), else the gateway registers dynamically; `scopes`
 * asked for instead of those the server advertises. None is needed with dynamic registration.
 */
export const McpServerOAuthConfig = Schema.Struct({
  clientId: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  clientSecret: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  scopes: Schema.optional(Schema.Array(Schema.String.pipe(Schema.minLength(1))))
}).annotations(strict)
export type McpServerOAuthConfig = typeof McpServerOAuthConfig.Type

/** `POST /api/mcp/servers`. stdio takes command/args/env/cwd; http and sse take url/headers (and oauth). */
export const CreateMcpServer = Schema.Struct({
  name: McpServerName,
  transport: McpServerTransport,
  command: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  args: Schema.optional(Schema.Array(Schema.String)),
  env: Schema.optional(StringMap),
  cwd: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  url: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  headers: Schema.optional(StringMap),
  /** Nothing of a server is exposed until an admin allows it. Default `[]`. */
  allowedTools: Schema.optional(McpAllowedTools),
  /** Time limit of one call in milliseconds (default 60,000). */
  timeoutMs: Schema.optional(Schema.Int.pipe(Schema.between(100, 3_600_000))),
  /** Calls per minute one key may make to this server; null or absent: none. */
  rpm: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  /** http and sse: the OAuth client the gateway signs in with (absent: dynamic registration, when the server asks for a sign-in). */
  oauth: Schema.optional(McpServerOAuthConfig)
}).annotations(strict)
export type CreateMcpServer = typeof CreateMcpServer.Type

/**
 * `PATCH /api/mcp/servers/{name}`: the fields given change (a name does not). In env and headers, a
 * masked value keeps what is stored, as does `oauth.clientSecret` sent back masked; `oauth: null`
 * removes the OAuth client.
 */
export const UpdateMcpServer = Schema.Struct({
  transport: Schema.optional(McpServerTransport),
  command: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  args: Schema.optional(Schema.Array(Schema.String)),
  env: Schema.optional(StringMap),
  cwd: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  url: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1)))),
  headers: Schema.optional(StringMap),
  allowedTools: Schema.optional(McpAllowedTools),
  timeoutMs: Schema.optional(Schema.Int.pipe(Schema.between(100, 3_600_000))),
  rpm: Schema.optional(Schema.NullOr(Schema.Int.pipe(Schema.positive()))),
  enabled: Schema.optional(Schema.Boolean),
  oauth: Schema.optional(Schema.NullOr(McpServerOAuthConfig))
}).annotations(strict)
export type UpdateMcpServer = typeof UpdateMcpServer.Type

/** `POST /api/mcp/servers/{name}/allow`: `all: true` for `["*"]`, or the names; `add: true` adds to what is allowed instead of replacing it. */
export const AllowMcpTools = Schema.Struct({
  all: Schema.optional(Schema.Boolean),
  tools: Schema.optional(McpAllowedTools),
  add: Schema.optional(Schema.Boolean)
}).annotations(strict)
export type AllowMcpTools = typeof AllowMcpTools.Type

export const MCP_HEALTH_STATES = ["starting", "ready", "restarting", "failed", "needs-auth", "disabled"] as const
export type McpHealthState = (typeof MCP_HEALTH_STATES)[number]
export const McpServerHealth = Schema.Struct({
  state: Schema.Literal(...MCP_HEALTH_STATES),
  /** Why it is not ready (the last error, the exit code and signal of a stdio process, "sign in needed"); null when ready. */
  reason: Schema.NullOr(Schema.String),
  /** Since when it is in this state. */
  since: Schema.String,
  /** Restarts since the gateway started. */
  restarts: Schema.Number,
  /** The stdio process's pid while it runs. */
  pid: Schema.NullOr(Schema.Number),
  /** What the server said it is (initialize's serverInfo). */
  serverInfo: Schema.NullOr(Schema.Struct({ name: Schema.String, version: Schema.String })),
  /** When tools, resources and prompts were last listed. */
  listedAt: Schema.NullOr(Schema.String)
})
export type McpServerHealth = typeof McpServerHealth.Type

/** A server's OAuth state as listings show it: never a token; the client secret masked. */
export const McpServerOAuthView = Schema.Struct({
  /** The gateway holds an access token for it. */
  signedIn: Schema.Boolean,
  /** When the access token expires (null: not said, or not signed in); it is refreshed ahead of that. */
  expiresAt: Schema.NullOr(Schema.String),
  /** When the last sign-in completed (a refresh does not change it). */
  signedInAt: Schema.NullOr(Schema.String),
  /** Why the last refresh failed, until one succeeds or the next sign-in. */
  lastError: Schema.NullOr(Schema.String),
  /** The configured client (null: registered dynamically, or not yet). */
  clientId: Schema.NullOr(Schema.String),
  /** The configured client secret, masked. */
  clientSecret: Schema.NullOr(Schema.String),
  /** The configured scopes ([]: those the server advertises). */
  scopes: Schema.Array(Schema.String)
})
export type McpServerOAuthView = typeof McpServerOAuthView.Type

/** A server as listings show it: secrets in env and headers masked. */
export const McpServerView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  transport: Schema.Literal(...MCP_SERVER_TRANSPORTS),
  command: Schema.NullOr(Schema.String),
  args: Schema.Array(Schema.String),
  env: StringMap,
  cwd: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  headers: StringMap,
  allowedTools: Schema.Array(Schema.String),
  timeoutMs: Schema.Number,
  rpm: Schema.NullOr(Schema.Number),
  enabled: Schema.Boolean,
  /**
   * OAuth (the MCP authorization spec): whether the server asked for it and whether the gateway
   * holds a token; null for a server that did not ask (and has no OAuth client configured).
   */
  oauth: Schema.NullOr(McpServerOAuthView),
  health: McpServerHealth,
  tools: Schema.Number,
  resources: Schema.Number,
  prompts: Schema.Number,
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type McpServerView = typeof McpServerView.Type

/** A server as the gateway holds it, secrets in the clear: never sent out. */
export interface McpServerRecord {
  readonly id: string
  readonly name: string
  readonly transport: McpServerTransport
  readonly command: string | null
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd: string | null
  readonly url: string | null
  readonly headers: Readonly<Record<string, string>>
  readonly allowedTools: ReadonlyArray<string>
  readonly timeoutMs: number
  readonly rpm: number | null
  readonly enabled: boolean
  /** http and sse: the configured OAuth client (absent or null: none configured). */
  readonly oauth?: McpServerOAuthClient | null
  readonly createdAt: number
  readonly updatedAt: number
}

/** A server's configured OAuth client as the gateway holds it, the secret in the clear: never sent out. */
export interface McpServerOAuthClient {
  readonly clientId: string | null
  readonly clientSecret: string | null
  readonly scopes: ReadonlyArray<string>
}

export const MCP_DEFAULT_TIMEOUT_MS = 60_000

/** One tool, resource or prompt of a server, as discovered, with the name `/v1/mcp` gives it. */
export const McpOffering = Schema.Struct({
  kind: Schema.Literal("tool", "resource", "prompt"),
  server: Schema.String,
  /** The server's own name (a resource's URI). */
  name: Schema.String,
  /** The name on `/v1/mcp`: `<server>__<name>`, shortened with a hash suffix past 64 characters (a resource keeps its URI). */
  exposedName: Schema.String,
  description: Schema.NullOr(Schema.String),
  /** Whether the server's allowedTools expose it. */
  allowed: Schema.Boolean
})
export type McpOffering = typeof McpOffering.Type

/** `POST /api/mcp/servers/{name}/call`. */
export const CallMcpTool = Schema.Struct({
  tool: Schema.String.pipe(Schema.minLength(1)),
  arguments: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}).annotations(strict)
export type CallMcpTool = typeof CallMcpTool.Type

/** A key's MCP ceiling: patterns `<server>`, `<server>__<tool>`, `<server>__*` (and `*`). Absent on a key: every allowed tool. */
export const McpKeyAllow = Schema.Struct({
  allow: Schema.Array(
    Schema.String.pipe(
      Schema.filter((s) => s === "*" || /^[a-z0-9][a-z0-9-]{0,31}(__.+)?$/.test(s), {
        message: (i) => `mcp.allow entries are <server>, <server>__<tool> or <server>__* (got ${JSON.stringify(i.actual)})`
      })
    )
  )
}).annotations(strict)
export type McpKeyAllow = typeof McpKeyAllow.Type

/**
 * The name `/v1/mcp` gives a server's tool or prompt: `<server>__<name>`, or, past
 * MCP_MAX_TOOL_NAME characters, its first characters and `_` and 8 hex digits of the SHA-256 of the
 * whole name (stable across restarts and gateways).
 */
export const exposedNameOf = (server: string, name: string): string => {
  const full = `${server}${MCP_NAME_SEPARATOR}${name}`
  if (full.length <= MCP_MAX_TOOL_NAME) return full
  const hash = createHash("sha256").update(full).digest("hex").slice(0, 8)
  return `${full.slice(0, MCP_MAX_TOOL_NAME - 9)}_${hash}`
}

/** `POST /api/mcp/servers/{name}/oauth/start`: the address to open in a browser to sign in. */
export const McpOAuthStarted = Schema.Struct({
  server: Schema.String,
  /** The authorization server's page (PKCE S256, the state of this sign-in, the resource indicator). */
  authorizationUrl: Schema.String,
  /** Where the authorization server sends the browser back: `GET /api/mcp/oauth/callback` on this gateway. */
  redirectUri: Schema.String,
  /** The sign-in must complete before this (10 minutes). */
  expiresAt: Schema.String
})
export type McpOAuthStarted = typeof McpOAuthStarted.Type

/** `GET /api/mcp/oauth/callback`: what the authorization server put on the browser's redirect. */
export const McpOAuthCallbackQuery = Schema.Struct({
  code: Schema.optional(Schema.String),
  state: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  error_description: Schema.optional(Schema.String),
  error_uri: Schema.optional(Schema.String),
  iss: Schema.optional(Schema.String)
})
export type McpOAuthCallbackQuery = typeof McpOAuthCallbackQuery.Type

/** The callback's answer: the server signed in to (its connection is made again with the token). */
export const McpOAuthSignedIn = Schema.Struct({
  server: Schema.String,
  signedIn: Schema.Literal(true),
  expiresAt: Schema.NullOr(Schema.String)
})
export type McpOAuthSignedIn = typeof McpOAuthSignedIn.Type

/** What `POST /api/mcp/servers/{name}/call` answers: the server's CallToolResult as it sent it (a tool's own failure: `isError`). */
export const McpCallResult = Schema.Struct({
  content: Schema.Array(Schema.Unknown),
  structuredContent: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  isError: Schema.optional(Schema.Boolean),
  _meta: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type McpCallResult = typeof McpCallResult.Type
