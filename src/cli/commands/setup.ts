import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { AdminPassword } from "../../domain/auth.js"
import { BaseUrl, ConnectionName, CreateConnection, ModelId } from "../../domain/connections.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { schemaOption } from "../schema.js"

export const setupOptions = {
  nonInteractive: Options.boolean("non-interactive").pipe(
    Options.withDescription("Never prompt; read flags, GATEWAY_API_KEY and DATA_DIR.")
  ),
  password: schemaOption("password", AdminPassword).pipe(
    Options.withDescription("Set the admin password (at least 8 characters)."),
    Options.optional
  ),
  addProvider: Options.boolean("add-provider").pipe(Options.withDescription("Add (or update) a provider connection.")),
  provider: schemaOption("provider", CreateConnection.fields.provider).pipe(
    Options.withDescription("Provider id from `gateway providers available`."),
    Options.optional
  ),
  providerName: schemaOption("provider-name", ConnectionName).pipe(
    Options.withDescription("Connection name, also its model prefix (default: the provider id)."),
    Options.optional
  ),
  providerBaseUrl: schemaOption("provider-base-url", BaseUrl).pipe(
    Options.withDescription("Base URL; includes /v1 for OpenAI-compatible upstreams."),
    Options.optional
  ),
  apiKey: Options.text("api-key").pipe(Options.withDescription("The provider's API key."), Options.optional),
  defaultModel: schemaOption("default-model", ModelId).pipe(Options.withDescription("Default model of the connection."), Options.optional),
  testProvider: Options.boolean("test-provider").pipe(Options.withDescription("Test the connection after saving it.")),
  json
}

export const setupCommand = Command.make(
  "setup",
  setupOptions,
  lazy(
    () => import("./setup.impl.js"),
    (m) => m.setup
  )
).pipe(Command.withDescription("Configure the gateway: admin password, API keys, provider connections."))
