/**
 * rtk: shrinks tool and command output with generic steps and one per-command filter; pure, deterministic, never drops
 * an error line in a generic step (docs/compression.md#rtk-tool-and-command-output).
 */
import * as Schema from "effect/Schema"
import { strict } from "../../../domain/parse.js"
import type { EngineContext, Segment, TextEngine } from "../types.js"
import { BUILTIN_FILTER_IDS, BUILTIN_FILTERS } from "./rtk/builtins.js"
import { chooseFilter, ERROR_LINE, FilterSpec, runFilter } from "./rtk/filter.js"
import { collapseRepeats, collapseSimilar, marker, progress, stripAnsi, truncate } from "./rtk/generic.js"
import { idProblems } from "./rtk/project.js"

export { BUILTIN_FILTERS } from "./rtk/builtins.js"
export { FilterSpec } from "./rtk/filter.js"
export { parseProjectFilters, type ProjectFiltersResult } from "./rtk/project.js"

const bool = (value: boolean) => Schema.optionalWith(Schema.Boolean, { default: () => value })
const int = (min: number, max: number, value: number) =>
  Schema.optionalWith(Schema.Int.pipe(Schema.between(min, max)), { default: () => value })

export const RtkConfig = Schema.Struct({
  /** Remove ANSI escape sequences (colours, cursor moves, hyperlinks). */
  ansi: bool(true),
  /** Keep only the final state of `\r`-redrawn lines; drop lines that are only a progress bar. */
  progress: bool(true),
  /** 3+ identical consecutive lines → the line and `… (repeated N times)`; blank runs → one blank line. */
  collapseRepeats: bool(true),
  /** 4+ consecutive lines differing only in numbers → first, `… (N similar lines omitted)`, last. */
  collapseSimilar: bool(false),
  /** Head-and-tail truncation past this many lines… */
  maxLines: int(20, 1_000_000, 200),
  /** …or this many characters. */
  maxChars: int(1_000, 10_000_000, 20_000),
  headLines: int(1, 100_000, 60),
  tailLines: int(1, 100_000, 60),
  /** Built-in filter ids enabled (default: all). */
  filters: Schema.optionalWith(Schema.Array(Schema.String), { default: () => BUILTIN_FILTER_IDS }),
  /** Filter ids disabled (built-in or custom); wins over `filters`. */
  disabledFilters: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /** The operator's or project's own filters (validated: safe regexes), tried before the built-ins. */
  customFilters: Schema.optionalWith(Schema.Array(FilterSpec).pipe(Schema.maxItems(100)), { default: () => [] })
})
  .annotations(strict)
  .pipe(
    Schema.filter((c) => {
      const problems: Array<string> = []
      if (c.headLines + c.tailLines >= c.maxLines) problems.push("headLines + tailLines must be less than maxLines")
      problems.push(...idProblems(c.customFilters, "customFilters"))
      const known = new Set([...BUILTIN_FILTER_IDS, ...c.customFilters.map((f) => f.id)])
      for (const field of ["filters", "disabledFilters"] as const) {
        c[field].forEach((id, i) => {
          if (!known.has(id)) problems.push(`${field}[${i}]: unknown filter "${id}"`)
        })
      }
      return problems.length === 0 ? true : problems.join("; ")
    })
  )
export type RtkConfig = typeof RtkConfig.Type

/** The defaults (every field), as `Schema.decodeUnknownSync(RtkConfig)({})` gives them. */
export const DEFAULT_RTK_CONFIG: RtkConfig = Schema.decodeUnknownSync(RtkConfig)({})

/** The filters a config runs, in the order they are tried (custom first); computed once per config object. */
const activeCache = new WeakMap<RtkConfig, ReadonlyArray<FilterSpec>>()
const activeFilters = (config: RtkConfig): ReadonlyArray<FilterSpec> => {
  let active = activeCache.get(config)
  if (active) return active
  const disabled = new Set(config.disabledFilters)
  const enabled = new Set(config.filters)
  active = [
    ...config.customFilters.filter((f) => !disabled.has(f.id)),
    ...BUILTIN_FILTERS.filter((f) => enabled.has(f.id) && !disabled.has(f.id))
  ]
  activeCache.set(config, active)
  return active
}

/**
 * Tool-output envelopes some agents wrap around a command's output (recorded traffic: Codex's
 * `Chunk ID/Wall time/…/Output:` header, Qwen Code's `Command:/Directory:/Output:` with an
 * `Error:/Exit Code:` footer, Claude Code's trailing `<system-reminder>`): rtk filters the output
 * between them and leaves the envelope as it is. Qwen's `Command:` names the command.
 */
interface Envelope {
  readonly head: string
  readonly body: string
  readonly foot: string
  readonly command?: string
}
const CODEX =
  /^((?:Chunk ID: [^\n]*\n)?Wall time: [^\n]*\n(?:Process exited with code [^\n]*\n)?(?:Original token count: [^\n]*\n)?Output:\n)([\s\S]*)$/
const QWEN = /^(Command: ([^\n]*)\nDirectory: [^\n]*\nOutput: )([\s\S]*)(\nError: [\s\S]*\nExit Code: [\s\S]*)$/
const REMINDER = /^([\s\S]*?)(\n+<system-reminder>[\s\S]*<\/system-reminder>\s*)$/

const unwrap = (text: string): Envelope => {
  let head = ""
  let foot = ""
  let body = text
  let command: string | undefined
  const reminder = REMINDER.exec(body)
  if (reminder) {
    body = reminder[1]!
    foot = reminder[2]!
  }
  const codex = CODEX.exec(body)
  if (codex) {
    head = codex[1]!
    body = codex[2]!
  } else {
    const qwen = QWEN.exec(body)
    if (qwen) {
      head = qwen[1]!
      command = qwen[2]!
      body = qwen[3]!
      foot = qwen[4]! + foot
    }
  }
  return command !== undefined ? { head, body, foot, command } : { head, body, foot }
}

