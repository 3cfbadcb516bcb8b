import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BadRequest } from "../../../domain/errors.js"
import { ShadowReport, ShadowReportQuery } from "../../../domain/shadow.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/shadow/report`: how each shadow target of a combo compares with what answered (docs/shadow.md). */
export class ShadowGroup extends HttpApiGroup.make("shadow")
  .add(HttpApiEndpoint.get("report", "/api/shadow/report").setUrlParams(ShadowReportQuery).addSuccess(ShadowReport).addError(BadRequest))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
