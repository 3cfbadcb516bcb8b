import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BadRequest } from "../../../domain/errors.js"
import { EnvRepairRequest, EnvRepairResult, InitState, StopAccepted } from "../../../domain/system.js"
import { ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, Roles } from "../Roles.js"

/**
 * `GET /api/init`: first-run state. No middleware: a first-run wizard asks before any password
 * or key exists. Anonymous callers get booleans and the version; management credentials add the
 * counts and paths (the handler checks them itself).
 */
export class InitGroup extends HttpApiGroup.make("init").add(HttpApiEndpoint.get("init", "/api/init").addSuccess(InitState)) {}

/** Process control and env repair (docs/operations.md, "Sessions and system"). */
export class SystemGroup extends HttpApiGroup.make("system")
  .add(HttpApiEndpoint.post("restart", "/api/restart").addSuccess(StopAccepted, { status: 202 }))
  .add(HttpApiEndpoint.post("shutdown", "/api/shutdown").addSuccess(StopAccepted, { status: 202 }))
  .add(
    HttpApiEndpoint.post("envRepair", "/api/system/env/repair")
      .setPayload(EnvRepairRequest)
      .addSuccess(EnvRepairResult)
      .addError(BadRequest)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, ADMIN_ONLY) {}
