/**
 * A request's program on the inference plane: its context, its authentication and the key's
 * inbound limits, an idempotency key's recorded run, the route's handler, and its end (the error
 * answer, the end hooks, metrics and span, the write-ahead's end, its log line).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as crypto from "node:crypto"
import type * as http from "node:http"
import type { ApiKeysShape } from "../services/auth/ApiKeys.js"
import type { InferenceAccess } from "../platform/config/AppConfig.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { idempotencyKey, type IdempotencyShape } from "../services/accounting/Idempotency.js"
import type { InFlightShape } from "../services/usage/InFlight.js"
import type { InboundLimitsShape } from "../services/accounting/InboundLimits.js"
import { authenticateInference, presentedKey } from "./auth.js"
import { clientAddress, trimmedHeader as header } from "../platform/http/request.js"
import { explicitSession } from "./session.js"
import { errorBody, InferenceError, toCanonical } from "../kernel/errors.js"
import { recordAnswer } from "./builtinHooks.js"
import { endRequest } from "../kernel/hooks.js"
import type { RequestHooksShape } from "../kernel/RequestHooks.js"
import { fireBegin, fireEnd } from "../kernel/listeners.js"
import { endStream, HTTP_TRANSPORT, readBody, type HttpRequestContext, sendJson, writeWhole } from "./io.js"
import { traceIdOf } from "../services/observability/Observability.js"
import { isGoogleClient } from "./routes/gemini.js"
import { newRequestId } from "../kernel/ids.js"
import { storeUnavailable } from "../platform/store/dialect.js"
import { INTERNAL_HEADER, INTERNAL_REQUEST_ID_HEADER, type InternalCallsShape, ON_BEHALF_HEADER } from "../kernel/internalCall.js"
import { routeLabel } from "./routeTable.js"
import type { Handler, RouteDef } from "./routes/types.js"

/** A request the inference plane takes; runs to completion and never fails. */
export type InferenceProgram = Effect.Effect<void>

/** A request taken by the inference plane: its program and its id (the server annotates the fiber's logs with it). */
export interface InferenceRequest {
  readonly program: InferenceProgram
  readonly requestId: string
  /** The trace id of its log lines: its span's, else the one of the client's `traceparent`. */
  readonly traceId?: string | undefined
}

/** The first answer was transient (5xx, 429): already sent, not kept for duplicates. */
class TransientAnswer {
  readonly _tag = "TransientAnswer"
}

const digest = (data: string | Buffer): string => crypto.createHash("sha256").update(data).digest("hex").slice(0, 32)

const respondError = (ctx: HttpRequestContext, e: InferenceError, route: RouteDef): void => {
  if (ctx.progress && !ctx.progress.contentStarted && !ctx.res.writableEnded) {
    // Progress events opened the stream: the error goes as the format's stream error event.
    ctx.progress.emit("error", { status: e.status })
    endStream(
      ctx,
      route.format.streamEncoder({ model: "", requestId: ctx.requestId }).push({ type: "error", error: toCanonical(e) }),
      e.message
    )
    return
  }
  if (!ctx.res.headersSent) {
    sendJson(ctx, e.status, errorBody(e, route.format), e.headers)
  } else if (!ctx.res.writableEnded) {
    endStream(ctx, "", e.message)
  }
}

/**
 * A request with an idempotency key: the first one with a key runs, duplicates get its answer.
 * Made once, called per such request (docs/performance.md, "Generator functions on the request path").
 */
