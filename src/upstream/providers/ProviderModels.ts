import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import type { CatalogModel, CreateProviderModel, PatchProviderModel, ProviderModelView } from "../../domain/models.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Connections } from "./Connections.js"
import { makeModelCatalog } from "./modelCatalog.js"
import { makeProviderModelRecords } from "./providerModelRecords.js"

export interface ProviderModelsShape {
  readonly list: (filter: {
    readonly provider?: string | undefined
    readonly model?: string | undefined
  }) => Effect.Effect<ReadonlyArray<ProviderModelView>, BadRequest>
  readonly create: (input: CreateProviderModel, actor: string) => Effect.Effect<ProviderModelView, BadRequest | Conflict>
  readonly patch: (input: PatchProviderModel, actor: string) => Effect.Effect<ProviderModelView, BadRequest | NotFound>
  readonly remove: (provider: string, model: string, actor: string) => Effect.Effect<ProviderModelView, BadRequest | NotFound>
  /** `GET /api/models/catalog`: the catalog with custom models, hidden ones left out. */
  readonly catalog: (query: {
    readonly provider?: string | undefined
    readonly scope?: "all" | "connected" | undefined
  }) => Effect.Effect<ReadonlyArray<CatalogModel>>
}

/**
 * Custom models per provider or connection, catalog overrides and hidden catalog models
 * (`/api/provider-models`), and the model catalog (`/api/models/catalog`). Records live in `kv`
 * (src/upstream/providers/customModels.ts); `Connections` applies them to its snapshot. The
 * entries are providerModelRecords.ts, the catalog modelCatalog.ts.
 */
export class ProviderModels extends Context.Tag("gateway/ProviderModels")<ProviderModels, ProviderModelsShape>() {
  static readonly layer = Layer.effect(
    ProviderModels,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const connections = yield* Connections
      const writer = yield* BatchWriter
      const nodeSpecs = Effect.map(connections.nodes, (ns) => ns.map((n) => n.spec))

      const { list, create, patch, remove } = makeProviderModelRecords({ kv, connections, writer, nodeSpecs })
      const catalog = makeModelCatalog({ connections, nodeSpecs })

      return { list, create, patch, remove, catalog }
    })
  )
}
