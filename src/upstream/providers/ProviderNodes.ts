import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import {
  type CreateProviderNode,
  FAMILY_AUTH,
  type PatchProviderNode,
  type ProviderNodeTestResult,
  type ProviderNodeView,
  type ReplaceProviderNode,
  type TestProviderNode
} from "../../domain/nodes.js"
import { maskSecret } from "../../kernel/redact.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { Egress } from "../egress/Egress.js"
import { UpstreamHttp } from "../client/UpstreamHttp.js"
import { findProvider } from "../../domain/catalog/catalog.js"
import { type Connection, Connections } from "./Connections.js"
import { PROVIDER_MODELS_NAMESPACE, recordKey } from "./customModels.js"
import { probeProvider } from "./probe.js"
import { type NodeRecord, nodeModelSpec, nodeSpec, PROVIDER_NODES_NAMESPACE } from "./nodeRecords.js"
import { checkProviderUrl } from "./urlPolicy.js"

export interface ProviderNodesShape {
  readonly list: Effect.Effect<ReadonlyArray<ProviderNodeView>>
  readonly get: (id: string) => Effect.Effect<ProviderNodeView, NotFound>
  readonly create: (input: CreateProviderNode, actor: string) => Effect.Effect<ProviderNodeView, BadRequest | Conflict>
  readonly replace: (id: string, input: ReplaceProviderNode, actor: string) => Effect.Effect<ProviderNodeView, BadRequest | Conflict | NotFound>
  readonly patch: (id: string, input: PatchProviderNode, actor: string) => Effect.Effect<ProviderNodeView, BadRequest | Conflict | NotFound>
  /** 409 while connections use the node (it names them): delete those first. */
  readonly remove: (id: string, actor: string) => Effect.Effect<ProviderNodeView, Conflict | NotFound>
  /** Lists the upstream's models with a key (given, or the node's first connection's); optionally adds them to the node. */
  readonly test: (id: string, input: TestProviderNode, actor: string) => Effect.Effect<ProviderNodeTestResult, BadRequest | NotFound>
}

type Definition = ReplaceProviderNode

/**
 * Provider nodes (`/api/provider-nodes`): custom provider definitions kept in `kv`
 * (src/upstream/providers/nodeRecords.ts). `Connections` turns each into a provider spec, so a
 * connection made for a node routes, lists its models and is priced like any provider's.
 */
