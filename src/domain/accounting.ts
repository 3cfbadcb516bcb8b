import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { findProvider, PROVIDERS } from "./catalog/catalog.js"
import { BadRequest } from "./errors.js"
import { PerMinute } from "./keys.js"
import { McpKeyAllow } from "./mcpServers.js"
import { decodeOrBadRequest, oneOf, strict } from "./parse.js"
import { Level } from "./teams.js"

/**
 * Money and quotas (spec document 2, "Budget (per API key, USD)"; document 1, "Custom headers"
 * and "Limits"): price overrides (/api/pricing), per-key budgets (/api/usage/budget) and per-key
 * token limits (/api/usage/token-limits). The HTTP API and the CLI decode with these.
 */

/** An optional field that, when present, must be of its type (no `undefined` alternative in the messages). */
const opt = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

const NonEmpty = (name: string, max = 300) =>
  Schema.Trim.pipe(
    Schema.minLength(1, { message: () => `${name} must not be empty` }),
    Schema.maxLength(max, { message: () => `${name} must be at most ${max} characters` })
  )

const KNOWN_PROVIDERS = PROVIDERS.map((p) => p.id)

/** A catalog provider id (case-insensitive on input, stored lowercase). */
const ProviderId = (name: string) =>
  NonEmpty(name, 100).pipe(
    Schema.filter((s) => (findProvider(s) ? true : `${name} '${s}' is not a known provider id; known: ${KNOWN_PROVIDERS.join(", ")}`))
  )

// ---------------------------------------------------------------- pricing

const Price = (name: string, unit: string) =>
  Schema.Number.pipe(Schema.filter((n) => (Number.isFinite(n) && n >= 0 ? true : `${name} must be a non-negative number of USD ${unit}`)))

export const PRICE_FIELDS = ["input", "output", "cachedInput", "cacheWrite", "perImage", "perSecond", "perCharacter", "perSearch"] as const
export type PriceField = (typeof PRICE_FIELDS)[number]

/** `PUT /api/pricing`: replaces the override of one (provider, model); unset fields fall back to the catalog. */
export const SetPrice = Schema.Struct({
  provider: ProviderId("provider"),
  model: NonEmpty("model"),
  input: opt(Price("input", "per 1M tokens")),
  output: opt(Price("output", "per 1M tokens")),
  cachedInput: opt(Price("cachedInput", "per 1M tokens")),
  cacheWrite: opt(Price("cacheWrite", "per 1M tokens")),
  perImage: opt(Price("perImage", "per image")),
  perSecond: opt(Price("perSecond", "per second")),
  perCharacter: opt(Price("perCharacter", "per character")),
  perSearch: opt(Price("perSearch", "per search unit"))
})
  .annotations(strict)
  .pipe(Schema.filter((p) => (PRICE_FIELDS.some((f) => p[f] !== undefined) ? true : `set at least one price: ${PRICE_FIELDS.join(", ")}`)))
export type SetPrice = typeof SetPrice.Type

/** `synced`: the pricing sync's price list (PRICING_SYNC_ENABLED, docs/accounting.md). */
export const PriceSource = Schema.Literal("catalog", "override", "catalog+override", "synced", "synced+override")
export type PriceSource = typeof PriceSource.Type

/** One row of `GET /api/pricing`: the effective price of a model. */
export const PriceRow = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  /** Catalog kind (`chat`, `embedding`); null for a model only an override knows. */
  kind: Schema.NullOr(Schema.String),
  input: Schema.Number,
  output: Schema.Number,
  cachedInput: Schema.NullOr(Schema.Number),
  cacheWrite: Schema.NullOr(Schema.Number),
  perImage: Schema.NullOr(Schema.Number),
  perSecond: Schema.NullOr(Schema.Number),
  perCharacter: Schema.NullOr(Schema.Number),
  perSearch: Schema.NullOr(Schema.Number),
  source: PriceSource,
  /** When the override was last set; null without one. */
  overrideUpdatedAt: Schema.NullOr(Schema.String)
})
export type PriceRow = typeof PriceRow.Type

export const decodeSetPrice = (input: unknown): Effect.Effect<SetPrice, BadRequest> => decodeOrBadRequest(SetPrice)(input)

// ---------------------------------------------------------------- levels

