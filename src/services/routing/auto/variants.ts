/**
 * The auto model ids (spec document 1, "Model identifier forms"): `auto`, the six variants
 * `auto/<variant>` and the compositions `auto/<category>[:<tier>]`, with the router strategy,
 * weights, exploration rate and pool filters each one means.
 */
import type { PoolEntry, Weights } from "../types.js"
import { DEFAULT_WEIGHTS, MODE_PACKS } from "./weights.js"

export const AUTO_VARIANTS = ["coding", "fast", "cheap", "offline", "smart", "lkgp"] as const
export type AutoVariant = (typeof AUTO_VARIANTS)[number]
export const AUTO_CATEGORIES = ["coding", "reasoning", "vision", "chat", "multimodal"] as const
export type AutoCategory = (typeof AUTO_CATEGORIES)[number]
/** Tiers as written in ids; `floor` is an alias of `cheap`. */
export const AUTO_TIERS = ["fast", "cheap", "floor", "reliable", "free", "pro"] as const
export type AutoTierInput = (typeof AUTO_TIERS)[number]
export type AutoTier = Exclude<AutoTierInput, "floor">

export const DEFAULT_EXPLORATION_RATE = 0.05
export const SMART_EXPLORATION_RATE = 0.1

export interface AutoSpec {
  /** Canonical id: lower case, `floor` written `cheap`. */
  readonly id: string
  readonly kind: "default" | "variant" | "category"
  /** For kind variant (and "lkgp" for bare `auto`). */
  readonly variant?: AutoVariant
  readonly description: string
  /** A RouterRegistry name. */
  readonly routerStrategy: string
  /** `balanced` for DEFAULT_WEIGHTS, else a MODE_PACKS name. */
  readonly weightsName: "balanced" | keyof typeof MODE_PACKS
  readonly weights: Weights
  readonly explorationRate: number
  readonly category?: AutoCategory
  readonly tier?: AutoTier
}

const VARIANT_SPECS: Readonly<Record<AutoVariant, Pick<AutoSpec, "routerStrategy" | "weightsName" | "explorationRate" | "description">>> = {
  lkgp: {
    routerStrategy: "lkgp",
    weightsName: "balanced",
    explorationRate: DEFAULT_EXPLORATION_RATE,
    description: "Last known good path; balanced weights."
  },
  coding: {
    routerStrategy: "rules",
    weightsName: "quality-first",
    explorationRate: DEFAULT_EXPLORATION_RATE,
    description: "Quality-first weights."
  },
  fast: {
    routerStrategy: "rules",
    weightsName: "ship-fast",
    explorationRate: DEFAULT_EXPLORATION_RATE,
    description: "Low-latency weighted selection (ship-fast weights)."
  },
  cheap: {
    routerStrategy: "cost",
    weightsName: "cost-saver",
    explorationRate: DEFAULT_EXPLORATION_RATE,
    description: "Lowest cost first."
  },
  offline: {
    routerStrategy: "rules",
    weightsName: "offline-friendly",
    explorationRate: DEFAULT_EXPLORATION_RATE,
    description: "Favours the highest quota availability (offline-friendly weights)."
  },
  smart: {
    routerStrategy: "rules",
    weightsName: "quality-first",
    explorationRate: SMART_EXPLORATION_RATE,
    description: "Quality-first weights plus 10% exploration."
  }
}

const TIER_WEIGHTS: Readonly<Record<AutoTier, AutoSpec["weightsName"]>> = {
  fast: "ship-fast",
  cheap: "cost-saver",
  reliable: "reliability-first",
  free: "balanced",
  pro: "balanced"
}

const weightsOf = (name: AutoSpec["weightsName"]): Weights => (name === "balanced" ? DEFAULT_WEIGHTS : MODE_PACKS[name])

const isOneOf = <T extends string>(list: ReadonlyArray<T>, v: string): v is T => (list as ReadonlyArray<string>).includes(v)

/** True for `auto` and any `auto/...` id (valid or not). */
export const isAutoId = (id: string): boolean => {
  const s = id.trim().toLowerCase()
  return s === "auto" || s.startsWith("auto/")
}

