/**
 * The model catalog (`GET /api/models/catalog`): every provider's models (the catalog's, then
 * the provider nodes') with their custom models and overrides, hidden ones left out, and what
 * single connections add; or, with `scope=connected`, the models of the connections there are.
 */
import * as Effect from "effect/Effect"
import { hasNoThinkingAlias, type ModelSpec, PROVIDERS, type ProviderSpec } from "../../domain/catalog/catalog.js"
import type { CatalogModel } from "../../domain/models.js"
import { catalogEntries } from "./catalogEntries.js"
import type { ConnectionsShape } from "./Connections.js"
import { applyRecords } from "./customModels.js"
import type { ProviderModelsShape } from "./ProviderModels.js"

const AUDIO_KINDS: ReadonlySet<string> = new Set(["speech", "transcription", "music"])

/** A model spec as the catalog lists it under `id`. */
const catalogModel = (provider: ProviderSpec, spec: ModelSpec, id: string, connection: string | null, custom: boolean): CatalogModel => ({
  provider: provider.id,
  connection,
  id,
  model: spec.id,
  name: spec.name,
  kind: spec.kind,
  contextWindow: spec.contextWindow,
  maxOutput: spec.maxOutput,
  capabilities: {
    tools: spec.capabilities.tools,
    vision: spec.capabilities.vision,
    reasoning: spec.capabilities.reasoning,
    audio: spec.capabilities.audio ?? AUDIO_KINDS.has(spec.kind),
    pdf: spec.capabilities.pdf ?? false,
    realtime: spec.capabilities.realtime ?? false
  },
  tier: spec.tier,
  price: { input: spec.pricing.input, output: spec.pricing.output, cachedInput: spec.pricing.cachedInput ?? null },
  custom,
  noThinkingAlias: hasNoThinkingAlias(provider, spec)
})

export interface ModelCatalogDeps {
  readonly connections: ConnectionsShape
  /** The provider nodes' specs. */
  readonly nodeSpecs: Effect.Effect<ReadonlyArray<ProviderSpec>>
}

/** `catalog`: the models of a provider (or connection), or of all, as `GET /api/models/catalog` lists them. */
export const makeModelCatalog =
  ({ connections, nodeSpecs }: ModelCatalogDeps): ProviderModelsShape["catalog"] =>
  (query) =>
    Effect.gen(function* () {
      const all = yield* connections.list
      const wanted = (provider: string, connection: string | null) =>
        query.provider === undefined ||
        query.provider.toLowerCase() === provider ||
        query.provider.toLowerCase() === connection?.toLowerCase()
      if (query.scope === "connected") {
        return catalogEntries(all)
          .filter((e) => !e.alias && wanted(e.connection.provider.id, e.connection.name))
          .map((e) => {
            const spec =
              e.spec ??
              applyRecords(e.connection.provider, [
                { scope: "connection", scopeId: e.connection.id, model: e.modelId, hidden: false, createdAt: 0, updatedAt: 0 }
              ]).provider.models.find((m) => m.id === e.modelId)!
            return catalogModel(e.connection.provider, spec, e.id, e.connection.name, e.connection.customModels?.has(e.modelId) ?? false)
          })
      }
      const records = yield* connections.customModels
      const out: Array<CatalogModel> = []
      // The catalog's providers, then the provider nodes (`/api/provider-nodes`).
      for (const p of [...PROVIDERS, ...(yield* nodeSpecs)]) {
        if (!wanted(p.id, null)) continue
        const applied = applyRecords(
          p,
          records.filter((r) => r.scope === "provider" && r.scopeId === p.id)
        )
        for (const m of applied.provider.models) {
          if (!applied.hidden.has(m.id))
            out.push(
              catalogModel(applied.provider, m, `${p.node?.prefix ?? p.id}/${m.id}`, null, applied.custom.has(m.id) || p.node !== undefined)
            )
        }
      }
      // Models a single connection adds or changes, under that connection's name.
      for (const c of all) {
        if (!wanted(c.provider.id, c.name)) continue
        for (const r of records) {
          if (r.scope !== "connection" || r.scopeId !== c.id || c.hiddenModels?.has(r.model)) continue
          const spec = c.provider.models.find((m) => m.id === r.model)
          if (spec) out.push(catalogModel(c.provider, spec, `${c.name}/${r.model}`, c.name, c.customModels?.has(r.model) ?? false))
        }
      }
      return out
    })