/**
 * The level a limit is set on (docs/accounting.md, "Limits at every level"): exactly one of a key
 * (`apiKeyId`), a team (`teamId`: its id or name), a user (`userId`: its id or email) or the
 * organisation (`organisation: true`).
 */
const SubjectFields = {
  apiKeyId: opt(NonEmpty("apiKeyId", 200)),
  teamId: opt(NonEmpty("teamId", 200)),
  userId: opt(NonEmpty("userId", 200)),
  organisation: opt(Schema.Literal(true).annotations({ message: () => "organisation must be true (the organisation's own limit)" }))
}

/** A body's subject fields. */
export interface SubjectInput {
  readonly apiKeyId?: string | undefined
  readonly teamId?: string | undefined
  readonly userId?: string | undefined
  readonly organisation?: true | undefined
}

/** The one level a body names, as given (a team or user may still be a name or email), or why not. */
export type SubjectRef =
  | { readonly level: "key"; readonly ref: string }
  | { readonly level: "team"; readonly ref: string }
  | { readonly level: "user"; readonly ref: string }
  | { readonly level: "organisation"; readonly ref: "org" }

export const subjectRef = (b: SubjectInput): SubjectRef | string => {
  const named: Array<SubjectRef> = []
  if (b.apiKeyId !== undefined) named.push({ level: "key", ref: b.apiKeyId })
  if (b.teamId !== undefined) named.push({ level: "team", ref: b.teamId })
  if (b.userId !== undefined) named.push({ level: "user", ref: b.userId })
  if (b.organisation === true) named.push({ level: "organisation", ref: "org" })
  if (named.length === 1) return named[0]!
  const fields = ["apiKeyId", "teamId", "userId", "organisation"].filter((f) => b[f as keyof SubjectInput] !== undefined)
  return named.length === 0
    ? "name the level the limit is on: one of apiKeyId, teamId, userId or organisation: true"
    : `name one level only: got ${fields.join(" and ")}`
}

/** A view's subject fields beside `apiKeyId`, which carries the subject's id on every level (a key's id, `team_…`, `usr_…`, `org`). */
const SubjectViewFields = {
  /** Absent on a key's own limits (their answer is as before). */
  level: opt(Level),
  teamId: opt(Schema.String),
  userId: opt(Schema.String),
  organisation: opt(Schema.Literal(true)),
  /** The team's name or the user's email. */
  subjectName: opt(Schema.String)
}

// ---------------------------------------------------------------- budgets

export const BUDGET_INTERVALS = ["daily", "weekly", "monthly"] as const
export type BudgetInterval = (typeof BUDGET_INTERVALS)[number]

const Usd = (name: string) =>
  Schema.Number.pipe(Schema.filter((n) => (Number.isFinite(n) && n >= 0 ? true : `${name} must be a non-negative number of USD`)))

export const ResetTime = Schema.String.pipe(
  Schema.pattern(/^([01]\d|2[0-3]):[0-5]\d$/, { message: () => "resetTime must be HH:MM (UTC), from 00:00 to 23:59" })
)

const LIMIT_FIELD: Record<BudgetInterval, "dailyLimitUsd" | "weeklyLimitUsd" | "monthlyLimitUsd"> = {
  daily: "dailyLimitUsd",
  weekly: "weeklyLimitUsd",
  monthly: "monthlyLimitUsd"
}

/**
 * `POST /api/usage/budget`. A limit of 0 (or absent) means no limit for that window; at least
 * one must be greater than 0. The body replaces the key's budget as a whole.
 */
const SetBudgetFields = {
  ...SubjectFields,
  dailyLimitUsd: opt(Usd("dailyLimitUsd")),
  weeklyLimitUsd: opt(Usd("weeklyLimitUsd")),
  monthlyLimitUsd: opt(Usd("monthlyLimitUsd")),
  warningThreshold: opt(
    Schema.Number.pipe(Schema.filter((n) => (n >= 0 && n <= 1 ? true : "warningThreshold must be a fraction between 0 and 1")))
  ),
  resetInterval: opt(oneOf(BUDGET_INTERVALS, "resetInterval")),
  resetTime: opt(ResetTime)
}

