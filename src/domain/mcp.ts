import * as Schema from "effect/Schema"
import { HistoryQuery } from "./usage.js"
import { oneOf, strict } from "./parse.js"

/**
 * The MCP server's contract (docs/mcp.md): the scopes its tools are grouped under, the
 * arguments of the tools that have their own, and the management views of its state.
 */

/** Every scope an MCP tool needs, `read:` for listings, `write:` for changes, `run:skills` for running a skill's scripts. */
export const MCP_SCOPES = [
  "read:catalog",
  "read:providers",
  "write:providers",
  "read:keys",
  "write:keys",
  "read:combos",
  "write:combos",
  "read:usage",
  "read:health",
  "run:skills"
] as const
export const McpScope = Schema.Literal(...MCP_SCOPES)
export type McpScope = typeof McpScope.Type
export const isMcpScope = (s: string): s is McpScope => (MCP_SCOPES as ReadonlyArray<string>).includes(s)

/** What a caller without credentials may do: read the agent-skill catalog, public over REST too. */
export const ANONYMOUS_SCOPES: ReadonlyArray<McpScope> = ["read:catalog"]

const described = <A, I>(schema: Schema.Schema<A, I>, description: string): Schema.Schema<A, I> => schema.annotations({ description })

/** A string with something in it besides spaces; the tools trim it. (No Trim transformation: it would hide the description from the JSON
 * Schema.) */
const NonBlank = (what: string, description: string) =>
  described(Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || `${what} must not be empty`)), description)

export const SkillsListArgs = Schema.Struct({
  category: Schema.optional(
    oneOf(["api", "cli"], "category").annotations({
      description: "api: REST API skills; cli: command-line skills.",
      jsonSchema: { enum: ["api", "cli"] }
    })
  ),
  area: Schema.optional(
    described(Schema.String, "The skill's area: its id without the gw- prefix (providers, budget, ...), or the cli- id itself.")
  )
}).annotations(strict)

export const SkillsGetArgs = Schema.Struct({
  id: NonBlank("id", "A skill id such as gw-providers or cli-keys.")
}).annotations(strict)

export const SkillsRunArgs = Schema.Struct({
  skill: NonBlank("skill", "The skill's id (gateway_agent_skills_list names them; an entry's scripts lists what it can run)."),
  script: NonBlank("script", "A file name from the skill's scripts, such as report.mjs."),
  arguments: Schema.optionalWith(
    described(Schema.Array(Schema.String).pipe(Schema.maxItems(256)), "The script's arguments, strings (process.argv from index 2)."),
    {
      default: () => []
    }
  ),
  stdin: Schema.optionalWith(
    described(Schema.String.pipe(Schema.maxLength(1024 * 1024)), "Its standard input, as one string (process.stdin in the script)."),
    {
      default: () => ""
    }
  )
}).annotations(strict)

export const NoArgs = Schema.Struct({}).annotations(strict)

const IdOrName = (what: string) => NonBlank(what, `The ${what}'s id or name.`)

export const ProviderTestArgs = Schema.Struct({ provider: IdOrName("provider connection") }).annotations(strict)

export const KeyRevokeArgs = Schema.Struct({ key: IdOrName("API key") }).annotations(strict)

export const ComboSwitchArgs = Schema.Struct({
  combo: IdOrName("combo"),
  model: NonBlank("model", "The target to make primary, <provider>/<model>; added in front when the combo does not have it."),
  weight: Schema.optional(described(Schema.Number, "Its weight (weighted strategies)."))
}).annotations(strict)

export const UsageSummaryArgs = Schema.Struct({
  from: HistoryQuery.fields.from.annotations({ description: "Start, ISO 8601 or epoch milliseconds (default: 24 hours ago)." }),
  to: HistoryQuery.fields.to,
  groupBy: HistoryQuery.fields.groupBy.annotations({
    description: "One of hour, day, model, provider, apiKey, connection, endpoint, team, user (a key counts for its owner: docs/teams.md)."
  }),
  apiKeyId: HistoryQuery.fields.apiKeyId,
  provider: HistoryQuery.fields.provider,
  model: HistoryQuery.fields.model
}).annotations(strict)

export const McpTransport = Schema.Struct({
  name: Schema.Literal("streamable-http", "stdio"),
  /** Where: the HTTP path, or the command that serves stdio. */
  endpoint: Schema.String
})

/** `GET /api/mcp/status`. */
export const McpStatus = Schema.Struct({
  transports: Schema.Array(McpTransport),
  /** Every protocol revision the server negotiates, newest first. */
  protocolVersions: Schema.Array(Schema.String),
  latestProtocolVersion: Schema.String,
  tools: Schema.Number,
  scopes: Schema.Array(McpScope),
  sessionsActive: Schema.Number,
  startedAt: Schema.String,
  restartedAt: Schema.NullOr(Schema.String),
  enforceScopes: Schema.Boolean,
  compressDescriptions: Schema.Boolean
})
export type McpStatus = typeof McpStatus.Type

/** `POST /api/mcp/restart`. */
export const McpRestartResult = Schema.Struct({
  closedSessions: Schema.Number,
  tools: Schema.Number,
  restartedAt: Schema.String
})
export type McpRestartResult = typeof McpRestartResult.Type
