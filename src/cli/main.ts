// The workers' shared credential leaves the environment before the code below copies it or starts anything.
import "../kernel/clusterSecret.js"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { envFilePath } from "../platform/system/envFile.js"
import { rememberStartEnv } from "../platform/system/startEnv.js"
import type { Parsed } from "./handler.js"
import { cliLogger, commandFailed } from "./output.js"
import type { rootOptions } from "./root.js"
import { type ServeArgs, serveArgs } from "./serveArgs.js"

// The env file (GATEWAY_ENV_FILE or ./.env): values already in the environment win.
rememberStartEnv(process.env)
const envFile = envFilePath()
if (fs.existsSync(envFile)) {
  try {
    process.loadEnvFile(envFile)
  } catch (e) {
    console.error(`gateway: cannot read the env file ${envFile}: ${(e as Error).message}`)
  }
}

/**
 * What the parser gives the root command for a command line that only starts the server
 * (`serveArgs`: `gateway` alone, or with `--port`, `--host`, `--data-dir`, `--no-open`): those
 * options as given, every other at its default.
 */
const rootOf = (args: ServeArgs): Parsed<typeof rootOptions> => ({
  port: Option.fromNullable(args.port),
  host: Option.fromNullable(args.host),
  dataDir: Option.fromNullable(args.dataDir),
  noOpen: args.noOpen,
  workers: Option.none(),
  tlsCert: Option.none(),
  tlsKey: Option.none(),
  mcp: false,
  nonInteractive: false,
  json: false
})

/**
 * A command line that only starts the server serves: the root command's action with its options,
 * as the CLI would run it, without loading the command tree and its parser (@effect/cli, every
 * command's options, the parse: about a tenth of the server's start, docs/cli.md "Start-up: lazy
 * commands"). Its failure is printed as the CLI prints a command's (`error: <message>`, exit 1).
 * Any other command line, the CLI.
 */
const serveAlone = (args: ServeArgs) =>
  Effect.flatMap(
    Effect.promise(() => import("./commands/serve.impl.js")),
    ({ serve }) => serve(rootOf(args))
  ).pipe(Effect.catchAll((e) => commandFailed(e)))

const command = Effect.flatMap(
  Effect.promise(() => Promise.all([import("./app.js"), import("@effect/cli/CliConfig"), import("@effect/platform-node/NodeContext")])),
  ([{ cli }, CliConfig, NodeContext]) =>
    cli(process.argv).pipe(
      // Help lists the command's own options; the built-ins (--help, --version, --completions,
      // --log-level, --wizard) work everywhere and are documented once, in the root's description.
      Effect.provide(CliConfig.layer({ showBuiltIns: false })),
      // The commands' platform: files, paths, a terminal (the wizard's prompts), child processes.
      Effect.provide(NodeContext.layer)
    )
)

const serving = serveArgs(process.argv.slice(2))
// The server provides what it needs itself; NodeContext (files, paths, a terminal, child processes,
// workers) is the commands', and its modules are not evaluated at the server's start.
const main = serving !== undefined ? serveAlone(serving) : command
main.pipe(Effect.provide(cliLogger), NodeRuntime.runMain({ disablePrettyLogger: true }))
