import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BadRequest, NotFound, ServiceUnavailable } from "../../../domain/errors.js"
import { ReplayIdPath, ReplayJob, StartReplay } from "../../../domain/replay.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/replay`: recorded requests sent again to candidate models, compared (docs/replay.md). */
export class ReplayGroup extends HttpApiGroup.make("replay")
  .add(
    HttpApiEndpoint.post("start", "/api/replay")
      .setPayload(StartReplay)
      .addSuccess(ReplayJob, { status: 202 })
      .addError(BadRequest)
      .addError(NotFound)
      .addError(ServiceUnavailable)
  )
  .add(HttpApiEndpoint.get("get", "/api/replay/:id").setPath(ReplayIdPath).addSuccess(ReplayJob).addError(NotFound))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
