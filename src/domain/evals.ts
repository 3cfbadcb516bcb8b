import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/** Eval sets and runs (docs/guardrails.md, "Evals"). */

const Text = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100_000))

export const Grader = Schema.Union(
  Schema.Struct({ type: Schema.Literal("exact"), expected: Schema.String, caseSensitive: Schema.optional(Schema.Boolean) }).annotations(
    strict
  ),
  Schema.Struct({ type: Schema.Literal("contains"), expected: Text, caseSensitive: Schema.optional(Schema.Boolean) }).annotations(strict),
  Schema.Struct({
    type: Schema.Literal("regex"),
    pattern: Text,
    flags: Schema.optional(Schema.String.pipe(Schema.pattern(/^[imsu]*$/, { message: () => "flags may be i, m, s and u" })))
  }).annotations(strict),
  /** The answer must be JSON valid against `schema` (the subset in docs/guardrails.md). */
  Schema.Struct({ type: Schema.Literal("json-schema"), schema: Schema.Record({ key: Schema.String, value: Schema.Unknown }) }).annotations(
    strict
  ),
  /** A model (through the gateway) scores the answer from 0 to 10 against the rubric. */
  Schema.Struct({ type: Schema.Literal("judge"), model: Text, rubric: Text }).annotations(strict)
)
export type Grader = typeof Grader.Type

export const EvalCase = Schema.Struct({
  id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100))),
  prompt: Text,
  system: Schema.optional(Text),
  maxTokens: Schema.optional(Schema.Int.pipe(Schema.positive())),
  grader: Grader
}).annotations(strict)
export type EvalCase = typeof EvalCase.Type

export const CreateEvalSet = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
  cases: Schema.Array(EvalCase).pipe(Schema.minItems(1, { message: () => "cases: give at least one case" }), Schema.maxItems(500))
}).annotations(strict)
export type CreateEvalSet = typeof CreateEvalSet.Type

export const EvalSetView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  cases: Schema.Array(EvalCase),
  createdAt: Schema.String,
  createdBy: Schema.String
})
export type EvalSetView = typeof EvalSetView.Type

export const StartRun = Schema.Struct({
  models: Schema.Array(Schema.String.pipe(Schema.minLength(1))).pipe(
    Schema.minItems(1, { message: () => "models: give at least one model id" }),
    Schema.maxItems(20)
  )
}).annotations(strict)

export const CaseResult = Schema.Struct({
  caseId: Schema.String,
  /** 0 to 1 (a judge's 0-10 divided by 10). */
  score: Schema.Number,
  passed: Schema.Boolean,
  latencyMs: Schema.Number,
  costUsd: Schema.Number,
  status: Schema.Number,
  output: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String)
})

export const ModelResult = Schema.Struct({
  model: Schema.String,
  /** Mean case score. */
  score: Schema.Number,
  passed: Schema.Number,
  total: Schema.Number,
  meanLatencyMs: Schema.Number,
  costUsd: Schema.Number,
  cases: Schema.Array(CaseResult)
})
export type ModelResult = typeof ModelResult.Type

export const EvalRunView = Schema.Struct({
  id: Schema.String,
  evalId: Schema.String,
  status: Schema.Literal("queued", "running", "completed", "failed"),
  models: Schema.Array(Schema.String),
  results: Schema.NullOr(Schema.Array(ModelResult)),
  error: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  finishedAt: Schema.NullOr(Schema.String)
})
export type EvalRunView = typeof EvalRunView.Type
