/**
 * Quota checks and issue reports (docs/files-batches.md, "Quota checks and issue reports"):
 * `GET /v1/quotas/check`, `POST /v1/issues/report`. Both on the inference plane, with the
 * caller's gateway key.
 */
import * as Effect from "effect/Effect"
import { presentedKey } from "../auth.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { decodeReport, type IssueTrackerShape } from "../quotas/IssueTracker.js"
import type { QuotasShape } from "../quotas/Quotas.js"
import { type HttpRequestContext, sendJson, withJsonObject } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

export const quotaRoutes = (_deps: RouteDeps, quotas: QuotasShape, tracker: IssueTrackerShape): ReadonlyArray<RouteDef> => [
  {
    method: "GET",
    path: "/v1/quotas/check",
    format: openAiChat,
    handle: (ctx: HttpRequestContext) =>
      Effect.map(
        quotas.check(
          {
            provider: ctx.query.get("provider") ?? undefined,
            connection: ctx.query.get("connection") ?? undefined,
            model: ctx.query.get("model") ?? undefined
          },
          ctx.apiKeyId
        ),
        (answer) => sendJson(ctx, 200, answer)
      )
  },
  {
    method: "POST",
    path: "/v1/issues/report",
    format: openAiChat,
    handle: (ctx: HttpRequestContext) =>
      withJsonObject(ctx, (body) =>
        Effect.flatMap(decodeReport(body), (report) => {
          // The caller's own key is the one gateway key known in clear here: scrubbed literally too.
          const own = presentedKey(ctx.req, ctx.query)
          return Effect.map(tracker.report(report, own ? [own] : [], ctx.requestId), (filed) => sendJson(ctx, 201, filed))
        })
      )
  }
]
