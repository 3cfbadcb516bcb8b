import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import type * as http from "node:http"
import { ApiKeys } from "../auth/ApiKeys.js"
import { AppConfig } from "../config/AppConfig.js"
import { FeatureFlags } from "../flags/FeatureFlags.js"
import { findPlanned, PLANNED_INFERENCE, plannedMessage } from "../http/planned.js"
import { authenticateInference } from "./auth.js"
import { makeChatCompletions } from "./chatCompletions.js"
import { InferenceError, openAiErrorBody } from "./errors.js"
import { type RequestContext, sendJson } from "./io.js"
import { makeListModels } from "./models.js"

type Handler = (ctx: RequestContext) => Effect.Effect<void, InferenceError>

/** A request the inference plane takes; runs to completion and never fails. */
export type InferenceProgram = Effect.Effect<void>

export interface InferenceRoutesShape {
  /** The program for a request, or undefined when the path belongs to the management plane. */
  readonly route: (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    query: string
  ) => InferenceProgram | undefined
}

export const newRequestId = (): string => "req_" + crypto.randomUUID().replace(/-/g, "")

const normalise = (path: string): string => (path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path)

/**
 * The client-facing routes. They are plain node:http handlers running Effect programs on the
 * server's prepared runtime (no router, no per-request spans): this is the hot path. Every
 * answer, success or error, carries X-Gateway-Version and X-Gateway-Request-Id; errors use the
 * OpenAI `{error: {message, type, code, param}}` shape.
 */
export class InferenceRoutes extends Context.Tag("gateway/InferenceRoutes")<InferenceRoutes, InferenceRoutesShape>() {
  static readonly layer = Layer.effect(
    InferenceRoutes,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const { allowedOrigins } = yield* AppConfig
      const handlers = new Map<string, Handler>([
        ["POST /v1/chat/completions", yield* makeChatCompletions],
        ["GET /v1/models", yield* makeListModels]
      ])

      const program = (req: http.IncomingMessage, res: http.ServerResponse, path: string, rawQuery: string, handler: Handler) => {
        const ctx: RequestContext = {
          requestId: newRequestId(),
          startedAt: Date.now(),
          req,
          res,
          path,
          query: new URLSearchParams(rawQuery),
          apiKeyId: null
        }
        return Effect.gen(function* () {
          ctx.apiKeyId = yield* authenticateInference(keys, flags, allowedOrigins, req, ctx.query)
          yield* handler(ctx)
        }).pipe(
          Effect.catchAll((e) => Effect.sync(() => respondError(ctx, e))),
          Effect.catchAllCause((cause) =>
            Effect.logError("request failed unexpectedly", Cause.pretty(cause)).pipe(
              Effect.zipRight(
                Effect.sync(() =>
                  respondError(
                    ctx,
                    new InferenceError({ status: 500, type: "server_error", code: "internal_error", message: `internal error (request ${ctx.requestId})` })
                  )
                )
              )
            )
          ),
          Effect.onExit((exit) =>
            Exit.isInterrupted(exit)
              ? Effect.logInfo(`${req.method} ${path} client closed after ${Date.now() - ctx.startedAt}ms`)
              : Effect.logInfo(`${req.method} ${path} ${res.statusCode} ${Date.now() - ctx.startedAt}ms`)
          ),
          Effect.annotateLogs("requestId", ctx.requestId)
        )
      }

      return {
        route: (req, res, rawPath, query) => {
          const path = normalise(rawPath)
          const handler = handlers.get(`${req.method} ${path}`)
          if (handler) return program(req, res, path, query, handler)
          const planned = findPlanned(PLANNED_INFERENCE, path)
          if (planned) {
            const notBuilt: Handler = () =>
              Effect.fail(new InferenceError({ status: 501, type: "invalid_request_error", code: "not_implemented", message: plannedMessage(planned) }))
            return program(req, res, path, query, notBuilt)
          }
          return undefined
        }
      }
    })
  )
}

const respondError = (ctx: RequestContext, e: InferenceError): void => {
  if (!ctx.res.headersSent) {
    sendJson(ctx, e.status, openAiErrorBody(e), e.headers)
  } else if (!ctx.res.writableEnded) {
    ctx.res.end()
  }
}
