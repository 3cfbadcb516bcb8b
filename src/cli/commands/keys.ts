import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { ApiKeyExpiry, ApiKeyName, ApiKeyScope, PerMinute, PerMinuteLimit } from "../../domain/keys.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { intFromText, schemaOption, schemaOptions } from "../schema.js"

const impl = () => import("./keys.impl.js")

/** `--rpm 0` / `--tpm 0` remove a limit (null in the API). */
const LimitOrZero = Schema.compose(
  Schema.transform(Schema.NumberFromString, Schema.NullOr(Schema.Number), { strict: true, decode: (n) => (n === 0 ? null : n), encode: (n) => n ?? 0 }),
  PerMinuteLimit
)

export const addOptions = {
  name: schemaOption("name", ApiKeyName).pipe(Options.withDescription("A label for the key."), Options.optional),
  scope: schemaOptions("scope", ApiKeyScope).pipe(
    Options.withDescription(
      "inference (default): model routes only; admin: also the management API; an MCP scope (read:usage, write:keys, ...): also those MCP tools (docs/mcp.md). Repeatable."
    )
  ),
  expiresAt: schemaOption("expires-at", ApiKeyExpiry).pipe(Options.withDescription("ISO 8601 expiry date."), Options.optional),
  rpm: schemaOption("rpm", intFromText(PerMinute)).pipe(Options.withDescription("Requests per minute this key may make."), Options.optional),
  tpm: schemaOption("tpm", intFromText(PerMinute)).pipe(Options.withDescription("Tokens (input plus output) per minute this key may use."), Options.optional),
  json
}
export const listOptions = { json }
export const removeOptions = { id: Args.text({ name: "id-or-name" }), json }
export const limitsOptions = {
  id: Args.text({ name: "id-or-name" }),
  rpm: schemaOption("rpm", LimitOrZero).pipe(Options.withDescription("Requests per minute (0 removes the limit)."), Options.optional),
  tpm: schemaOption("tpm", LimitOrZero).pipe(Options.withDescription("Tokens per minute (0 removes the limit)."), Options.optional),
  json
}

const add = Command.make(
  "add",
  addOptions,
  lazy(impl, (m) => m.add)
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
).pipe(Command.withDescription("Set or remove a key's inbound rate limits (requests and tokens per minute)."))

export const keysCommand = Command.make("keys").pipe(
  Command.withDescription("Manage gateway API keys in the local database."),
  Command.withSubcommands([add, list, limits, remove])
)
