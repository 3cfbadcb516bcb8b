import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as crypto from "node:crypto"
import type * as http from "node:http"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { AppConfig, inferenceAccess } from "../platform/config/AppConfig.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { openAiChat } from "../upstream/formats/openai-chat.js"
import { findPlanned, PLANNED_INFERENCE, plannedMessage } from "../platform/http/planned.js"
import { decodePathSegment, quotedPath } from "../kernel/untrusted.js"
import { Connections } from "../upstream/providers/Connections.js"
import { Router } from "../services/routing/Router.js"
import { Accounting } from "../services/accounting/Accounting.js"
import { Idempotency, idempotencyKey } from "../services/accounting/Idempotency.js"
import { InFlight } from "../services/usage/InFlight.js"
import { IssueTracker } from "./quotas/IssueTracker.js"
import { Quotas } from "./quotas/Quotas.js"
import { MediaJobs } from "./media/MediaJobs.js"
import { Usage } from "../services/usage/Usage.js"
import { authenticateInference, authenticateNow, presentedKey } from "./auth.js"
import { clientAddress, trimmedHeader as header } from "../platform/http/request.js"
import { explicitSession } from "./session.js"
import { badRequest, errorBody, InferenceError, toCanonical } from "../kernel/errors.js"
import { recordAnswer } from "./builtinHooks.js"
import { endRequest, RequestHooks } from "../kernel/hooks.js"
import { fireBegin, fireEnd } from "../kernel/listeners.js"
import { InboundLimits } from "../services/accounting/InboundLimits.js"
import { endStream, HTTP_TRANSPORT, parseJsonObject, readBody, readBodyNow, type HttpRequestContext, sendJson, writeWhole } from "./io.js"
import { Inference } from "./pipeline.js"
import { traceIdOf } from "../services/observability/Observability.js"
import { GatewayMetrics } from "../services/observability/Metrics.js"
import { ResponseStore } from "./responseStore.js"
import { isGoogleClient, listGeminiModels } from "./routes/gemini.js"
import { inferenceRouteDefs } from "./routes/index.js"
import type { RouteDeps } from "./routes/openai.js"
import { WebSearch } from "./search/WebSearch.js"
import { Files } from "./files/Files.js"
import { NativeBatches } from "./batches/native.js"
import { SkillCatalog } from "../services/skills/SkillCatalog.js"
import { Batches } from "./batches/Batches.js"
import { newRequestId } from "../kernel/ids.js"
import { storeUnavailable } from "../platform/store/dialect.js"
import { INTERNAL_HEADER, INTERNAL_REQUEST_ID_HEADER, InternalCalls, ON_BEHALF_HEADER } from "../kernel/internalCall.js"
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

export interface InferenceRoutesShape {
  /**
   * The program for a request, or undefined when the path belongs to the management plane. With
   * `fork` (the server's), a request the common path takes answers `common`: it runs without a
   * fiber, and forks its program through `fork` only when it stops being common.
   */
  readonly route: (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    query: string,
    fork?: (request: InferenceRequest) => void
  ) => InferenceRequest | "common" | undefined
  /** Shared with the WebSocket transport. */
  readonly deps: RouteDeps
}

const normalise = (path: string): string => (path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path)

interface Table {
  readonly exact: Map<string, RouteDef>
  readonly patterns: ReadonlyArray<RouteDef & { readonly path: RegExp }>
}

const buildTable = (routes: ReadonlyArray<RouteDef>): Table => ({
  exact: new Map(routes.filter((r) => typeof r.path === "string").map((r) => [`${r.method} ${r.path}`, r])),
  patterns: routes.filter((r): r is RouteDef & { path: RegExp } => r.path instanceof RegExp)
})

/** The methods a path is served with (for a 405's `Allow`), empty when no route has the path. */
const methodsOf = (table: Table, path: string): Array<string> => {
  const methods: Array<string> = []
  for (const m of ["GET", "HEAD", "POST", "DELETE"]) if (table.exact.has(`${m} ${path}`)) methods.push(m)
  for (const r of table.patterns) if (!methods.includes(r.method) && r.path.test(path)) methods.push(r.method)
  return methods
}

/** Paths under /api/ that no inference route has belong to the management plane (its own 404 shape). */
const isManagementPath = (path: string): boolean => path === "/api" || path.startsWith("/api/") || path === "/metrics"

/** Requests no route has: one label for all of them in metrics and spans (their paths are the client's). */
const UNMATCHED = "unmatched"

const labels = new WeakMap<RegExp, string>()

/**
 * A route's label in metrics and spans: its path, or for a pattern its template
 * (`/v1/providers/{provider}/embeddings`); never the concrete path, whose parameters are the
 * client's (and, for the editor routes, a key).
 */
