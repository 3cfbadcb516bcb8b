import * as Schema from "effect/Schema"
import { strict } from "../../../domain/parse.js"
import type { TextEngine } from "../types.js"

/**
 * whitespace: removes whitespace that carries nothing (docs/compression.md). Everywhere: trailing
 * spaces and tabs of each line, and a run of 3 or more blank lines becomes one blank line. In prose
 * only, outside fenced code blocks: a run of spaces or tabs inside a line becomes one space. Never:
 * leading indentation, line endings (a CRLF stays a CRLF), anything inside a fenced code block of
 * prose, the alignment inside a line of a tool result.
 */

export const Config = Schema.Struct({
  prose: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  toolResults: Schema.optionalWith(Schema.Boolean, { default: () => true })
}).annotations(strict)
export type Config = typeof Config.Type

export const describe = (): ReadonlyArray<{ readonly engine: "whitespace"; readonly id: string; readonly description: string }> => [
  {
    engine: "whitespace",
    id: "trailing",
    description: "trailing spaces and tabs of a line removed (prose outside code blocks, tool results)"
  },
  {
    engine: "whitespace",
    id: "blank-runs",
    description: "3 or more blank lines in a row become one blank line (prose outside code blocks, tool results)"
  },
  {
    engine: "whitespace",
    id: "inner-runs",
    description: "a run of spaces or tabs inside a prose line (not its indentation) becomes one space; never in code blocks or tool results"
  }
]

const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})/

const squeeze = (text: string, prose: boolean): string => {
  const lines = text.split("\n")
  const out: Array<string> = []
  let fence: string | undefined
  let blanks: Array<string> = []
  const flushBlanks = () => {
    // Keep a run of 1 or 2 blank lines as it is; 3 or more: one (the first, with its line ending).
    if (blanks.length >= 3) out.push(blanks[0]!)
    else out.push(...blanks)
    blanks = []
  }
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!
    if (prose && fence !== undefined) {
      out.push(raw)
      if (new RegExp(`^ {0,3}${fence.charAt(0) === "`" ? "`" : "~"}{${fence.length},}[ \\t]*\\r?$`).test(raw)) fence = undefined
      continue
    }
    const cr = raw.endsWith("\r") ? "\r" : ""
    let line = (cr ? raw.slice(0, -1) : raw).replace(/[ \t]+$/, "")
    // The last piece of text after its final newline is not a blank line of its own.
    if (line === "" && i < lines.length - 1) {
      blanks.push(cr)
      continue
    }
    flushBlanks()
    if (prose) {
      const open = FENCE_OPEN.exec(line)
      if (open) fence = open[1]!
      else {
        const indent = /^[ \t]*/.exec(line)![0]
        line = indent + line.slice(indent.length).replace(/[ \t]{2,}|\t/g, " ")
      }
    }
    out.push(line + cr)
  }
  flushBlanks()
  return out.join("\n")
}

export const whitespace: TextEngine<Config> = {
  id: "whitespace",
  description: "Trailing whitespace, runs of blank lines and (in prose) runs of spaces removed; indentation and code blocks kept",
  applies: () => true,
  apply: (text, segment, config) => {
    const prose = segment.kind === "prose"
    if (prose ? !config.prose : !config.toolResults) return text
    const next = squeeze(text, prose)
    return next === text ? text : next
  }
}
