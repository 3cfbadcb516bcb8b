import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../../domain/errors.js"
import {
  MeshCheckResult,
  MeshCommandResult,
  MeshEnable,
  MeshLogin,
  MeshLoginResult,
  MeshPrivileged,
  MeshStatus,
  TunnelAction,
  TunnelStatus
} from "../../../domain/tunnels.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** Server-sent events: `progress` ({line}) while it runs, then `done` ({ok, error?}). */
const InstallEvents = HttpApiSchema.withEncoding(Schema.String, { kind: "Text", contentType: "text/event-stream" })

/** Tunnels (docs/tunnels.md): the quick tunnel, the token tunnel and the mesh funnel with its setup steps. */
export class TunnelsGroup extends HttpApiGroup.make("tunnels")
  .add(HttpApiEndpoint.get("quickStatus", "/api/tunnels/quick").addSuccess(TunnelStatus))
  .add(HttpApiEndpoint.post("quick", "/api/tunnels/quick").setPayload(TunnelAction).addSuccess(TunnelStatus).addError(BadRequest))
  .add(HttpApiEndpoint.get("tokenStatus", "/api/tunnels/token").addSuccess(TunnelStatus))
  .add(HttpApiEndpoint.post("token", "/api/tunnels/token").setPayload(TunnelAction).addSuccess(TunnelStatus))
  .add(HttpApiEndpoint.get("meshStatus", "/api/tunnels/mesh").addSuccess(MeshStatus))
  .add(HttpApiEndpoint.get("meshCheck", "/api/tunnels/mesh/check").addSuccess(MeshCheckResult))
  .add(HttpApiEndpoint.post("meshInstall", "/api/tunnels/mesh/install").setPayload(MeshPrivileged).addSuccess(InstallEvents))
  .add(HttpApiEndpoint.post("meshStartDaemon", "/api/tunnels/mesh/start-daemon").setPayload(MeshPrivileged).addSuccess(MeshCommandResult))
  .add(HttpApiEndpoint.post("meshLogin", "/api/tunnels/mesh/login").setPayload(MeshLogin).addSuccess(MeshLoginResult))
  .add(HttpApiEndpoint.post("meshEnable", "/api/tunnels/mesh/enable").setPayload(MeshEnable).addSuccess(MeshStatus))
  .add(HttpApiEndpoint.post("meshDisable", "/api/tunnels/mesh/disable").setPayload(MeshPrivileged).addSuccess(MeshStatus))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
