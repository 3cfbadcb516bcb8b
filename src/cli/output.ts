import * as Console from "effect/Console"
import * as Effect from "effect/Effect"

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

export const orDash = (v: string | number | null | undefined): string =>
  v === null || v === undefined || v === "" ? "-" : String(v)
