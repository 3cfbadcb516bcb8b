/**
 * A provider node's test (`POST /api/provider-nodes/{id}/test`): the upstream's model list asked
 * with a key (given, or the node's first connection's), through that connection's proxy, and the
 * models it lists optionally added to the node.
 */
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { BadRequest } from "../../domain/errors.js"
import type { UpstreamHttpShape } from "../client/UpstreamHttp.js"
import type { EgressShape } from "../egress/Egress.js"
import type { ConnectionsShape } from "./Connections.js"
import { nodeSpec } from "./nodeRecords.js"
import { type NodeViews, usersOf } from "./nodeViews.js"
import type { NodeWrites } from "./nodeWrites.js"
import { probeProvider } from "./probe.js"
import type { ProviderNodesShape } from "./ProviderNodes.js"
import { checkProviderUrl } from "./urlPolicy.js"

export interface NodeTestDeps {
  readonly connections: ConnectionsShape
  readonly http: UpstreamHttpShape
  readonly egress: EgressShape
  readonly views: NodeViews
  /** Writes the node with its imported models (and audits it). */
  readonly store: NodeWrites["store"]
}

/** `test`: probes the node's upstream and answers what it lists (and what was imported). */
export const makeNodeTest =
  ({ connections, http, egress, views, store }: NodeTestDeps): ProviderNodesShape["test"] =>
  (id, input, actor) =>
    Effect.gen(function* () {
      const current = yield* views.find(id)
      const spec = nodeSpec(current, views.headersOf(current.id))
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
        yield* store(
          { ...current, models: [...current.models, ...imported.map((m) => ({ id: m }))], updatedAt: Date.now() },
          actor,
          "provider_node.import_models"
        )
      }
      return {
        id: current.id,
        ok: probed.ok,
        status: probed.status,
        latencyMs: probed.latencyMs,
        error: probed.error,
        models: probed.models.map((m) => m.id),
        imported
      }
    })
