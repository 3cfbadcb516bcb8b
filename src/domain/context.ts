import * as Schema from "effect/Schema"
import { oneOf, strict, strictStruct } from "./parse.js"

/** Engine ids (the built-in default combo is json, rtk, whitespace: src/services/context/select.ts). */
export const ENGINE_IDS = ["rtk", "json", "whitespace", "caveman", "summarize"] as const
export type EngineId = (typeof ENGINE_IDS)[number]

/**
 * Compression and context (docs/compression.md): compression combos and their assignments,
 * the preview, analytics, memory entries and injected skills. The routes are in
 * src/management/api/context/Api.ts; the CLI builds its options from the same schemas.
 */

const Name = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "name must not be empty" }),
  Schema.maxLength(100, { message: () => "name must be at most 100 characters" })
)
const Text = (field: string, max: number) =>
  Schema.String.pipe(
    Schema.filter((s) => s.trim().length > 0, { message: () => `${field} must not be empty` }),
    Schema.maxLength(max, { message: () => `${field} must be at most ${max} characters` })
  )
const Strings = (field: string, max: number) =>
  Schema.Array(Schema.Trim.pipe(Schema.minLength(1, { message: () => `${field} entries must not be empty` }), Schema.maxLength(200))).pipe(
    Schema.maxItems(max, { message: () => `${field} takes at most ${max} entries` })
  )

// ---------------------------------------------------------------- combos

export const EngineIdSchema = oneOf(ENGINE_IDS, "engine")

/** One step of a compression combo: an engine and its settings (merged over the engine's configured settings). */
export const EngineStep = Schema.Struct({
  engine: EngineIdSchema,
  config: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}).annotations(strict)
export type EngineStep = typeof EngineStep.Type

const Steps = Schema.Array(EngineStep).pipe(
  Schema.minItems(1, { message: () => "engines must name at least one engine" }),
  Schema.maxItems(10, { message: () => "engines takes at most 10 steps" })
)

export const CreateCompressionCombo = strictStruct({
  name: Name,
  description: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(1000)), { default: () => "" }),
  engines: Steps
})
export type CreateCompressionCombo = typeof CreateCompressionCombo.Type

export const UpdateCompressionCombo = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Schema.String.pipe(Schema.maxLength(1000))),
  engines: Schema.optional(Steps)
}).annotations(strict)
export type UpdateCompressionCombo = typeof UpdateCompressionCombo.Type

/** Where a compression combo applies: requests for these routing combos and these models (`provider/model` or a model id). */
export const CompressionAssignments = strictStruct({
  routingCombos: Schema.optionalWith(Strings("routingCombos", 500), { default: () => [] }),
  models: Schema.optionalWith(Strings("models", 500), { default: () => [] })
})
export type CompressionAssignments = typeof CompressionAssignments.Type

export const CompressionComboView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  engines: Schema.Array(EngineStep),
  assignments: Schema.Struct({ routingCombos: Schema.Array(Schema.String), models: Schema.Array(Schema.String) }),
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type CompressionComboView = typeof CompressionComboView.Type

// ---------------------------------------------------------------- engines

/** An engine's settings: any JSON object here, decoded strictly by the engine's own schema (an unknown field is a 400 naming it). */
export const EngineConfig = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations(strict)

export const LanguagePack = Schema.Struct({ id: Schema.String, name: Schema.String, rules: Schema.Number })
export const CompressionRule = Schema.Struct({ engine: Schema.String, id: Schema.String, description: Schema.String })
export const RtkFilterView = Schema.Struct({
  id: Schema.String,
  description: Schema.String,
  source: Schema.Literal("builtin", "custom", "project"),
  enabled: Schema.Boolean,
  match: Schema.Unknown
})

