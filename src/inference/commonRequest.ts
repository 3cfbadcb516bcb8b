/**
 * The dispatcher's side of the common path (docs/ARCHITECTURE.md, "The common path"): a request
 * taken without a fiber while it stays common (the key checked from memory, the body read on its
 * events, the pipeline's `runNow`), forked as a program the moment it stops being so, and its end.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Runtime from "effect/Runtime"
import type * as http from "node:http"
import type { ApiKeysShape } from "../services/auth/ApiKeys.js"
import type { InferenceAccess } from "../platform/config/AppConfig.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import type { InFlightShape } from "../services/usage/InFlight.js"
import type { InboundLimitsShape } from "../services/accounting/InboundLimits.js"
import type { GatewayMetricsShape } from "../services/observability/GatewayMetrics.js"
import { traceIdOf } from "../services/observability/Observability.js"
import { authenticateNow } from "./auth.js"
import { trimmedHeader as header } from "../platform/http/request.js"
import { InferenceError } from "../kernel/errors.js"
import { endRequest } from "../kernel/hooks.js"
import { fireBegin, fireEnd } from "../kernel/listeners.js"
import { INTERNAL_HEADER } from "../kernel/internalCall.js"
import { type BodyReader, parseJsonObject, readBodyNow, type HttpRequestContext } from "./io.js"
import type { InferenceShape } from "./call.js"
import type { CommonPathEnds } from "./commonPath.js"
import type { InferenceRequest, makeRequestPrograms } from "./requestProgram.js"
import type { RouteDef } from "./routes/types.js"

type RequestPrograms = ReturnType<typeof makeRequestPrograms>

export interface CommonRequestDeps {
  readonly keys: ApiKeysShape
  readonly flags: FeatureFlagsShape
  readonly access: InferenceAccess
  readonly inboundLimits: InboundLimitsShape
  readonly inflight: InFlightShape
  readonly inference: InferenceShape
  /** Counts each request by the path it took (`gateway_requests_path_total`), when metrics are on. */
  readonly metrics: GatewayMetricsShape | undefined
  /** The layer's runtime: a common request's end hooks and log line run on it. */
  readonly runtime: Runtime.Runtime<never>
  /** Whether info lines are logged at all (a request's log line costs effects). */
  readonly infoOn: boolean
  readonly contextOf: RequestPrograms["contextOf"]
  readonly programOn: RequestPrograms["programOn"]
  readonly finishing: RequestPrograms["finishing"]
}

/**
 * `tryCommon`, made once with the layer: the request on the common path, when the route has one;
 * false when not even begun (the caller runs the program as usual).
 */
