/**
 * The changes to provider nodes: a definition checked (catalog ids, the other nodes, connection
 * names, the URL policy) and made a record (headers encrypted), then stored in `kv` with an
 * audit row; create, replace, patch, and remove (refused while connections use the node).
 */
import * as Effect from "effect/Effect"
import { BadRequest, Conflict } from "../../domain/errors.js"
import { findProvider } from "../../domain/catalog/catalog.js"
import { FAMILY_AUTH, type ReplaceProviderNode } from "../../domain/nodes.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import type { ConnectionsShape } from "./Connections.js"
import { PROVIDER_MODELS_NAMESPACE, recordKey } from "./customModels.js"
import { type NodeRecord, PROVIDER_NODES_NAMESPACE } from "./nodeRecords.js"
import { type NodeViews, usersOf } from "./nodeViews.js"
import type { ProviderNodesShape } from "./ProviderNodes.js"
import { checkProviderUrl } from "./urlPolicy.js"

type Definition = ReplaceProviderNode

export interface NodeWritesDeps {
  readonly kv: KeyValueShape
  readonly connections: ConnectionsShape
  readonly secrets: SecretsShape
  readonly writer: BatchWriterShape
  readonly views: NodeViews
}

/** `create`, `replace`, `patch` and `remove`, and `store` (a record written, the snapshot reloaded, the change audited). */
export const makeNodeWrites = ({ kv, connections, secrets, writer, views }: NodeWritesDeps) => {
  const { records, find, viewOf } = views

  /** Checks a definition against the catalog, the other nodes, the connection names and the URL policy. */
  const check = (id: string, def: Definition, self: NodeRecord | undefined) =>
    Effect.gen(function* () {
      const prefix = def.prefix ?? id
      const verdict = checkProviderUrl(def.baseUrl, yield* connections.urlPolicy)
      if (!verdict.ok) return yield* new BadRequest({ message: `baseUrl rejected: ${verdict.reason}` })
      if (findProvider(id)) return yield* new Conflict({ message: `id '${id}' is a catalog provider's id; pick another` })
      if (findProvider(prefix)) return yield* new Conflict({ message: `prefix '${prefix}' is a catalog provider's id; pick another` })
      const others = (yield* records).filter((n) => n.id !== self?.id)
      for (const n of others) {
        if ([n.id, n.prefix].includes(id) || [n.id, n.prefix].includes(prefix)) {
          return yield* new Conflict({
            message: `provider node '${n.id}' (prefix '${n.prefix}') already uses ${[n.id, n.prefix].includes(id) ? `id '${id}'` : `prefix '${prefix}'`}`
          })
        }
      }
      const all = yield* connections.list
      const clash = all.find((c) => c.name.toLowerCase() === prefix && c.provider.id !== id)
      if (clash)
        return yield* new Conflict({
          message: `prefix '${prefix}' is the name of provider connection '${clash.name}' (${clash.provider.id}); pick another prefix`
        })
      if (self && self.prefix !== prefix && usersOf(id, all).length > 0) {
        return yield* new Conflict({
          message: `prefix cannot change while connections use the node (${usersOf(id, all)
            .map((c) => c.name)
            .join(", ")}); delete them first`
        })
      }
      const ids = new Set<string>()
      for (const m of def.models ?? []) {
        if (ids.has(m.id)) return yield* new BadRequest({ message: `models: '${m.id}' is listed twice` })
        ids.add(m.id)
      }
    })

  const recordOf = (id: string, def: Definition, self: NodeRecord | undefined, t: number): NodeRecord => ({
    id,
    name: def.name ?? self?.name ?? id,
    prefix: def.prefix ?? id,
    baseUrl: def.baseUrl.replace(/\/+$/, ""),
    family: def.family,
    authStyle: def.authStyle ?? FAMILY_AUTH[def.family],
    headers: def.headers ? Object.fromEntries(Object.entries(def.headers).map(([k, v]) => [k, secrets.encrypt(v)])) : {},
    models: (def.models ?? []).map((m) => ({ ...m })),
    createdAt: self?.createdAt ?? t,
    updatedAt: t
  })

  const store = (r: NodeRecord, actor: string, action: string) =>
    Effect.gen(function* () {
      yield* kv.set(PROVIDER_NODES_NAMESPACE, r.id, JSON.stringify(r))
      yield* connections.reload
      writer.append("audit_log", { ts: Date.now(), actor, action, target: `provider_node:${r.id}`, detail: null })
      return yield* viewOf(r)
    })

  const create: ProviderNodesShape["create"] = (input, actor) =>
    Effect.gen(function* () {
      const { id, ...def } = input
      if ((yield* records).some((n) => n.id === id)) {
        return yield* new Conflict({
          message: `provider node '${id}' already exists; change it with PUT or PATCH /api/provider-nodes/${id}`
        })
      }
      yield* check(id, def, undefined)
      return yield* store(recordOf(id, def, undefined, Date.now()), actor, "provider_node.create")
    })

  const replace: ProviderNodesShape["replace"] = (id, input, actor) =>
    Effect.gen(function* () {
      const current = yield* find(id)
      yield* check(current.id, input, current)
      return yield* store(recordOf(current.id, input, current, Date.now()), actor, "provider_node.update")
    })

  const patch: ProviderNodesShape["patch"] = (id, input, actor) =>
    Effect.gen(function* () {
      const current = yield* find(id)
      const def: Definition = {
        name: input.name ?? current.name,
        prefix: input.prefix ?? current.prefix,
        baseUrl: input.baseUrl ?? current.baseUrl,
        family: input.family ?? current.family,
        authStyle:
          input.authStyle ??
          (input.family !== undefined && current.authStyle === FAMILY_AUTH[current.family] ? FAMILY_AUTH[input.family] : current.authStyle),
        models: input.models ?? current.models
      }
      yield* check(current.id, def, current)
      const next = recordOf(current.id, def, current, Date.now())
      // Unchanged headers keep their stored (encrypted) values.
      return yield* store(input.headers === undefined ? { ...next, headers: current.headers } : next, actor, "provider_node.update")
    })

  const remove: ProviderNodesShape["remove"] = (id, actor) =>
    Effect.gen(function* () {
      const current = yield* find(id)
      const users = usersOf(current.id, yield* connections.list)
      if (users.length > 0) {
        return yield* new Conflict({
          message: `provider node '${current.id}' has connections: ${users.map((c) => `${c.name} (${c.id})`).join(", ")}; delete them first (DELETE /api/providers/{id})`
        })
      }
      const removed = yield* viewOf(current)
      yield* kv.remove(PROVIDER_NODES_NAMESPACE, current.id)
      // The node's provider-wide custom models go with it.
      for (const r of yield* connections.customModels) {
        if (r.scope === "provider" && r.scopeId === current.id)
          yield* kv.remove(PROVIDER_MODELS_NAMESPACE, recordKey(r.scope, r.scopeId, r.model))
      }
      yield* connections.reload
      writer.append("audit_log", {
        ts: Date.now(),
        actor,
        action: "provider_node.remove",
        target: `provider_node:${current.id}`,
        detail: null
      })
      return removed
    })

  return { store, create, replace, patch, remove }
}

export type NodeWrites = ReturnType<typeof makeNodeWrites>
