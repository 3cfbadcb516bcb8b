import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Etag from "@effect/platform/Etag"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeHttpPlatform from "@effect/platform-node/NodeHttpPlatform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { newRequestId } from "../../kernel/ids.js"
import { gatewayHeaders } from "../../inference/io.js"
import { findPlanned, PLANNED_MANAGEMENT, plannedMessage } from "../../platform/http/planned.js"
import { decodePathSegment, jsonTooDeep, quotedPath, TOO_DEEP_MESSAGE } from "../../kernel/untrusted.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { AuditLog } from "../../services/governance/AuditLog.js"
import { audited } from "./compliance/AuditSlot.js"
import * as ManagementHttp from "./Http.js"
import { OpenApiRoute } from "./openapi.js"
import * as HttpApiError from "@effect/platform/HttpApiError"
import { BadRequest } from "../../domain/errors.js"
import { describeIssues } from "../../domain/parse.js"
import { storeUnavailable } from "../../platform/store/dialect.js"
import { buildLayer } from "../../platform/system/buildLayer.js"
import type { NodeHandler } from "./ManagementHandler.js"

const json = (status: number, tag: string, message: string) => HttpServerResponse.unsafeJson({ _tag: tag, message }, { status })

/** What the management plane answers when no handler took the request or a handler died. */
const fallbackResponse = (req: HttpServerRequest.HttpServerRequest, cause: Cause.Cause<unknown>, requestId: string) => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure) && (failure.value as { _tag?: string })._tag === "RouteNotFound") {
    const path = req.url.split("?")[0] ?? req.url
    // The router finds no route for a path it cannot percent-decode: say what is wrong with it.
    if (decodePathSegment(path) === undefined) {
      return Effect.succeed(badRequest(`request path is not valid percent-encoding: ${quotedPath(path)}`))
    }
    const planned = findPlanned(PLANNED_MANAGEMENT, path)
    return Effect.succeed(
      planned ? json(501, "NotImplemented", plannedMessage(planned)) : json(404, "NotFound", `no route for ${req.method} ${path}`)
    )
  }
  if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
  // The store refused for being unavailable (its server down, its disk full or read-only): a 503 that says so.
  const unavailable = storeUnavailable(cause)
  if (unavailable !== undefined)
    return Effect.succeed(json(503, "ServiceUnavailable", `store_unavailable: ${unavailable}; try again once it is back`))
  return Effect.logError("management request failed unexpectedly", Cause.pretty(cause)).pipe(
    Effect.as(json(500, "InternalError", `internal error (request ${requestId})`))
  )
}

/** A payload the HttpApi could not decode: `invalid request: ` and the plane's one wording (`describeIssues`). */
export const describeDecodeError = (e: HttpApiError.HttpApiDecodeError): string =>
  `invalid request: ${describeIssues(e.issues) || e.message}`

const badRequest = (message: string) => HttpServerResponse.unsafeJson(new BadRequest({ message }), { status: 400 })

/**
 * Bad input answers like every other management error, `BadRequest` with a one-line message:
 * schema failures instead of the platform's nested tree, and unreadable bodies (not JSON)
 * instead of a 500.
 */
const BadInputAsBadRequest = HttpApiBuilder.middleware((app) =>
  Effect.catchAllCause(app, (cause) => {
    // The platform reports an unparseable body as a defect (orDie), a schema failure as a failure.
    const failure = Option.getOrElse(Cause.failureOption(cause), () => Option.getOrUndefined(Cause.dieOption(cause))) as unknown
    if (failure instanceof HttpApiError.HttpApiDecodeError) return Effect.succeed(badRequest(describeDecodeError(failure)))
    const request = failure as { _tag?: string; reason?: string; cause?: unknown } | undefined
    if (request?._tag === "RequestError" && request.reason === "Decode") {
      if (request.cause instanceof SyntaxError)
        return Effect.succeed(badRequest(`request body is not valid JSON: ${request.cause.message}`))
      // The body limit (MaxBodySize) or a broken upload: the body never arrived whole.
      return Effect.succeed(json(413, "PayloadTooLarge", `request body exceeds ${MAX_MANAGEMENT_BODY_BYTES} bytes or could not be read`))
    }
    return Effect.failCause(cause)
  })
)

/**
 * A JSON body nested deeper than MAX_JSON_DEPTH is refused before any handler sees it: schema
 * decoding and error rendering walk it recursively and would overflow the stack (a 500). The
 * body text is cached by the request, so the handler reads the same text again at no cost; a
 * body that cannot be read is left to the handler, which reports it as usual. Runs after
 * `unsupportedBody`, so whatever body is here is read as JSON.
 */
