/**
 * Replay (docs/replay.md): recorded requests sent again to candidate models, compared with what
 * answered them, in the same report as shadow traffic (`ShadowReport`).
 */
import * as Schema from "effect/Schema"
import { strict, strictStruct } from "./parse.js"
import { ShadowReport } from "./shadow.js"

const Model = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "models[] must not be empty" }),
  Schema.maxLength(300, { message: () => "models[] must be at most 300 characters" })
)

/** What to replay: exactly one of a recorded inspector session, usage rows whose bodies were kept, or a JSONL text. */
export const ReplaySource = Schema.Struct({
  sessionId: Schema.optional(Schema.String.pipe(Schema.minLength(1, { message: () => "source.sessionId must not be empty" }))),
  usageIds: Schema.optional(
    Schema.Array(Schema.String.pipe(Schema.minLength(1, { message: () => "source.usageIds[] must not be empty" }))).pipe(
      Schema.minItems(1, { message: () => "source.usageIds must name at least one request" }),
      Schema.maxItems(1000, { message: () => "source.usageIds holds at most 1000 requests" })
    )
  ),
  jsonl: Schema.optional(
    Schema.String.pipe(
      Schema.minLength(1, { message: () => "source.jsonl must hold at least one line" }),
      Schema.maxLength(16 * 1024 * 1024, { message: () => "source.jsonl must be at most 16 MiB" })
    )
  )
})
  .annotations(strict)
  .pipe(
    Schema.filter(
      (s) =>
        [s.sessionId, s.usageIds, s.jsonl].filter((v) => v !== undefined).length === 1 ||
        "source must name exactly one of sessionId, usageIds or jsonl"
    )
  )
export type ReplaySource = typeof ReplaySource.Type

export const StartReplay = strictStruct({
  source: ReplaySource,
  /** The candidate models (a model id, `<connection>/<model>`, or a combo). */
  models: Schema.Array(Model).pipe(
    Schema.minItems(1, { message: () => "models must name at least one candidate model" }),
    Schema.maxItems(8, { message: () => "models holds at most 8 candidates" })
  ),
  /** Calls in flight at once. */
  concurrency: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 16, { message: () => "concurrency must be an integer between 1 and 16" })),
    {
      default: () => 2
    }
  ),
  /** The replay stops starting calls once they cost this much (USD); what is left is skipped (`budget`). */
  budgetUsd: Schema.optionalWith(
    Schema.Number.pipe(Schema.finite(), Schema.between(0, 100_000, { message: () => "budgetUsd must be between 0 and 100000" })),
    {
      default: () => 1
    }
  ),
  /** A model that says which answer is better (priced and counted within the budget); none: no judge. */
  judgeModel: Schema.optional(Schema.NullOr(Model))
})
export type StartReplay = typeof StartReplay.Type

export const ReplayState = Schema.Literal("running", "done", "interrupted")

export const ReplayJob = Schema.Struct({
  id: Schema.String,
  state: ReplayState,
  /** Where the requests came from: `session:<id>`, `usage:<n ids>`, `jsonl:<n lines>`. */
  source: Schema.String,
  models: Schema.Array(Schema.String),
  /** What each candidate is compared with: the answer recorded with the request, or (none recorded) the first model's. */
  baseline: Schema.Literal("recorded", "first-model", "mixed"),
  concurrency: Schema.Number,
  budgetUsd: Schema.Number,
  spentUsd: Schema.Number,
  createdAt: Schema.String,
  finishedAt: Schema.NullOr(Schema.String),
  /** Requests found in the source, and those that can be replayed. */
  requests: Schema.Number,
  replayable: Schema.Number,
  /** Candidate calls: planned (replayable × models), made, failed. */
  calls: Schema.Struct({ total: Schema.Number, done: Schema.Number, failed: Schema.Number }),
  /** Requests or calls left out, by reason (`not_replayable`, `body_not_kept`, `not_found`, `budget`...). */
  skipped: Schema.Record({ key: Schema.String, value: Schema.Number }),
  /** The first few reasons a request was left out, to read. */
  notes: Schema.Array(Schema.String),
  /** The comparison so far (the same report as shadow traffic's, scope `replay:<id>`). */
  report: ShadowReport
})
export type ReplayJob = typeof ReplayJob.Type

export const ReplayIdPath = Schema.Struct({ id: Schema.String })
