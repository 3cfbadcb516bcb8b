import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"
import { ComboBridge } from "./bridge.js"
import { MaxQueueWaitSeconds } from "./quotaQueue.js"
import { ShadowTargets } from "./shadow.js"

/** The 17 routing strategy values of a combo (spec document 1). */
export const STRATEGY_NAMES = [
  "priority",
  "weighted",
  "round-robin",
  "context-relay",
  "fill-first",
  "p2c",
  "random",
  "least-used",
  "cost-optimized",
  "reset-aware",
  "reset-window",
  "headroom",
  "strict-random",
  "auto",
  "lkgp",
  "context-optimized",
  "fusion"
] as const
export type StrategyName = (typeof STRATEGY_NAMES)[number]

/** The 12 scoring factors (spec document 1, "Scoring factors"). */
export const FACTORS = [
  "health",
  "quota",
  "costInv",
  "latencyInv",
  "taskFit",
  "stability",
  "tierPriority",
  "tierAffinity",
  "specificityMatch",
  "contextAffinity",
  "connectionDensity",
  "resetWindowAffinity"
] as const
export type Factor = (typeof FACTORS)[number]

/**
 * Routing combos (spec document 1, "Combo"): a name used as a model id, one of the 17
 * strategies, ordered targets and a strategy configuration. The HTTP API (/api/combos*) and the
 * CLI (`gateway combo ...`) validate with these schemas.
 */

/** Combo names are model ids: no slash (that is `<provider>/<model>`), no spaces, not `auto`. */
export const ComboName = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(64, { message: () => "name must be at most 64 characters" }),
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, {
    message: () => "name may hold letters, digits, '.', '_', ':' and '-' only (it is used as a model id, so no '/')"
  }),
  Schema.filter((s) => (s.toLowerCase() === "auto" ? "name 'auto' is reserved for the virtual auto model" : true))
)

export const StrategyName = oneOf(STRATEGY_NAMES, "strategy")

export const ComboTarget = Schema.Struct({
  /** `<provider or connection>/<model>`, or a bare model id a connection serves. */
  model: Schema.Trim.pipe(
    Schema.minLength(1, { message: () => "targets[].model must not be empty" }),
    Schema.maxLength(300, { message: () => "targets[].model must be at most 300 characters" })
  ),
  /** `weighted`, `p2c`, quota share: relative weight (default 1). */
  weight: Schema.optional(
    Schema.Number.pipe(
      Schema.finite(),
      Schema.between(0, 1_000_000, { message: () => "targets[].weight must be a number between 0 and 1000000" })
    )
  )
}).annotations(strict)
export type ComboTarget = typeof ComboTarget.Type

const FACTOR_SET: ReadonlySet<string> = new Set(FACTORS)
const Weights = Schema.Record({
  key: Schema.String,
  value: Schema.Number.pipe(
    Schema.finite(),
    Schema.between(0, 1000, { message: () => "auto.weights values must be numbers between 0 and 1000" })
  )
}).pipe(
  Schema.filter((w) => {
    const unknown = Object.keys(w).filter((k) => !FACTOR_SET.has(k))
    return unknown.length === 0
      ? true
      : `auto.weights: unknown factor ${unknown.map((k) => `'${k}'`).join(", ")}; factors are ${FACTORS.join(", ")}`
  })
)

const PositiveMs = (name: string) =>
  Schema.Int.pipe(
    Schema.between(1, 3_600_000, { message: () => `${name} must be an integer number of milliseconds between 1 and 3600000` })
  )