const routeLabel = (route: RouteDef): string => {
  const p = route.path
  if (typeof p === "string") return p
  let label = labels.get(p)
  if (label === undefined) {
    label = p.source
      .replace(/^\^/, "")
      .replace(/\$$/, "")
      .replace(/\(\?<(\w+)>(?:[^()]|\([^()]*\))*\)/g, "{$1}")
      .replace(/\\(.)/g, "$1")
    labels.set(p, label)
  }
  return label
}

/** A 404 (no route has the path) or 405 (another method has it) in the OpenAI error shape, before authentication. */
const noRoute = (method: string, path: string, allowed: ReadonlyArray<string>): RouteDef => ({
  method: "GET",
  path: UNMATCHED,
  format: openAiChat,
  public: true,
  handle: () =>
    Effect.fail(
      allowed.length === 0
        ? new InferenceError({ status: 404, kind: "invalid_request", code: "not_found", message: `no route for ${method} ${quotedPath(path)}` })
        : new InferenceError({
            status: 405,
            kind: "invalid_request",
            code: "method_not_allowed",
            message: `${method} is not allowed on ${quotedPath(path)}; use ${allowed.join(" or ")}`,
            headers: { allow: allowed.join(", ") }
          })
    )
})

/**
 * The route for a request and its path parameters, percent-decoded here once (handlers get
 * text); `malformed` names the first parameter whose escapes cannot be decoded (`%ZZ`).
 */
const match = (table: Table, method: string, path: string): { route: RouteDef; params: Record<string, string>; malformed?: string } | undefined => {
  const exact = table.exact.get(`${method} ${path}`)
  if (exact) return { route: exact, params: {} }
  for (const r of table.patterns) {
    if (r.method !== method) continue
    const m = r.path.exec(path)
    if (!m) continue
    const params: Record<string, string> = {}
    for (const name in m.groups) {
      const value = decodePathSegment(m.groups[name] ?? "")
      if (value === undefined) return { route: r, params, malformed: name }
      params[name] = value
    }
    return { route: r, params }
  }
  return undefined
}

/** The route, answering only a 400 in its format (before authentication): a path parameter is not valid percent-encoding. */
const malformedParam = (route: RouteDef, name: string, path: string): RouteDef => ({
  ...route,
  public: true,
  handle: () => Effect.fail(badRequest(`path parameter '${name}' is not valid percent-encoding: ${quotedPath(path)}`, name, "invalid_path_encoding"))
})

/** `/api/v1/editor/{token}/...` → the route behind it, authenticated by the token. */
const EDITOR = /^\/api\/v1\/editor\/(?<token>[^/]+)(?<rest>\/.*)?$/
const EDITOR_PATHS: Record<string, string> = {
  "/models": "/v1/models",
  "/chat/completions": "/v1/chat/completions",
  "/responses": "/v1/responses",
  "/api/chat": "/api/chat",
  "/api/tags": "/api/tags"
}

/**
 * The client-facing routes. They are plain node:http handlers running Effect programs on the
 * server's prepared runtime (no router, no per-request spans): this is the hot path. Every
 * answer, success or error, carries X-Gateway-Version and X-Gateway-Request-Id; errors are in
 * the route's wire format.
 */
export class InferenceRoutes extends Context.Tag("gateway/InferenceRoutes")<InferenceRoutes, InferenceRoutesShape>() {
  static readonly layer = Layer.effect(
    InferenceRoutes,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const connections = yield* Connections
      const router = yield* Router
      const idempotency = yield* Idempotency
      const inflight = yield* InFlight
      const hooks = yield* RequestHooks
      const files = yield* Files
      const internal = yield* InternalCalls
      const inboundLimits = yield* InboundLimits
      const access = inferenceAccess(yield* AppConfig)
      // Per-request info lines cost effects on every request: only when info is logged at all.
      const infoOn = LogLevel.lessThanEqual(yield* FiberRef.get(FiberRef.currentMinimumLogLevel), LogLevel.Info)
      const deps: RouteDeps = {
        inference: yield* Inference,
        usage: yield* Usage,
        responses: yield* ResponseStore,
        connections: connections.list,
        flag: (key) => flags.enabled(key as never),
        virtualModels: router.virtualModels,
        accounting: yield* Accounting
      }
      const table = buildTable(
        inferenceRouteDefs({
          deps,
          jobs: yield* MediaJobs,
          search: yield* WebSearch,
          quotas: yield* Quotas,
          issues: yield* IssueTracker,
          files,
          batches: yield* Batches,
          native: yield* NativeBatches,
          skills: yield* SkillCatalog,
          access
        })
      )
      const listGemini = listGeminiModels(deps)

      // A request with an idempotency key: made once, called per such request (docs/performance.md,
      // "Generator functions on the request path").
      const runIdempotent = Effect.fnUntraced(function* (
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
        if (duplicate) writeWhole(ctx, response.status, { ...response.headers, "x-gateway-request-id": ctx.requestId, "x-gateway-idempotent": "true" }, response.body)
      })

      /** A request's context, before anything runs. */
      const contextOf = (
        req: http.IncomingMessage,
        res: http.ServerResponse,
        path: string,
        rawQuery: string,
        route: RouteDef
      ): { ctx: HttpRequestContext; isInternal: boolean } => {
        // A batch line this process sends itself (src/inference/batches/Batches.ts): its owner's identity and request id.
        const presented = req.headers[INTERNAL_HEADER]
        const isInternal = typeof presented === "string" && internal.check(presented)
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
          query: new URLSearchParams(rawQuery),
          apiKeyId: null,
          responseHeaders: { "x-gateway-session-id": explicitSession(req) ?? `sess_${requestId.slice(4)}` },
          // The request's hooks: the registry's table as it is now (hooks.ts).
          hooks: hooks.current(),
          route: routeLabel(route),
          endpoint: undefined,
          span: undefined,
          upstreamMs: undefined,
          usageRow: undefined
        }
        return { ctx, isInternal }
      }

