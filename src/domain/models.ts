import * as Schema from "effect/Schema"
import { oneOf, strict } from "./parse.js"

/**
 * The model catalog, aliases and custom models (spec document 2, "Routing config" and
 * "Providers"): `/api/models/catalog`, `/api/models/alias`, `/api/provider-models`.
 */

export const MODEL_KINDS = [
  "chat",
  "embedding",
  "image",
  "video",
  "music",
  "speech",
  "transcription",
  "rerank",
  "moderation",
  "search"
] as const
export const CAPABILITIES = ["tools", "vision", "reasoning", "audio", "pdf", "json", "realtime"] as const
export type CapabilityName = (typeof CAPABILITIES)[number]

const ModelIdText = (field: string) =>
  Schema.Trim.pipe(
    Schema.minLength(1, { message: () => `${field} must not be empty` }),
    Schema.maxLength(200, { message: () => `${field} must be at most 200 characters` }),
    Schema.pattern(/^[^\s]+$/, { message: () => `${field} must not contain whitespace` })
  )

const PerMillion = (field: string) =>
  Schema.Number.pipe(
    Schema.finite(),
    Schema.between(0, 100_000, { message: () => `${field} must be a number of USD per 1M tokens between 0 and 100000` })
  )

export const ModelPrice = Schema.Struct({
  input: Schema.optional(PerMillion("price.input")),
  output: Schema.optional(PerMillion("price.output")),
  cachedInput: Schema.optional(PerMillion("price.cachedInput"))
}).annotations(strict)

export const CatalogModel = Schema.Struct({
  provider: Schema.String,
  /** The connection that serves it, when the entry comes from a connection; null: catalog only. */
  connection: Schema.NullOr(Schema.String),
  /** `<connection>/<model>` when connected, else `<provider>/<model>`. */
  id: Schema.String,
  model: Schema.String,
  name: Schema.String,
  kind: Schema.String,
  contextWindow: Schema.Number,
  maxOutput: Schema.Number,
  capabilities: Schema.Struct({
    tools: Schema.Boolean,
    vision: Schema.Boolean,
    reasoning: Schema.Boolean,
    audio: Schema.Boolean,
    pdf: Schema.Boolean,
    /** Served over `/v1/realtime` (docs/realtime.md). */
    realtime: Schema.Boolean
  }),
  tier: Schema.String,
  price: Schema.Struct({ input: Schema.Number, output: Schema.Number, cachedInput: Schema.NullOr(Schema.Number) }),
  custom: Schema.Boolean,
  noThinkingAlias: Schema.Boolean
})
export type CatalogModel = typeof CatalogModel.Type

export const CatalogQuery = Schema.Struct({
  provider: Schema.optional(Schema.String),
  /** `connected`: only models a connection serves; `all` (default): the whole catalog plus custom models. */
  scope: Schema.optional(oneOf(["all", "connected"] as const, "scope"))
})

export const ModelCatalog = Schema.Struct({ models: Schema.Array(CatalogModel) })

// ---------------------------------------------------------------- aliases

export const SetModelAlias = Schema.Struct({
  alias: ModelIdText("alias"),
  target: Schema.Trim.pipe(
    Schema.minLength(1, { message: () => "target must not be empty" }),
    Schema.maxLength(300, { message: () => "target must be at most 300 characters" }),
    Schema.pattern(/^[^\s]+$/, { message: () => "target must not contain whitespace" })
  )
}).annotations(strict)
export type SetModelAlias = typeof SetModelAlias.Type

export const ModelAliasView = Schema.Struct({
  alias: Schema.String,
  target: Schema.String,
  /** `user`: set with POST; `compat`: a well-known client id added by MODEL_ALIAS_COMPAT_ENABLED. */
  source: Schema.Literal("user", "compat")
})
export type ModelAliasView = typeof ModelAliasView.Type

export const ModelAliasList = Schema.Struct({ aliases: Schema.Array(ModelAliasView), compat: Schema.Boolean })

export const AliasQuery = Schema.Struct({ alias: ModelIdText("alias") })

// ---------------------------------------------------------------- custom models

const ProviderRef = Schema.Trim.pipe(
  Schema.minLength(1, { message: () => "provider must not be empty (a connection name or a provider id)" }),
  Schema.maxLength(100, { message: () => "provider must be at most 100 characters" })
)

const ModelFields = {
  name: Schema.optional(
    Schema.Trim.pipe(
      Schema.minLength(1, { message: () => "name must not be empty" }),
      Schema.maxLength(200, { message: () => "name must be at most 200 characters" })
    )
  ),
  kind: Schema.optional(oneOf(MODEL_KINDS, "kind")),
  contextLength: Schema.optional(
    Schema.Int.pipe(Schema.between(0, 100_000_000, { message: () => "contextLength must be an integer between 0 and 100000000" }))
  ),
  maxOutput: Schema.optional(
    Schema.Int.pipe(Schema.between(0, 100_000_000, { message: () => "maxOutput must be an integer between 0 and 100000000" }))
  ),
  capabilities: Schema.optional(Schema.Array(oneOf(CAPABILITIES, "capabilities[]"))),
  price: Schema.optional(ModelPrice),
  tier: Schema.optional(oneOf(["free", "standard", "premium"] as const, "tier")),
  /** Force the `claude-3-gateway-no-thinking/...` listing on or off (default: derived). */
  noThinkingAlias: Schema.optional(Schema.NullOr(Schema.Boolean)),
  /** Hide the model from model lists and the catalog (a catalog model too). */
  hidden: Schema.optional(Schema.Boolean)
}

export const CreateProviderModel = Schema.Struct({ provider: ProviderRef, model: ModelIdText("model"), ...ModelFields }).annotations(strict)
export type CreateProviderModel = typeof CreateProviderModel.Type

export const PatchProviderModel = CreateProviderModel
export type PatchProviderModel = CreateProviderModel

export const ProviderModelQuery = Schema.Struct({ provider: Schema.optional(ProviderRef), model: Schema.optional(ModelIdText("model")) })
export const ProviderModelKey = Schema.Struct({ provider: ProviderRef, model: ModelIdText("model") })

export const ProviderModelView = Schema.Struct({
  /** The provider id, or the connection name the model belongs to. */
  provider: Schema.String,
  scope: Schema.Literal("provider", "connection"),
  model: Schema.String,
  /** Whether the catalog lists this model (then the entry overrides or hides it). */
  inCatalog: Schema.Boolean,
  name: Schema.NullOr(Schema.String),
  kind: Schema.NullOr(Schema.String),
  contextLength: Schema.NullOr(Schema.Number),
  maxOutput: Schema.NullOr(Schema.Number),
  capabilities: Schema.NullOr(Schema.Array(Schema.String)),
  price: Schema.NullOr(
    Schema.Struct({
      input: Schema.optional(Schema.Number),
      output: Schema.optional(Schema.Number),
      cachedInput: Schema.optional(Schema.Number)
    })
  ),
  tier: Schema.NullOr(Schema.String),
  noThinkingAlias: Schema.NullOr(Schema.Boolean),
  hidden: Schema.Boolean,
  createdAt: Schema.String,
  updatedAt: Schema.String
})
export type ProviderModelView = typeof ProviderModelView.Type
