import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import {
  CreateProviderNode,
  PatchProviderNode,
  ProviderNodeTestResult,
  ProviderNodeView,
  ReplaceProviderNode,
  TestProviderNode
} from "../../../domain/nodes.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/provider-nodes*`: custom provider definitions (docs/operations.md, "Provider nodes"). */
export class NodesGroup extends HttpApiGroup.make("nodes")
  .add(HttpApiEndpoint.get("list", "/api/provider-nodes").addSuccess(Schema.Struct({ nodes: Schema.Array(ProviderNodeView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/provider-nodes")
      .setPayload(CreateProviderNode)
      .addSuccess(ProviderNodeView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("get", "/api/provider-nodes/:id").setPath(IdPath).addSuccess(ProviderNodeView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("replace", "/api/provider-nodes/:id")
      .setPath(IdPath)
      .setPayload(ReplaceProviderNode)
      .addSuccess(ProviderNodeView)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/provider-nodes/:id")
      .setPath(IdPath)
      .setPayload(PatchProviderNode)
      .addSuccess(ProviderNodeView)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/provider-nodes/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ProviderNodeView }))
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("test", "/api/provider-nodes/:id/test")
      .setPath(IdPath)
      .setPayload(TestProviderNode)
      .addSuccess(ProviderNodeTestResult)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