export class ProviderNodes extends Context.Tag("gateway/ProviderNodes")<ProviderNodes, ProviderNodesShape>() {
  static readonly layer = Layer.effect(
    ProviderNodes,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const connections = yield* Connections
      const secrets = yield* Secrets
      const writer = yield* BatchWriter
      const http = yield* UpstreamHttp
      const egress = yield* Egress

      const usersOf = (id: string, all: ReadonlyArray<Connection>) => all.filter((c) => c.provider.id === id)

      const view = (r: NodeRecord, all: ReadonlyArray<Connection>): ProviderNodeView => ({
        id: r.id,
        name: r.name,
        prefix: r.prefix,
        baseUrl: r.baseUrl,
        family: r.family,
        authStyle: r.authStyle,
        // Only the masked form leaves the process; a value that cannot be decrypted shows as such.
        headers: Object.fromEntries(Object.keys(r.headers).map((name) => [name, maskedHeader(r, name, all)])),
        models: r.models.map((m) => {
          const spec = nodeModelSpec(m)
          return {
            id: spec.id,
            name: spec.name,
            contextLength: spec.contextWindow,
            maxOutput: spec.maxOutput,
            capabilities: (["tools", "vision", "reasoning", "json", "audio"] as const).filter((c) => spec.capabilities[c] === true),
            price: { input: spec.pricing.input, output: spec.pricing.output, cachedInput: spec.pricing.cachedInput ?? null }
          }
        }),
        connections: usersOf(r.id, all).map((c) => c.name),
        createdAt: new Date(r.createdAt).toISOString(),
        updatedAt: new Date(r.updatedAt).toISOString()
      })

      // The decrypted values live in the Connections snapshot's node specs; mask from there.
      let decrypted = new Map<string, Readonly<Record<string, Redacted.Redacted<string>>>>()
      const maskedHeader = (r: NodeRecord, name: string, _all: ReadonlyArray<Connection>) => {
        const value = decrypted.get(r.id)?.[name]
        return value === undefined ? "<undecryptable>" : maskSecret(Redacted.value(value))
      }
      const records = Effect.map(connections.nodes, (nodes) => {
        decrypted = new Map(nodes.map((n) => [n.record.id, n.spec.node?.headers ?? {}]))
        return nodes.map((n) => n.record)
      })

      const find = (id: string) =>
        Effect.flatMap(records, (all) => {
          const r = all.find((n) => n.id === id.toLowerCase())
          return r ? Effect.succeed(r) : Effect.fail(new NotFound({ message: `no provider node '${id}'` }))
        })

      const viewOf = (r: NodeRecord) => Effect.flatMap(records, () => Effect.map(connections.list, (all) => view(r, all)))

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
          if (clash) return yield* new Conflict({ message: `prefix '${prefix}' is the name of provider connection '${clash.name}' (${clash.provider.id}); pick another prefix` })
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
            return yield* new Conflict({ message: `provider node '${id}' already exists; change it with PUT or PATCH /api/provider-nodes/${id}` })
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
            authStyle: input.authStyle ?? (input.family !== undefined && current.authStyle === FAMILY_AUTH[current.family] ? FAMILY_AUTH[input.family] : current.authStyle),
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
            if (r.scope === "provider" && r.scopeId === current.id) yield* kv.remove(PROVIDER_MODELS_NAMESPACE, recordKey(r.scope, r.scopeId, r.model))
          }
          yield* connections.reload
          writer.append("audit_log", { ts: Date.now(), actor, action: "provider_node.remove", target: `provider_node:${current.id}`, detail: null })
          return removed
        })

      const test: ProviderNodesShape["test"] = (id, input, actor) =>
        Effect.gen(function* () {
          const current = yield* find(id)
          const spec = nodeSpec(current, decrypted.get(current.id) ?? {})
          const verdict = checkProviderUrl(current.baseUrl, yield* connections.urlPolicy)
          if (!verdict.ok) return yield* new BadRequest({ message: `baseUrl rejected: ${verdict.reason}` })
          const first = usersOf(current.id, yield* connections.list)[0]
          const key = input.apiKey ?? (first?.apiKey ? Redacted.value(first.apiKey) : undefined)
          // A control-plane call: through the proxy of the node's first connection, else the global default (docs/egress.md).
          const via = yield* Effect.either(egress.control(first?.proxyId, current.baseUrl, first?.tlsProfile))
          const probed =
            via._tag === "Left"
              ? { ok: false, status: null, latencyMs: 0, error: `${via.left.code}: ${via.left.message}`, models: [] }
              : yield* probeProvider(http, spec, current.family, current.baseUrl, key, via.right ? { dispatcher: via.right } : {})
          const known = new Set(current.models.map((m) => m.id))
          const imported = input.importModels === true && probed.ok ? probed.models.map((m) => m.id).filter((m) => !known.has(m)) : []
          if (imported.length > 0) {
            yield* store({ ...current, models: [...current.models, ...imported.map((m) => ({ id: m }))], updatedAt: Date.now() }, actor, "provider_node.import_models")
          }
          return { id: current.id, ok: probed.ok, status: probed.status, latencyMs: probed.latencyMs, error: probed.error, models: probed.models.map((m) => m.id), imported }
        })

      return {
        list: Effect.flatMap(records, (rs) => Effect.map(connections.list, (all) => rs.map((r) => view(r, all)))),
        get: (id) => Effect.flatMap(find(id), viewOf),
        create,
        replace,
        patch,
        remove,
        test
      }
    })
  )
}
