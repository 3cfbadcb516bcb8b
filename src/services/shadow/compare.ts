/**
 * How two answers to one request compare (docs/shadow.md): exact and normalized agreement of
 * their text, agreement of the tools they called (names and arguments), a similarity for
 * ranking the disagreements, and the statistics of the report (means with 95% intervals).
 */
import type { CanonicalResponse } from "../../domain/canonical.js"
import { textOf } from "../../domain/canonical.js"

export interface ToolCall {
  readonly name: string
  readonly arguments: unknown
}

export interface Answer {
  readonly text: string
  readonly tools: ReadonlyArray<ToolCall>
  readonly finish: string | null
}

export const answerOf = (r: CanonicalResponse): Answer => ({
  text: textOf(r.content),
  tools: r.content.flatMap((b) => (b.type === "tool_use" ? [{ name: b.name, arguments: b.input ?? {} }] : [])),
  finish: r.stopReason ?? null
})

/** JSON with its object keys sorted: two values that are equal as JSON print the same. */
export const canonicalJson = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`
  if (v !== null && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`
  return JSON.stringify(v) ?? "null"
}

const asJson = (text: string): unknown => {
  const t = text.trim()
  if (!(t.startsWith("{") || t.startsWith("["))) return undefined
  try {
    return JSON.parse(t)
  } catch {
    return undefined
  }
}

/** Text as compared when "normalized": JSON by value, prose by its words (case, spacing and punctuation aside). */
export const normalize = (text: string): string => {
  const json = asJson(text)
  if (json !== undefined) return canonicalJson(json)
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, " ")
    .replace(/\s+/g, " ")
    .trim()
}

const words = (text: string): Set<string> =>
  new Set(
    normalize(text)
      .split(/[\s,:{}[\]"]+/)
      .filter(Boolean)
  )

/** Jaccard similarity of the two texts' words (1 when both are empty). */
export const similarity = (a: string, b: string): number => {
  const x = words(a)
  const y = words(b)
  if (x.size === 0 && y.size === 0) return 1
  let both = 0
  for (const w of x) if (y.has(w)) both++
  return both / (x.size + y.size - both)
}

const toolKey = (t: ToolCall): string => `${t.name}(${canonicalJson(t.arguments)})`

export interface Comparison {
  readonly exact: boolean
  readonly normalized: boolean
  /** Same tools called with the same arguments (in any order); null when neither called one. */
  readonly tools: boolean | null
  readonly similarity: number
}

export const compare = (a: Answer, b: Answer): Comparison => {
  const anyTools = a.tools.length > 0 || b.tools.length > 0
  const ta = a.tools.map(toolKey).sort()
  const tb = b.tools.map(toolKey).sort()
  const tools = anyTools ? ta.length === tb.length && ta.every((k, i) => k === tb[i]) : null
  const sameText = a.text === b.text
  return {
    exact: sameText && tools !== false,
    normalized: normalize(a.text) === normalize(b.text) && tools !== false,
    tools,
    similarity:
      anyTools && a.text === "" && b.text === "" ? (tools ? 1 : similarity(ta.join(" "), tb.join(" "))) : similarity(a.text, b.text)
  }
}

export interface Interval {
  readonly mean: number
  readonly low: number
  readonly high: number
  readonly n: number
}

/** The mean and its 95% confidence interval (normal approximation, sample standard deviation). */
export const meanInterval = (xs: ReadonlyArray<number>): Interval => {
  const n = xs.length
  if (n === 0) return { mean: 0, low: 0, high: 0, n: 0 }
  const mean = xs.reduce((s, x) => s + x, 0) / n
  if (n < 2) return { mean, low: mean, high: mean, n }
  const variance = xs.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)
  const half = 1.96 * Math.sqrt(variance / n)
  return { mean, low: mean - half, high: mean + half, n }
}
