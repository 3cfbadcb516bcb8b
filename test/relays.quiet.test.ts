import { describe, expect, it } from "vitest"
import { quietUpTo } from "../src/inference/relays.js"

/**
 * `quietUpTo` searches a marker by a piece of it and walks an event's lines without searching for
 * its blank line (src/inference/relays.ts): it must answer what a plain search for each marker and
 * each line answers, wherever markers, pieces of markers, odd lines and `\r` fall in a chunk.
 */
const plainQuietUpTo = (text: string, from: number, markers: ReadonlyArray<string>): number => {
  if (!(text.startsWith("data: ", from) || text.startsWith("event: ", from))) return from
  let stop = text.length
  for (const m of markers) {
    const i = text.indexOf(m, from)
    if (i !== -1 && i < stop) stop = i
  }
  const cr = text.indexOf("\r", from)
  if (cr !== -1 && cr < stop) stop = cr
  for (let nl = text.indexOf("\n", from); nl !== -1 && nl < stop; nl = text.indexOf("\n", nl + 1)) {
    const next = nl + 1
    if (next < text.length && text.charCodeAt(next) !== 10 && !text.startsWith("data: ", next) && !text.startsWith("event: ", next)) {
      stop = nl
      break
    }
  }
  if (stop === text.length) return stop
  const boundary = text.lastIndexOf("\n\n", stop - 1)
  return boundary < from ? from : boundary + 2
}

const MARKER_SETS: ReadonlyArray<ReadonlyArray<string>> = [
  ['"usage"', '"error"', "event: error"],
  ['"usage"', '"error"', "event: error", '"signature"', '"redacted_thinking"'],
  ["usageMetadata", '"error"', "event: error", '"thoughtSignature"'],
  [
    '"usage"',
    "usageMetadata",
    '"done"',
    '"error"',
    "event: error",
    '"signature"',
    '"redacted_thinking"',
    "encrypted_content",
    "thoughtSignature"
  ]
]

/** Pieces a chunk is made of: plain JSON, markers whole and cut short, near-misses, odd lines. */
const DATA_PIECES = [
  '{"id":"c1","choices":[{"delta":{"content":"hi"}}]}',
  '"usage"',
  "usage",
  'usage"',
  '"usag',
  '"error"',
  "rror",
  'error"',
  "e",
  '"',
  '""usage""',
  "event: error",
  "vent: error",
  '"signature"',
  "signature",
  '"redacted_thinking"',
  "usageMetadata",
  "thoughtSignature",
  '"thoughtSignature"',
  "encrypted_content",
  '"done"',
  "tok tok",
  "\r",
  "é"
]
const LINES = ["data: ", "event: error\n", "event: delta\n", ": ping\n", "id: 4\n", "data:", "\n", "retry: 1\n", "\r\n"]

/** A small deterministic generator (the same cases every run). */
const rng = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x80000000
}

const chunkOf = (next: () => number): string => {
  let text = ""
  const events = 1 + Math.floor(next() * 6)
  for (let e = 0; e < events; e++) {
    if (next() < 0.3) text += LINES[Math.floor(next() * LINES.length)]!
    text += "data: "
    const pieces = 1 + Math.floor(next() * 4)
    for (let p = 0; p < pieces; p++) text += DATA_PIECES[Math.floor(next() * DATA_PIECES.length)]!
    text += next() < 0.1 ? "\n" : "\n\n"
  }
  return text
}

describe("quietUpTo answers what a plain search answers", () => {
  it("on generated chunks, from each event start", () => {
    const next = rng(7)
    let compared = 0
    for (let c = 0; c < 4000; c++) {
      const text = chunkOf(next)
      const markers = MARKER_SETS[c % MARKER_SETS.length]!
      const starts = [0]
      for (let i = text.indexOf("\n\n"); i !== -1; i = text.indexOf("\n\n", i + 1)) starts.push(i + 2)
      for (const from of starts) {
        if (from > text.length) continue
        expect(quietUpTo(text, from, markers), JSON.stringify({ text, from, markers })).toBe(plainQuietUpTo(text, from, markers))
        compared++
      }
    }
    expect(compared).toBeGreaterThan(10_000)
  })

  it("finds a marker past its pieces that are not it", () => {
    const markers = ['"usage"', '"error"', "event: error"]
    const a = 'data: {"x":"usages","y":"rror","z":"errors"}\n\n'
    const b = 'data: {"usage":{}}\n\n'
    expect(quietUpTo(a + a + b, 0, markers)).toBe(2 * a.length)
    const c = 'data: {"e":"event: erro"}\n\n'
    expect(quietUpTo(`${c}${a}event: error\ndata: {}\n\n`, 0, markers)).toBe(c.length + a.length)
  })
})
