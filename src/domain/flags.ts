import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

export const FlagSource = Schema.Literal("db", "env", "default")

export const FeatureFlagView = Schema.Struct({
  key: Schema.String,
  label: Schema.String,
  description: Schema.String,
  category: Schema.Literal("security", "network", "policies", "runtime", "cli", "health"),
  type: Schema.Literal("boolean", "enum"),
  enumValues: Schema.NullOr(Schema.Array(Schema.String)),
  defaultValue: Schema.String,
  effectiveValue: Schema.String,
  source: FlagSource,
  requiresRestart: Schema.Boolean,
  /** True for a restart flag whose effective value differs from the value this process started with. */
  pendingRestart: Schema.Boolean,
  warningLevel: Schema.String
})
export type FeatureFlagView = typeof FeatureFlagView.Type

export const FeatureFlagSummary = Schema.Struct({
  total: Schema.Number,
  active: Schema.Number,
  inactive: Schema.Number,
  overriddenByDb: Schema.Number,
  overriddenByEnv: Schema.Number
})

export const FeatureFlagList = Schema.Struct({
  flags: Schema.Array(FeatureFlagView),
  summary: FeatureFlagSummary
})
export type FeatureFlagList = typeof FeatureFlagList.Type

export const SetFeatureFlag = Schema.Struct({
  key: Schema.String.annotations({ description: "Flag name (also its environment variable)." }),
  value: Schema.optional(Schema.String.annotations({ description: "New value; omit to remove the database override." }))
}).annotations(strict)
export type SetFeatureFlag = typeof SetFeatureFlag.Type

export const SetFeatureFlagResult = Schema.Struct({
  key: Schema.String,
  effectiveValue: Schema.String,
  source: FlagSource,
  previousValue: Schema.String,
  previousSource: FlagSource,
  requiresRestart: Schema.Boolean
})
export type SetFeatureFlagResult = typeof SetFeatureFlagResult.Type

export const ClearFeatureFlagsResult = Schema.Struct({
  cleared: Schema.Number,
  message: Schema.String
})
