import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import { AutoCombos, ComboView, CreateCombo, UpdateCombo } from "../../../domain/combos.js"
import { ManagementAuth, IdPath } from "../Principal.js"
import { CATALOG, Roles } from "../Roles.js"

export class CombosGroup extends HttpApiGroup.make("combos")
  .add(HttpApiEndpoint.get("list", "/api/combos").addSuccess(Schema.Struct({ combos: Schema.Array(ComboView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/combos")
      .setPayload(CreateCombo)
      .addSuccess(ComboView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("auto", "/api/combos/auto").addSuccess(AutoCombos))
  .add(HttpApiEndpoint.get("get", "/api/combos/:id").setPath(IdPath).addSuccess(ComboView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("update", "/api/combos/:id")
      .setPath(IdPath)
      .setPayload(UpdateCombo)
      .addSuccess(ComboView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.patch("patch", "/api/combos/:id")
      .setPath(IdPath)
      .setPayload(UpdateCombo)
      .addSuccess(ComboView)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/combos/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ComboView }))
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CATALOG) {}