export const RtkFilterList = Schema.Struct({
  filters: Schema.Array(RtkFilterView),
  /** The project filter files (GATEWAY_RTK_FILTERS_DIR, default DATA_DIR/rtk-filters): each file's filters, or why it is not used. */
  project: Schema.Struct({
    dir: Schema.String,
    trusted: Schema.Boolean,
    files: Schema.Array(Schema.Struct({ file: Schema.String, filters: Schema.Number, errors: Schema.Array(Schema.String) }))
  })
})

export const RtkTestPayload = Schema.Struct({
  text: Schema.String.pipe(Schema.maxLength(5_000_000, { message: () => "text must be at most 5000000 characters" })),
  command: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
  /** Settings for this test only, merged over the configured ones. */
  config: Schema.optional(EngineConfig)
}).annotations(strict)

export const RtkTestResult = Schema.Struct({
  output: Schema.String,
  filter: Schema.NullOr(Schema.String),
  linesBefore: Schema.Number,
  linesAfter: Schema.Number,
  tokensBefore: Schema.Number,
  tokensAfter: Schema.Number,
  steps: Schema.Array(Schema.String)
})

export const RawOutput = Schema.Struct({ id: Schema.String, text: Schema.String, createdAt: Schema.String, expiresAt: Schema.String })

// ---------------------------------------------------------------- preview

export const FormatIdSchema = oneOf(["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"] as const, "format")

export const PreviewPayload = strictStruct({
  /** The wire format of `body`; default openai-chat. */
  format: Schema.optionalWith(FormatIdSchema, { default: () => "openai-chat" as const }),
  /** The usage label of the endpoint (`chat.completions`, `messages`, `responses`, `generateContent`, `api.chat`, `api.generate`,
   * `completions`); default from the format. */
  endpoint: Schema.optional(Schema.String.pipe(Schema.maxLength(50))),
  body: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** As `x-gateway-compression`: `default`, `engine:<id>`, a combo's name or id; default `default`. */
  mode: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(200)), { default: () => "default" }),
  /** The target (`provider/model`): names the tokenizer family. */
  model: Schema.optional(Schema.String.pipe(Schema.maxLength(300)))
})
export type PreviewPayload = typeof PreviewPayload.Type

export const EngineSaving = Schema.Struct({
  engine: Schema.String,
  tokensBefore: Schema.Number,
  tokensAfter: Schema.Number,
  tokensSaved: Schema.Number
})

export const PreviewResult = Schema.Struct({
  mode: Schema.String,
  engines: Schema.Array(EngineSaving),
  tokensBefore: Schema.Number,
  tokensAfter: Schema.Number,
  tokenizer: Schema.String,
  body: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})

// ---------------------------------------------------------------- analytics

export const AnalyticsQuery = Schema.Struct({
  /** First day (YYYY-MM-DD, UTC), default 30 days ago. */
  from: Schema.optional(Schema.String.pipe(Schema.pattern(/^\d{4}-\d{2}-\d{2}$/, { message: () => "from must be a day as YYYY-MM-DD" }))),
  to: Schema.optional(Schema.String.pipe(Schema.pattern(/^\d{4}-\d{2}-\d{2}$/, { message: () => "to must be a day as YYYY-MM-DD" })))
})

const Totals = Schema.Struct({
  requests: Schema.Number,
  tokensBefore: Schema.Number,
  tokensAfter: Schema.Number,
  tokensSaved: Schema.Number,
  savedUsd: Schema.Number,
  injectedTokens: Schema.Number
})
export const AnalyticsRow = Schema.Struct({
  day: Schema.String,
  engine: Schema.String,
  combo: Schema.String,
  model: Schema.String,
  ...Totals.fields
})
export const ContextAnalytics = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  rows: Schema.Array(AnalyticsRow),
  totals: Totals,
  byEngine: Schema.Array(Schema.Struct({ engine: Schema.String, ...Totals.fields })),
  byCombo: Schema.Array(Schema.Struct({ combo: Schema.String, ...Totals.fields })),
  byModel: Schema.Array(Schema.Struct({ model: Schema.String, ...Totals.fields })),
  byDay: Schema.Array(Schema.Struct({ day: Schema.String, ...Totals.fields }))
})
export type ContextAnalytics = typeof ContextAnalytics.Type

