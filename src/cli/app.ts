import * as Command from "@effect/cli/Command"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { VERSION } from "../version.js"
import { a2aCommand } from "./commands/a2a.js"
import { cacheCommand, quotaCommand } from "./commands/accounting.js"
import { codingToolCommands } from "./commands/clitools.js"
import { backupCommand, restoreCommand } from "./commands/backup.js"
import { comboCommand } from "./commands/combos.js"
import { evalCommand } from "./commands/evals.js"
import { doctorCommand } from "./commands/doctor.js"
import { keysCommand } from "./commands/keys.js"
import { mcpCommand } from "./commands/mcp.js"
import { modelsCommand, providerCommand } from "./commands/models.js"
import { providersCommand } from "./commands/providers.js"
import { setupCommand } from "./commands/setup.js"
import { statusCommand } from "./commands/status.js"
import { configCommand, envCommand, healthCommand, logsCommand, resetEncryptedColumnsCommand, resetPasswordCommand } from "./commands/system.js"
import { overridesFrom } from "./local.js"
import { exitWith } from "./output.js"
import { gateway } from "./root.js"
import { serve } from "../system/serve.js"

/** With no subcommand, `gateway` serves. The tree is exported for the agent-skill generator (src/skills/cliSource.ts). */
export const command = gateway.pipe(
  Command.withHandler((root) =>
    Effect.gen(function* () {
      if (root.mcp) {
        const { serveStdio } = yield* Effect.promise(() => import("../mcp/stdio.js"))
        return yield* serveStdio(overridesFrom(root))
      }
      return yield* serve(overridesFrom(root))
    })
  ),
  Command.withDescription("Self-hosted AI gateway. Without a subcommand: start the server (port 20128)."),
  Command.withSubcommands([
    setupCommand,
    doctorCommand,
    providersCommand,
    keysCommand,
    statusCommand,
    comboCommand,
    quotaCommand,
    cacheCommand,
    backupCommand,
    restoreCommand,
    resetPasswordCommand,
    resetEncryptedColumnsCommand,
    configCommand,
    envCommand,
    healthCommand,
    logsCommand,
    modelsCommand,
    providerCommand,
    evalCommand,
    a2aCommand,
    mcpCommand,
    ...codingToolCommands
  ])
)

const run = Command.run(command, { name: "gateway", version: VERSION })

/** `-v` is the short form of `--version`. */
export const normaliseArgv = (argv: ReadonlyArray<string>): Array<string> =>
  argv.map((a, i) => (i >= 2 && a === "-v" ? "--version" : a))

/**
 * The whole CLI for an argv (`[node, script, ...args]`). Domain errors print `error: ...` and
 * set exit status 1; bad arguments (already explained by the parser) set 2.
 */
export const cli = (argv: ReadonlyArray<string>) =>
  run(normaliseArgv(argv)).pipe(
    Effect.catchIf(ValidationError.isValidationError, () => exitWith(2)),
    Effect.catchAll((e) =>
      Console.error(`error: ${(e as { message?: string }).message ?? String(e)}`).pipe(Effect.zipRight(exitWith(1)))
    )
  )
