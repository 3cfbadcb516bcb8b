import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { AppConfig } from "../platform/config/AppConfig.js"
import { overridesFrom } from "./overrides.js"
import { intFromText, schemaOption } from "./schema.js"

/** A TCP port; 0 lets the system pick a free one (tests). */
export const Port = Schema.Int.pipe(Schema.between(0, 65535, { message: () => "must be an integer from 0 to 65535" }))

/**
 * The root command `gateway`. Its options are shared by the subcommands (`gateway --port 3000
 * status`). Its own action, with no subcommand, starts the server.
 */
export const rootOptions = {
  port: schemaOption("port", intFromText(Port)).pipe(
    Options.withDescription("Port to listen on (default 20128, or PORT)."),
    Options.optional
  ),
  host: Options.text("host").pipe(
    Options.withDescription(
      "Interface to bind (default 127.0.0.1, or HOST). A non-loopback address exposes the gateway to the network; inference there needs a gateway key unless GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true."
    ),
    Options.optional
  ),
  dataDir: Options.text("data-dir").pipe(
    Options.withDescription("Where the database lives (default ./data, or DATA_DIR)."),
    Options.optional
  ),
  noOpen: Options.boolean("no-open").pipe(
    Options.withDescription("Do not open a browser (accepted for compatibility; the gateway has no dashboard to open).")
  ),
  workers: Options.text("workers").pipe(
    Options.withDescription(
      "Server processes sharing the port: a whole number from 1 to 64, or `auto` (one per core). Default 1. See docs/scale-out.md."
    ),
    Options.optional
  ),
  tlsCert: Options.file("tls-cert").pipe(
    Options.withDescription("Serve HTTPS with this PEM certificate (chain); with --tls-key (or GATEWAY_TLS_CERT). See docs/realtime.md."),
    Options.optional
  ),
  tlsKey: Options.file("tls-key").pipe(
    Options.withDescription("The PEM private key of --tls-cert (or GATEWAY_TLS_KEY)."),
    Options.optional
  ),
  mcp: Options.boolean("mcp").pipe(Options.withDescription("Serve MCP over stdio instead of HTTP.")),
  nonInteractive: Options.boolean("non-interactive").pipe(Options.withDescription("Never prompt.")),
  json: Options.boolean("json").pipe(Options.withDescription("Print JSON: `gateway --json <command>` is `gateway <command> --json`."))
}

export const gateway = Command.make("gateway", rootOptions)

export { overridesFrom }

/** AppConfig overrides for a subcommand: the environment, overridden by the root options. */
export const cliConfig = Effect.map(gateway, overridesFrom)

/** The effective AppConfig (environment and root options), without building anything. */
export const appConfig = Effect.gen(function* () {
  return yield* Effect.provide(AppConfig, AppConfig.layer(yield* cliConfig))
})