/** The meaning of an auto id, or undefined when it is not a valid one. Case-insensitive. */
export const parseAutoId = (id: string): AutoSpec | undefined => {
  if (typeof id !== "string") return undefined
  const s = id.trim().toLowerCase()
  if (s === "auto")
    return {
      id: "auto",
      kind: "default",
      variant: "lkgp",
      ...VARIANT_SPECS.lkgp,
      description: "Default auto: same as auto/lkgp; balanced weights.",
      weights: DEFAULT_WEIGHTS
    }
  if (!s.startsWith("auto/")) return undefined
  const rest = s.slice("auto/".length)
  const colon = rest.indexOf(":")
  if (colon < 0) {
    if (isOneOf(AUTO_VARIANTS, rest)) {
      const v = VARIANT_SPECS[rest]
      return { id: s, kind: "variant", variant: rest, ...v, weights: weightsOf(v.weightsName) }
    }
    if (isOneOf(AUTO_CATEGORIES, rest))
      return {
        id: s,
        kind: "category",
        description: `Category ${rest}; balanced weights.`,
        routerStrategy: "rules",
        weightsName: "balanced",
        weights: DEFAULT_WEIGHTS,
        explorationRate: DEFAULT_EXPLORATION_RATE,
        category: rest
      }
    return undefined
  }
  const category = rest.slice(0, colon)
  const tierIn = rest.slice(colon + 1)
  if (!isOneOf(AUTO_CATEGORIES, category) || !isOneOf(AUTO_TIERS, tierIn)) return undefined
  const tier: AutoTier = tierIn === "floor" ? "cheap" : tierIn
  const weightsName = TIER_WEIGHTS[tier]
  return {
    id: `auto/${category}:${tier}`,
    kind: "category",
    description: `Category ${category}, tier ${tier}.`,
    routerStrategy: "rules",
    weightsName,
    weights: weightsOf(weightsName),
    explorationRate: DEFAULT_EXPLORATION_RATE,
    category,
    tier
  }
}

const failOpen = (pool: ReadonlyArray<PoolEntry>, keep: (e: PoolEntry) => boolean): ReadonlyArray<PoolEntry> => {
  const kept = pool.filter(keep)
  return kept.length > 0 ? kept : pool
}

const CATEGORY_FILTERS: Readonly<Record<AutoCategory, ((e: PoolEntry) => boolean) | undefined>> = {
  vision: (e) => e.capabilities.vision,
  multimodal: (e) => e.capabilities.vision,
  reasoning: (e) => e.capabilities.reasoning,
  coding: (e) => e.capabilities.tools,
  chat: undefined
}

/**
 * The pool an auto id routes over: the category filter, then the tier filter (free: model
 * tier free; pro: model tier premium or a pro/ultra account). Each filter is fail-open: when
 * it would leave nothing, it is skipped.
 */
export const filterPool = (pool: ReadonlyArray<PoolEntry>, spec: AutoSpec): Array<PoolEntry> => {
  let out = pool
  const cat = spec.category === undefined ? undefined : CATEGORY_FILTERS[spec.category]
  if (cat !== undefined) out = failOpen(out, cat)
  if (spec.tier === "free") out = failOpen(out, (e) => e.modelTier === "free")
  else if (spec.tier === "pro")
    out = failOpen(out, (e) => e.modelTier === "premium" || e.accountTier === "pro" || e.accountTier === "ultra")
  return [...out]
}

/** The 7 invokable auto ids: bare `auto` and the six variants. */
export const AUTO_VARIANT_IDS: ReadonlyArray<string> = ["auto", ...AUTO_VARIANTS.map((v) => `auto/${v}`)]

/** The ids listed in the model list: the 7 plus a few compositions; any valid composition resolves on demand. */
export const ADVERTISED_AUTO_IDS: ReadonlyArray<string> = [
  ...AUTO_VARIANT_IDS,
  "auto/coding:fast",
  "auto/coding:cheap",
  "auto/reasoning",
  "auto/vision",
  "auto/chat:free"
]
