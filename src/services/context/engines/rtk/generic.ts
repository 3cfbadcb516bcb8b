/**
 * rtk's generic steps, for any tool output: ANSI removal, progress redraws and bars, repeated and
 * similar line collapse, head-and-tail truncation. None of them drops an error line (one matching
 * ERROR_LINE): repeats of one are collapsed to the line and a count, similar-line collapse and
 * progress-bar removal skip them, truncation keeps them (after the marker).
 */
import { ERROR_LINE } from "./filter.js"

// CSI (colours, cursor moves, erase), OSC (titles, hyperlinks; BEL or ST terminated), and the other two-byte escapes.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]/g
// eslint-disable-next-line no-control-regex
const HAS_ANSI = /[\x1b\x9b]/

export const stripAnsi = (text: string): string => (HAS_ANSI.test(text) ? text.replace(ANSI, "") : text)

const BAR = /\[[=#>\-.*~ ]{4,}\]|[█▉▊▋▌▍▎▏░▒▓━■]{2,}|\|[█▉▊▋▌▍▎▏#= ]{3,}\|/
const UNIT_WORDS = new Set(["eta", "kib", "mib", "gib", "tib", "kb", "mb", "gb", "tb", "bytes", "elapsed", "remaining", "left", "of"])

/** What a bar shows besides the bar: a percentage, a fraction (`1.2/19.0`, `45/100`), a rate or an eta. */
const MEASURE = /\d{1,3}(?:\.\d+)?\s?%|\d+(?:\.\d+)?\s?[kKMGT]?i?B?\s?\/\s?\d+(?:\.\d+)?|\bit\/s\b|\beta\b/

/**
 * A line that is only a progress bar: a bar graphic with a measure (so a decorative rule like
 * `━━━━ Section ━━━━` in a file is not one), its numbers, units and at most a short label.
 */
export const isProgressBar = (line: string): boolean => {
  if (line.length > 400 || !BAR.test(line) || !MEASURE.test(line) || ERROR_LINE.test(line)) return false
  const words = line.replace(BAR, " ").match(/\b[A-Za-z]{3,}\b/g) ?? []
  return words.filter((w) => !UNIT_WORDS.has(w.toLowerCase())).length <= 3
}

const PERCENT = /\d{1,3}(?:\.\d+)?\s?%/
const digitsAway = (line: string): string => line.replace(/\d+(?:\.\d+)?/g, "#")

/**
 * `\r` redraws: each line keeps only its final state (the last non-empty part after a `\r`); lines
 * that are only a progress bar are dropped; a run of percentage lines that differ only in their
 * numbers (a progress meter printed without a terminal) keeps its last line.
 */
export const progress = (lines: ReadonlyArray<string>): Array<string> => {
  const out: Array<string> = []
  for (const raw of lines) {
    let line = raw
    if (line.includes("\r")) {
      const parts = line.split("\r").filter((p) => p.length > 0)
      line = parts.length > 0 ? parts[parts.length - 1]! : ""
      // A redraw that printed only a bar and then erased it leaves nothing worth a line.
      if (parts.length > 1 && isProgressBar(line)) continue
    }
    if (isProgressBar(line)) continue
    const prev = out[out.length - 1]
    if (
      prev !== undefined &&
      PERCENT.test(line) &&
      PERCENT.test(prev) &&
      !ERROR_LINE.test(prev) &&
      prev.length < 400 &&
      line.length < 400 &&
      digitsAway(prev) === digitsAway(line)
    ) {
      out[out.length - 1] = line
      continue
    }
    out.push(line)
  }
  return out
}

export const repeatedMarker = (line: string, n: number): string => `${line} … (repeated ${n} times)`
const REPEATED = /^(.*) … \(repeated (\d+) times\)$/

/**
 * Runs of identical consecutive lines: 3 or more become the line and `… (repeated N times)`; runs
 * of blank lines become one blank line. A line already carrying a repeat count folds into the run.
 */
export const collapseRepeats = (lines: ReadonlyArray<string>): Array<string> => {
  const out: Array<string> = []
  let i = 0
  while (i < lines.length) {
    const line = lines[i]!
    const base = REPEATED.exec(line)
    const text = base ? base[1]! : line
    let count = base ? Number(base[2]) : 1
    let j = i + 1
    while (j < lines.length) {
      const next = lines[j]!
      if (next === text) count++
      else {
        const m = REPEATED.exec(next)
        if (m && m[1] === text) count += Number(m[2])
        else break
      }
      j++
    }
    if (text.trim() === "") out.push(line.trim() === "" ? line : text)
    else if (j - i === 1) out.push(line)
    else if (count >= 3) out.push(repeatedMarker(text, count))
    else for (let k = i; k < j; k++) out.push(lines[k]!)
    i = j
  }
  return out
}

const SIMILAR = /^… \((\d+) similar lines omitted\)$/

/**
 * Runs of 4 or more consecutive lines that differ only in their numbers (timestamps, counters,
 * ids): the first and last are kept with `… (N similar lines omitted)` between. Error lines and
 * lines without a digit never join a run.
 */
export const collapseSimilar = (lines: ReadonlyArray<string>): Array<string> => {
  const out: Array<string> = []
  const key = (l: string): string | undefined =>
    l.length > 1000 || !/\d/.test(l) || ERROR_LINE.test(l) || SIMILAR.test(l) ? undefined : digitsAway(l)
  let i = 0
  while (i < lines.length) {
    const k = key(lines[i]!)
    let j = i + 1
    if (k !== undefined) while (j < lines.length && key(lines[j]!) === k) j++
    const run = j - i
    if (run >= 4) out.push(lines[i]!, `… (${run - 2} similar lines omitted)`, lines[j - 1]!)
    else for (let x = i; x < j; x++) out.push(lines[x]!)
    i = j
  }
  return out
}

export const MARKER = /^\[rtk: \d+ (?:lines|chars) omitted; full output: GET \/api\/context\/rtk\/raw-output\/\S+\]$/

export const marker = (omitted: number, unit: "lines" | "chars", id: string): string =>
  `[rtk: ${omitted} ${unit} omitted; full output: GET /api/context/rtk/raw-output/${id}]`

export interface TruncateOptions {
  readonly maxLines: number
  readonly maxChars: number
  readonly headLines: number
  readonly tailLines: number
}

/**
 * Head-and-tail truncation when the output is over `maxLines` lines or `maxChars` characters: the
 * first `headLines` and last `tailLines` lines, the marker between, and after the marker every
 * error line of the cut part. When the kept lines are still over `maxChars` (very long lines), the
 * text is cut by characters the same way (half the budget at each end). `rawId()` is called only
 * when something is cut.
 */
export const truncate = (lines: ReadonlyArray<string>, o: TruncateOptions, rawId: () => string): Array<string> | undefined => {
  const chars = (ls: ReadonlyArray<string>) => ls.reduce((n, l) => n + l.length + 1, 0) - 1
  if (lines.length <= o.maxLines && chars(lines) <= o.maxChars) return undefined
  // Already cut by rtk (the marker is there): cutting again would only move the marker.
  if (lines.some((l) => MARKER.test(l))) return undefined
  let kept: Array<string> = [...lines]
  if (lines.length > o.maxLines && lines.length > o.headLines + o.tailLines) {
    const middle = lines.slice(o.headLines, lines.length - o.tailLines)
    const errors = middle.filter((l) => l.length <= 4096 && ERROR_LINE.test(l))
    kept = [
      ...lines.slice(0, o.headLines),
      marker(middle.length - errors.length, "lines", rawId()),
      ...errors,
      ...lines.slice(lines.length - o.tailLines)
    ]
  }
  const text = kept.join("\n")
  if (text.length <= o.maxChars) return kept
  const half = Math.floor(o.maxChars / 2)
  let headEnd = half
  let tailStart = text.length - half
  // Prefer line boundaries when one is near.
  const nl = text.lastIndexOf("\n", headEnd)
  if (nl > half / 2) headEnd = nl
  const nl2 = text.indexOf("\n", tailStart)
  if (nl2 !== -1 && nl2 < tailStart + half / 2) tailStart = nl2 + 1
  const cut = text.slice(headEnd, tailStart)
  const errors = cut.split("\n").filter((l) => l.length <= 4096 && ERROR_LINE.test(l) && !l.startsWith("[rtk: "))
  const head = text.slice(0, headEnd).replace(/\n$/, "")
  const tail = text.slice(tailStart)
  return [...head.split("\n"), marker(cut.length, "chars", rawId()), ...errors, ...tail.split("\n")]
}
