import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * Coding tools and ACP agents (spec document 2, "CLI tool catalog entry and batch status", the
 * "CLI tools" and "ACP agents" endpoint families; docs/coding-tools.md).
 */

export const CliToolCategory = Schema.Literal("code", "agent")
export const BaseUrlSupport = Schema.Literal("full", "partial", "none")
export const ConfigType = Schema.Literal("env", "custom", "guide", "custom-builder", "mitm")

/** A catalog entry: the spec's fields plus `command`, the executable detection looks for. */
export const CliToolEntry = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  color: Schema.String,
  description: Schema.String,
  docsUrl: Schema.String,
  vendor: Schema.String,
  category: CliToolCategory,
  acpSpawnable: Schema.Boolean,
  baseUrlSupport: BaseUrlSupport,
  configType: ConfigType,
  command: Schema.String
})
export type CliToolEntry = typeof CliToolEntry.Type

export const ToolDetection = Schema.Struct({
  installed: Schema.Boolean,
  runnable: Schema.Boolean,
  version: Schema.optional(Schema.String),
  command: Schema.optional(Schema.String),
  commandPath: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
})
export type ToolDetection = typeof ToolDetection.Type

export const ToolConfigStatus = Schema.Struct({
  status: Schema.Literal("configured", "not_configured", "not_installed", "unknown", "other"),
  endpoint: Schema.optional(Schema.String),
  lastConfiguredAt: Schema.optional(Schema.String)
})
export type ToolConfigStatus = typeof ToolConfigStatus.Type

export const ToolStatus = Schema.Struct({
  detection: ToolDetection,
  config: ToolConfigStatus,
  /** Sanitised: one line, no stack, secrets masked. */
  error: Schema.optional(Schema.String)
})
export type ToolStatus = typeof ToolStatus.Type

/** `GET /api/cli-tools/all-statuses`: tool id → status. */
export const AllToolStatuses = Schema.Record({ key: Schema.String, value: ToolStatus })

/** `GET /api/cli-tools/runtime/{toolId}`: the catalog entry and its status. */
export const ToolRuntime = Schema.Struct({ ...CliToolEntry.fields, status: ToolStatus })

/** The gateway-related settings a tool's configuration holds now (key masked). */
export const ToolSettingsView = Schema.Struct({
  tool: Schema.String,
  /** The files setup writes, primary first. */
  files: Schema.Array(Schema.String),
  exists: Schema.Boolean,
  baseUrl: Schema.NullOr(Schema.String),
  apiKey: Schema.NullOr(Schema.String),
  /** Where the tool reads its key from when it is not in a file (Codex's `env_key`). */
  apiKeyEnv: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  lastConfiguredAt: Schema.NullOr(Schema.String)
})
export type ToolSettingsView = typeof ToolSettingsView.Type

const HttpUrl = Schema.String.pipe(
  Schema.maxLength(2048, { message: () => "baseUrl must be at most 2048 characters" }),
  Schema.filter(
    (s) => {
      try {
        const u = new URL(s)
        return u.protocol === "http:" || u.protocol === "https:"
          ? true
          : `baseUrl must be http or https (got ${JSON.stringify(u.protocol)})`
      } catch {
        return `baseUrl must be an absolute http(s) URL (got ${JSON.stringify(s.slice(0, 100))})`
      }
    },
    { identifier: "BaseUrl" }
  )
)

const Secret = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{8,512}$/, { message: () => "apiKey must be 8 to 512 printable characters without spaces" })
)
const ModelId = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,300}$/, { message: () => "model must be 1 to 300 printable characters without spaces" })
)

/** `POST /api/cli-tools/{tool}-settings`. Missing fields keep what the tool has (baseUrl: this gateway). */
export const SaveToolSettings = Schema.Struct({
  baseUrl: Schema.optional(HttpUrl),
  apiKey: Schema.optional(Secret),
  keyId: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  model: Schema.optional(ModelId),
  /** Also turn off the tool's update checks, telemetry and other calls home. */
  offline: Schema.optional(Schema.Boolean)
}).annotations(strict)
export type SaveToolSettings = typeof SaveToolSettings.Type

export const WrittenFile = Schema.Struct({ path: Schema.String, backup: Schema.NullOr(Schema.String) })

export const SavedToolSettings = Schema.Struct({
  tool: Schema.String,
  written: Schema.Array(WrittenFile),
  /** Environment the user still has to set for the tool (values of secrets masked). */
  env: Schema.Record({ key: Schema.String, value: Schema.String }),
  settings: ToolSettingsView
})

/** The path `/api/cli-tools/{tool}-settings`. */
export const ToolSettingsPath = Schema.Struct({ tool: Schema.String })
export const ToolIdPath = Schema.Struct({ toolId: Schema.String })

// ACP agents

export const AcpAgentView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  binary: Schema.String,
  args: Schema.Array(Schema.String),
  version: Schema.NullOr(Schema.String),
  installed: Schema.Boolean,
  /** The protocol the agent speaks on stdio when spawned with `args`. */
  protocol: Schema.Literal("acp"),
  isCustom: Schema.Boolean
})
export type AcpAgentView = typeof AcpAgentView.Type

export const AcpAgentList = Schema.Struct({
  agents: Schema.Array(AcpAgentView),
  summary: Schema.Struct({
    total: Schema.Number,
    installed: Schema.Number,
    notFound: Schema.Number,
    builtIn: Schema.Number,
    custom: Schema.Number
  })
})
export type AcpAgentList = typeof AcpAgentList.Type

const AgentId = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    message: () => "id must be 1-64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
)
/** A command name on PATH or an absolute path; never a shell line. */
const Binary = Schema.String.pipe(
  Schema.pattern(/^(\/[^\0]{1,1023}|[A-Za-z0-9._+-]{1,128})$/, {
    message: () => "binary must be a command name (letters, digits, '.', '_', '+', '-') or an absolute path"
  })
)
const Arg = Schema.String.pipe(Schema.maxLength(1000, { message: () => "each arg must be at most 1000 characters" }))

export const AddAcpAgent = Schema.Struct({
  id: AgentId,
  name: Schema.String.pipe(
    Schema.minLength(1, { message: () => "name must not be empty" }),
    Schema.maxLength(200, { message: () => "name must be at most 200 characters" })
  ),
  binary: Binary,
  args: Schema.optional(Schema.Array(Arg).pipe(Schema.maxItems(32, { message: () => "args may list at most 32 arguments" })))
}).annotations(strict)
export type AddAcpAgent = typeof AddAcpAgent.Type

export const RefreshAcpAgents = Schema.Struct({ refresh: Schema.Literal(true) }).annotations(strict)

/** `POST /api/acp/agents`: add a custom agent, or `{ "refresh": true }` to re-run detection. */
export const AcpAgentsRequest = Schema.Union(RefreshAcpAgents, AddAcpAgent)

export const AcpDeleteQuery = Schema.Struct({ id: Schema.String })
