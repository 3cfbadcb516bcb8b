import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, Forbidden, NotFound } from "../../../domain/errors.js"
import { ApiKeyView, CreateApiKey, CreatedApiKey, UpdateApiKey } from "../../../domain/keys.js"
import { ManagementAuth, IdPath } from "../Principal.js"
import { EVERY_ROLE, KEY_HOLDERS, Roles } from "../Roles.js"

export class KeysGroup extends HttpApiGroup.make("keys")
  .add(
    HttpApiEndpoint.get("list", "/api/keys")
      .annotate(Roles, EVERY_ROLE)
      .addSuccess(Schema.Struct({ keys: Schema.Array(ApiKeyView) }))
  )
  .add(
    HttpApiEndpoint.post("create", "/api/keys")
      .setPayload(CreateApiKey)
      .addSuccess(CreatedApiKey, { status: 201 })
      .addError(BadRequest)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/keys/:id")
      .setPath(IdPath)
      .setPayload(UpdateApiKey)
      .addSuccess(ApiKeyView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/keys/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ApiKeyView }))
      .addError(NotFound)
      .addError(Conflict)
      .addError(Forbidden)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, KEY_HOLDERS) {}
