/**
 * rtk's declarative filters: a filter is data (regex sources and a few numbers), interpreted by
 * `runFilter` below, so the built-in filters (builtins.ts) and a project's own filter file
 * (project.ts) have one shape and one interpreter. Pure and deterministic.
 */
import * as Schema from "effect/Schema"
import { strict } from "../../../../domain/parse.js"
import { checkRegex } from "./regex.js"

/** A regex source that compiles, is at most 500 characters, and has no catastrophic shape. */
export const SafeRegexSource = Schema.String.pipe(
  Schema.filter((source) => checkRegex(source, false) ?? true, { identifier: "SafeRegexSource" })
)
/** A regex source that compiles and is at most 500 characters (trusted filters: no shape check). */
export const TrustedRegexSource = Schema.String.pipe(
  Schema.filter((source) => checkRegex(source, true) ?? true, { identifier: "TrustedRegexSource" })
)

const Count = (max: number) => Schema.Int.pipe(Schema.between(0, max))

const makeFilterSchema = (Regex: typeof SafeRegexSource | typeof TrustedRegexSource) =>
  Schema.Struct({
    /** Unique id (letters, digits, `-`, `_`, `.`). */
    id: Schema.String.pipe(
      Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, { message: () => "id: 1-64 letters, digits, '.', '_' or '-'" })
    ),
    description: Schema.String.pipe(Schema.maxLength(300)),
    /** When the filter applies: the command line matches `command`, or (no command matched) the output matches `output`. */
    match: Schema.Struct({
      command: Schema.optionalWith(Regex, { exact: true }),
      output: Schema.optionalWith(Regex, { exact: true })
    }).annotations(strict),
    /** Lines matching any of these are dropped. */
    drop: Schema.optionalWith(Schema.Array(Regex).pipe(Schema.maxItems(50)), { exact: true }),
    /** When present, only lines matching one of these (plus `context` lines around, plus error lines) are kept. */
    keep: Schema.optionalWith(Schema.Array(Regex).pipe(Schema.maxItems(50)), { exact: true }),
    /** Lines of context kept before and after each kept line (keep mode). */
    context: Schema.optionalWith(Count(20), { exact: true }),
    /** Lines right after a kept line that match this are kept too (continuation lines of a message). */
    continuation: Schema.optionalWith(Regex, { exact: true }),
    /** Line rewrites, first matching rule wins: `$1`… name capture groups. */
    replace: Schema.optionalWith(
      Schema.Array(Schema.Struct({ pattern: Regex, with: Schema.String.pipe(Schema.maxLength(200)) }).annotations(strict)).pipe(
        Schema.maxItems(20)
      ),
      {
        exact: true
      }
    ),
    /**
     * Multi-line records folded into one line: a record starts at a line matching `start`; the
     * capture groups of `start` and of the first line matching each of `fields` are joined by a space;
     * the record's other lines are dropped (git log → `hash subject`).
     */
    records: Schema.optionalWith(
      Schema.Struct({ start: Regex, fields: Schema.Array(Regex).pipe(Schema.maxItems(10)) }).annotations(strict),
      { exact: true }
    ),
    /**
     * Long sections (from a line matching `start` to before the next `start` or `end` line) cut to
     * `head` and `tail` lines when longer than `maxLines` (git diff hunks).
     */
    sections: Schema.optionalWith(
      Schema.Struct({
        start: Regex,
        end: Schema.optionalWith(Regex, { exact: true }),
        maxLines: Count(10_000),
        head: Count(1000),
        tail: Count(1000)
      })
        .annotations(strict)
        .pipe(Schema.filter((s) => s.head + s.tail < s.maxLines || "sections: head + tail must be less than maxLines")),
      { exact: true }
    ),
    /**
     * Lines matching `pattern` grouped by its capture group 1 (the key; group 2 is the rest) when at
     * least `minLines` lines match: `braces` writes `key{a,b,c}` (find), `indent` writes `key:` then
     * `  rest` lines (grep).
     */
    group: Schema.optionalWith(
      Schema.Struct({ pattern: Regex, minLines: Count(100_000), format: Schema.Literal("braces", "indent") }).annotations(strict),
      { exact: true }
    ),
    /** Drops repeated lines (not only consecutive ones), keeping the first. */
    dedupe: Schema.optionalWith(Schema.Boolean, { exact: true }),
    /** Head-and-tail truncation threshold for this command's output (overrides the config's `maxLines`). */
    maxLines: Schema.optionalWith(Schema.Int.pipe(Schema.between(10, 100_000)), { exact: true })
  }).annotations(strict)