      const program = (
        req: http.IncomingMessage,
        res: http.ServerResponse,
        path: string,
        rawQuery: string,
        route: RouteDef,
        params: Record<string, string>,
        token?: string
      ): InferenceRequest => {
        const { ctx, isInternal } = contextOf(req, res, path, rawQuery, route)
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
        // Without an idempotency key (the usual request) a failure is answered by the exit handler below.
        const serveIt = () => (!clientKey || flags.peekEnabled("GATEWAY_IDEMPOTENCY_ENABLED") === false ? handler(ctx, params) : idempotent(clientKey))
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

      /**
       * The request's end around its work: the error answer when it failed, its end hooks (its
       * usage row among them), its metrics and span, the write-ahead's end, its log line. One exit
       * handler instead of a stack of catch/onExit layers: this runs for every request, in an
       * uninterruptible region so a client that went away (the fiber interrupted) still gets its
       * log line, and its usage row (the end hooks).
       */
      const finishing = (ctx: HttpRequestContext, path: string, route: RouteDef, body: Effect.Effect<unknown, InferenceError>): InferenceProgram => {
        const { req, res } = ctx
        return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(Effect.exit(restore(body)), (exit) => {
            const done = () => (infoOn ? Effect.logInfo(`${req.method} ${path} ${res.statusCode} ${Date.now() - ctx.startedAt}ms`) : Effect.void)
            let error: InferenceError | undefined
            let gone = false
            let after: () => Effect.Effect<void> = done
            if (Exit.isFailure(exit)) {
              if (Cause.isInterruptedOnly(exit.cause)) {
                gone = true
                after = () => (infoOn ? Effect.logInfo(`${req.method} ${path} client closed after ${Date.now() - ctx.startedAt}ms`) : Effect.void)
              } else {
                const failure = Cause.failureOption(exit.cause)
                // A route that must store (files, batches, stored responses) and found the store unavailable: a 503 that says so.
                const unavailable = failure._tag === "None" ? storeUnavailable(exit.cause) : undefined
                error =
                  failure._tag === "Some"
                    ? failure.value
                    : unavailable !== undefined
                      ? new InferenceError({ status: 503, kind: "server", code: "store_unavailable", message: `the gateway cannot store this request now: ${unavailable}` })
                      : new InferenceError({ status: 500, kind: "server", code: "internal_error", message: `internal error (request ${ctx.requestId})` })
                try {
                  respondError(ctx, error, route)
                  if (failure._tag === "None" && unavailable === undefined) after = () => Effect.logError("request failed unexpectedly", Cause.pretty(exit.cause))
                } catch (e) {
                  // The error answer itself could not be written: close the connection rather than leave it open.
                  res.destroy()
                  after = () => Effect.logError("the error answer could not be written", Cause.pretty(Cause.sequential(exit.cause, Cause.die(e))))
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

      // ---------------------------------------------------------------- the common path

      const metrics = Option.getOrUndefined(yield* Effect.serviceOption(GatewayMetrics))
      const counted = (path: "common" | "pipeline", reason: string) => metrics?.requestPath(path, reason)
      const runtime = yield* Effect.runtime<never>()
      const runLog = Runtime.runFork(runtime)

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
        if ((header(req, "idempotency-key") ?? header(req, "x-request-id")) !== undefined && flags.peekEnabled("GATEWAY_IDEMPOTENCY_ENABLED") !== false)
          return (void counted("pipeline", "idempotency"), false)
        const { ctx } = contextOf(req, res, path, rawQuery, route)
        fireBegin(ctx)
        /** Not common after all: the program from its start, on this context (begun, the body read if it was). */
        const refuse = (why: string, failWith?: InferenceError) => {
          counted("pipeline", why)
          fork(programOn(ctx, false, path, route, params, undefined, failWith))
        }
        const id = authenticateNow(keys, flags, access, req, ctx.query)
        if (id === undefined) return (refuse("key"), true)
        ctx.apiKeyId = id
        // Inbound rate limits of the key: a counter to admit against.
        if (id !== null && inboundLimits.admit(ctx, id) !== undefined) return (refuse("key"), true)
        readBodyNow(req, (read) => {
          if ("error" in read) return refuse("body", read.error)
          ctx.body = read.body
          const parsed = parseJsonObject(read.body)
          if (Either.isLeft(parsed)) return refuse("body")
          const call = prepare(ctx, parsed.right)
          if (call instanceof InferenceError) return refuse("body")
          const why = deps.inference.runNow(call, {
            done: () => finishNow(ctx, path),
            handoff: (rest) => fork({ program: finishing(ctx, path, route, rest), requestId: ctx.requestId, traceId: traceIdOf(ctx) })
          })
          if (why !== undefined) return refuse(why)
          counted("common", "")
        })
        return true
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
        const line = () => {
          inflight.end(ctx.requestId)
          if (infoOn) {
            const annotations: Record<string, string> = traceId === undefined ? { requestId: ctx.requestId } : { requestId: ctx.requestId, traceId }
            runLog(Effect.annotateLogs(Effect.logInfo(`${ctx.req.method} ${path} ${ctx.res.statusCode} ${Date.now() - ctx.startedAt}ms`), annotations))
          }
        }
        if (ending === undefined) return line()
        runLog(Effect.ensuring(ending, Effect.sync(line)))
      }

      const editorInfo: RouteDef = {
        method: "GET",
        path: "/",
        format: openAiChat,
        handle: (ctx) =>
          Effect.sync(() => sendJson(ctx, 200, { ok: true, note: "OpenAI-compatible base URL for clients that cannot send headers", endpoints: Object.keys(EDITOR_PATHS) }))
      }

      return {
        deps,
        route: (req, res, rawPath, query, fork) => {
          const path = normalise(rawPath)
          const method = req.method ?? "GET"
          const editor = EDITOR.exec(path)
          if (editor) {
            const rest = editor.groups!["rest"] ?? "/"
            const inner = rest === "/" && method === "GET" ? { route: editorInfo, params: {} } : EDITOR_PATHS[rest] ? match(table, method, EDITOR_PATHS[rest]!) : undefined
            if (!inner && EDITOR_PATHS[rest]) return program(req, res, path, query, noRoute(method, path, methodsOf(table, EDITOR_PATHS[rest]!)), {})
            if (inner) {
              const token = decodePathSegment(editor.groups!["token"]!)
              return token === undefined
                ? program(req, res, path, query, malformedParam(inner.route, "token", path), {})
                : program(req, res, path, query, inner.route, inner.params, token)
            }
          }
          const found = match(table, method, path)
          if (found) {
            if (found.malformed !== undefined) return program(req, res, path, query, malformedParam(found.route, found.malformed, path), {})
            if (fork !== undefined && found.route.common !== undefined && tryCommon(req, res, path, query, found.route, found.params, fork)) return "common"
            return program(req, res, path, query, found.route, found.params)
          }
          const planned = findPlanned(PLANNED_INFERENCE, path)
          if (planned) {
            const notBuilt: RouteDef = {
              method: "POST",
              path,
              format: openAiChat,
              handle: () => Effect.fail(new InferenceError({ status: 501, kind: "invalid_request", code: "not_implemented", message: plannedMessage(planned) }))
            }
            return program(req, res, path, query, notBuilt, {})
          }
          // Not served with this method: a 405 when another method has the path, else (outside /api/) a 404.
          const allowed = methodsOf(table, path)
          if (allowed.length === 0 && isManagementPath(path)) return undefined
          return program(req, res, path, query, noRoute(method, path, allowed), {})
        }
      }
    })
  )
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
    endStream(ctx, route.format.streamEncoder({ model: "", requestId: ctx.requestId }).push({ type: "error", error: toCanonical(e) }), e.message)
    return
  }
  if (!ctx.res.headersSent) {
    sendJson(ctx, e.status, errorBody(e, route.format), e.headers)
  } else if (!ctx.res.writableEnded) {
    endStream(ctx, "", e.message)
  }
}
