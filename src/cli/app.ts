import * as Command from "@effect/cli/Command"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Effect from "effect/Effect"
import { VERSION } from "../kernel/version.js"
import { a2aCommand } from "./commands/a2a.js"
import { cacheCommand, quotaCommand } from "./commands/accounting.js"
import { codingToolCommands } from "./commands/clitools.js"
import { backupCommand, restoreCommand } from "./commands/backup.js"
import { comboCommand } from "./commands/combos.js"
import { completionCommand } from "./commands/completion.js"
import { compressionCommand } from "./commands/compression.js"
import { contextCommand } from "./commands/context.js"
import { dbCommand } from "./commands/db.js"
import { doctorCommand } from "./commands/doctor.js"
import { configCommand, envCommand } from "./commands/env.js"
import { evalCommand } from "./commands/evals.js"
import { replayCommand } from "./commands/replay.js"
import { shadowCommand } from "./commands/shadow.js"
import { inspectCommand } from "./commands/inspect.js"
import { keysCommand } from "./commands/keys.js"
import { loginCommand, logoutCommand } from "./commands/login.js"
import { logsCommand } from "./commands/logs.js"
import { mcpCommand } from "./commands/mcp.js"
import { modelsCommand, providerCommand } from "./commands/models.js"
import { providersCommand } from "./commands/providers.js"
import { resetEncryptedColumnsCommand, resetPasswordCommand } from "./commands/recovery.js"
import { setupCommand } from "./commands/setup.js"
import { healthCommand, statusCommand } from "./commands/status.js"
import { teamsCommand, usersCommand } from "./commands/teams.js"
import { testCommand } from "./commands/test.js"
import { tunnelCommand } from "./commands/tunnel.js"
import { pluginsCommand } from "./commands/plugins.js"
import { updateCommand } from "./commands/update.js"
import { usageCommand } from "./commands/usage.js"
import { lazy } from "./handler.js"
import { commandFailed, printError } from "./output.js"
import { gateway } from "./root.js"
import { describeValidationError, withParserConsole } from "./usage.js"

/**
 * The command tree. Every module imported here is light (see handler.ts): what a command does
 * is loaded when it runs.
 */
export const subcommands = [
  setupCommand,
  doctorCommand,
  providersCommand,
  keysCommand,
  usersCommand,
  teamsCommand,
  loginCommand,
  logoutCommand,
  statusCommand,
  comboCommand,
  compressionCommand,
  contextCommand,
  quotaCommand,
  usageCommand,
  cacheCommand,
  backupCommand,
  restoreCommand,
  dbCommand,
  resetPasswordCommand,
  resetEncryptedColumnsCommand,
  configCommand,
  envCommand,
  healthCommand,
  logsCommand,
  inspectCommand,
  modelsCommand,
  providerCommand,
  evalCommand,
  shadowCommand,
  replayCommand,
  tunnelCommand,
  pluginsCommand,
  testCommand,
  updateCommand,
  completionCommand,
  a2aCommand,
  mcpCommand,
  ...codingToolCommands
] as const

/** With no subcommand, `gateway` serves. */
export const command = gateway.pipe(
  Command.withHandler(
    lazy(
      () => import("./commands/serve.impl.js"),
      (m) => m.serve
    )
  ),
  Command.withDescription(
    "Self-hosted AI gateway. Without a subcommand: start the server (port 20128). Every command takes --help (-h) and --version (-v), and --json where its output is data. Exit status: 0 done, 1 failed, 2 bad command line."
  ),
  Command.withSubcommands(subcommands)
)

const run = Command.run(command, { name: "gateway", version: VERSION })

/** `-v` is the short form of `--version`. */
export const normaliseArgv = (argv: ReadonlyArray<string>): Array<string> => argv.map((a, i) => (i >= 2 && a === "-v" ? "--version" : a))

/**
 * The whole CLI for an argv (`[node, script, ...args]`). Exit status: 0 done; 1 the command
 * failed (`error: <message>`); 2 the command line is wrong (`error: <option>: <problem>`, one
 * line, the same shape for every command), before anything ran.
 */
export const cli = (argv: ReadonlyArray<string>) => {
  const args = normaliseArgv(argv)
  const words = args.slice(2)
  const json = words.includes("--json")
  return withParserConsole(run(args), json).pipe(
    Effect.catchIf(ValidationError.isValidationError, (e) => printError(2, describeValidationError(e, words, command, subcommands), json)),
    Effect.catchAll((e) => commandFailed(e, json))
  )
}
