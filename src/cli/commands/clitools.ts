import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import { CLI_TOOLS } from "../../management/clitools/catalog.js"
import { lazy, type Parsed } from "../handler.js"
import { gateway } from "../root.js"

/**
 * `gateway setup-<tool>`, `gateway launch <tool>` and `gateway launch-codex`
 * (docs/coding-tools.md). Names, options and descriptions are static; the implementation
 * (clitools.impl.ts, with the tool modules and the TOML library) loads only when one runs.
 */

const connection = {
  remote: Options.text("remote").pipe(Options.withDescription("The gateway's URL (default http://127.0.0.1:<port>)."), Options.optional),
  apiKey: Options.text("api-key").pipe(
    Options.withDescription("The gateway key the tool will use (default GATEWAY_API_KEY; make one with `gateway keys add --name <tool>`)."),
    Options.optional
  ),
  port: Options.integer("port").pipe(
    Options.withDescription("The gateway's port on this machine (default 20128, or PORT)."),
    Options.optional
  ),
  model: Options.text("model").pipe(
    Options.withDescription(
      "The default model (default: the tool's current one if the gateway serves it, else the catalog's first chat model)."
    ),
    Options.optional
  )
}

export interface ConnectionOptions {
  readonly remote: Option.Option<string>
  readonly apiKey: Option.Option<string>
  readonly port: Option.Option<number>
  readonly model: Option.Option<string>
}

const impl = () => import("./clitools.impl.js")

const setupOptions = {
  ...connection,
  dryRun: Options.boolean("dry-run").pipe(Options.withDescription("Print the files and where they would go; write nothing.")),
  yes: Options.boolean("yes").pipe(Options.withAlias("y"), Options.withDescription("Write without asking.")),
  offline: Options.boolean("offline").pipe(
    Options.withDescription("Also turn off the tool's update checks, telemetry and other calls home.")
  ),
  json: Options.boolean("json").pipe(Options.withDescription("Print JSON."))
}
type SetupOptions = typeof setupOptions

const setupCommand = (id: string, name: string) =>
  Command.make(
    `setup-${id}`,
    setupOptions,
    lazy(impl, (m) => (opts: Parsed<SetupOptions>) => Effect.flatMap(gateway, (root) => m.setupTool(id, opts, root.nonInteractive)))
  ).pipe(
    Command.withDescription(`Point ${name} at this gateway: write its own configuration (models from the live catalog), keeping a backup.`)
  )

const launchArgs = Args.repeated(Args.text({ name: "args" })).pipe(Args.withDescription("Arguments for the tool (after `--`)."))

const launchOptions = {
  ...connection,
  tool: Args.text({ name: "tool" }).pipe(Args.withDescription(`One of ${CLI_TOOLS.map((t) => t.id).join(", ")}.`)),
  args: launchArgs
}
type LaunchOptions = typeof launchOptions
const launchCodexOptions = { ...connection, args: launchArgs }
type LaunchCodexOptions = typeof launchCodexOptions

const launchCommand = Command.make(
  "launch",
  launchOptions,
  lazy(impl, (m) => (opts: Parsed<LaunchOptions>) => m.launchTool(opts.tool, opts, opts.args))
).pipe(
  Command.withDescription(
    "Start a coding tool pointed at this gateway (environment and arguments only; writes no configuration). Exits with the tool's exit code."
  )
)

const launchCodexCommand = Command.make(
  "launch-codex",
  launchCodexOptions,
  lazy(impl, (m) => (opts: Parsed<LaunchCodexOptions>) => m.launchTool("codex", opts, opts.args))
).pipe(Command.withDescription("Start Codex pointed at this gateway (same as `gateway launch codex`)."))

/** Every coding-tool command, for the root's subcommand list. */
export const codingToolCommands = [...CLI_TOOLS.map((t) => setupCommand(t.id, t.name)), launchCommand, launchCodexCommand] as const
