import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { CatalogModel, CreateProviderModel, PatchProviderModel, ProviderModelView } from "../../domain/models.js"
import { catalogEntries } from "./catalogEntries.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { findProvider, hasNoThinkingAlias, type ModelSpec, PROVIDERS, type ProviderSpec } from "../../domain/catalog/catalog.js"
import { type Connection, Connections } from "./Connections.js"
import { applyRecords, type CustomModelRecord, PROVIDER_MODELS_NAMESPACE, recordKey } from "./customModels.js"

export interface ProviderModelsShape {
  readonly list: (filter: { readonly provider?: string | undefined; readonly model?: string | undefined }) => Effect.Effect<ReadonlyArray<ProviderModelView>, BadRequest>
  readonly create: (input: CreateProviderModel, actor: string) => Effect.Effect<ProviderModelView, BadRequest | Conflict>
  readonly patch: (input: PatchProviderModel, actor: string) => Effect.Effect<ProviderModelView, BadRequest | NotFound>
  readonly remove: (provider: string, model: string, actor: string) => Effect.Effect<ProviderModelView, BadRequest | NotFound>
  /** `GET /api/models/catalog`: the catalog with custom models, hidden ones left out. */
  readonly catalog: (query: { readonly provider?: string | undefined; readonly scope?: "all" | "connected" | undefined }) => Effect.Effect<ReadonlyArray<CatalogModel>>
}

interface Scope {
  readonly scope: CustomModelRecord["scope"]
  readonly scopeId: string
  readonly label: string
  readonly provider: ProviderSpec
  readonly connection: Connection | undefined
}

const AUDIO_KINDS: ReadonlySet<string> = new Set(["speech", "transcription", "music"])

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
    audio: spec.capabilities.audio ?? AUDIO_KINDS.has(spec.kind)
  },
  tier: spec.tier,
  price: { input: spec.pricing.input, output: spec.pricing.output, cachedInput: spec.pricing.cachedInput ?? null },
  custom,
  noThinkingAlias: hasNoThinkingAlias(provider, spec)
})

/**
 * Custom models per provider or connection, catalog overrides and hidden catalog models
 * (`/api/provider-models`), and the model catalog (`/api/models/catalog`). Records live in `kv`
 * (src/upstream/providers/customModels.ts); `Connections` applies them to its snapshot.
 */
export class ProviderModels extends Context.Tag("gateway/ProviderModels")<ProviderModels, ProviderModelsShape>() {
  static readonly layer = Layer.effect(
    ProviderModels,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const connections = yield* Connections
      const writer = yield* BatchWriter

      const scopeOf = (ref: string): Effect.Effect<Scope, BadRequest> =>
        Effect.gen(function* () {
          const provider = yield* connections.provider(ref)
          if (provider && (!provider.node || provider.id === ref.toLowerCase()))
            return { scope: "provider" as const, scopeId: provider.id, label: provider.id, provider, connection: undefined }
          const c = yield* Effect.option(connections.get(ref))
          if (Option.isSome(c)) {
            const conn = c.value
            return {
              scope: "connection" as const,
              scopeId: conn.id,
              label: conn.name,
              provider: (yield* connections.provider(conn.provider.id)) ?? conn.provider,
              connection: conn
            }
          }
          return yield* new BadRequest({ message: `provider: '${ref}' is neither a provider connection's name nor a provider id` })
        })

      const labelOf = (r: CustomModelRecord, all: ReadonlyArray<Connection>) => (r.scope === "provider" ? r.scopeId : (all.find((c) => c.id === r.scopeId)?.name ?? r.scopeId))

      const view = (r: CustomModelRecord, all: ReadonlyArray<Connection>, nodes: ReadonlyArray<ProviderSpec>): ProviderModelView => {
        const providerId = r.scope === "provider" ? r.scopeId : (all.find((c) => c.id === r.scopeId)?.provider.id ?? "")
        const provider = findProvider(providerId) ?? nodes.find((n) => n.id === providerId)
        return {
          provider: labelOf(r, all),
          scope: r.scope,
          model: r.model,
          inCatalog: provider?.models.some((m) => m.id === r.model) ?? false,
          name: r.name ?? null,
          kind: r.kind ?? null,
          contextLength: r.contextLength ?? null,
          maxOutput: r.maxOutput ?? null,
          capabilities: r.capabilities ? [...r.capabilities] : null,
          price: r.price ? { ...r.price } : null,
          tier: r.tier ?? null,
          noThinkingAlias: r.noThinkingAlias ?? null,
          hidden: r.hidden,
          createdAt: new Date(r.createdAt).toISOString(),
          updatedAt: new Date(r.updatedAt).toISOString()
        }
      }

      const nodeSpecs = Effect.map(connections.nodes, (ns) => ns.map((n) => n.spec))

      const find = (s: Scope, model: string) => Effect.map(connections.customModels, (all) => all.find((r) => r.scope === s.scope && r.scopeId === s.scopeId && r.model === model))

      const store = (r: CustomModelRecord, actor: string, action: string) =>
        Effect.gen(function* () {
          yield* kv.set(PROVIDER_MODELS_NAMESPACE, recordKey(r.scope, r.scopeId, r.model), JSON.stringify(r))
          yield* connections.reload
          writer.append("audit_log", { ts: Date.now(), actor, action, target: `${r.scope}:${r.scopeId}/${r.model}`, detail: null })
          return view(r, yield* connections.list, yield* nodeSpecs)
        })

      const fieldsOf = (input: CreateProviderModel) => ({
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.kind !== undefined ? { kind: input.kind } : {}),
        ...(input.contextLength !== undefined ? { contextLength: input.contextLength } : {}),
        ...(input.maxOutput !== undefined ? { maxOutput: input.maxOutput } : {}),
        ...(input.capabilities !== undefined ? { capabilities: input.capabilities } : {}),
        ...(input.price !== undefined ? { price: input.price } : {}),
        ...(input.tier !== undefined ? { tier: input.tier } : {}),
        ...(input.noThinkingAlias !== undefined ? { noThinkingAlias: input.noThinkingAlias } : {}),
        ...(input.hidden !== undefined ? { hidden: input.hidden } : {})
      })

