/**
 * The static task-fitness map of the `taskFit` factor: wildcard patterns, first match wins, ending with `*`; a synced
 * leaderboard ELO overrides it per model (docs/routing.md#the-12-factors-factorscores-every-value-in-0-1).
 */
import type { TaskType } from "../types.js"
import { BoundedMap } from "../../../kernel/BoundedMap.js"

export type TaskScores = Readonly<Record<TaskType, number>>

export interface FitnessEntry {
  readonly pattern: string
  readonly scores: TaskScores
}

/** coding, review, planning, analysis, debugging, documentation, chat */
const s = (
  coding: number,
  review: number,
  planning: number,
  analysis: number,
  debugging: number,
  documentation: number,
  chat: number
): TaskScores => ({
  coding,
  review,
  planning,
  analysis,
  debugging,
  documentation,
  chat
})

export const FITNESS_MAP: ReadonlyArray<FitnessEntry> = [
  // Anthropic
  { pattern: "*claude*opus*", scores: s(0.97, 0.97, 0.96, 0.95, 0.97, 0.93, 0.9) },
  { pattern: "*claude*sonnet*", scores: s(0.95, 0.93, 0.9, 0.9, 0.94, 0.9, 0.88) },
  { pattern: "*claude*haiku*", scores: s(0.78, 0.74, 0.7, 0.72, 0.74, 0.8, 0.82) },
  { pattern: "*claude*", scores: s(0.85, 0.83, 0.8, 0.8, 0.83, 0.84, 0.85) },
  // OpenAI open weights (before the gpt-* families and the o-series)
  { pattern: "*gpt-oss*120b*", scores: s(0.8, 0.76, 0.76, 0.8, 0.78, 0.72, 0.72) },
  { pattern: "*gpt-oss*", scores: s(0.7, 0.66, 0.66, 0.7, 0.68, 0.64, 0.66) },
  // OpenAI GPT-5
  { pattern: "*gpt-5*nano*", scores: s(0.66, 0.62, 0.6, 0.64, 0.62, 0.7, 0.74) },
  { pattern: "*gpt-5*mini*", scores: s(0.82, 0.8, 0.78, 0.82, 0.8, 0.8, 0.8) },
  { pattern: "*gpt-5*", scores: s(0.95, 0.94, 0.94, 0.95, 0.95, 0.9, 0.9) },
  // OpenAI GPT-4.1 / GPT-4o
  { pattern: "*gpt-4.1*nano*", scores: s(0.6, 0.56, 0.55, 0.58, 0.56, 0.66, 0.7) },
  { pattern: "*gpt-4.1*mini*", scores: s(0.76, 0.72, 0.7, 0.74, 0.72, 0.78, 0.78) },
  { pattern: "*gpt-4.1*", scores: s(0.86, 0.84, 0.82, 0.84, 0.84, 0.86, 0.84) },
  { pattern: "*gpt-4o*mini*", scores: s(0.64, 0.62, 0.6, 0.62, 0.6, 0.7, 0.78) },
  { pattern: "*gpt-4o*", scores: s(0.78, 0.78, 0.76, 0.78, 0.76, 0.82, 0.88) },
  // OpenAI o-series (reasoning)
  { pattern: "o4-mini*", scores: s(0.84, 0.8, 0.82, 0.86, 0.84, 0.7, 0.66) },
  { pattern: "*/o4-mini*", scores: s(0.84, 0.8, 0.82, 0.86, 0.84, 0.7, 0.66) },
  { pattern: "o3-mini*", scores: s(0.8, 0.76, 0.78, 0.82, 0.8, 0.66, 0.62) },
  { pattern: "*/o3-mini*", scores: s(0.8, 0.76, 0.78, 0.82, 0.8, 0.66, 0.62) },
  { pattern: "o1*", scores: s(0.86, 0.84, 0.88, 0.9, 0.86, 0.72, 0.68) },
  { pattern: "*/o1*", scores: s(0.86, 0.84, 0.88, 0.9, 0.86, 0.72, 0.68) },
  { pattern: "o3*", scores: s(0.92, 0.9, 0.93, 0.95, 0.93, 0.78, 0.74) },
  { pattern: "*/o3*", scores: s(0.92, 0.9, 0.93, 0.95, 0.93, 0.78, 0.74) },
  { pattern: "o4*", scores: s(0.88, 0.84, 0.86, 0.9, 0.88, 0.74, 0.7) },
  { pattern: "*/o4*", scores: s(0.88, 0.84, 0.86, 0.9, 0.88, 0.74, 0.7) },
  // Google Gemini
  { pattern: "*gemini*pro*", scores: s(0.9, 0.88, 0.9, 0.93, 0.88, 0.88, 0.86) },
  { pattern: "*gemini*flash*lite*", scores: s(0.6, 0.58, 0.58, 0.64, 0.58, 0.7, 0.76) },
  { pattern: "*gemini*flash*", scores: s(0.78, 0.74, 0.74, 0.8, 0.76, 0.8, 0.82) },
  { pattern: "*gemini*", scores: s(0.75, 0.72, 0.72, 0.78, 0.72, 0.78, 0.8) },
  // DeepSeek
  { pattern: "*deepseek*reasoner*", scores: s(0.86, 0.82, 0.86, 0.9, 0.88, 0.7, 0.66) },
  { pattern: "*deepseek*r1*", scores: s(0.86, 0.82, 0.86, 0.9, 0.88, 0.7, 0.66) },
  { pattern: "*deepseek*coder*", scores: s(0.84, 0.78, 0.66, 0.7, 0.8, 0.68, 0.6) },
  { pattern: "*deepseek*", scores: s(0.84, 0.8, 0.78, 0.8, 0.8, 0.78, 0.8) },
  // Mistral
  { pattern: "*codestral*", scores: s(0.84, 0.74, 0.6, 0.62, 0.78, 0.7, 0.55) },
  { pattern: "*devstral*", scores: s(0.84, 0.76, 0.66, 0.64, 0.8, 0.68, 0.55) },
  { pattern: "*mistral*large*", scores: s(0.8, 0.78, 0.78, 0.8, 0.78, 0.8, 0.82) },
  { pattern: "*mistral*small*", scores: s(0.62, 0.6, 0.58, 0.62, 0.6, 0.68, 0.74) },
  { pattern: "*mistral*", scores: s(0.68, 0.66, 0.64, 0.66, 0.66, 0.7, 0.74) },
  // Qwen (coder first)
  { pattern: "*qwen*coder*", scores: s(0.84, 0.74, 0.6, 0.62, 0.78, 0.68, 0.55) },
  { pattern: "*qwq*", scores: s(0.78, 0.74, 0.78, 0.82, 0.78, 0.62, 0.6) },
  { pattern: "*qwen*", scores: s(0.74, 0.72, 0.72, 0.76, 0.72, 0.74, 0.78) },
  // xAI Grok
  { pattern: "*grok*code*", scores: s(0.86, 0.78, 0.66, 0.68, 0.84, 0.7, 0.58) },
  { pattern: "*grok*mini*", scores: s(0.7, 0.68, 0.7, 0.74, 0.7, 0.68, 0.72) },
  { pattern: "*grok*", scores: s(0.9, 0.88, 0.88, 0.9, 0.88, 0.84, 0.86) },
  // Meta Llama (size matters most). Anchored at the start, after a "/" or a "-" so that the
  // provider form of other Ollama models ("ollama/phi3") does not match "*llama*".
  { pattern: "llama*405b*", scores: s(0.78, 0.76, 0.76, 0.78, 0.76, 0.8, 0.82) },
  { pattern: "*/llama*405b*", scores: s(0.78, 0.76, 0.76, 0.78, 0.76, 0.8, 0.82) },
  { pattern: "*-llama*405b*", scores: s(0.78, 0.76, 0.76, 0.78, 0.76, 0.8, 0.82) },
  { pattern: "llama*70b*", scores: s(0.7, 0.68, 0.68, 0.7, 0.66, 0.74, 0.8) },
  { pattern: "*/llama*70b*", scores: s(0.7, 0.68, 0.68, 0.7, 0.66, 0.74, 0.8) },
  { pattern: "*-llama*70b*", scores: s(0.7, 0.68, 0.68, 0.7, 0.66, 0.74, 0.8) },
  { pattern: "llama*8b*", scores: s(0.5, 0.48, 0.46, 0.5, 0.46, 0.58, 0.66) },
  { pattern: "*/llama*8b*", scores: s(0.5, 0.48, 0.46, 0.5, 0.46, 0.58, 0.66) },
  { pattern: "*-llama*8b*", scores: s(0.5, 0.48, 0.46, 0.5, 0.46, 0.58, 0.66) },
  { pattern: "llama*", scores: s(0.52, 0.5, 0.48, 0.5, 0.48, 0.6, 0.68) },
  { pattern: "*/llama*", scores: s(0.52, 0.5, 0.48, 0.5, 0.48, 0.6, 0.68) },
  { pattern: "*-llama*", scores: s(0.52, 0.5, 0.48, 0.5, 0.48, 0.6, 0.68) },
  // Small "mini" models of families not listed above
  { pattern: "*mini*", scores: s(0.66, 0.62, 0.62, 0.66, 0.62, 0.68, 0.72) },
  // Anything else
  { pattern: "*", scores: s(0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5) }
]

