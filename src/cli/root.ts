import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"

/**
 * The root command `gateway`. Its options are shared by the subcommands (`gateway --port 3000
 * status`). Its own action, with no subcommand, starts the server.
 */
export const rootOptions = {
  port: Options.integer("port").pipe(Options.withDescription("Port to listen on (default 20128, or PORT)."), Options.optional),
  host: Options.text("host").pipe(
    Options.withDescription("Interface to bind (default 127.0.0.1, or HOST). A non-loopback address exposes the gateway to the network; inference there needs a gateway key unless GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true."),
    Options.optional
  ),
  dataDir: Options.text("data-dir").pipe(Options.withDescription("Where the database lives (default ./data, or DATA_DIR)."), Options.optional),
  noOpen: Options.boolean("no-open").pipe(Options.withDescription("Do not open a browser (accepted for compatibility; the gateway has no dashboard to open).")),
  mcp: Options.boolean("mcp").pipe(Options.withDescription("Serve MCP over stdio instead of HTTP.")),
  nonInteractive: Options.boolean("non-interactive").pipe(Options.withDescription("Never prompt."))
}

export const gateway = Command.make("gateway", rootOptions)