export interface RtkResult {
  readonly output: string
  /** The per-command filter that ran (its id), or null. */
  readonly filter: string | null
  readonly linesBefore: number
  readonly linesAfter: number
  /** The steps that changed something, in order: `ansi`, `progress`, `filter:<id>`, `collapseRepeats`, `collapseSimilar`, `truncate`. */
  readonly steps: ReadonlyArray<string>
}

const sameLines = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): boolean => a.length === b.length && a.every((l, i) => l === b[i])

/** `\r` redraw parts that mention an error, kept (as lines before the final state) by the progress step. */
const progressKeepingErrors = (lines: ReadonlyArray<string>): Array<string> => {
  const withErrors: Array<string> = []
  for (const line of lines) {
    if (!line.includes("\r")) {
      withErrors.push(line)
      continue
    }
    const parts = line.split("\r").filter((p) => p.length > 0)
    for (const p of parts.slice(0, -1)) if (ERROR_LINE.test(p)) withErrors.push(p)
    withErrors.push(line)
  }
  return progress(withErrors)
}

/** Runs rtk over one tool output: the new text and what was done (for `POST /api/context/rtk/test`). */
export const run = (text: string, command: string | undefined, config: RtkConfig, context: EngineContext): RtkResult => {
  const envelope = unwrap(text)
  // A final newline stays a final newline (not an empty last line the steps would see).
  const newline = /\r?\n$/.exec(envelope.body)?.[0] ?? ""
  const body = newline ? envelope.body.slice(0, -newline.length) : envelope.body
  const input = body.split(/\r?\n/)
  const steps: Array<string> = []
  let lines = input
  const step = (name: string, next: Array<string>) => {
    if (!sameLines(lines, next)) steps.push(name)
    lines = next
  }
  let rawId: string | undefined
  const keep = (): string => (rawId ??= context.keepRaw(text))

  if (config.ansi) {
    const stripped = stripAnsi(body)
    if (stripped !== body) step("ansi", stripped.split(/\r?\n/))
  }
  if (config.progress && lines.some((l) => l.includes("\r") || l.includes("%") || /[\]|█▉▊▋▌▍▎▏░▒▓━■]/.test(l))) {
    step("progress", progressKeepingErrors(lines))
  }
  const filter = chooseFilter(activeFilters(config), lines.join("\n"), command ?? envelope.command)
  if (filter)
    step(
      `filter:${filter.id}`,
      runFilter(filter, lines, (n) => marker(n, "lines", keep()))
    )
  if (config.collapseRepeats) step("collapseRepeats", collapseRepeats(lines))
  if (config.collapseSimilar) step("collapseSimilar", collapseSimilar(lines))
  const truncated = truncate(
    lines,
    { maxLines: filter?.maxLines ?? config.maxLines, maxChars: config.maxChars, headLines: config.headLines, tailLines: config.tailLines },
    keep
  )
  if (truncated) step("truncate", truncated)

  const changed = steps.length > 0
  const output = changed ? envelope.head + lines.join("\n") + (newline ? "\n" : "") + envelope.foot : text
  return { output, filter: filter?.id ?? null, linesBefore: input.length, linesAfter: changed ? lines.length : input.length, steps }
}

/** A context for previews: the marker names `preview` instead of keeping the raw output. */
const PREVIEW_CONTEXT: EngineContext = { keepRaw: () => "preview" }

/** `POST /api/context/rtk/test`: rtk over `text` as if `command` produced it. */
export const test = (text: string, command: string | undefined, config: RtkConfig, context: EngineContext = PREVIEW_CONTEXT): RtkResult =>
  run(text, command, config, context)

export const rtk: TextEngine<RtkConfig> = {
  id: "rtk",
  description: "Filters tool and command output: ANSI, progress bars, repeated lines, per-command filters, head-and-tail truncation",
  applies: (segment: Segment) => segment.kind === "tool-result",
  apply: (text, segment, config, context) => run(text, segment.command, config, context).output
}

export interface RtkRule {
  readonly engine: "rtk"
  readonly id: string
  readonly description: string
}

const GENERIC_RULES: ReadonlyArray<RtkRule> = [
  { engine: "rtk", id: "ansi", description: "Removes ANSI escape sequences (colours, cursor moves, hyperlinks)" },
  {
    engine: "rtk",
    id: "progress",
    description: "Keeps only the final state of \\r-redrawn lines; drops lines that are only a progress bar"
  },
  {
    engine: "rtk",
    id: "collapseRepeats",
    description: "3 or more identical consecutive lines become the line and … (repeated N times); blank runs one blank line"
  },
  {
    engine: "rtk",
    id: "collapseSimilar",
    description: "4 or more consecutive lines differing only in numbers keep the first and last (off by default)"
  },
  {
    engine: "rtk",
    id: "truncate",
    description:
      "Past maxLines or maxChars keeps headLines and tailLines with a marker naming the raw output's id; error lines in the cut part are kept"
  }
]

/** For `GET /api/compression/rules`: the generic steps, then each built-in filter. */
export const describe = (): ReadonlyArray<RtkRule> => [
  ...GENERIC_RULES,
  ...BUILTIN_FILTERS.map((f) => ({ engine: "rtk" as const, id: `filter:${f.id}`, description: f.description }))
]

/** For `GET /api/context/rtk/filters`. */
export const listFilters = (): ReadonlyArray<{ id: string; description: string; match: FilterSpec["match"] }> =>
  BUILTIN_FILTERS.map((f) => ({ id: f.id, description: f.description, match: f.match }))
