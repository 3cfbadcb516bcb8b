/**
 * Weight sets of the auto engine: the 12 default weights, the mode packs, the
 * `X-Gateway-Mode` / `X-Gateway-Budget` header rules and the precedence between header,
 * combo overrides, saved pack and base weights (spec document 1, "Scoring factors").
 */
import { FACTORS, type Factor, type Weights } from "../types.js"

/** The 12 default weights (sum 1.0). */
export const DEFAULT_WEIGHTS: Weights = Object.freeze({
  health: 0.2,
  quota: 0.15,
  costInv: 0.15,
  latencyInv: 0.12,
  taskFit: 0.08,
  stability: 0.05,
  tierPriority: 0.05,
  tierAffinity: 0.05,
  specificityMatch: 0.05,
  contextAffinity: 0.05,
  connectionDensity: 0.05,
  resetWindowAffinity: 0
})

export type ModePackName = "ship-fast" | "cost-saver" | "quality-first" | "offline-friendly" | "reliability-first"

/**
 * The mode packs, exactly as the spec's table (factors not listed count as 0). Note: the spec
 * says each column sums to 1.0 but its numbers sum to 0.94 (ship-fast) and 0.95 (the other
 * three); the numbers are kept as written. Scores divide by the sum of the weights
 * (scoreEntry), so the effective weights are these normalised to 1.
 * `reliability-first` is not given by the spec; this build's values sum to 1.0.
 */
export const MODE_PACKS: Readonly<Record<ModePackName, Weights>> = Object.freeze({
  "ship-fast": Object.freeze({
    quota: 0.14,
    health: 0.28,
    costInv: 0.05,
    latencyInv: 0.32,
    taskFit: 0.1,
    stability: 0,
    tierPriority: 0.05
  }),
  "cost-saver": Object.freeze({
    quota: 0.14,
    health: 0.19,
    costInv: 0.37,
    latencyInv: 0.05,
    taskFit: 0.1,
    stability: 0.05,
    tierPriority: 0.05
  }),
  "quality-first": Object.freeze({
    quota: 0.1,
    health: 0.18,
    costInv: 0.05,
    latencyInv: 0.05,
    taskFit: 0.37,
    stability: 0.15,
    tierPriority: 0.05
  }),
  "offline-friendly": Object.freeze({
    quota: 0.37,
    health: 0.28,
    costInv: 0.1,
    latencyInv: 0.05,
    taskFit: 0,
    stability: 0.1,
    tierPriority: 0.05
  }),
  "reliability-first": Object.freeze({
    health: 0.3,
    stability: 0.25,
    latencyInv: 0.15,
    quota: 0.15,
    costInv: 0.05,
    taskFit: 0.05,
    tierPriority: 0.05
  })
})

/** Mode names (header values and saved packs) to a pack name, or "balanced" for the default weights. */
const MODE_ALIASES: Readonly<Record<string, ModePackName | "balanced">> = {
  fast: "ship-fast",
  cheap: "cost-saver",
  quality: "quality-first",
  reliable: "reliability-first",
  offline: "offline-friendly",
  balanced: "balanced",
  default: "balanced",
  "ship-fast": "ship-fast",
  "cost-saver": "cost-saver",
  "quality-first": "quality-first",
  "offline-friendly": "offline-friendly",
  "reliability-first": "reliability-first"
}

/** The pack a mode value names (`balanced` for the default weights); undefined when unknown. Case-insensitive, trimmed. */
export const modeName = (value: string | undefined | null): ModePackName | "balanced" | undefined => {
  if (typeof value !== "string") return undefined
  const key = value.trim().toLowerCase()
  return Object.hasOwn(MODE_ALIASES, key) ? MODE_ALIASES[key] : undefined
}

/** The weights of a mode name or alias (`X-Gateway-Mode`); undefined (ignored) when unknown. */
export const modeFromHeader = (value: string | undefined | null): Weights | undefined => {
  const name = modeName(value)
  return name === undefined ? undefined : name === "balanced" ? DEFAULT_WEIGHTS : MODE_PACKS[name]
}

const FACTOR_SET: ReadonlySet<string> = new Set(FACTORS)

/** Keeps known factors with finite, non-negative values; everything else is dropped. */
export const sanitizeWeights = (w: Readonly<Record<string, unknown>> | undefined): Weights => {
  const out: Partial<Record<Factor, number>> = {}
  if (w === undefined || w === null || typeof w !== "object") return out
  for (const [k, v] of Object.entries(w)) {
    if (FACTOR_SET.has(k) && typeof v === "number" && Number.isFinite(v) && v >= 0) out[k as Factor] = v
  }
  return out
}

/** The weights divided by their sum (all 0 stays all 0): the effective weights of scoreEntry. */
export const normalizeWeights = (w: Weights): Weights => {
  const clean = sanitizeWeights(w)
  const sum = Object.values(clean).reduce((a, b) => a + (b ?? 0), 0)
  if (sum <= 0) return clean
  const out: Partial<Record<Factor, number>> = {}
  for (const [k, v] of Object.entries(clean)) out[k as Factor] = (v ?? 0) / sum
  return out
}

/**
 * The weights of one request. Precedence, highest first: a valid `X-Gateway-Mode` header
 * (replaces everything, `balanced`/`default` force DEFAULT_WEIGHTS), then the combo's
 * `auto.weights` merged over the saved `modePack` (or over `base` when the pack is absent or
 * unknown): keys present replace. Unknown factors and negative or non-finite values are ignored.
 */
export const resolveWeights = (opts: {
  readonly base: Weights
  readonly comboWeights?: Weights | Readonly<Record<string, unknown>> | undefined
  readonly modePack?: string | undefined
  readonly header?: string | undefined
}): Weights => {
  const fromHeader = modeFromHeader(opts.header)
  if (fromHeader !== undefined) return fromHeader
  const fromPack = modeFromHeader(opts.modePack)
  const start = fromPack ?? opts.base
  const overrides = sanitizeWeights(opts.comboWeights as Readonly<Record<string, unknown>> | undefined)
  return Object.keys(overrides).length === 0 ? start : { ...start, ...overrides }
}

/** `X-Gateway-Budget` (or a saved budgetCap): a positive finite number of USD, otherwise undefined (ignored). */
export const budgetFromHeader = (value: string | number | undefined | null): number | undefined => {
  if (typeof value === "number") return Number.isFinite(value) && value > 0 ? value : undefined
  if (typeof value !== "string") return undefined
  const s = value.trim()
  if (s === "" || !/^[+]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(s)) return undefined
  const n = Number(s)
  return Number.isFinite(n) && n > 0 ? n : undefined
}
