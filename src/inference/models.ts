import * as Effect from "effect/Effect"
import { FeatureFlags } from "../flags/FeatureFlags.js"
import { Connections, connectionModelIds } from "../providers/Connections.js"
import { type RequestContext, sendJson } from "./io.js"

/** `GET /v1/models`: every model of every enabled connection, as `<connection>/<model>`. */
export const makeListModels = Effect.gen(function* () {
  const connections = yield* Connections
  const flags = yield* FeatureFlags
  return (ctx: RequestContext) =>
    Effect.gen(function* () {
      const includeNames = yield* flags.enabled("MODEL_CATALOG_INCLUDE_NAMES")
      const data = (yield* connections.list)
        .filter((c) => c.enabled)
        .flatMap((c) =>
          connectionModelIds(c).map((id) => {
            const spec = c.provider.models.find((m) => m.id === id)
            return {
              id: `${c.name}/${id}`,
              object: "model" as const,
              created: Math.floor(c.createdAt / 1000),
              owned_by: c.provider.id,
              ...(includeNames ? { name: spec?.name ?? id } : {}),
              ...(spec ? { context_length: spec.contextWindow, max_output_tokens: spec.maxOutput } : {})
            }
          })
        )
      sendJson(ctx, 200, { object: "list", data })
    })
})
