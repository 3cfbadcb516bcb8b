import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { CompatExchange, CompatExchangePath, CompatMatrix, CompatQuery, CompatRun } from "../../../domain/compat.js"
import { BadRequest, Conflict, NotFound, ServiceUnavailable } from "../../../domain/errors.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/compat`: the supported clients' recorded requests against configured models (docs/compat.md). */
export class CompatGroup extends HttpApiGroup.make("compat")
  .add(HttpApiEndpoint.get("matrix", "/api/compat").setUrlParams(CompatQuery).addSuccess(CompatMatrix).addError(BadRequest))
  .add(
    HttpApiEndpoint.post("run", "/api/compat/run")
      .setPayload(CompatRun)
      .addSuccess(CompatMatrix, { status: 202 })
      .addError(BadRequest)
      .addError(Conflict)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.get("exchange", "/api/compat/exchanges/:id").setPath(CompatExchangePath).addSuccess(CompatExchange).addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