const escapeRegex = (c: string): string => c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")

const compiled = new Map<string, RegExp>()

/** A wildcard pattern (`*` = any run of characters) as a whole-string, case-insensitive RegExp. */
export const wildcardRegExp = (pattern: string): RegExp => {
  let re = compiled.get(pattern)
  if (re === undefined) {
    re = new RegExp("^" + pattern.split("*").map(escapeRegex).join(".*") + "$", "i")
    compiled.set(pattern, re)
  }
  return re
}

/** True when `pattern` matches the model id or `<provider>/<model>`. */
export const matchesModel = (pattern: string, modelId: string, provider: string): boolean => {
  const re = wildcardRegExp(pattern)
  return re.test(modelId) || re.test(`${provider}/${modelId}`)
}

/** Matches against the default map, memoised per `<provider>\u0000<model>` (bounded: the oldest of 10,000 ids goes first). */
const defaultMatches = new BoundedMap<string, FitnessEntry | undefined>({ maxEntries: 10_000 })

/** The first fitness entry matching the model (the `*` entry at worst). */
export const fitnessEntry = (
  modelId: string,
  provider: string,
  map: ReadonlyArray<FitnessEntry> = FITNESS_MAP
): FitnessEntry | undefined => {
  if (map !== FITNESS_MAP) return map.find((e) => matchesModel(e.pattern, modelId, provider))
  const key = `${provider}\u0000${modelId}`
  if (defaultMatches.has(key)) return defaultMatches.get(key)
  const found = map.find((e) => matchesModel(e.pattern, modelId, provider))
  defaultMatches.set(key, found)
  return found
}

/** The model's fitness for a task type, in [0, 1]; 0.5 when no entry matches. */
export const taskFit = (modelId: string, provider: string, task: TaskType, map: ReadonlyArray<FitnessEntry> = FITNESS_MAP): number => {
  const v = fitnessEntry(modelId, provider, map)?.scores[task]
  return v === undefined || !Number.isFinite(v) ? 0.5 : Math.min(1, Math.max(0, v))
}
