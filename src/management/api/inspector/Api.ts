import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable } from "../../../domain/errors.js"
import {
  AddHost,
  AnnotationPayload,
  CaptureModes,
  CustomHostSchema,
  DetailQuery,
  HostList,
  HostPath,
  HttpProxyAction,
  IngestPayload,
  InterceptedRequestView,
  InterceptedSummary,
  PatchHost,
  ReplayResult,
  RequestList,
  RequestsQuery,
  SessionExportQuery,
  SessionList,
  SessionSnapshot,
  SessionViewSchema,
  StartSession,
  SystemProxyAction,
  TlsInterceptPayload,
  TproxyStart,
  TproxyStatus,
  UpdateSession
} from "../../../domain/inspector.js"
import { INSPECTOR_BASE, TPROXY_PATH } from "../../../services/inspector/paths.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, CONFIGURATION, READERS, Roles } from "../Roles.js"

const Har = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/json" })
const Pem = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/x-pem-file" })
const SessionExport = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/json" })

/**
 * `/api/tools/traffic-inspector/*`: the traffic inspector (docs/inspector.md). Loopback-only: the
 * server refuses any other caller before authentication (src/server/Server.ts); then the admin's
 * credentials apply as on every management route.
 */
export class InspectorGroup extends HttpApiGroup.make("inspector")
  .add(HttpApiEndpoint.get("list", `${INSPECTOR_BASE}/requests`).setUrlParams(RequestsQuery).addSuccess(RequestList).addError(NotFound))
  .add(HttpApiEndpoint.del("clear", `${INSPECTOR_BASE}/requests`).addSuccess(Schema.Struct({ cleared: Schema.Number })))
  .add(
    HttpApiEndpoint.get("get", `${INSPECTOR_BASE}/requests/:id`)
      .setPath(IdPath)
      .setUrlParams(DetailQuery)
      .addSuccess(InterceptedRequestView)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("replay", `${INSPECTOR_BASE}/requests/:id/replay`)
      .setPath(IdPath)
      .addSuccess(ReplayResult)
      .addError(NotFound)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(BadGateway)
  )
  .add(
    HttpApiEndpoint.put("annotate", `${INSPECTOR_BASE}/requests/:id/annotation`)
      .setPath(IdPath)
      .setPayload(AnnotationPayload)
      .addSuccess(InterceptedSummary)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("exportHar", `${INSPECTOR_BASE}/export.har`).setUrlParams(RequestsQuery).addSuccess(Har).addError(NotFound))
  .add(HttpApiEndpoint.get("hosts", `${INSPECTOR_BASE}/hosts`).annotate(Roles, READERS).addSuccess(HostList).addError(ServiceUnavailable))
  .add(
    HttpApiEndpoint.post("addHost", `${INSPECTOR_BASE}/hosts`)
      .setPayload(AddHost)
      .addSuccess(CustomHostSchema, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
      .addError(Forbidden)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.del("removeHost", `${INSPECTOR_BASE}/hosts/:host`)
      .setPath(HostPath)
      .addSuccess(Schema.Struct({ removed: CustomHostSchema }))
      .addError(NotFound)
      .addError(Forbidden)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.patch("patchHost", `${INSPECTOR_BASE}/hosts/:host`)
      .setPath(HostPath)
      .setPayload(PatchHost)
      .addSuccess(CustomHostSchema)
      .addError(NotFound)
      .addError(Forbidden)
      .addError(Conflict)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.get("captureModes", `${INSPECTOR_BASE}/capture-modes`)
      .annotate(Roles, READERS)
      .addSuccess(CaptureModes)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.post("httpProxy", `${INSPECTOR_BASE}/capture-modes/http-proxy`)
      .setPayload(HttpProxyAction)
      .addSuccess(CaptureModes)
      .addError(Conflict)
      .addError(BadRequest)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.post("systemProxy", `${INSPECTOR_BASE}/capture-modes/system-proxy`)
      .setPayload(SystemProxyAction)
      .addSuccess(CaptureModes)
      .addError(Conflict)
      .addError(BadRequest)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.post("tlsIntercept", `${INSPECTOR_BASE}/capture-modes/tls-intercept`)
      .setPayload(TlsInterceptPayload)
      .addSuccess(CaptureModes)
      .addError(BadRequest)
      .addError(ServiceUnavailable)
  )
  .add(HttpApiEndpoint.get("sessions", `${INSPECTOR_BASE}/sessions`).addSuccess(SessionList))
  .add(
    HttpApiEndpoint.post("startSession", `${INSPECTOR_BASE}/sessions`)
      .setPayload(StartSession)
      .addSuccess(SessionViewSchema, { status: 201 })
  )
  .add(HttpApiEndpoint.get("session", `${INSPECTOR_BASE}/sessions/:id`).setPath(IdPath).addSuccess(SessionSnapshot).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("updateSession", `${INSPECTOR_BASE}/sessions/:id`)
      .setPath(IdPath)
      .setPayload(UpdateSession)
      .addSuccess(SessionViewSchema)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.del("deleteSession", `${INSPECTOR_BASE}/sessions/:id`)
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ deleted: Schema.String }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("sessionHar", `${INSPECTOR_BASE}/sessions/:id/export.har`).setPath(IdPath).addSuccess(Har).addError(NotFound))
  .add(
    HttpApiEndpoint.get("sessionExport", `${INSPECTOR_BASE}/sessions/:id/export`)
      .setPath(IdPath)
      .setUrlParams(SessionExportQuery)
      .addSuccess(SessionExport)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, ADMIN_ONLY) {}

/**
 * The inspector's routes that take no admin credentials (still loopback-only): the CA
 * certificate clients are told to trust, and the ingest route, which has its own token.
 */
export class InspectorOpenGroup extends HttpApiGroup.make("inspectorOpen")
  .add(HttpApiEndpoint.get("caPem", `${INSPECTOR_BASE}/ca.pem`).addSuccess(Pem).addError(ServiceUnavailable))
  .add(
    HttpApiEndpoint.post("ingest", `${INSPECTOR_BASE}/internal/ingest`)
      .setPayload(IngestPayload)
      .addSuccess(Schema.Struct({ id: Schema.String }), { status: 201 })
      .addError(Forbidden)
      .addError(BadRequest)
  ) {}

/**
 * `/api/tools/agent-bridge/tproxy`: the transparent-decrypt capture mode (docs/capture.md), under
 * the agent-bridge prefix as the spec has it. Loopback-only like every `/api/tools/` route, then
 * the admin's credentials.
 */
export class TproxyGroup extends HttpApiGroup.make("tproxy")
  .add(HttpApiEndpoint.get("status", TPROXY_PATH).addSuccess(TproxyStatus).addError(ServiceUnavailable))
  .add(
    HttpApiEndpoint.post("start", TPROXY_PATH)
      .setPayload(TproxyStart)
      .addSuccess(TproxyStatus)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(Forbidden)
      .addError(ServiceUnavailable)
  )
  .add(HttpApiEndpoint.del("stop", TPROXY_PATH).addSuccess(TproxyStatus).addError(ServiceUnavailable))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
