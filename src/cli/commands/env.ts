import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Schema from "effect/Schema"
import { ENV_NAME } from "../../platform/system/envFile.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { schemaArg } from "../schema.js"

const impl = () => import("./env.impl.js")

const EnvName = Schema.String.pipe(
  Schema.pattern(ENV_NAME, { message: () => "not a variable name (letters, digits and _, not starting with a digit)" })
)
const EnvValue = Schema.String.pipe(Schema.filter((v) => (/[\r\n]/.test(v) ? "must be one line" : true)))

export const configShowOptions = { json }
export const envShowOptions = { json }
export const envGetOptions = { name: Args.text({ name: "name" }) }
export const envSetOptions = { name: schemaArg("name", EnvName), value: schemaArg("value", EnvValue) }

const configShow = Command.make(
  "show",
  configShowOptions,
  lazy(
    () => import("./config.impl.js"),
    (m) => m.configShow
  )
).pipe(Command.withDescription("The effective process configuration, environment (secrets masked) and feature flags."))

export const configCommand = Command.make("config").pipe(
  Command.withDescription("Show the gateway's configuration."),
  Command.withSubcommands([configShow])
)

const envShow = Command.make(
  "show",
  envShowOptions,
  lazy(impl, (m) => m.envShow)
).pipe(Command.withDescription("The env file's variables, secrets masked."))
const envGet = Command.make(
  "get",
  envGetOptions,
  lazy(impl, (m) => m.envGet)
).pipe(Command.withDescription("One variable's value from the env file (unmasked: it is for scripts); exit 1 when it is not set."))
const envSet = Command.make(
  "set",
  envSetOptions,
  lazy(impl, (m) => m.envSet)
).pipe(Command.withDescription("Set a variable in the env file (atomic write; the previous file is snapshotted to DATA_DIR/env-backups)."))

export const envCommand = Command.make("env").pipe(
  Command.withDescription("The env file the gateway reads at start (GATEWAY_ENV_FILE, default ./.env)."),
  Command.withSubcommands([envShow, envGet, envSet])
)
