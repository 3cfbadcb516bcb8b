/**
 * The entries of `/api/provider-models`: custom models, catalog overrides and hidden catalog
 * models of a provider or of one connection, kept in `kv` (customModels.ts). A request names
 * its scope by provider id or connection name; each change is stored, the snapshot reloaded and
 * the change audited.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { findProvider, type ProviderSpec } from "../../domain/catalog/catalog.js"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { CreateProviderModel, ProviderModelView } from "../../domain/models.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import type { Connection, ConnectionsShape } from "./Connections.js"
import { type CustomModelRecord, PROVIDER_MODELS_NAMESPACE, recordKey } from "./customModels.js"
import type { ProviderModelsShape } from "./ProviderModels.js"

/** Where an entry applies: a provider (every connection of it) or one connection. */
interface Scope {
  readonly scope: CustomModelRecord["scope"]
  readonly scopeId: string
  readonly label: string
  readonly provider: ProviderSpec
  readonly connection: Connection | undefined
}

const labelOf = (r: CustomModelRecord, all: ReadonlyArray<Connection>) =>
  r.scope === "provider" ? r.scopeId : (all.find((c) => c.id === r.scopeId)?.name ?? r.scopeId)

/** An entry as the API shows it. */
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

/** The fields a request sets (the ones it leaves out stay as they are). */
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

export interface ProviderModelRecordsDeps {
  readonly kv: KeyValueShape
  readonly connections: ConnectionsShape
  readonly writer: BatchWriterShape
  /** The provider nodes' specs. */
  readonly nodeSpecs: Effect.Effect<ReadonlyArray<ProviderSpec>>
}

/** `list`, `create`, `patch` and `remove` of the entries. */
export const makeProviderModelRecords = ({ kv, connections, writer, nodeSpecs }: ProviderModelRecordsDeps) => {
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

  const find = (s: Scope, model: string) =>
    Effect.map(connections.customModels, (all) => all.find((r) => r.scope === s.scope && r.scopeId === s.scopeId && r.model === model))

  const store = (r: CustomModelRecord, actor: string, action: string) =>
    Effect.gen(function* () {
      yield* kv.set(PROVIDER_MODELS_NAMESPACE, recordKey(r.scope, r.scopeId, r.model), JSON.stringify(r))
      yield* connections.reload
      writer.append("audit_log", { ts: Date.now(), actor, action, target: `${r.scope}:${r.scopeId}/${r.model}`, detail: null })
      return view(r, yield* connections.list, yield* nodeSpecs)
    })

  const create: ProviderModelsShape["create"] = (input, actor) =>
    Effect.gen(function* () {
      const s = yield* scopeOf(input.provider)
      if (yield* find(s, input.model)) {
        return yield* new Conflict({
          message: `model '${input.model}' of ${s.label} already has an entry; change it with PATCH /api/provider-models`
        })
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
      const known =
        s.provider.models.some((m) => m.id === input.model) ||
        (s.connection?.models.includes(input.model) ?? false) ||
        s.connection?.defaultModel === input.model
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
      writer.append("audit_log", {
        ts: Date.now(),
        actor,
        action: "provider_model.remove",
        target: `${s.scope}:${s.scopeId}/${model}`,
        detail: null
      })
      return view(current, yield* connections.list, yield* nodeSpecs)
    })

  const list: ProviderModelsShape["list"] = (filter) =>
    Effect.gen(function* () {
      const s = filter.provider === undefined ? undefined : yield* scopeOf(filter.provider)
      const all = yield* connections.list
      const records = (yield* connections.customModels).filter(
        (r) =>
          (s === undefined || (r.scope === s.scope && r.scopeId === s.scopeId)) && (filter.model === undefined || r.model === filter.model)
      )
      const nodes = yield* nodeSpecs
      return records.map((r) => view(r, all, nodes))
    })

  return { list, create, patch, remove }
}