const makeIdempotentRun = ({ flags, idempotency }: { readonly flags: FeatureFlagsShape; readonly idempotency: IdempotencyShape }) =>
  Effect.fnUntraced(function* (
    clientKey: string,
    ctx: HttpRequestContext,
    route: RouteDef,
    path: string,
    token: string | undefined,
    serve: Effect.Effect<unknown>
  ) {
    const req = ctx.req
    if (!(yield* flags.enabled("GATEWAY_IDEMPOTENCY_ENABLED"))) return yield* serve
    // The same key with another body is another request (X-Request-Id is often a correlation id
    // passed along); callers without a recognised key are told apart by what they presented.
    ctx.body ??= yield* readBody(req)
    const caller = ctx.apiKeyId ?? `anon:${digest(presentedKey(req, ctx.query, token) ?? clientAddress(req, false))}`
    const key = idempotencyKey({ apiKeyId: caller, method: route.method, path, clientKey: `${clientKey}\u0000${digest(ctx.body)}` })
    // The first request with a key runs; duplicates within 5 s (or while it runs) get its answer.
    // A 5xx or 429 answer is not kept: a retry after it should try again.
    const outcome = yield* Effect.either(
      idempotency.run(
        key,
        Effect.suspend(() => {
          const recorder = recordAnswer(ctx)
          return Effect.flatMap(serve, () => {
            const r = recorder.result()
            return r.status >= 500 || r.status === 429 ? Effect.fail(new TransientAnswer()) : Effect.succeed(r)
          })
        })
      )
    )
    if (outcome._tag === "Left") return
    const { response, duplicate } = outcome.right
    if (duplicate)
      writeWhole(
        ctx,
        response.status,
        { ...response.headers, "x-gateway-request-id": ctx.requestId, "x-gateway-idempotent": "true" },
        response.body
      )
  })

/**
 * The query of a request without one (nearly every request): one instance for all of them rather
 * than one per request. Nothing on the request path writes a request's query; were something to,
 * it would throw here rather than change the query of every other request.
 */
class NoQuery extends URLSearchParams {
  override append(): never {
    throw new TypeError("a request's query is read-only")
  }
  override delete(): never {
    throw new TypeError("a request's query is read-only")
  }
  override set(): never {
    throw new TypeError("a request's query is read-only")
  }
  override sort(): never {
    throw new TypeError("a request's query is read-only")
  }
}
const NO_QUERY: URLSearchParams = new NoQuery()

/** Whether a request is a batch line this process sends itself (src/inference/batches/Batches.ts): its owner's identity and request id. */
const makeIsInternal =
  ({ internal }: { readonly internal: InternalCallsShape }) =>
  (req: http.IncomingMessage): boolean => {
    const presented = req.headers[INTERNAL_HEADER]
    return typeof presented === "string" && internal.check(presented)
  }

/**
 * The headers the pipeline adds to a request's answer (`ctx.responseHeaders`), starting with its
 * session: a plain object (its prototype is Object's) made by a constructor so that V8 gives it
 * room inside it for the ten or so a whole answer gets (the session, the cache's, the seven of its
 * cost). A literal has room for the one it names: each header set later grew a side array again,
 * and a whole answer's cost headers copied in at once grew it three times.
 */
type HeadersByName = Record<string, string>
const PipelineHeaders = function (this: HeadersByName, sessionId: string) {
  this["x-gateway-session-id"] = sessionId
} as unknown as new (
  sessionId: string
) => HeadersByName
PipelineHeaders.prototype = Object.prototype

/** A request's context, before anything runs; `isInternal`: a batch line this process sends itself (`makeIsInternal`). */
const makeRequestContext =
  ({ hooks }: { readonly hooks: RequestHooksShape }) =>
  (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    rawQuery: string,
    route: RouteDef,
    isInternal: boolean
  ): HttpRequestContext => {
    const internalId = isInternal ? req.headers[INTERNAL_REQUEST_ID_HEADER] : undefined
    const requestId = typeof internalId === "string" && /^[A-Za-z0-9_-]{1,100}$/.test(internalId) ? internalId : newRequestId()
    // Every answer names a session: the client's own, else (until the pipeline derives one from the body) this request's.
    const ctx: HttpRequestContext = {
      requestId,
      startedAt: Date.now(),
      req,
      res,
      method: req.method ?? "GET",
      headers: req.headers,
      answer: res,
      transport: HTTP_TRANSPORT,
      path,
      query: rawQuery === "" ? NO_QUERY : new URLSearchParams(rawQuery),
      apiKeyId: null,
      conversation: undefined,
      responseHeaders: new PipelineHeaders(explicitSession(req) ?? `sess_${requestId.slice(4)}`),
      // The request's hooks: the registry's table as it is now (hooks.ts).
      hooks: hooks.current(),
      route: routeLabel(route),
      endpoint: undefined,
      span: undefined,
      upstreamMs: undefined,
      usageRow: undefined,
      // Set on every request later (the inspector's record, the body, the answer as written, its
      // end): named here, so that the context has room for them inside it rather than a side
      // array grown twice as they come.
      inspection: undefined,
      // The request as hooks see it (kernel/hooks.ts `requestOf`), made when a hook that is not
      // built in first runs: context compression's, on every request while it is registered.
      hookRequest: undefined,
      body: undefined,
      answerHeaders: undefined,
      answerBody: undefined,
      ended: undefined
    }
    return ctx
  }