export const makeTryCommon = (deps: CommonRequestDeps) => {
  const { keys, flags, access, inboundLimits, inflight, inference, metrics, infoOn, contextOf, programOn, finishing } = deps
  const counted = (path: "common" | "pipeline", reason: string) => metrics?.requestPath(path, reason)
  const runLog = Runtime.runFork(deps.runtime)

  /**
   * The request on the common path (docs/ARCHITECTURE.md, "The common path"), when the route
   * has one: without a fiber while it stays common (the key checked from memory, the body
   * read on its events, the pipeline's `runNow`), its program forked through `fork` the moment
   * it stops being so. False: not even begun (the caller runs the program as usual).
   */
  const tryCommon = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    rawQuery: string,
    route: RouteDef,
    params: Record<string, string>,
    fork: (request: InferenceRequest) => void
  ): boolean => {
    const prepare = route.common
    if (prepare === undefined || route.public) return false
    const on = flags.peekEnabled("GATEWAY_COMMON_PATH")
    if (on !== true) return (void counted("pipeline", on === false ? "off" : "cold"), false)
    if (req.headers[INTERNAL_HEADER] !== undefined) return (void counted("pipeline", "route"), false)
    if (
      (header(req, "idempotency-key") ?? header(req, "x-request-id")) !== undefined &&
      flags.peekEnabled("GATEWAY_IDEMPOTENCY_ENABLED") !== false
    )
      return (void counted("pipeline", "idempotency"), false)
    // Not a batch line of this process's own: it would carry INTERNAL_HEADER.
    const ctx = contextOf(req, res, path, rawQuery, route, false)
    fireBegin(ctx)
    const run = new CommonRun(ctx, path, route, params, fork, prepare)
    const id = authenticateNow(keys, flags, access, req, ctx.query)
    if (id === undefined) return (run.refuse("key"), true)
    ctx.apiKeyId = id
    // Inbound rate limits of the key: a counter to admit against.
    if (id !== null && inboundLimits.admit(ctx, id) !== undefined) return (run.refuse("key"), true)
    readBodyNow(req, run)
    return true
  }

  /**
   * One request taken on the common path: what its refusal, its body's reading and its two ends
   * (the `CommonPathEnds` that `runNow` calls) need, in one object of a fixed shape rather than a
   * closure for each.
   */
  class CommonRun implements CommonPathEnds, BodyReader {
    constructor(
      readonly ctx: HttpRequestContext,
      readonly path: string,
      readonly route: RouteDef,
      readonly params: Record<string, string>,
      readonly fork: (request: InferenceRequest) => void,
      readonly prepare: NonNullable<RouteDef["common"]>
    ) {}

    /** Not common after all: the program from its start, on this context (begun, the body read if it was). */
    refuse(why: string, failWith?: InferenceError): void {
      counted("pipeline", why)
      this.fork(programOn(this.ctx, false, this.path, this.route, this.params, undefined, failWith))
    }

    /** The body, read: the call prepared and run on the common path, or refused. */
    bodyRead(read: { readonly body: Buffer } | { readonly error: InferenceError }): void {
      if ("error" in read) return this.refuse("body", read.error)
      const ctx = this.ctx
      ctx.body = read.body
      const parsed = parseJsonObject(read.body)
      if (Either.isLeft(parsed)) return this.refuse("body")
      const call = this.prepare(ctx, parsed.right)
      if (typeof call === "string") return this.refuse(call)
      if (call instanceof InferenceError) return this.refuse("body")
      const why = inference.runNow(call, this)
      if (why !== undefined) return this.refuse(why)
      counted("common", "")
    }

    done(): void {
      finishNow(this.ctx, this.path)
    }

    handoff(rest: Effect.Effect<void, InferenceError>): void {
      const ctx = this.ctx
      this.fork({ program: finishing(ctx, this.path, this.route, rest), requestId: ctx.requestId, traceId: traceIdOf(ctx) })
    }
  }

  /**
   * A request the common path answered, its usage row queued: its end as `finishing` ends a
   * successful program (its end hooks, metrics and span, the write-ahead, its log line).
   */
  const finishNow = (ctx: HttpRequestContext, path: string): void => {
    const ending = endRequest(ctx)
    // Read before the span ends with the request.
    const traceId = infoOn ? traceIdOf(ctx) : undefined
    fireEnd(ctx, ctx.res.statusCode)
    // Without end hooks (the usual request), its last line at once: no closure to run it later.
    if (ending === undefined) return ended(ctx, path, traceId)
    runLog(
      Effect.ensuring(
        ending,
        Effect.sync(() => ended(ctx, path, traceId))
      )
    )
  }

  /** A common request's last step: out of the in-flight requests, and its log line. */
  const ended = (ctx: HttpRequestContext, path: string, traceId: string | undefined): void => {
    inflight.end(ctx.requestId)
    if (infoOn) {
      const annotations: Record<string, string> =
        traceId === undefined ? { requestId: ctx.requestId } : { requestId: ctx.requestId, traceId }
      runLog(
        Effect.annotateLogs(Effect.logInfo(`${ctx.req.method} ${path} ${ctx.res.statusCode} ${Date.now() - ctx.startedAt}ms`), annotations)
      )
    }
  }

  return tryCommon
}
