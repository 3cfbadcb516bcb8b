import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BadRequest } from "../../../domain/errors.js"
import { TunnelAction, TunnelStatus } from "../../../domain/tunnels.js"
import { ManagementAuth } from "../Principal.js"

/** Tunnels (docs/tunnels.md): the quick tunnel; the token tunnel and the mesh funnel answer 501 until built. */
export class TunnelsGroup extends HttpApiGroup.make("tunnels")
  .add(HttpApiEndpoint.get("quickStatus", "/api/tunnels/quick").addSuccess(TunnelStatus))
  .add(HttpApiEndpoint.post("quick", "/api/tunnels/quick").setPayload(TunnelAction).addSuccess(TunnelStatus).addError(BadRequest))
  .middleware(ManagementAuth) {}
