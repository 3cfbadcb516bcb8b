/**
 * What the provider nodes API shows: the stored node records (read through the `Connections`
 * snapshot, which also holds their decrypted header values), one looked up by id, and a node's
 * view with its headers masked and the connections that use it.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { NotFound } from "../../domain/errors.js"
import type { ProviderNodeView } from "../../domain/nodes.js"
import { maskSecret } from "../../kernel/redact.js"
import type { Connection, ConnectionsShape } from "./Connections.js"
import { type NodeRecord, nodeModelSpec } from "./nodeRecords.js"

/** The connections made for node `id`. */
export const usersOf = (id: string, all: ReadonlyArray<Connection>) => all.filter((c) => c.provider.id === id)

export interface NodeViewsDeps {
  readonly connections: ConnectionsShape
}

/** The reads: `records` (refreshing the decrypted headers), `find`, `view`/`viewOf`, `list`, and `headersOf` a node. */
export const makeNodeViews = ({ connections }: NodeViewsDeps) => {
  // The decrypted values live in the Connections snapshot's node specs; mask from there.
  let decrypted = new Map<string, Readonly<Record<string, Redacted.Redacted<string>>>>()

  /** A header's masked value; a value that cannot be decrypted shows as such. */
  const maskedHeader = (r: NodeRecord, name: string) => {
    const value = decrypted.get(r.id)?.[name]
    return value === undefined ? "<undecryptable>" : maskSecret(Redacted.value(value))
  }

  /** The decrypted header values of node `id` as last read by `records` (none when unknown). */
  const headersOf = (id: string): Readonly<Record<string, Redacted.Redacted<string>>> => decrypted.get(id) ?? {}

  const view = (r: NodeRecord, all: ReadonlyArray<Connection>): ProviderNodeView => ({
    id: r.id,
    name: r.name,
    prefix: r.prefix,
    baseUrl: r.baseUrl,
    family: r.family,
    authStyle: r.authStyle,
    // Only the masked form leaves the process; a value that cannot be decrypted shows as such.
    headers: Object.fromEntries(Object.keys(r.headers).map((name) => [name, maskedHeader(r, name)])),
    models: r.models.map((m) => {
      const spec = nodeModelSpec(m)
      return {
        id: spec.id,
        name: spec.name,
        contextLength: spec.contextWindow,
        maxOutput: spec.maxOutput,
        capabilities: (["tools", "vision", "reasoning", "json", "audio", "pdf"] as const).filter((c) => spec.capabilities[c] === true),
        price: { input: spec.pricing.input, output: spec.pricing.output, cachedInput: spec.pricing.cachedInput ?? null }
      }
    }),
    connections: usersOf(r.id, all).map((c) => c.name),
    createdAt: new Date(r.createdAt).toISOString(),
    updatedAt: new Date(r.updatedAt).toISOString()
  })

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

  const list = Effect.flatMap(records, (rs) => Effect.map(connections.list, (all) => rs.map((r) => view(r, all))))

  return { records, find, viewOf, list, headersOf }
}

export type NodeViews = ReturnType<typeof makeNodeViews>
