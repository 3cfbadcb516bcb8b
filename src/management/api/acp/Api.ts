import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { AcpAgentList, AcpAgentsRequest, AcpDeleteQuery } from "../../../domain/clitools.js"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/acp/agents`: Agent Client Protocol agents, built in and custom (docs/coding-tools.md). */
export class AcpGroup extends HttpApiGroup.make("acp")
  .add(HttpApiEndpoint.get("list", "/api/acp/agents").addSuccess(AcpAgentList))
  .add(
    HttpApiEndpoint.post("change", "/api/acp/agents")
      .setPayload(AcpAgentsRequest)
      .addSuccess(AcpAgentList)
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/acp/agents")
      .setUrlParams(AcpDeleteQuery)
      .addSuccess(Schema.Struct({ removed: Schema.String }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