/**
 * The request's end around its work: the error answer when it failed, its end hooks (its
 * usage row among them), its metrics and span, the write-ahead's end, its log line. One exit
 * handler instead of a stack of catch/onExit layers: this runs for every request, in an
 * uninterruptible region so a client that went away (the fiber interrupted) still gets its
 * log line, and its usage row (the end hooks).
 */
const makeFinishing =
  ({ inflight, infoOn }: { readonly inflight: InFlightShape; readonly infoOn: boolean }) =>
  (ctx: HttpRequestContext, path: string, route: RouteDef, body: Effect.Effect<unknown, InferenceError>): InferenceProgram => {
    const { req, res } = ctx
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Effect.exit(restore(body)), (exit) => {
        const done = () =>
          infoOn ? Effect.logInfo(`${req.method} ${path} ${res.statusCode} ${Date.now() - ctx.startedAt}ms`) : Effect.void
        let error: InferenceError | undefined
        let gone = false
        let after: () => Effect.Effect<void> = done
        if (Exit.isFailure(exit)) {
          if (Cause.isInterruptedOnly(exit.cause)) {
            gone = true
            after = () =>
              infoOn ? Effect.logInfo(`${req.method} ${path} client closed after ${Date.now() - ctx.startedAt}ms`) : Effect.void
          } else {
            const failure = Cause.failureOption(exit.cause)
            // A route that must store (files, batches, stored responses) and found the store unavailable: a 503 that says so.
            const unavailable = failure._tag === "None" ? storeUnavailable(exit.cause) : undefined
            error =
              failure._tag === "Some"
                ? failure.value
                : unavailable !== undefined
                  ? new InferenceError({
                      status: 503,
                      kind: "server",
                      code: "store_unavailable",
                      message: `the gateway cannot store this request now: ${unavailable}`
                    })
                  : new InferenceError({
                      status: 500,
                      kind: "server",
                      code: "internal_error",
                      message: `internal error (request ${ctx.requestId})`
                    })
            try {
              respondError(ctx, error, route)
              if (failure._tag === "None" && unavailable === undefined)
                after = () => Effect.logError("request failed unexpectedly", Cause.pretty(exit.cause))
            } catch (e) {
              // The error answer itself could not be written: close the connection rather than leave it open.
              res.destroy()
              after = () =>
                Effect.logError("the error answer could not be written", Cause.pretty(Cause.sequential(exit.cause, Cause.die(e))))
            }
          }
        }
        // The request's end: onResponse or onError (its usage row among them), unless the recorded run ended it.
        const ending = endRequest(ctx, error, gone)
        // Its metrics and span: after the end hooks' synchronous part, which put its usage row on ctx.
        fireEnd(ctx, gone ? 499 : res.statusCode, error)
        // Its usage row (if it writes one) is queued by now: no longer written ahead.
        if (ending === undefined) {
          inflight.end(ctx.requestId)
          return after()
        }
        return Effect.flatMap(ending, () => {
          inflight.end(ctx.requestId)
          return after()
        })
      })
    )
  }

