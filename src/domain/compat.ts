/**
 * The live compatibility matrix (docs/compat.md): the recorded request shapes of the supported
 * clients, replayed against configured models through the gateway, and what worked.
 */
import * as Schema from "effect/Schema"
import { strictStruct } from "./parse.js"

const Model = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "models[] must not be empty" }),
  Schema.maxLength(300, { message: () => "models[] must be at most 300 characters" })
)

const Models = Schema.Array(Model).pipe(
  Schema.minItems(1, { message: () => "models must name at least one model" }),
  Schema.maxItems(24, { message: () => "models holds at most 24 models" })
)

/** `GET /api/compat?models=a,b`: the models to plan for (default: the configured ones). */
export const CompatQuery = Schema.Struct({
  models: Schema.optional(Schema.String)
})

export const CompatRun = strictStruct({
  /** The models to run against (default: each enabled connection's configured models). */
  models: Schema.optional(Models),
  /** Only these cases (ids from `GET /api/compat`); default: all. */
  cases: Schema.optional(Schema.Array(Schema.String).pipe(Schema.minItems(1, { message: () => "cases must name at least one case" }))),
  /** No call starts once the run has cost this much (USD); what is left is `skipped`. */
  budgetUsd: Schema.optionalWith(
    Schema.Number.pipe(Schema.finite(), Schema.between(0, 1000, { message: () => "budgetUsd must be between 0 and 1000" })),
    {
      default: () => 0.25
    }
  ),
  concurrency: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, 16, { message: () => "concurrency must be an integer between 1 and 16" })),
    {
      default: () => 4
    }
  )
})
export type CompatRun = typeof CompatRun.Type

export const CompatCase = Schema.Struct({
  id: Schema.String,
  client: Schema.String,
  /** `text`, `streaming`, `tools`, `tool-round-trip`, `structured-output`, `reasoning`, `images`. */
  capability: Schema.String,
  /** The recording it comes from (and what was added to it, for a derived case). */
  source: Schema.String,
  path: Schema.String,
  stream: Schema.Boolean,
  /** Tokens the request carries (estimated from its size) and the most its answer may use. */
  inputTokens: Schema.Number,
  maxOutputTokens: Schema.Number
})

export const CompatCell = Schema.Struct({
  case: Schema.String,
  model: Schema.String,
  /** `pass`, `fail`, `skipped` (budget), `pending` (in the run under way, not answered yet), or `not-run` (no run has tried it). */
  status: Schema.Literal("pass", "fail", "skipped", "pending", "not-run"),
  /** Why it failed or was skipped. */
  reason: Schema.NullOr(Schema.String),
  /** The exchange to read (`GET /api/compat/exchanges/{id}`). */
  exchangeId: Schema.NullOr(Schema.String),
  latencyMs: Schema.NullOr(Schema.Number),
  costUsd: Schema.NullOr(Schema.Number),
  /** The estimate before running; null when the model has no price. */
  estimatedUsd: Schema.NullOr(Schema.Number)
})
export type CompatCell = typeof CompatCell.Type

export const CompatMatrix = Schema.Struct({
  cases: Schema.Array(CompatCase),
  models: Schema.Array(Schema.String),
  /** What running every cell would cost at most (each answer at its output cap), per model and in all; models without a price are listed
   * apart. */
  estimate: Schema.Struct({
    totalUsd: Schema.Number,
    perModel: Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.Number) }),
    unpriced: Schema.Array(Schema.String)
  }),
  /** The run under way or the last one, when there was one. */
  run: Schema.NullOr(
    Schema.Struct({
      id: Schema.String,
      /** `running` until every cell is answered or skipped; `interrupted` when its gateway stopped first. */
      state: Schema.Literal("running", "done", "interrupted"),
      startedAt: Schema.String,
      finishedAt: Schema.NullOr(Schema.String),
      budgetUsd: Schema.Number,
      spentUsd: Schema.Number,
      /** Its cells, and those answered or skipped so far. */
      total: Schema.Number,
      done: Schema.Number,
      passed: Schema.Number,
      failed: Schema.Number,
      skipped: Schema.Number
    })
  ),
  cells: Schema.Array(CompatCell)
})
export type CompatMatrix = typeof CompatMatrix.Type

export const CompatExchange = Schema.Struct({
  id: Schema.String,
  case: Schema.String,
  model: Schema.String,
  status: Schema.Literal("pass", "fail"),
  reason: Schema.NullOr(Schema.String),
  request: Schema.Struct({
    method: Schema.String,
    path: Schema.String,
    headers: Schema.Record({ key: Schema.String, value: Schema.String }),
    body: Schema.Unknown
  }),
  answer: Schema.Struct({
    status: Schema.Number,
    contentType: Schema.String,
    /** The answer as written (its first 64 KiB). */
    body: Schema.String,
    truncated: Schema.Boolean
  })
})
export type CompatExchange = typeof CompatExchange.Type

export const CompatExchangePath = Schema.Struct({ id: Schema.String })