/** A filter as a project file or the config's `customFilters` gives it: every regex shape-checked. */
export const FilterSpec = makeFilterSchema(SafeRegexSource)
export type FilterSpec = typeof FilterSpec.Type
/** The same, when `GATEWAY_RTK_TRUST_PROJECT_FILTERS` says project filters are trusted. */
export const TrustedFilterSpec = makeFilterSchema(TrustedRegexSource)

/** Error lines: never dropped by generic steps, always kept in keep mode. */
export const ERROR_LINE = /error|fail|panic|exception|traceback/i

interface Compiled {
  readonly command?: RegExp
  readonly output?: RegExp
  readonly drop: ReadonlyArray<RegExp>
  readonly keep?: ReadonlyArray<RegExp>
  readonly continuation?: RegExp
  readonly replace: ReadonlyArray<{ pattern: RegExp; with: string }>
  readonly records?: { start: RegExp; fields: ReadonlyArray<RegExp> }
  readonly sections?: { start: RegExp; end?: RegExp; maxLines: number; head: number; tail: number }
  readonly group?: { pattern: RegExp; minLines: number; format: "braces" | "indent" }
}

const compiledCache = new WeakMap<FilterSpec, Compiled>()
const re = (source: string, flags = ""): RegExp => new RegExp(source, flags)

/** Compiles a (validated) filter once; cached per filter object. */
export const compile = (f: FilterSpec): Compiled => {
  let c = compiledCache.get(f)
  if (c) return c
  c = {
    ...(f.match.command !== undefined ? { command: re(f.match.command) } : {}),
    ...(f.match.output !== undefined ? { output: re(f.match.output, "m") } : {}),
    drop: (f.drop ?? []).map((s) => re(s)),
    ...(f.keep ? { keep: f.keep.map((s) => re(s)) } : {}),
    ...(f.continuation !== undefined ? { continuation: re(f.continuation) } : {}),
    replace: (f.replace ?? []).map((r) => ({ pattern: re(r.pattern), with: r.with })),
    ...(f.records ? { records: { start: re(f.records.start), fields: f.records.fields.map((s) => re(s)) } } : {}),
    ...(f.sections
      ? {
          sections: {
            start: re(f.sections.start),
            ...(f.sections.end !== undefined ? { end: re(f.sections.end) } : {}),
            maxLines: f.sections.maxLines,
            head: f.sections.head,
            tail: f.sections.tail
          }
        }
      : {}),
    ...(f.group ? { group: { pattern: re(f.group.pattern), minLines: f.group.minLines, format: f.group.format } } : {})
  }
  compiledCache.set(f, c)
  return c
}

/** Output detection looks at this much of the text at most. */
const DETECT_CHARS = 65_536

/** The filter for this command line (first whose `command` matches), else for this output's shape. */
export const chooseFilter = (filters: ReadonlyArray<FilterSpec>, text: string, command: string | undefined): FilterSpec | undefined => {
  if (command !== undefined && command.length > 0) {
    for (const f of filters) {
      const c = compile(f)
      if (c.command && c.command.test(command)) return f
    }
  }
  const head = text.length > DETECT_CHARS ? text.slice(0, DETECT_CHARS) : text
  for (const f of filters) {
    const c = compile(f)
    if (c.output && c.output.test(head)) return f
  }
  return undefined
}

/** Lines longer than this are not tested against a filter's regexes (kept as they are). */
const MAX_TEST_LINE = 4096
const test = (r: RegExp, line: string): boolean => line.length <= MAX_TEST_LINE && r.test(line)
const any = (rs: ReadonlyArray<RegExp>, line: string): boolean => rs.some((r) => test(r, line))

const expand = (template: string, m: RegExpExecArray): string =>
  template.replace(/\$(\$|\d{1,2})/g, (_, g: string) => (g === "$" ? "$" : (m[Number(g)] ?? "")))

/** What a section cut leaves in place of the lines it removed. */
export type CutMarker = (omitted: number) => string

/** Applies one filter to the lines; `cut` makes the marker line of a section cut (and keeps the raw output). */
export const runFilter = (f: FilterSpec, input: ReadonlyArray<string>, cut: CutMarker): Array<string> => {
  const c = compile(f)
  let lines: Array<string> = [...input]

  if (c.records) lines = foldRecords(lines, c.records)
  if (c.drop.length > 0) lines = lines.filter((l) => !any(c.drop, l))
  if (c.keep) lines = keepOnly(lines, c.keep, f.context ?? 0, c.continuation)
  if (c.replace.length > 0) {
    lines = lines.map((l) => {
      if (l.length > MAX_TEST_LINE) return l
      for (const r of c.replace) {
        const m = r.pattern.exec(l)
        if (m) return l.slice(0, m.index) + expand(r.with, m) + l.slice(m.index + m[0].length)
      }
      return l
    })
  }
  if (f.dedupe) {
    const seen = new Set<string>()
    lines = lines.filter((l) => (l.trim() === "" ? true : seen.has(l) ? false : (seen.add(l), true)))
  }
  if (c.group) lines = groupLines(lines, c.group)
  if (c.sections) lines = cutSections(lines, c.sections, cut)
  return lines
}

