import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import type * as ValidationError from "@effect/cli/ValidationError"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as HashMap from "effect/HashMap"
import { inHandler } from "./handler.js"
import { ANSI, colourOn } from "./output.js"

/**
 * Usage errors, one shape for every command: `error: <option or argument>: <problem>` on
 * stderr, exit 2. @effect/cli prints its own multi-line help text for a parse error; the CLI
 * runs the parser with `parserConsole`, which drops that, and prints this line instead.
 */

type AnyCommand = Command.Command<any, any, any, any>

const text = (doc: HelpDoc.HelpDoc): string =>
  HelpDoc.toAnsiText(doc)
    .replace(ANSI, "")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .join("; ")

const childrenOf = (command: AnyCommand): Array<string> => [...HashMap.keys(Command.getSubcommands(command))].sort()
const nameOf = (command: AnyCommand): string => [...Command.getNames(command)][0] ?? ""

/** Root options that take a value: the word after one is not a command. */
const ROOT_VALUE_OPTIONS = new Set(["--port", "--host", "--data-dir"])

/** `gateway frob`, `gateway keys frob`, `gateway keys`: which group, which word, what it offers. */
const unknownCommand = (args: ReadonlyArray<string>, root: AnyCommand, commands: ReadonlyArray<AnyCommand>): string => {
  const words = args.map((a, i) => ({ a, i })).filter(({ a, i }) => !a.startsWith("-") && !ROOT_VALUE_OPTIONS.has(args[i - 1] ?? ""))
  const group = commands.find((c) => nameOf(c) === words[0]?.a && childrenOf(c).length > 0)
  const [subject, offered, word] = group
    ? [nameOf(group), childrenOf(group), args[words[0]!.i + 1]]
    : ["gateway", childrenOf(root), words[0]?.a]
  const problem = word !== undefined && !word.startsWith("-") ? `unknown command '${word}'` : "a command is missing"
  return `${subject}: ${problem} (one of: ${offered.join(", ")})`
}

/**
 * One line for a parse error of `args` (the words after `gateway`), in the `<subject>:
 * <problem>` shape; schema failures already read so (src/cli/schema.ts).
 */
export const describeValidationError = (
  e: ValidationError.ValidationError,
  args: ReadonlyArray<string>,
  root: AnyCommand,
  commands: ReadonlyArray<AnyCommand>
): string => {
  if (e._tag === "CommandMismatch" || e._tag === "MissingSubcommand") return unknownCommand(args, root, commands)
  if (e._tag === "MultipleValuesDetected") return `${e.values.join(" ")}: one value was expected`
  const message = text(e.error)
  let m: RegExpExecArray | null
  if ((m = /^Expected to find option: '(.+)'$/.exec(message))) return `${m[1]}: is missing`
  if ((m = /^Missing argument (<.+?>)/.exec(message))) return `${m[1]}: is missing`
  if ((m = /^Received unknown argument: '(.+)'$/.exec(message)))
    return `${m[1]}: ${m[1]!.startsWith("-") ? "unknown option" : "unexpected argument"}`
  if ((m = /^The flag '(.+)' is not recognized\. Did you mean '(.+)'\?$/.exec(message)))
    return `${m[1]}: unknown option (did you mean ${m[2]}?)`
  if ((m = /^More than one reference to option '(.+)' detected$/.exec(message))) return `${m[1]}: given more than once`
  return message
}

/**
 * The Console the parser runs with: its own error output is dropped (the CLI prints one line
 * instead), and its help text loses its colours unless stdout is a terminal that wants them.
 * A handler's output (`inHandler`) goes through untouched.
 */
export const parserConsole = (original: Console.Console, json: boolean): Console.Console => ({
  ...original,
  log: (...args: ReadonlyArray<any>) =>
    Effect.flatMap(FiberRef.get(inHandler), (own) =>
      own || colourOn(process.stdout, json)
        ? original.log(...args)
        : original.log(...args.map((a) => (typeof a === "string" ? a.replace(ANSI, "") : a)))
    ),
  error: (...args: ReadonlyArray<any>) => Effect.flatMap(FiberRef.get(inHandler), (own) => (own ? original.error(...args) : Effect.void))
})

/** Runs `effect` (the parser and, inside it, the handler) with `parserConsole`. */
export const withParserConsole = <A, E, R>(effect: Effect.Effect<A, E, R>, json: boolean): Effect.Effect<A, E, R> =>
  Console.consoleWith((original) => Console.withConsole(effect, parserConsole(original, json)))