/** At least one positive limit, and a reset interval that is one of the limited windows. */
const budgetLimits = (
  b: Partial<Record<(typeof LIMIT_FIELD)[BudgetInterval], number>> & { readonly resetInterval?: BudgetInterval | undefined }
): string | true => {
  const limited = BUDGET_INTERVALS.filter((w) => (b[LIMIT_FIELD[w]] ?? 0) > 0)
  if (limited.length === 0) return "set at least one limit greater than 0: dailyLimitUsd, weeklyLimitUsd or monthlyLimitUsd"
  if (b.resetInterval !== undefined && !limited.includes(b.resetInterval)) {
    return `resetInterval is ${b.resetInterval} but ${LIMIT_FIELD[b.resetInterval]} is not set (greater than 0); limited windows: ${limited.join(", ")}`
  }
  return true
}

export const SetBudget = Schema.Struct(SetBudgetFields)
  .annotations(strict)
  .pipe(
    Schema.filter((b) => {
      const subject = subjectRef(b)
      return typeof subject === "string" ? subject : budgetLimits(b)
    })
  )
export type SetBudget = typeof SetBudget.Type

/** A budget with its defaults applied, as stored. Limits of 0 are stored as null (no limit). */
export interface BudgetConfig {
  /** The subject's id: a key's, `team_…`, `usr_…` or `org` (the column kept its name). */
  readonly apiKeyId: string
  readonly dailyLimitUsd: number | null
  readonly weeklyLimitUsd: number | null
  readonly monthlyLimitUsd: number | null
  readonly warningThreshold: number
  readonly resetInterval: BudgetInterval
  readonly resetTime: string
}

export const DEFAULT_WARNING_THRESHOLD = 0.8
export const DEFAULT_RESET_TIME = "00:00"

export const budgetLimit = (
  b: Pick<BudgetConfig, "dailyLimitUsd" | "weeklyLimitUsd" | "monthlyLimitUsd">,
  w: BudgetInterval
): number | null => b[LIMIT_FIELD[w]]

/** Applies the defaults: threshold 0.8, resetTime 00:00, resetInterval the shortest limited window. */
export const budgetConfig = (input: Omit<SetBudget, "apiKeyId"> & { readonly apiKeyId: string }): BudgetConfig => {
  const limit = (n: number | undefined) => (n !== undefined && n > 0 ? n : null)
  const b = {
    dailyLimitUsd: limit(input.dailyLimitUsd),
    weeklyLimitUsd: limit(input.weeklyLimitUsd),
    monthlyLimitUsd: limit(input.monthlyLimitUsd)
  }
  return {
    apiKeyId: input.apiKeyId,
    ...b,
    warningThreshold: input.warningThreshold ?? DEFAULT_WARNING_THRESHOLD,
    resetInterval: input.resetInterval ?? BUDGET_INTERVALS.find((w) => budgetLimit(b, w) !== null) ?? "monthly",
    resetTime: input.resetTime ?? DEFAULT_RESET_TIME
  }
}

const LEGACY_KEYS = ["keyId", "limit", "period"] as const

/**
 * The body of `POST /api/usage/budget` as the HttpApi decodes it: `SetBudget`, whose legacy
 * fields (keyId, limit, period) are declared only to answer `LEGACY_BUDGET_MESSAGE` for them.
 */
export const SetBudgetPayload = Schema.Struct({
  ...SetBudgetFields,
  keyId: opt(Schema.Union(Schema.String, Schema.Number)),
  limit: opt(Schema.Union(Schema.String, Schema.Number)),
  period: opt(Schema.Union(Schema.String, Schema.Number))
})
  .annotations(strict)
  .pipe(Schema.filter((b) => (LEGACY_KEYS.some((k) => b[k] !== undefined) ? LEGACY_BUDGET_MESSAGE : true)))

export const LEGACY_BUDGET_MESSAGE =
  "the legacy budget shape (keyId, limit, period) is not accepted; send apiKeyId and at least one of dailyLimitUsd, weeklyLimitUsd, monthlyLimitUsd " +
  "(plus optional warningThreshold 0..1, resetInterval daily|weekly|monthly, resetTime HH:MM UTC), " +
  'e.g. {"apiKeyId": "<key id>", "monthlyLimitUsd": 50}'

