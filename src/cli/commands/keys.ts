import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ApiKeys } from "../../auth/ApiKeys.js"
import { API_KEY_SCOPES, CreateApiKey, UpdateApiKey } from "../../domain/keys.js"
import { decodeOrBadRequest } from "../../domain/parse.js"
import { withLocalGateway } from "../local.js"
import { orDash, printJson, table } from "../output.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

const add = Command.make(
  "add",
  {
    name: Options.text("name").pipe(Options.withDescription("A label for the key."), Options.optional),
    scope: Options.choice("scope", API_KEY_SCOPES).pipe(
      Options.withDescription("inference (default): model routes only; admin: also the management API; an MCP scope (read:usage, write:keys, ...): also those MCP tools (docs/mcp.md)."),
      Options.repeated
    ),
    expiresAt: Options.text("expires-at").pipe(Options.withDescription("ISO 8601 expiry date."), Options.optional),
    rpm: Options.integer("rpm").pipe(Options.withDescription("Requests per minute this key may make."), Options.optional),
    tpm: Options.integer("tpm").pipe(Options.withDescription("Tokens (input plus output) per minute this key may use."), Options.optional),
    json
  },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const input = yield* decodeOrBadRequest(CreateApiKey)({
          name: Option.getOrUndefined(opts.name),
          scopes: opts.scope.length > 0 ? opts.scope : undefined,
          expiresAt: Option.getOrUndefined(opts.expiresAt),
          rpm: Option.getOrUndefined(opts.rpm),
          tpm: Option.getOrUndefined(opts.tpm)
        })
        const created = yield* (yield* ApiKeys).create(input, { actor: "cli" })
        if (opts.json) return yield* printJson(created)
        yield* Console.log(created.secret)
        yield* Console.error(
          `created ${created.id} (${created.name}, scopes ${created.scopes.join(", ")}). The key is shown only now; store it safely.`
        )
      })
    )
).pipe(Command.withDescription("Create an API key; the key is printed once."))

const list = Command.make("list", { json }, (opts) =>
  withLocalGateway(
    Effect.gen(function* () {
      const keys = yield* (yield* ApiKeys).list
      if (opts.json) return yield* printJson({ keys })
      if (keys.length === 0) return yield* Console.log("no API keys yet: create one with `gateway keys add`")
      yield* Console.log(
        table(
          ["ID", "NAME", "KEY", "SCOPES", "RPM", "TPM", "CREATED", "EXPIRES", "LAST USED"],
          keys.map((k) => [k.id, k.name, k.key, k.scopes.join(","), orDash(k.rpm === null ? null : String(k.rpm)), orDash(k.tpm === null ? null : String(k.tpm)), k.createdAt, orDash(k.expiresAt), orDash(k.lastUsedAt)])
        )
      )
    })
  )
).pipe(Command.withDescription("List API keys (masked)."))

const remove = Command.make(
  "remove",
  { id: Args.text({ name: "id-or-name" }), json },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const removed = yield* (yield* ApiKeys).remove(opts.id, "cli")
        if (opts.json) return yield* printJson({ removed })
        yield* Console.log(`removed ${removed.id} (${removed.name})`)
      })
    )
).pipe(Command.withDescription("Remove an API key by id or name."))

/** `--rpm 0` / `--tpm 0` remove a limit; an option left out keeps it. */
const limitOption = (o: Option.Option<number>) => Option.match(o, { onNone: () => undefined, onSome: (n) => (n === 0 ? null : n) })

const limits = Command.make(
  "limits",
  {
    id: Args.text({ name: "id-or-name" }),
    rpm: Options.integer("rpm").pipe(Options.withDescription("Requests per minute (0 removes the limit)."), Options.optional),
    tpm: Options.integer("tpm").pipe(Options.withDescription("Tokens per minute (0 removes the limit)."), Options.optional),
    json
  },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const input = yield* decodeOrBadRequest(UpdateApiKey)({ rpm: limitOption(opts.rpm), tpm: limitOption(opts.tpm) })
        const updated = yield* (yield* ApiKeys).update(opts.id, input, "cli")
        if (opts.json) return yield* printJson(updated)
        yield* Console.log(`${updated.id} (${updated.name}): rpm ${updated.rpm ?? "none"}, tpm ${updated.tpm ?? "none"}`)
      })
    )
).pipe(Command.withDescription("Set or remove a key's inbound rate limits (requests and tokens per minute)."))

export const keysCommand = Command.make("keys").pipe(
  Command.withDescription("Manage gateway API keys in the local database."),
  Command.withSubcommands([add, list, limits, remove])
)
