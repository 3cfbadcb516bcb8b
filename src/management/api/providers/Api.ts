import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import {
  ConnectionModels,
  ConnectionTestResult,
  ConnectionView,
  CreateConnection,
  ProbeResult,
  UpdateConnection,
  ValidateProvider
} from "../../../domain/connections.js"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import { ManagementAuth, IdPath } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

export class ProvidersGroup extends HttpApiGroup.make("providers")
  .add(HttpApiEndpoint.get("list", "/api/providers").addSuccess(Schema.Struct({ connections: Schema.Array(ConnectionView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/providers")
      .setPayload(CreateConnection)
      .addSuccess(ConnectionView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.post("validate", "/api/providers/validate").setPayload(ValidateProvider).addSuccess(ProbeResult).addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/api/providers/:id").setPath(IdPath).addSuccess(ConnectionView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("update", "/api/providers/:id")
      .setPath(IdPath)
      .setPayload(UpdateConnection)
      .addSuccess(ConnectionView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/providers/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ConnectionView }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.post("test", "/api/providers/:id/test").setPath(IdPath).addSuccess(ConnectionTestResult).addError(NotFound))
  .add(HttpApiEndpoint.get("models", "/api/providers/:id/models").setPath(IdPath).addSuccess(ConnectionModels).addError(NotFound))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
