/**
 * Shadow traffic (docs/shadow.md): the `shadow` field a combo's config and the gateway's settings
 * take, the options of the shadow calls, and the report per shadow target.
 */
import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

export const ShadowTarget = Schema.Struct({
  /** What the shadow call asks for: a model id, `<connection>/<model>`, or a combo. */
  model: Schema.Trim.pipe(
    Schema.minLength(1, { message: () => "shadow[].model must not be empty" }),
    Schema.maxLength(300, { message: () => "shadow[].model must be at most 300 characters" })
  ),
  /** Share of the requests also sent to this target (0 to 1). */
  sampleRate: Schema.Number.pipe(Schema.between(0, 1, { message: () => "shadow[].sampleRate must be a fraction between 0 and 1" }))
}).annotations(strict)
export type ShadowTarget = typeof ShadowTarget.Type

export const ShadowTargets = Schema.Array(ShadowTarget).pipe(Schema.maxItems(8, { message: () => "shadow holds at most 8 targets" }))

/** How shadow calls are made, gateway-wide (settings `shadowOptions`). */
export const ShadowOptions = Schema.Struct({
  /** Shadow calls (and their judge calls) stop for the day once they cost this much (USD, UTC day). */
  budgetUsdPerDay: Schema.optionalWith(
    Schema.Number.pipe(
      Schema.finite(),
      Schema.between(0, 1_000_000, { message: () => "shadowOptions.budgetUsdPerDay must be between 0 and 1000000" })
    ),
    {
      default: () => 1
    }
  ),
  /** Shadow calls in flight at once; a sampled request finding none free is skipped. */
  concurrency: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 64, { message: () => "shadowOptions.concurrency must be an integer between 1 and 64" })),
    {
      default: () => 2
    }
  ),
  /** Pairs older than this are deleted. */
  retentionDays: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 3650, { message: () => "shadowOptions.retentionDays must be an integer between 1 and 3650" })),
    {
      default: () => 30
    }
  ),
  /** A model asked, through the gateway, which of the two answers is better (priced and budgeted like any request); none: no preference is
   * taken. */
  judgeModel: Schema.optionalWith(
    Schema.NullOr(Schema.Trim.pipe(Schema.minLength(1, { message: () => "shadowOptions.judgeModel must not be empty" }))),
    {
      default: () => null
    }
  )
}).annotations(strict)
export type ShadowOptions = typeof ShadowOptions.Type

const Interval = Schema.Struct({
  /** The mean of (shadow − primary). */
  mean: Schema.Number,
  /** 95% confidence interval of the mean (normal approximation; equal to the mean below 2 pairs). */
  low: Schema.Number,
  high: Schema.Number,
  n: Schema.Number
})

const Disagreement = Schema.Struct({
  id: Schema.String,
  requestId: Schema.String,
  createdAt: Schema.String,
  request: Schema.String,
  primary: Schema.String,
  shadow: Schema.String,
  similarity: Schema.Number,
  judge: Schema.NullOr(Schema.String)
})

export const ShadowTargetReport = Schema.Struct({
  shadowModel: Schema.String,
  pairs: Schema.Number,
  /** Shadow calls that failed (no answer to compare). */
  failed: Schema.Number,
  exactAgreement: Schema.Number,
  normalizedAgreement: Schema.Number,
  /** Over the pairs where either side called a tool; null when none did. */
  toolAgreement: Schema.NullOr(Schema.Number),
  /** Judged pairs, from the shadow target's side. */
  judge: Schema.Struct({ judged: Schema.Number, wins: Schema.Number, ties: Schema.Number, losses: Schema.Number }),
  costDeltaUsd: Interval,
  latencyDeltaMs: Interval,
  ttftDeltaMs: Schema.NullOr(Interval),
  /** Share of valid answers where the request asked for a JSON Schema; null when none did. */
  schemaValid: Schema.NullOr(Schema.Struct({ primary: Schema.Number, shadow: Schema.Number, n: Schema.Number })),
  /** The pairs that differ most (lowest similarity), to read. */
  worst: Schema.Array(Disagreement)
})
export type ShadowTargetReport = typeof ShadowTargetReport.Type

export const ShadowReport = Schema.Struct({
  scope: Schema.String,
  since: Schema.NullOr(Schema.String),
  targets: Schema.Array(ShadowTargetReport),
  /** Sampled requests not shadowed, by reason (since the process started). */
  skipped: Schema.Record({ key: Schema.String, value: Schema.Number }),
  /** What shadow calls cost today (UTC), and the day's cap. */
  spentTodayUsd: Schema.Number,
  budgetUsdPerDay: Schema.Number
})
export type ShadowReport = typeof ShadowReport.Type

export const ShadowReportQuery = Schema.Struct({
  combo: Schema.String.pipe(Schema.minLength(1, { message: () => "combo must name a combo (or a model id shadowed by the settings)" })),
  /** Only pairs of the last N days. */
  days: Schema.optional(Schema.NumberFromString.pipe(Schema.between(1, 3650, { message: () => "days must be between 1 and 3650" })))
})
