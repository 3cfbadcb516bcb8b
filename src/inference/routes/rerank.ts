/**
 * Rerank, moderation and the embedding-model list (docs/media.md, "Rerank, moderation and
 * model lists"): `POST /v1/rerank`, `POST /v1/moderations`, `GET /v1/embeddings`.
 */
import * as Effect from "effect/Effect"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { moderations } from "../media/moderation.js"
import { rerank } from "../media/rerank.js"
import { catalogEntries, entryKind, openAiModelList } from "../../upstream/providers/catalogEntries.js"
import type { InferenceError } from "../../kernel/errors.js"
import { type HttpRequestContext, sendJson, withJsonObject } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/** `GET /v1/embeddings`: the embedding models of the enabled connections (and combos of them), in the `/v1/models` list shape. */
export const listEmbeddingModels = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const entries = catalogEntries(yield* deps.connections).filter((e) => entryKind(e) === "embedding")
    const virtual = (yield* deps.virtualModels).filter((v) => v.serves === "embedding")
    sendJson(ctx, 200, openAiModelList(entries, yield* deps.flag("MODEL_CATALOG_INCLUDE_NAMES"), virtual))
  })

export const rerankRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => {
  const withBody =
    (h: (ctx: HttpRequestContext, body: Record<string, unknown>) => Effect.Effect<void, InferenceError>) => (ctx: HttpRequestContext) =>
      withJsonObject(ctx, (body) => h(ctx, body))
  return [
    { method: "POST", path: "/v1/rerank", format: openAiChat, handle: withBody(rerank(deps.inference, deps.accounting)) },
    { method: "POST", path: "/v1/moderations", format: openAiChat, handle: withBody(moderations(deps.inference, deps.accounting)) },
    { method: "GET", path: "/v1/embeddings", format: openAiChat, handle: listEmbeddingModels(deps) }
  ]
}
