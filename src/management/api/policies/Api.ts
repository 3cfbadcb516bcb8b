import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import { CreatePolicy, PolicyDetail, PolicyList, PolicyView } from "../../../domain/policies.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/policies`: versioned policy documents applied on the request path (docs/guardrails.md). */
export class PoliciesGroup extends HttpApiGroup.make("policies")
  .add(HttpApiEndpoint.get("list", "/api/policies").addSuccess(PolicyList))
  .add(
    HttpApiEndpoint.post("create", "/api/policies").setPayload(CreatePolicy).addSuccess(PolicyView, { status: 201 }).addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/api/policies/:id").setPath(IdPath).addSuccess(PolicyDetail).addError(NotFound))
  .add(
    HttpApiEndpoint.del("remove", "/api/policies/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: PolicyView }))
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
