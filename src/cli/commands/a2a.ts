import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"

/**
 * `gateway a2a status|card`: the running server's A2A endpoint, from its agent card. Only the
 * options live here; the work (HTTP, configuration) is loaded when the command runs, so the CLI
 * starts without it.
 */
const url = Options.text("url").pipe(Options.withDescription("Server address (default http://127.0.0.1:<port>)."), Options.optional)
const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

const run = () => import("./a2aRun.js")

const status = Command.make(
  "status",
  {
    url,
    apiKey: Options.text("api-key").pipe(
      Options.withDescription(
        "Gateway API key for the endpoint, when the gateway requires one (default GATEWAY_API_KEY); sent only to the server's own origin."
      ),
      Options.optional
    ),
    json
  },
  lazy(run, (m) => m.a2aStatus)
).pipe(
  Command.withDescription(
    "Is the A2A endpoint answering? Reads the agent card, then asks the endpoint it names for list-capabilities; exits 1 when either fails."
  )
)

const card = Command.make(
  "card",
  { url, json },
  lazy(run, (m) => m.a2aCard)
).pipe(
  Command.withDescription(
    "Print the running server's A2A agent card (/.well-known/agent-card.json): a summary, or the card itself with --json."
  )
)

export const a2aCommand = Command.make("a2a").pipe(
  Command.withDescription("The gateway as an A2A agent: its JSON-RPC endpoint (POST /a2a) and agent card."),
  Command.withSubcommands([status, card])
)