const foldRecords = (lines: ReadonlyArray<string>, r: { start: RegExp; fields: ReadonlyArray<RegExp> }): Array<string> => {
  const out: Array<string> = []
  let current: { parts: Array<string>; found: Array<string | undefined> } | undefined
  const flush = () => {
    if (!current) return
    const fields = current.found.filter((x): x is string => x !== undefined && x !== "")
    out.push([...current.parts, ...fields].join(" "))
    current = undefined
  }
  for (const line of lines) {
    const m = line.length <= MAX_TEST_LINE ? r.start.exec(line) : null
    if (m) {
      flush()
      current = {
        parts: m
          .slice(1)
          .filter((x): x is string => x !== undefined && x.trim() !== "")
          .map((x) => x.trim()),
        found: r.fields.map(() => undefined)
      }
      if (current.parts.length === 0) current.parts.push(line)
      continue
    }
    if (!current) {
      out.push(line)
      continue
    }
    for (let i = 0; i < r.fields.length; i++) {
      if (current.found[i] !== undefined) continue
      const fm = line.length <= MAX_TEST_LINE ? r.fields[i]!.exec(line) : null
      if (fm) {
        current.found[i] =
          fm
            .slice(1)
            .filter((x) => x !== undefined)
            .join(" ")
            .trim() || fm[0].trim()
        break
      }
    }
  }
  flush()
  return out
}

const keepOnly = (
  lines: ReadonlyArray<string>,
  keep: ReadonlyArray<RegExp>,
  context: number,
  continuation: RegExp | undefined
): Array<string> => {
  const kept = new Uint8Array(lines.length)
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!
    if (!any(keep, l) && !(l.length <= MAX_TEST_LINE && ERROR_LINE.test(l))) continue
    for (let j = Math.max(0, i - context); j <= Math.min(lines.length - 1, i + context); j++) kept[j] = 1
  }
  if (continuation) {
    for (let i = 1; i < lines.length; i++) if (!kept[i] && kept[i - 1] && test(continuation, lines[i]!)) kept[i] = 1
  }
  return lines.filter((_, i) => kept[i] === 1)
}

const groupLines = (lines: ReadonlyArray<string>, g: { pattern: RegExp; minLines: number; format: "braces" | "indent" }): Array<string> => {
  const keys: Array<string | undefined> = []
  const rests: Array<string> = []
  let matching = 0
  for (const l of lines) {
    const m = l.length <= MAX_TEST_LINE ? g.pattern.exec(l) : null
    if (m && m[1] !== undefined && m[1] !== "") {
      keys.push(m[1])
      rests.push(m[2] ?? "")
      matching++
    } else {
      keys.push(undefined)
      rests.push("")
    }
  }
  if (matching < g.minLines) return [...lines]
  const groups = new Map<string, Array<number>>()
  keys.forEach((k, i) => {
    if (k === undefined) return
    const list = groups.get(k)
    if (list) list.push(i)
    else groups.set(k, [i])
  })
  const out: Array<string> = []
  keys.forEach((k, i) => {
    if (k === undefined) return void out.push(lines[i]!)
    const members = groups.get(k)!
    if (members[0] !== i) return
    if (members.length === 1) return void out.push(lines[i]!)
    if (g.format === "braces") out.push(`${k}{${members.map((j) => rests[j]).join(",")}}`)
    else {
      out.push(`${k}:`)
      for (const j of members) out.push(`  ${rests[j]}`)
    }
  })
  return out
}

const cutSections = (
  lines: ReadonlyArray<string>,
  s: { start: RegExp; end?: RegExp; maxLines: number; head: number; tail: number },
  cut: CutMarker
): Array<string> => {
  const out: Array<string> = []
  let section: Array<string> | undefined
  const flush = () => {
    if (!section) return
    if (section.length > s.maxLines) {
      out.push(...section.slice(0, s.head), cut(section.length - s.head - s.tail), ...section.slice(section.length - s.tail))
    } else out.push(...section)
    section = undefined
  }
  for (const l of lines) {
    if (test(s.start, l)) {
      flush()
      section = [l]
    } else if (section && s.end && test(s.end, l)) {
      flush()
      out.push(l)
    } else if (section) section.push(l)
    else out.push(l)
  }
  flush()
  return out
}
