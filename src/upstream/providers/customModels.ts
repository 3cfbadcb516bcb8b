import type { CapabilityName } from "../../domain/models.js"
import { kindOf, type ModelKind, type ModelSpec, type ProviderSpec } from "../../domain/catalog/catalog.js"

/**
 * Custom models and catalog overrides (`/api/provider-models`), stored in the `kv` table
 * (namespace `provider_models`, one JSON record per provider or connection and model), so
 * backups and cloud sync carry them like every other setting. `Connections` reads them into its
 * snapshot: each connection's provider spec lists the catalog's models with the overrides
 * applied plus the custom ones, and `hiddenModels` names the ones left out of model lists.
 */
export const PROVIDER_MODELS_NAMESPACE = "provider_models"

export interface CustomModelRecord {
  /** `provider`: every connection of the provider id `scopeId`; `connection`: the connection with id `scopeId`. */
  readonly scope: "provider" | "connection"
  readonly scopeId: string
  readonly model: string
  readonly name?: string | undefined
  readonly kind?: ModelKind | undefined
  readonly contextLength?: number | undefined
  readonly maxOutput?: number | undefined
  readonly capabilities?: ReadonlyArray<CapabilityName> | undefined
  readonly price?:
    | { readonly input?: number | undefined; readonly output?: number | undefined; readonly cachedInput?: number | undefined }
    | undefined
  readonly tier?: ModelSpec["tier"] | undefined
  readonly noThinkingAlias?: boolean | null | undefined
  readonly hidden: boolean
  readonly createdAt: number
  readonly updatedAt: number
}

export const recordKey = (scope: CustomModelRecord["scope"], scopeId: string, model: string): string => `${scope}:${scopeId}:${model}`

/** Parses stored rows; a record that does not parse is skipped (a hand-edited row never breaks routing). */
export const parseRecords = (rows: ReadonlyArray<readonly [string, string]>): Array<CustomModelRecord> => {
  const out: Array<CustomModelRecord> = []
  for (const [, value] of rows) {
    try {
      const r = JSON.parse(value) as CustomModelRecord
      if ((r.scope === "provider" || r.scope === "connection") && typeof r.scopeId === "string" && typeof r.model === "string") out.push(r)
    } catch {
      // skipped
    }
  }
  return out
}

/** Context window and output limit of a custom model that does not say (as the router advertises for unknown pools). */
export const CUSTOM_DEFAULT_CONTEXT = 128_000
export const CUSTOM_DEFAULT_OUTPUT = 8_192

/** The spec a record describes, over the catalog's (or an earlier record's) spec of the same model. */
export const specOf = (provider: ProviderSpec, r: CustomModelRecord, base: ModelSpec | undefined): ModelSpec => {
  const has = (c: CapabilityName) => r.capabilities?.includes(c) ?? false
  const capabilities = r.capabilities
    ? {
        tools: has("tools"),
        vision: has("vision"),
        reasoning: has("reasoning"),
        json: has("json"),
        audio: has("audio"),
        pdf: has("pdf"),
        realtime: has("realtime")
      }
    : (base?.capabilities ?? { tools: true, vision: false, reasoning: false, json: true })
  const pricing = {
    ...(base?.pricing ?? { input: 0, output: 0 }),
    ...Object.fromEntries(Object.entries(r.price ?? {}).filter(([, v]) => v !== undefined))
  }
  const kind = r.kind ?? base?.kind ?? kindOf(provider, r.model)
  const sized = kind === "chat" || kind === "embedding"
  const noThinking = r.noThinkingAlias === undefined || r.noThinkingAlias === null ? base?.noThinkingAlias : r.noThinkingAlias
  return {
    id: r.model,
    name: r.name ?? base?.name ?? r.model,
    kind,
    contextWindow: r.contextLength ?? base?.contextWindow ?? (sized ? CUSTOM_DEFAULT_CONTEXT : 0),
    maxOutput: r.maxOutput ?? base?.maxOutput ?? (kind === "chat" ? CUSTOM_DEFAULT_OUTPUT : 0),
    capabilities,
    pricing,
    tier: r.tier ?? base?.tier ?? (pricing.input === 0 && pricing.output === 0 ? "free" : pricing.input >= 2 ? "premium" : "standard"),
    ...(noThinking !== undefined ? { noThinkingAlias: noThinking } : {})
  }
}

/**
 * A provider spec with `records` applied in order (provider-wide ones first, then the
 * connection's own): overridden catalog models, custom models appended, and the hidden ids.
 */
export const applyRecords = (
  provider: ProviderSpec,
  records: ReadonlyArray<CustomModelRecord>
): { readonly provider: ProviderSpec; readonly hidden: ReadonlySet<string>; readonly custom: ReadonlySet<string> } => {
  if (records.length === 0) return { provider, hidden: EMPTY, custom: EMPTY }
  const models = new Map(provider.models.map((m) => [m.id, m]))
  const hidden = new Set<string>()
  const custom = new Set<string>()
  for (const r of records) {
    const base = models.get(r.model)
    if (!provider.models.some((m) => m.id === r.model)) custom.add(r.model)
    models.set(r.model, specOf(provider, r, base))
    if (r.hidden) hidden.add(r.model)
    else hidden.delete(r.model)
  }
  return { provider: { ...provider, models: Array.from(models.values()) }, hidden, custom }
}

const EMPTY: ReadonlySet<string> = new Set()