// ---------------------------------------------------------------- memory

export const MEMORY_SCOPES = ["global", "key", "session"] as const
export type MemoryScope = (typeof MEMORY_SCOPES)[number]

export const CreateMemory = strictStruct({
  text: Text("text", 20_000),
  /** `global`: every request; `key`: requests of the API key `scopeId`; `session`: requests whose session id (X-Session-Id) is `scopeId`.
   * */
  scope: Schema.optionalWith(oneOf(MEMORY_SCOPES, "scope"), { default: () => "global" as const }),
  scopeId: Schema.optionalWith(Schema.NullOr(Schema.Trim.pipe(Schema.minLength(1), Schema.maxLength(200))), { default: () => null }),
  tags: Schema.optionalWith(Strings("tags", 50), { default: () => [] }),
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true })
})
export type CreateMemory = typeof CreateMemory.Type

export const UpdateMemory = Schema.Struct({
  text: Schema.optional(Text("text", 20_000)),
  scope: Schema.optional(oneOf(MEMORY_SCOPES, "scope")),
  scopeId: Schema.optional(Schema.NullOr(Schema.Trim.pipe(Schema.minLength(1), Schema.maxLength(200)))),
  tags: Schema.optional(Strings("tags", 50)),
  enabled: Schema.optional(Schema.Boolean)
}).annotations(strict)
export type UpdateMemory = typeof UpdateMemory.Type

export const MemoryView = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
  scope: Schema.Literal(...MEMORY_SCOPES),
  scopeId: Schema.NullOr(Schema.String),
  tags: Schema.Array(Schema.String),
  enabled: Schema.Boolean,
  tokens: Schema.Number,
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type MemoryView = typeof MemoryView.Type

export const MemoryQuery = Schema.Struct({
  scope: Schema.optional(oneOf(MEMORY_SCOPES, "scope")),
  tag: Schema.optional(Schema.String)
})

// ---------------------------------------------------------------- skills

export const SkillTrigger = strictStruct({
  /** Injected into every request. */
  always: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Injected when a user turn of the conversation contains one of these (case-insensitive). */
  keywords: Schema.optionalWith(Strings("keywords", 50), { default: () => [] }),
  /** Injected when the model asked matches one of these (`*` matches any run of characters). */
  models: Schema.optionalWith(Strings("models", 50), { default: () => [] })
})
export type SkillTrigger = typeof SkillTrigger.Type

export const CreateContextSkill = strictStruct({
  name: Name,
  /** An agent-skill catalog id (`gw-inference`, `cli-chat`, ...): its file is the text. */
  catalogId: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  /** A custom skill's instructions (when no catalogId). */
  text: Schema.optional(Text("text", 50_000)),
  trigger: Schema.optionalWith(SkillTrigger, { default: () => ({ always: false, keywords: [], models: [] }) }),
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true })
})
export type CreateContextSkill = typeof CreateContextSkill.Type

export const UpdateContextSkill = Schema.Struct({
  name: Schema.optional(Name),
  text: Schema.optional(Text("text", 50_000)),
  trigger: Schema.optional(SkillTrigger),
  enabled: Schema.optional(Schema.Boolean)
}).annotations(strict)
export type UpdateContextSkill = typeof UpdateContextSkill.Type

export const ContextSkillView = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  source: Schema.Literal("catalog", "custom"),
  catalogId: Schema.NullOr(Schema.String),
  text: Schema.String,
  trigger: Schema.Struct({ always: Schema.Boolean, keywords: Schema.Array(Schema.String), models: Schema.Array(Schema.String) }),
  enabled: Schema.Boolean,
  tokens: Schema.Number,
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type ContextSkillView = typeof ContextSkillView.Type