const notTooDeep = <E, R>(req: HttpServerRequest.HttpServerRequest, app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  BODILESS.has(req.method) || emptyBody(req)
    ? app
    : Effect.flatMap(Effect.either(req.text), (text) =>
        text._tag === "Right" && jsonTooDeep(text.right) ? Effect.succeed(badRequest(`request body is ${TOO_DEEP_MESSAGE}`)) : app
      )

/**
 * Routes whose body is a file, not JSON: the handler streams it to disk under its own size limit
 * (`POST /api/db-backups/import`, GATEWAY_BACKUP_IMPORT_MAX_MB; `POST /api/plugins/upload`,
 * PLUGIN_MAX_UPLOAD_MB), so the JSON checks and the 1 MiB limit do not apply.
 */
const UPLOAD_ROUTES = new Set(["POST /api/db-backups/import", "POST /api/plugins/upload"])
const isUpload = (req: HttpServerRequest.HttpServerRequest): boolean => UPLOAD_ROUTES.has(`${req.method} ${req.url.split("?")[0]}`)

/** Methods whose body, if any, no management route reads. */
const BODILESS = new Set(["GET", "HEAD", "OPTIONS"])

/** Management bodies are small JSON documents; anything larger is refused before it is read. */
export const MAX_MANAGEMENT_BODY_BYTES = 1024 * 1024

/**
 * The media type a management body is read as. The platform would otherwise parse forms and
 * multipart bodies into the same schemas (and die on a malformed multipart body); no
 * management route takes anything but JSON. A body without a content type is read as JSON.
 */
const unsupportedBody = (req: HttpServerRequest.HttpServerRequest): string | undefined => {
  if (BODILESS.has(req.method) || emptyBody(req)) return undefined
  const contentType = req.headers["content-type"]
  if (contentType === undefined) return undefined
  const mediaType = (contentType.split(";")[0] ?? "").trim().toLowerCase()
  if (mediaType === "application/json") return undefined
  const shown = contentType.length > 80 ? `${contentType.slice(0, 80)}…` : contentType
  return `management request bodies must be JSON: send 'content-type: application/json' (got ${JSON.stringify(shown)})`
}

const emptyBody = (req: HttpServerRequest.HttpServerRequest): boolean =>
  req.headers["transfer-encoding"] === undefined && (req.headers["content-length"] ?? "0").trim() === "0"

/**
 * A request that declares a content type but sends no body is read as having none: its type
 * says nothing, and the platform's multipart parser would wait for (or die on) a body that is
 * not there. A route that needs a body then says so with a 400.
 */
const withoutBody = (req: HttpServerRequest.HttpServerRequest): HttpServerRequest.HttpServerRequest => {
  if (BODILESS.has(req.method) || req.headers["content-type"] === undefined || !emptyBody(req)) return req
  const { "content-type": _, ...headers } = req.headers
  return req.modify({ headers: headers as typeof req.headers })
}

/** Request id, version headers, body limit, access log and JSON fallbacks for every management response. */
const managementMiddleware = (deps: Parameters<typeof audited>[0]) =>
  HttpMiddleware.make((app) =>
    Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      const requestId = newRequestId()
      const started = Date.now()
      const declared = Number(req.headers["content-length"] ?? 0)
      const unsupported = unsupportedBody(req)
      const guarded = isUpload(req)
        ? app
        : unsupported !== undefined
          ? Effect.succeed(json(415, "UnsupportedMediaType", unsupported))
          : declared > MAX_MANAGEMENT_BODY_BYTES
            ? Effect.succeed(json(413, "PayloadTooLarge", `request body exceeds ${MAX_MANAGEMENT_BODY_BYTES} bytes`))
            : HttpIncomingMessage.withMaxBodySize(
                Effect.provideService(notTooDeep(req, app), HttpServerRequest.HttpServerRequest, withoutBody(req)),
                Option.some(MAX_MANAGEMENT_BODY_BYTES)
              )
      // Every change is written to the audit log once answered (compliance/AuditSlot.ts).
      return yield* audited(deps, req, app, guarded).pipe(
        Effect.catchAllCause((cause) => fallbackResponse(req, cause, requestId)),
        Effect.map((res) => HttpServerResponse.setHeaders(res, gatewayHeaders(requestId))),
        Effect.tap((res) => Effect.logInfo(`${req.method} ${req.url.split("?")[0]} ${res.status} ${Date.now() - started}ms`)),
        Effect.annotateLogs("requestId", requestId)
      )
    })
  )

/** The management plane's handler while it is built (a tag of this module's own). */
class AppHandler extends Context.Tag("gateway/ManagementApp")<AppHandler, NodeHandler>() {}

const appLayer = Layer.effect(
  AppHandler,
  Effect.gen(function* () {
    const app = yield* HttpApiBuilder.httpApp
    // Applied to the app itself: makeHandler writes the response before an outer middleware runs.
    return yield* NodeHttpServer.makeHandler(managementMiddleware({ audit: yield* AuditLog, flags: yield* FeatureFlags })(app))
  })
).pipe(
  Layer.provide(Layer.mergeAll(ManagementHttp.layer, BadInputAsBadRequest, OpenApiRoute)),
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer]),
  // The file system and paths (file answers, uploads): the rest of NodeContext (a terminal, a
  // command executor, workers) the API does not use.
  Layer.provide([NodeHttpPlatform.layer, Etag.layerWeak, NodeFileSystem.layer, NodePath.layer])
)

/**
 * The management plane (an HttpApi) as a node:http handler, its layers released with the scope.
 * Loaded and built on the first management request (./ManagementHandler.ts).
 */
export const build = Effect.map(buildLayer(appLayer), (context) => Context.get(context, AppHandler))
