import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type { Parsed } from "../handler.js"
import type { completionOptions } from "./completion.js"

/**
 * @effect/cli 0.77's bash script walks the words with `case "${cmd},${word}"`, where `cmd` is
 * the path so far joined by `__` (`gateway__keys`), but writes its patterns as the whole path
 * joined by `,` with `-` turned into `__` (`gateway,keys,add`, `gateway,reset__password`): only
 * the first level of plain names ever matches. The patterns are rewritten to what the walk
 * compares (`gateway__keys,add`, `gateway,reset-password`).
 */
export const fixBashWalk = (lines: ReadonlyArray<string>): Array<string> =>
  lines.map((line) => {
    const m = /^(\s+)([A-Za-z0-9_]+(?:,[A-Za-z0-9_]+)+)\)$/.exec(line)
    if (!m) return line
    const parts = m[2]!.split(",")
    return `${m[1]}${parts.slice(0, -1).join("__")},${parts.at(-1)!.replaceAll("__", "-")})`
  })

/** The script @effect/cli generates from the whole command tree (what `--completions <shell>` prints). */
export const completion = (opts: Parsed<typeof completionOptions>): Effect.Effect<void> =>
  Effect.gen(function* () {
    const { command } = yield* Effect.promise(() => import("../app.js"))
    const lines =
      opts.shell === "bash"
        ? fixBashWalk(yield* Command.getBashCompletions(command, "gateway"))
        : yield* (opts.shell === "zsh" ? Command.getZshCompletions : Command.getFishCompletions)(command, "gateway")
    yield* Console.log(lines.join("\n"))
  })
