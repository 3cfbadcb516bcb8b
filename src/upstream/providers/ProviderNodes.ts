import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type {
  CreateProviderNode,
  PatchProviderNode,
  ProviderNodeTestResult,
  ProviderNodeView,
  ReplaceProviderNode,
  TestProviderNode
} from "../../domain/nodes.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { Egress } from "../egress/Egress.js"
import { UpstreamHttp } from "../client/UpstreamHttp.js"
import { Connections } from "./Connections.js"
import { makeNodeTest } from "./nodeTest.js"
import { makeNodeViews } from "./nodeViews.js"
import { makeNodeWrites } from "./nodeWrites.js"

export interface ProviderNodesShape {
  readonly list: Effect.Effect<ReadonlyArray<ProviderNodeView>>
  readonly get: (id: string) => Effect.Effect<ProviderNodeView, NotFound>
  readonly create: (input: CreateProviderNode, actor: string) => Effect.Effect<ProviderNodeView, BadRequest | Conflict>
  readonly replace: (
    id: string,
    input: ReplaceProviderNode,
    actor: string
  ) => Effect.Effect<ProviderNodeView, BadRequest | Conflict | NotFound>
  readonly patch: (id: string, input: PatchProviderNode, actor: string) => Effect.Effect<ProviderNodeView, BadRequest | Conflict | NotFound>
  /** 409 while connections use the node (it names them): delete those first. */
  readonly remove: (id: string, actor: string) => Effect.Effect<ProviderNodeView, Conflict | NotFound>
  /** Lists the upstream's models with a key (given, or the node's first connection's); optionally adds them to the node. */
  readonly test: (id: string, input: TestProviderNode, actor: string) => Effect.Effect<ProviderNodeTestResult, BadRequest | NotFound>
}

/**
 * Provider nodes (`/api/provider-nodes`): custom provider definitions kept in `kv`
 * (src/upstream/providers/nodeRecords.ts). `Connections` turns each into a provider spec, so a
 * connection made for a node routes, lists its models and is priced like any provider's. The
 * reads and views are nodeViews.ts, the checked changes nodeWrites.ts, the upstream test nodeTest.ts.
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

      const views = makeNodeViews({ connections })
      const { store, create, replace, patch, remove } = makeNodeWrites({ kv, connections, secrets, writer, views })
      const test = makeNodeTest({ connections, http, egress, views, store })

      return {
        list: views.list,
        get: (id) => Effect.flatMap(views.find(id), views.viewOf),
        create,
        replace,
        patch,
        remove,
        test
      }
    })
  )
}
