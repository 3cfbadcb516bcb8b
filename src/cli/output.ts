import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Logging from "../services/observability/Logging.js"

/** Prints rows as an aligned plain-text table (no colours, so it pipes cleanly). */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd()
  return [line(headers), ...rows.map(line)].join("\n")
}

export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** Ends the command with a non-zero exit status without an error trace. */
export const exitWith = (code: number) =>
  Effect.sync(() => {
    process.exitCode = code
  })

/** `error: <line>` on stderr (the `error:` red on a terminal) and exit status `code`. */
export const printError = (code: number, line: string, json = false) =>
  Console.error(`${red("error:", colourOn(process.stderr, json))} ${line}`).pipe(Effect.zipRight(exitWith(code)))

/** A command that failed: its message, exit status 2 for a usage error and 1 for any other failure. */
export const commandFailed = (e: unknown, json = false) => {
  const error = e as { readonly _tag?: string; readonly message?: string }
  return printError(error._tag === "UsageError" ? 2 : 1, error.message ?? String(e), json)
}

export const orDash = (v: string | number | null | undefined): string => (v === null || v === undefined || v === "" ? "-" : String(v))

/**
 * Colours only on a terminal: never when the stream is a pipe or a file, with `NO_COLOR` set
 * (no-color.org), `TERM=dumb`, or JSON output.
 */
export const colourOn = (stream: { readonly isTTY?: boolean }, json = false): boolean =>
  stream.isTTY === true && !json && !process.env.NO_COLOR && process.env.TERM !== "dumb"

const sgr = (code: number) => (text: string, on: boolean) => (on ? `\x1b[${code}m${text}\x1b[0m` : text)
export const red = sgr(31)
export const green = sgr(32)
export const yellow = sgr(33)
export const bold = sgr(1)

/** ANSI escape sequences (colours, styles) in a text. */
export const ANSI = /\x1b\[[0-9;]*m/g

/** Logs of CLI commands go to stderr, warnings and above, so that stdout stays clean output. */
export const cliLogger = Logging.layer(process.env.LOG_FORMAT === "json" ? "json" : "pretty", Logging.levelFromEnv(LogLevel.Warning), {
  stderr: true
})
