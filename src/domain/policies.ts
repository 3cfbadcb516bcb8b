import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/**
 * Policy documents (docs/guardrails.md, "Policies"): what the gateway lets a request do, applied
 * on the request path. Each POST of a name creates its next version; the current versions of all
 * names apply together (a request must pass every one).
 */

/** A tool name or glob (`*` any run of characters, `?` one), matched case-insensitively. */
const Pattern = Schema.Trim.pipe(Schema.minLength(1, { message: () => "a pattern must not be empty" }), Schema.maxLength(200))

export const PolicyName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, {
    message: () => "name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
  })
)

export const ToolRules = Schema.Struct({
  /** When given (non-empty), only tools matching one of these may be declared or called. */
  allow: Schema.optional(Schema.Array(Pattern).pipe(Schema.maxItems(500))),
  /** Tools matching one of these may never be declared or called (deny wins over allow). */
  deny: Schema.optional(Schema.Array(Pattern).pipe(Schema.maxItems(500)))
}).annotations(strict)
export type ToolRules = typeof ToolRules.Type

/** Policy rules; each optional, at least one required (checked by the service). */
export const PolicyRules = {
  tools: Schema.optional(ToolRules),
  /** API key id (or `*` for every key without its own entry) → model ids or globs it may use. */
  models: Schema.optional(
    Schema.Record({ key: Schema.String.pipe(Schema.minLength(1)), value: Schema.Array(Pattern).pipe(Schema.maxItems(500)) })
  ),
  /** The most output tokens a request may ask for (max_tokens and its equivalents); a request that names none gets this cap. */
  maxTokens: Schema.optional(Schema.Int.pipe(Schema.positive({ message: () => "maxTokens must be a positive integer" }))),
  /** The most a request may cost by estimate, in USD (input estimate and the output cap at the first target's prices). */
  maxCostUsd: Schema.optional(
    Schema.Number.pipe(Schema.finite(), Schema.positive({ message: () => "maxCostUsd must be a positive number" }))
  ),
  /** Words or phrases no request may contain (case-insensitive, in any text of the body). */
  blockedTerms: Schema.optional(Schema.Array(Pattern).pipe(Schema.maxItems(1000)))
}

export const CreatePolicy = Schema.Struct({
  name: PolicyName,
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(1000))),
  /** Default true; a disabled version is kept and listed but not applied. */
  enabled: Schema.optional(Schema.Boolean),
  ...PolicyRules
}).annotations(strict)
export type CreatePolicy = typeof CreatePolicy.Type

export const PolicyView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  version: Schema.Int,
  description: Schema.NullOr(Schema.String),
  enabled: Schema.Boolean,
  tools: Schema.NullOr(ToolRules),
  models: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) })),
  maxTokens: Schema.NullOr(Schema.Number),
  maxCostUsd: Schema.NullOr(Schema.Number),
  blockedTerms: Schema.NullOr(Schema.Array(Schema.String)),
  createdAt: Schema.String,
  createdBy: Schema.String
})
export type PolicyView = typeof PolicyView.Type

export const PolicyList = Schema.Struct({
  policies: Schema.Array(PolicyView),
  /** The TOOL_POLICY_MODE in force: whether tool rules are enforced, warned about or ignored. */
  toolPolicyMode: Schema.String
})

export const PolicyDetail = Schema.Struct({
  policy: Schema.NullOr(PolicyView),
  /** Every version of the name, newest first (deleted ones included, with `deletedAt`). */
  history: Schema.Array(Schema.extend(PolicyView, Schema.Struct({ deletedAt: Schema.NullOr(Schema.String) })))
})
