import * as Command from "@effect/cli/Command"
import * as Schema from "effect/Schema"
import { lazy } from "../handler.js"
import { schemaArg } from "../schema.js"

export const completionOptions = { shell: schemaArg("shell", Schema.Literal("bash", "zsh", "fish")) }

/** `gateway completion bash|zsh|fish`: the shell completion script, generated from the command tree. */
export const completionCommand = Command.make(
  "completion",
  completionOptions,
  lazy(
    () => import("./completion.impl.js"),
    (m) => m.completion
  )
).pipe(Command.withDescription("Print a completion script for bash, zsh or fish (see docs/cli.md for where it goes)."))