export interface RequestProgramDeps {
  readonly keys: ApiKeysShape
  readonly flags: FeatureFlagsShape
  readonly idempotency: IdempotencyShape
  readonly inflight: InFlightShape
  readonly hooks: RequestHooksShape
  readonly internal: InternalCallsShape
  readonly inboundLimits: InboundLimitsShape
  readonly access: InferenceAccess
  /** Whether info lines are logged at all (a request's log line costs effects). */
  readonly infoOn: boolean
  /** GET /v1/models for Google's clients: the Gemini list. */
  readonly listGemini: Handler
}

/**
 * The programs of requests, made once with the layer: `contextOf` a request, its `program` from
 * the start (context, begun), `programOn` a context already begun, and `finishing`, its end.
 */
export const makeRequestPrograms = (deps: RequestProgramDeps) => {
  const { keys, flags, inboundLimits, access, listGemini } = deps
  const runIdempotent = makeIdempotentRun(deps)
  const contextOf = makeRequestContext(deps)
  const isInternalOf = makeIsInternal(deps)
  const finishing = makeFinishing(deps)

  const program = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    rawQuery: string,
    route: RouteDef,
    params: Record<string, string>,
    token?: string
  ): InferenceRequest => {
    const isInternal = isInternalOf(req)
    const ctx = contextOf(req, res, path, rawQuery, route, isInternal)
    // In flight, its span while tracing is on, and the trace id its log lines carry.
    fireBegin(ctx)
    return programOn(ctx, isInternal, path, route, params, token)
  }

  /**
   * The request's program on its context (begun: `fireBegin` already told the listeners).
   * `failWith`: the route's handler is not run, the request fails with this error instead (a
   * body the common path found too large).
   */
  const programOn = (
    ctx: HttpRequestContext,
    isInternal: boolean,
    path: string,
    route: RouteDef,
    params: Record<string, string>,
    token?: string,
    failWith?: InferenceError
  ): InferenceRequest => {
    const { req } = ctx
    const traceId = traceIdOf(ctx)
    let handler: Handler = failWith === undefined ? route.handle : () => Effect.fail(failWith)
    // GET /v1/models from Google's clients wants the Gemini list.
    if (path === "/v1/models" && req.method === "GET" && isGoogleClient(ctx)) handler = listGemini
    const handle = Effect.suspend(() => handler(ctx, params))
    // With an idempotency key the error answer must be written, and the request ended (its
    // end hooks see the answer: the recorder keeps it), inside the recorded run.
    const ended = (e?: InferenceError) => Effect.uninterruptible(Effect.suspend(() => endRequest(ctx, e) ?? Effect.void))
    const serve = Effect.matchEffect(handle, {
      onFailure: (e) =>
        Effect.zipRight(
          Effect.sync(() => respondError(ctx, e, route)),
          ended(e)
        ),
      onSuccess: () => ended()
    })
    const clientKey = route.method === "POST" ? (header(req, "idempotency-key") ?? header(req, "x-request-id")) : undefined
    // Without an idempotency key (the usual request) a failure is answered by the exit handler (`finishing`).
    const serveIt = () =>
      !clientKey || flags.peekEnabled("GATEWAY_IDEMPOTENCY_ENABLED") === false ? handler(ctx, params) : idempotent(clientKey)
    const body = route.public
      ? handle
      : isInternal
        ? Effect.suspend(() => {
            const owner = req.headers[ON_BEHALF_HEADER]
            ctx.apiKeyId = typeof owner === "string" && owner !== "" ? owner : null
            return serveIt()
          })
        : Effect.flatMap(authenticateInference(keys, flags, access, req, ctx.query, token), (id) => {
            ctx.apiKeyId = id
            // Inbound rate limits of the key (undefined: it has none).
            const admission = id === null ? undefined : inboundLimits.admit(ctx, id)
            return admission === undefined ? serveIt() : Effect.zipRight(admission, Effect.suspend(serveIt))
          })
    const idempotent = (clientKey: string) => runIdempotent(clientKey, ctx, route, path, token, serve)
    return { program: finishing(ctx, path, route, body), requestId: ctx.requestId, traceId }
  }

  return { contextOf, program, programOn, finishing }
}