      const create: ProviderModelsShape["create"] = (input, actor) =>
        Effect.gen(function* () {
          const s = yield* scopeOf(input.provider)
          if (yield* find(s, input.model)) {
            return yield* new Conflict({ message: `model '${input.model}' of ${s.label} already has an entry; change it with PATCH /api/provider-models` })
          }
          const t = Date.now()
          return yield* store(
            { scope: s.scope, scopeId: s.scopeId, model: input.model, hidden: false, ...fieldsOf(input), createdAt: t, updatedAt: t },
            actor,
            "provider_model.create"
          )
        })

      const patch: ProviderModelsShape["patch"] = (input, actor) =>
        Effect.gen(function* () {
          const s = yield* scopeOf(input.provider)
          const current = yield* find(s, input.model)
          const t = Date.now()
          if (current) return yield* store({ ...current, ...fieldsOf(input), updatedAt: t }, actor, "provider_model.update")
          // A catalog model (or one the connection lists) gets its first override.
          const known = s.provider.models.some((m) => m.id === input.model) || (s.connection?.models.includes(input.model) ?? false) || s.connection?.defaultModel === input.model
          if (!known) {
            return yield* new NotFound({ message: `no model '${input.model}' at ${s.label}: add it with POST /api/provider-models` })
          }
          return yield* store(
            { scope: s.scope, scopeId: s.scopeId, model: input.model, hidden: false, ...fieldsOf(input), createdAt: t, updatedAt: t },
            actor,
            "provider_model.update"
          )
        })

      const remove: ProviderModelsShape["remove"] = (provider, model, actor) =>
        Effect.gen(function* () {
          const s = yield* scopeOf(provider)
          const current = yield* find(s, model)
          if (!current) return yield* new NotFound({ message: `no custom model or override '${model}' at ${s.label}` })
          yield* kv.remove(PROVIDER_MODELS_NAMESPACE, recordKey(current.scope, current.scopeId, current.model))
          yield* connections.reload
          writer.append("audit_log", { ts: Date.now(), actor, action: "provider_model.remove", target: `${s.scope}:${s.scopeId}/${model}`, detail: null })
          return view(current, yield* connections.list, yield* nodeSpecs)
        })

      const list: ProviderModelsShape["list"] = (filter) =>
        Effect.gen(function* () {
          const s = filter.provider === undefined ? undefined : yield* scopeOf(filter.provider)
          const all = yield* connections.list
          const records = (yield* connections.customModels).filter(
            (r) => (s === undefined || (r.scope === s.scope && r.scopeId === s.scopeId)) && (filter.model === undefined || r.model === filter.model)
          )
          const nodes = yield* nodeSpecs
          return records.map((r) => view(r, all, nodes))
        })

      const catalog: ProviderModelsShape["catalog"] = (query) =>
        Effect.gen(function* () {
          const all = yield* connections.list
          const wanted = (provider: string, connection: string | null) =>
            query.provider === undefined || query.provider.toLowerCase() === provider || query.provider.toLowerCase() === connection?.toLowerCase()
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
                out.push(catalogModel(applied.provider, m, `${p.node?.prefix ?? p.id}/${m.id}`, null, applied.custom.has(m.id) || p.node !== undefined))
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

      return { list, create, patch, remove, catalog }
    })
  )
}