export const ComboConfig = Schema.Struct({
  /** fusion: the synthesizing model; default the first panel model. */
  judgeModel: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "judgeModel must not be empty" }))),
  fusionTuning: Schema.optional(
    Schema.Struct({
      minPanel: Schema.optional(
        Schema.Int.pipe(Schema.between(1, 64, { message: () => "fusionTuning.minPanel must be an integer between 1 and 64" }))
      ),
      stragglerGraceMs: Schema.optional(PositiveMs("fusionTuning.stragglerGraceMs")),
      panelHardTimeoutMs: Schema.optional(PositiveMs("fusionTuning.panelHardTimeoutMs"))
    }).annotations(strict)
  ),
  /** auto: rules, cost/eco, latency/fast, sla-aware/sla, lkgp, or a registered custom name. */
  routerStrategy: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "routerStrategy must not be empty" }))),
  auto: Schema.optional(
    Schema.Struct({
      weights: Schema.optional(Weights),
      /** Restricts auto candidates to these providers (provider ids or connection names). */
      candidatePool: Schema.optional(
        Schema.Array(Schema.Trim.pipe(Schema.minLength(1, { message: () => "auto.candidatePool entries must not be empty" })))
      ),
      /** Legacy location of routerStrategy. */
      routerStrategy: Schema.optional(Schema.Trim.pipe(Schema.minLength(1, { message: () => "auto.routerStrategy must not be empty" })))
    }).annotations(strict)
  ),
  /** auto: a saved weight pack (ship-fast, cost-saver, quality-first, offline-friendly, reliability-first). */
  modePack: Schema.optional(Schema.Trim),
  /** auto: per-request cost ceiling in USD. */
  budgetCap: Schema.optional(
    Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "budgetCap must be a positive number of USD" }))
  ),
  /** auto: share of requests sent to a random candidate (default 0.05). */
  explorationRate: Schema.optional(Schema.Number.pipe(Schema.between(0, 1, { message: () => "explorationRate must be between 0 and 1" }))),
  slaTargetP95Ms: Schema.optional(
    Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "slaTargetP95Ms must be a positive number" }))
  ),
  slaMaxErrorRate: Schema.optional(
    Schema.Number.pipe(Schema.between(0, 1, { message: () => "slaMaxErrorRate must be a fraction between 0 and 1" }))
  ),
  slaMaxCostPer1MTokens: Schema.optional(
    Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "slaMaxCostPer1MTokens must be a positive number" }))
  ),
  slaHardConstraints: Schema.optional(Schema.Boolean),
  /**
   * Keep a conversation without a session id on the target whose prompt cache holds its prefix
   * (docs/routing.md, "Prompt-cache affinity"). Default: on for strategies that order by
   * preference, off for those that spread requests (round-robin, weighted, random, ...).
   */
  promptCacheAffinity: Schema.optional(Schema.Boolean),
  /** Shadow traffic (docs/shadow.md): a sample of the combo's requests also sent to each target, after the answer went out. */
  shadow: Schema.optional(ShadowTargets),
  /** Bridge models of the combo's targets that cannot take an input modality (docs/bridge.md); the top-level `bridge` sets it too. */
  bridge: Schema.optional(ComboBridge),
  /**
   * Longest wait, in seconds, for a quota to reset when every target is out of it (docs/resilience.md, "Waiting out a quota");
   * 0 or absent: off. With the key's own, the smaller applies.
   */
  maxQueueWaitSeconds: Schema.optional(MaxQueueWaitSeconds)
}).annotations(strict)
export type ComboConfig = typeof ComboConfig.Type

const comboFields = {
  strategy: StrategyName,
  targets: Schema.Array(ComboTarget).pipe(Schema.maxItems(64, { message: () => "a combo holds at most 64 targets" })),
  config: ComboConfig,
  description: Schema.NullOr(Schema.String.pipe(Schema.maxLength(500, { message: () => "description must be at most 500 characters" }))),
  enabled: Schema.Boolean
}

export const CreateCombo = Schema.Struct({
  id: Schema.optional(
    Schema.Trim.pipe(
      Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
        message: () => "id may hold letters, digits, '.', '_' and '-' only (at most 64)"
      })
    )
  ),
  name: ComboName,
  strategy: comboFields.strategy,
  targets: Schema.optional(comboFields.targets),
  config: Schema.optional(comboFields.config),
  /** The combo's bridge models per input modality (docs/bridge.md), kept as `config.bridge`; null removes it. */
  bridge: Schema.optional(Schema.NullOr(ComboBridge)),
  description: Schema.optional(comboFields.description),
  enabled: Schema.optional(comboFields.enabled)
}).annotations(strict)
export type CreateCombo = typeof CreateCombo.Type

export const UpdateCombo = Schema.Struct({
  name: Schema.optional(ComboName),
  strategy: Schema.optional(comboFields.strategy),
  targets: Schema.optional(comboFields.targets),
  config: Schema.optional(comboFields.config),
  /** The combo's bridge models (docs/bridge.md), kept as `config.bridge`; null removes it. */
  bridge: Schema.optional(Schema.NullOr(ComboBridge)),
  description: Schema.optional(comboFields.description),
  enabled: Schema.optional(comboFields.enabled)
}).annotations(strict)
export type UpdateCombo = typeof UpdateCombo.Type

export const ComboView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  strategy: Schema.String,
  targets: Schema.Array(Schema.Struct({ model: Schema.String, weight: Schema.optional(Schema.Number) })),
  config: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** The combo's own bridge models (`config.bridge`, docs/bridge.md); null: the gateway's default. */
  bridge: Schema.NullOr(ComboBridge),
  description: Schema.NullOr(Schema.String),
  enabled: Schema.Boolean,
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type ComboView = typeof ComboView.Type

/** One candidate of an auto pool, as GET /api/combos/auto lists it. */
export const AutoPoolEntry = Schema.Struct({
  model: Schema.String,
  provider: Schema.String,
  connection: Schema.String,
  context_length: Schema.NullOr(Schema.Number),
  max_output_tokens: Schema.NullOr(Schema.Number),
  tier: Schema.String,
  capabilities: Schema.Struct({ tools: Schema.Boolean, vision: Schema.Boolean, reasoning: Schema.Boolean })
})

export const AutoVariantView = Schema.Struct({
  id: Schema.String,
  description: Schema.String,
  routerStrategy: Schema.String,
  weights: Schema.Record({ key: Schema.String, value: Schema.Number }),
  explorationRate: Schema.Number,
  pool: Schema.Array(AutoPoolEntry),
  /** Maximum over the pool; a default when no pool model declares one (never 0). */
  context_length: Schema.Number,
  max_output_tokens: Schema.Number
})

export const AutoCombos = Schema.Struct({
  variants: Schema.Array(AutoVariantView),
  /** Compositions `auto/<category>[:<tier>]` resolve on demand; these are the advertised ones. */
  advertised: Schema.Array(Schema.String),
  categories: Schema.Array(Schema.String),
  tiers: Schema.Array(Schema.String)
})
