/**
 * Web search (docs/search.md, "Web search"): `GET /v1/search` (the configured search providers
 * and what each honours), `POST /v1/search`, `GET /v1/search/analytics`.
 */
import type * as Effect from "effect/Effect"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { listSearchProviders, search, searchAnalytics } from "../search/search.js"
import type { WebSearchShape } from "../search/WebSearch.js"
import type { InferenceError } from "../../kernel/errors.js"
import { type HttpRequestContext, withJsonObject } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

export const searchRoutes = (deps: RouteDeps, ws: WebSearchShape): ReadonlyArray<RouteDef> => {
  const run = search(deps.inference, deps.accounting, deps.connections, ws)
  const post = (ctx: HttpRequestContext): Effect.Effect<void, InferenceError> => withJsonObject(ctx, (body) => run(ctx, body))
  return [
    { method: "GET", path: "/v1/search", format: openAiChat, handle: listSearchProviders(deps.accounting, deps.connections, ws) },
    { method: "POST", path: "/v1/search", format: openAiChat, handle: post },
    { method: "GET", path: "/v1/search/analytics", format: openAiChat, handle: searchAnalytics(ws) }
  ]
}