/** Decodes a budget body: the legacy shape, unknown fields and a body without a positive limit are 400s. */
export const decodeSetBudget = (input: unknown): Effect.Effect<SetBudget, BadRequest> => {
  if (typeof input === "object" && input !== null && !Array.isArray(input) && LEGACY_KEYS.some((k) => Object.hasOwn(input, k))) {
    return Effect.fail(new BadRequest({ message: LEGACY_BUDGET_MESSAGE }))
  }
  return decodeOrBadRequest(SetBudget)(input)
}

/** The state of one budget window. */
export const BudgetWindowStatus = Schema.Struct({
  limitUsd: Schema.Number,
  spentUsd: Schema.Number,
  /** `max(0, limitUsd - spentUsd)`. */
  remainingUsd: Schema.Number,
  /** ISO 8601: when the current window began. */
  windowStart: Schema.String,
  /** ISO 8601: when it resets. */
  resetsAt: Schema.String,
  /** spentUsd ≥ warningThreshold × limitUsd. */
  warning: Schema.Boolean,
  /** spentUsd ≥ limitUsd. */
  exceeded: Schema.Boolean
})
export type BudgetWindowStatus = typeof BudgetWindowStatus.Type

/** One entry of `GET /api/usage/budget`. */
export const BudgetStatus = Schema.Struct({
  apiKeyId: Schema.String,
  ...SubjectViewFields,
  dailyLimitUsd: Schema.NullOr(Schema.Number),
  weeklyLimitUsd: Schema.NullOr(Schema.Number),
  monthlyLimitUsd: Schema.NullOr(Schema.Number),
  warningThreshold: Schema.Number,
  resetInterval: Schema.Literal(...BUDGET_INTERVALS),
  resetTime: Schema.String,
  /** Only the windows that have a limit. */
  windows: Schema.Struct({
    daily: opt(BudgetWindowStatus),
    weekly: opt(BudgetWindowStatus),
    monthly: opt(BudgetWindowStatus)
  }),
  /** The `resetInterval` window's figures. */
  limitUsd: Schema.Number,
  spentUsd: Schema.Number,
  remainingUsd: Schema.Number,
  resetsAt: Schema.String,
  /** The `resetInterval` window reached its warning threshold. */
  warning: Schema.Boolean,
  /** Any window reached its limit (requests with this key are refused until it resets). */
  exceeded: Schema.Boolean,
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type BudgetStatus = typeof BudgetStatus.Type

// ---------------------------------------------------------------- token limits

export const TOKEN_LIMIT_SCOPES = ["global", "provider", "model"] as const
export type TokenLimitScope = (typeof TOKEN_LIMIT_SCOPES)[number]
export const TOKEN_LIMIT_WINDOWS = ["minute", "hour", "day", "week", "month"] as const
export type TokenLimitWindow = (typeof TOKEN_LIMIT_WINDOWS)[number]

/** `POST /api/usage/token-limits`. */
export const CreateTokenLimit = Schema.Struct({
  ...SubjectFields,
  scope: oneOf(TOKEN_LIMIT_SCOPES, "scope"),
  /** scope provider: the provider id. */
  provider: opt(ProviderId("provider")),
  /** scope model: the model as the client writes it, `<provider>/<model>`, or a bare model id. */
  model: opt(NonEmpty("model")),
  maxTokens: Schema.Number.pipe(Schema.filter((n) => (Number.isSafeInteger(n) && n > 0 ? true : "maxTokens must be a positive integer"))),
  window: opt(oneOf(TOKEN_LIMIT_WINDOWS, "window"))
})
  .annotations(strict)
  .pipe(
    Schema.filter((l) => {
      const subject = subjectRef(l)
      if (typeof subject === "string") return subject
      switch (l.scope) {
        case "global":
          return l.provider === undefined && l.model === undefined ? true : "scope global takes neither provider nor model"
        case "provider":
          if (l.provider === undefined) return "scope provider needs provider (a provider id)"
          return l.model === undefined ? true : "scope provider takes provider only, not model (use scope model)"
        case "model":
          if (l.model === undefined) return "scope model needs model (the requested model id, <provider>/<model>, or a bare model id)"
          return l.provider === undefined ? true : "scope model takes model only, not provider (write the model as <provider>/<model>)"
      }
    })
  )
export type CreateTokenLimit = typeof CreateTokenLimit.Type

export const decodeCreateTokenLimit = (input: unknown): Effect.Effect<CreateTokenLimit, BadRequest> =>
  decodeOrBadRequest(CreateTokenLimit)(input)

export const TokenLimitView = Schema.Struct({
  id: Schema.String,
  apiKeyId: Schema.String,
  ...SubjectViewFields,
  scope: Schema.Literal(...TOKEN_LIMIT_SCOPES),
  provider: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  maxTokens: Schema.Number,
  window: Schema.Literal(...TOKEN_LIMIT_WINDOWS),
  /** Input plus output tokens used in the current window. */
  usedTokens: Schema.Number,
  /** ISO 8601. */
  windowStart: Schema.String,
  /** ISO 8601. */
  resetsAt: Schema.String,
  createdAt: Schema.String
})
export type TokenLimitView = typeof TokenLimitView.Type

// ---------------------------------------------------------------- rate limits, models and MCP per level

/** At most this many model patterns on one level. */
const MAX_MODEL_PATTERNS = 200

/** Model and combo patterns: the id as the client writes it, `<provider>/<model>`, a combo's name; `*` any run of characters. */
export const ModelPatterns = Schema.Array(NonEmpty("models[]", 300)).pipe(
  Schema.minItems(1, { message: () => "models must not be empty (null removes the limit)" }),
  Schema.maxItems(MAX_MODEL_PATTERNS, { message: () => `models takes at most ${MAX_MODEL_PATTERNS} patterns` })
)

/**
 * `POST /api/usage/limits`: the limits of one level other than budgets and token limits. The fields
 * given change, null removes one; a key's `rpm`, `tpm` and `mcp` are the key's own (as
 * `PATCH /api/keys/{id}` sets them).
 */
export const SetLevelLimits = Schema.Struct({
  ...SubjectFields,
  /** Requests per minute of the level together. */
  rpm: opt(Schema.NullOr(PerMinute)),
  /** Tokens (input plus output) per minute. */
  tpm: opt(Schema.NullOr(PerMinute)),
  /** The models and combos the level may use. */
  models: opt(Schema.NullOr(ModelPatterns)),
  /** The MCP servers and tools the level may use (docs/mcp.md). */
  mcp: opt(Schema.NullOr(McpKeyAllow))
})
  .annotations(strict)
  .pipe(
    Schema.filter((b) => {
      const subject = subjectRef(b)
      if (typeof subject === "string") return subject
      return b.rpm === undefined && b.tpm === undefined && b.models === undefined && b.mcp === undefined
        ? "set at least one of rpm, tpm, models or mcp (null removes one)"
        : true
    })
  )
export type SetLevelLimits = typeof SetLevelLimits.Type

export const decodeSetLevelLimits = (input: unknown): Effect.Effect<SetLevelLimits, BadRequest> => decodeOrBadRequest(SetLevelLimits)(input)

/** One level's rate limits, models and MCP access (null: no limit of that kind on this level). */
export const LevelLimitsView = Schema.Struct({
  subjectId: Schema.String,
  level: Level,
  /** The key's, team's or organisation's name, or the user's email. */
  name: Schema.String,
  rpm: Schema.NullOr(Schema.Number),
  tpm: Schema.NullOr(Schema.Number),
  models: Schema.NullOr(Schema.Array(Schema.String)),
  mcp: Schema.NullOr(Schema.Struct({ allow: Schema.Array(Schema.String) })),
  /** The levels above this one whose limits a request of it must also be within, nearest first. */
  above: Schema.Array(Schema.Struct({ subjectId: Schema.String, level: Level, name: Schema.String })),
  updatedAt: Schema.NullOr(Schema.String)
})
export type LevelLimitsView = typeof LevelLimitsView.Type

/** `GET /api/usage/budget`, `/api/usage/token-limits`, `/api/usage/limits`: one level, or `level` (`all`, or one level) to list. */
export const SubjectQuery = Schema.Struct({
  apiKeyId: Schema.optional(Schema.String),
  teamId: Schema.optional(Schema.String),
  userId: Schema.optional(Schema.String),
  organisation: Schema.optional(Schema.Literal("true")),
  level: Schema.optional(Schema.Literal("all", "organisation", "team", "user", "key"))
})
export type SubjectQuery = typeof SubjectQuery.Type
