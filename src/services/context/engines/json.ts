import * as Schema from "effect/Schema"
import { strict } from "../../../domain/parse.js"
import type { TextEngine } from "../types.js"

/**
 * json: pretty-printed JSON minified by removing whitespace between tokens only (validated, never re-serialised, so
 * numbers, escapes and duplicate keys keep their exact text) (docs/compression.md#json).
 */

export const Config = Schema.Struct({
  toolResults: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  prose: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  fencedBlocks: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  minChars: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 50 })
}).annotations(strict)
export type Config = typeof Config.Type

export const describe = (): ReadonlyArray<{ readonly engine: "json"; readonly id: string; readonly description: string }> => [
  {
    engine: "json",
    id: "whole-text",
    description: "a tool result (or prose, with prose: true) that is one JSON object or array is minified"
  },
  { engine: "json", id: "fenced-block", description: "the body of a ```json fenced block is minified, the fence kept" }
]

/** JSON text without the whitespace between tokens; strings copied as they are. Assumes valid JSON. */
export const minifyJson = (text: string): string => {
  let out = ""
  let i = 0
  const n = text.length
  while (i < n) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // A string: up to the closing quote not escaped.
      let j = i + 1
      while (j < n) {
        const d = text.charCodeAt(j)
        if (d === 0x5c) j += 2
        else if (d === 0x22) break
        else j++
      }
      out += text.slice(i, j + 1)
      i = j + 1
    } else if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
      i++
    } else {
      let j = i + 1
      while (j < n) {
        const d = text.charCodeAt(j)
        if (d === 0x22 || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break
        j++
      }
      out += text.slice(i, j)
      i = j
    }
  }
  return out
}

const isJsonContainer = (text: string): boolean => {
  const t = text.trim()
  const first = t.charAt(0)
  if (first !== "{" && first !== "[") return false
  try {
    JSON.parse(t)
    return true
  } catch {
    return false
  }
}

/** The whole text minified when it is one JSON object or array; else the text. */
const minifyWhole = (text: string): string => (isJsonContainer(text) ? minifyJson(text.trim()) : text)

const FENCED_JSON = /^( {0,3})(`{3,}|~{3,})[ \t]*(json|jsonc?|JSON)[ \t]*(\r?\n)([\s\S]*?)\r?\n {0,3}\2[ \t]*(?=\r?\n|$)/gm

const minifyFenced = (text: string): string =>
  text.includes("```") || text.includes("~~~")
    ? text.replace(FENCED_JSON, (block, indent: string, fence: string, lang: string, nl: string, body: string) => {
        if (!isJsonContainer(body)) return block
        const min = minifyJson(body.trim())
        return `${indent}${fence}${lang}${nl}${min}${nl}${indent}${fence}`
      })
    : text

export const json: TextEngine<Config> = {
  id: "json",
  description: "JSON in tool results (and ```json blocks) minified; numbers and strings keep their exact text",
  applies: () => true,
  apply: (text, segment, config) => {
    if (text.length < config.minChars) return text
    const whole = segment.kind === "tool-result" ? config.toolResults : config.prose
    if (whole) {
      const min = minifyWhole(text)
      if (min !== text) return min
    }
    if (config.fencedBlocks && (segment.kind === "prose" || config.toolResults)) return minifyFenced(text)
    return text
  }
}
