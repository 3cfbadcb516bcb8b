import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { ApiKeyExpiry, ApiKeyName, ApiKeyScope, KeyOwnerRef, PerMinute, PerMinuteLimit } from "../../domain/keys.js"
import { McpKeyAllow } from "../../domain/mcpServers.js"
import { MaxQueueWaitSeconds } from "../../domain/quotaQueue.js"
import { ShadowTarget } from "../../domain/shadow.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { intFromText, schemaOption, schemaOptions } from "../schema.js"

const impl = () => import("./keys.impl.js")

/** `--rpm 0` / `--tpm 0` remove a limit (null in the API). */
const LimitOrZero = Schema.compose(
  Schema.transform(Schema.NumberFromString, Schema.NullOr(Schema.Number), {
    strict: true,
    decode: (n) => (n === 0 ? null : n),
    encode: (n) => n ?? 0
  }),
  PerMinuteLimit
)

/** `--target <model>=<sampleRate>`: a shadow target, checked as the API checks it. */
const ShadowFlag = Schema.compose(
  Schema.transformOrFail(Schema.String, Schema.Struct({ model: Schema.String, sampleRate: Schema.Number }), {
    strict: true,
    decode: (s, _, ast) => {
      const at = s.lastIndexOf("=")
      const rate = Number(s.slice(at + 1))
      return at <= 0 || s.slice(at + 1).trim() === "" || Number.isNaN(rate)
        ? ParseResult.fail(
            new ParseResult.Type(ast, s, `expected <model>=<sampleRate>, e.g. anthropic/claude-sonnet-4=0.1 (got ${JSON.stringify(s)})`)
          )
        : ParseResult.succeed({ model: s.slice(0, at), sampleRate: rate })
    },
    encode: (t) => ParseResult.succeed(`${t.model}=${t.sampleRate}`)
  }),
  ShadowTarget
)

/** `--max-queue-wait <seconds>` (0: off), as `maxQueueWaitSeconds` of the keys API. */
const maxQueueWait = schemaOption("max-queue-wait", intFromText(MaxQueueWaitSeconds)).pipe(
  Options.withDescription(
    "Longest wait, in seconds, for an upstream's quota to reset when every target is out of it; 0: off (docs/resilience.md)."
  ),
  Options.optional
)

export const addOptions = {
  name: schemaOption("name", ApiKeyName).pipe(Options.withDescription("A label for the key."), Options.optional),
  scope: schemaOptions("scope", ApiKeyScope).pipe(
    Options.withDescription(
      "inference (default): model routes only; admin: also the management API; an MCP scope (read:usage, write:keys, ...): also those MCP tools (docs/mcp.md). Repeatable."
    )
  ),
  expiresAt: schemaOption("expires-at", ApiKeyExpiry).pipe(Options.withDescription("ISO 8601 expiry date."), Options.optional),
  rpm: schemaOption("rpm", intFromText(PerMinute)).pipe(
    Options.withDescription("Requests per minute this key may make."),
    Options.optional
  ),
  tpm: schemaOption("tpm", intFromText(PerMinute)).pipe(
    Options.withDescription("Tokens (input plus output) per minute this key may use."),
    Options.optional
  ),
  user: schemaOption("user", KeyOwnerRef).pipe(
    Options.withDescription("The user who owns the key: an id (usr_…) or email. Default: the first admin (docs/teams.md)."),
    Options.optional
  ),
  team: schemaOption("team", KeyOwnerRef).pipe(
    Options.withDescription("The team that owns the key instead: an id (team_…) or name."),
    Options.optional
  ),
  maxQueueWait,
  mcpAllow: schemaOptions("mcp-allow", McpKeyAllow.fields.allow.value).pipe(
    Options.withDescription(
      "What of the MCP servers behind the gateway this key may use: <server>, <server>__<tool>, <server>__* or *; repeat. None: every allowed tool (docs/mcp.md)."
    )
  ),
  /** With --url: created by the running gateway (POST /api/keys) for the caller, e.g. the user `gateway login` signed in (docs/sso.md). */
  url: remoteOptions.url.pipe(
    Options.withDescription(
      "Create the key at this running gateway (POST /api/keys) instead of the local database: owned by the caller, the user `gateway login` signed in or the --api-key's owner."
    )
  ),
  apiKey: remoteOptions.apiKey,
  json
}
export const listOptions = { json }
export const shadowOptions = {
  id: Args.text({ name: "id-or-name" }),
  target: schemaOptions("target", ShadowFlag).pipe(
    Options.withDescription(
      "A shadow target for this key's requests, <model>=<sampleRate> (docs/shadow.md); repeat. The given targets replace the key's."
    )
  ),
  none: Options.boolean("none").pipe(Options.withDescription("Remove the key's shadow targets.")),
  json
}
export const removeOptions = { id: Args.text({ name: "id-or-name" }), json }
export const limitsOptions = {
  id: Args.text({ name: "id-or-name" }),
  rpm: schemaOption("rpm", LimitOrZero).pipe(Options.withDescription("Requests per minute (0 removes the limit)."), Options.optional),
  tpm: schemaOption("tpm", LimitOrZero).pipe(Options.withDescription("Tokens per minute (0 removes the limit)."), Options.optional),
  maxQueueWait,
  json
}

const add = Command.make(
  "add",
  addOptions,
  // With --url the running gateway makes the key (docs/sso.md, "The CLI"); else the local database.
  lazy(impl, (m) => (opts: Parameters<typeof m.add>[0]) => (Option.isSome(opts.url) ? m.addRemote(opts) : m.add(opts)))
).pipe(Command.withDescription("Create an API key; the key is printed once."))
const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription("List API keys (masked)."))
const remove = Command.make(
  "remove",
  removeOptions,
  lazy(impl, (m) => m.remove)
).pipe(Command.withDescription("Remove an API key by id or name."))
const limits = Command.make(
  "limits",
  limitsOptions,
  lazy(impl, (m) => m.limits)
).pipe(Command.withDescription("Set or remove a key's inbound rate limits (requests and tokens per minute) and its quota wait."))

const shadow = Command.make(
  "shadow",
  shadowOptions,
  lazy(impl, (m) => m.shadow)
).pipe(Command.withDescription("Show, set or remove the shadow targets of a key's requests (docs/shadow.md)."))

export const keysCommand = Command.make("keys").pipe(
  Command.withDescription("Manage gateway API keys in the local database."),
  Command.withSubcommands([add, list, limits, shadow, remove])
)
