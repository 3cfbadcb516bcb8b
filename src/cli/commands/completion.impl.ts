import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type { Parsed } from "../handler.js"
import type { completionOptions } from "./completion.js"

/** The script @effect/cli generates from the whole command tree (what `--completions <shell>` prints). */
export const completion = (opts: Parsed<typeof completionOptions>): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { command } = yield* Effect.promise(() => import("../app.js"))
    const generate = { bash: Command.getBashCompletions, zsh: Command.getZshCompletions, fish: Command.getFishCompletions }[opts.shell]
    const lines = yield* generate(command, "gateway")
    yield* Console.log(lines.join("\n"))
  })
