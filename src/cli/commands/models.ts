import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { BaseUrl, ConnectionName, CreateConnection } from "../../domain/connections.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { schemaOption } from "../schema.js"

const impl = () => import("./models.impl.js")

export const modelsOptions = {
  ...remoteOptions,
  provider: Args.text({ name: "provider" }).pipe(Args.withDescription("A provider id, node id or connection name."), Args.optional),
  connected: Options.boolean("connected").pipe(Options.withDescription("Only what the connections serve now.")),
  json
}
export const providerListOptions = { ...remoteOptions, json }
export const providerAddOptions = {
  url: remoteOptions.url,
  // `--api-key` is the upstream's key here (the spec's flag); the admin key comes from GATEWAY_API_KEY or --admin-key.
  adminKey: Options.text("admin-key").pipe(Options.withDescription("Admin API key (default GATEWAY_API_KEY)."), Options.optional),
  provider: schemaOption("provider", CreateConnection.fields.provider).pipe(
    Options.withDescription("A provider id (`gateway providers available`) or a provider node id.")
  ),
  name: schemaOption("name", ConnectionName).pipe(
    Options.withDescription("Connection name, the model prefix (default: the provider id, or the node's prefix)."),
    Options.optional
  ),
  providerApiKey: Options.text("api-key").pipe(
    Options.withDescription("The upstream's API key (never printed; listed masked)."),
    Options.optional
  ),
  baseUrl: schemaOption("base-url", BaseUrl).pipe(
    Options.withDescription("The upstream's base URL, when not the provider's."),
    Options.optional
  ),
  json
}

/** `gateway models [provider]`: the running server's model catalog (`GET /api/models/catalog`). */
export const modelsCommand = Command.make(
  "models",
  modelsOptions,
  lazy(impl, (m) => m.models)
).pipe(Command.withDescription("Models of the running server's catalog (custom models and provider nodes included)."))

const list = Command.make(
  "list",
  providerListOptions,
  lazy(impl, (m) => m.providerList)
).pipe(Command.withDescription("Provider connections of the running server (keys masked)."))
const add = Command.make(
  "add",
  providerAddOptions,
  lazy(impl, (m) => m.providerAdd)
).pipe(Command.withDescription("Add a provider connection to the running server."))

/** `gateway provider list|add`: connections of a running server (`gateway providers` reads the local database). */
export const providerCommand = Command.make("provider").pipe(
  Command.withDescription("Provider connections of the running server: list, add."),
  Command.withSubcommands([list, add])
)
