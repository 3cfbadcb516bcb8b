import * as crypto from "node:crypto"
import { type BridgeModels, bridgeModelOf, modalitiesOf, nativeModalities } from "../../domain/bridge.js"
import { hasNoThinkingAlias, kindOf, type ModelKind, type ModelSpec } from "../../domain/catalog/catalog.js"
import { type Connection, connectionModelIds } from "./Connections.js"
import type { VirtualModel } from "../../services/routing/Router.js"

export const NO_THINKING_PREFIX = "claude-3-gateway-no-thinking/"

/** `claude-3-gateway-no-thinking/<provider>/<model>` → `<provider>/<model>` and the flag. */
export const splitNoThinking = (model: string): { readonly model: string; readonly noThinking: boolean } =>
  model.startsWith(NO_THINKING_PREFIX) ? { model: model.slice(NO_THINKING_PREFIX.length), noThinking: true } : { model, noThinking: false }

export interface CatalogEntry {
  readonly id: string
  readonly connection: Connection
  readonly modelId: string
  readonly spec: ModelSpec | undefined
  readonly alias: boolean
}

/** Every model the enabled connections serve, as `<connection>/<model>`, plus no-thinking aliases. */
export const catalogEntries = (connections: ReadonlyArray<Connection>): Array<CatalogEntry> =>
  connections
    .filter((c) => c.enabled)
    .flatMap((c) =>
      connectionModelIds(c).flatMap((modelId) => {
        const spec = c.provider.models.find((m) => m.id === modelId)
        const entry = { id: `${c.name}/${modelId}`, connection: c, modelId, spec, alias: false }
        return spec && hasNoThinkingAlias(c.provider, spec)
          ? [entry, { ...entry, id: `${NO_THINKING_PREFIX}${entry.id}`, alias: true }]
          : [entry]
      })
    )

/** What an entry's model does (chat, embedding, image, rerank...): `kindOf` in the provider catalog. */
export const entryKind = (e: CatalogEntry): ModelKind => e.spec?.kind ?? kindOf(e.connection.provider, e.modelId)

const displayName = (e: CatalogEntry): string => `${e.spec?.name ?? e.modelId}${e.alias ? " (no thinking)" : ""}`

/**
 * One list that both the OpenAI and the Anthropic SDK accept (both call `GET /v1/models`):
 * OpenAI's `object`/`owned_by` plus Anthropic's `type`/`display_name`/`created_at`/`has_more`.
 */
export const openAiModelList = (
  entries: ReadonlyArray<CatalogEntry>,
  includeNames: boolean,
  virtual: ReadonlyArray<VirtualModel> = [],
  bridges?: BridgeModels
) => {
  const data = [
    ...entries.map((e) => modelObject(e, includeNames, bridges)),
    ...virtual.map((v) => virtualModelObject(v, includeNames, bridges))
  ]
  return { object: "list", data, has_more: false, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null }
}

/**
 * The input modalities a chat model takes natively and through the gateway's default bridge
 * (docs/bridge.md); with `bridges` only (the OpenAI-shaped lists).
 */
const entryModalities = (e: CatalogEntry, bridges: BridgeModels | undefined) =>
  bridges !== undefined && entryKind(e) === "chat"
    ? { modalities: modalitiesOf(nativeModalities(e.spec?.capabilities), (m) => bridgeModelOf(m, bridges, undefined)) }
    : {}

export const modelObject = (e: CatalogEntry, includeNames: boolean, bridges?: BridgeModels) => ({
  id: e.id,
  object: "model" as const,
  created: Math.floor(e.connection.createdAt / 1000),
  owned_by: e.connection.provider.id,
  type: "model" as const,
  created_at: new Date(e.connection.createdAt).toISOString(),
  ...(includeNames ? { display_name: displayName(e), name: displayName(e) } : {}),
  kind: entryKind(e),
  // Media models (images, speech, rerank...) have no context window to advertise.
  ...(e.spec && (e.spec.kind === "chat" || e.spec.kind === "embedding")
    ? { context_length: e.spec.contextWindow, max_output_tokens: e.spec.maxOutput }
    : {}),
  ...entryModalities(e, bridges)
})

export const geminiModel = (e: CatalogEntry) => ({
  name: `models/${e.id}`,
  baseModelId: e.modelId,
  version: "001",
  displayName: displayName(e),
  description: `${e.connection.provider.name} via connection ${e.connection.name}`,
  inputTokenLimit: e.spec?.contextWindow ?? 0,
  outputTokenLimit: e.spec?.maxOutput ?? 0,
  supportedGenerationMethods:
    e.spec?.kind === "embedding" ? ["embedContent", "batchEmbedContents"] : ["generateContent", "streamGenerateContent", "countTokens"]
})

export const ollamaModel = (e: CatalogEntry) => ({
  name: e.id,
  model: e.id,
  modified_at: new Date(e.connection.updatedAt).toISOString(),
  size: 0,
  digest: crypto.createHash("sha256").update(e.id).digest("hex"),
  details: {
    parent_model: "",
    format: "remote",
    family: e.connection.provider.id,
    families: [e.connection.provider.id],
    parameter_size: "",
    quantization_level: ""
  }
})

/** A combo or auto id in OpenAI/Anthropic list shape (owned by the gateway). */
export const virtualModelObject = (v: VirtualModel, includeNames: boolean, bridges?: BridgeModels) => ({
  id: v.id,
  object: "model" as const,
  created: Math.floor(v.createdAt / 1000),
  owned_by: "gateway",
  type: "model" as const,
  created_at: new Date(v.createdAt).toISOString(),
  ...(includeNames ? { display_name: v.id, name: v.id, description: v.description } : {}),
  kind: v.serves,
  context_length: v.contextWindow,
  max_output_tokens: v.maxOutput,
  ...(bridges !== undefined && v.serves === "chat"
    ? { modalities: modalitiesOf(v.native, (m) => bridgeModelOf(m, bridges, v.bridge)) }
    : {})
})

export const virtualGeminiModel = (v: VirtualModel) => ({
  name: `models/${v.id}`,
  baseModelId: v.id,
  version: "001",
  displayName: v.id,
  description: v.description,
  inputTokenLimit: v.contextWindow,
  outputTokenLimit: v.maxOutput,
  supportedGenerationMethods: ["generateContent", "streamGenerateContent", "countTokens"]
})

export const virtualOllamaModel = (v: VirtualModel) => ({
  name: v.id,
  model: v.id,
  modified_at: new Date(v.createdAt).toISOString(),
  size: 0,
  digest: crypto.createHash("sha256").update(v.id).digest("hex"),
  details: { parent_model: "", format: "remote", family: "gateway", families: ["gateway"], parameter_size: "", quantization_level: "" }
})
