import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import {
  AliasQuery,
  CatalogQuery,
  CreateProviderModel,
  ModelAliasList,
  ModelAliasView,
  ModelCatalog,
  PatchProviderModel,
  ProviderModelKey,
  ProviderModelQuery,
  ProviderModelView,
  SetModelAlias
} from "../../../domain/models.js"
import { ManagementAuth } from "../Principal.js"
import { CATALOG, Roles } from "../Roles.js"

export class ModelsGroup extends HttpApiGroup.make("models")
  .add(HttpApiEndpoint.get("catalog", "/api/models/catalog").setUrlParams(CatalogQuery).addSuccess(ModelCatalog).addError(BadRequest))
  .add(HttpApiEndpoint.get("aliases", "/api/models/alias").addSuccess(ModelAliasList))
  .add(HttpApiEndpoint.post("setAlias", "/api/models/alias").setPayload(SetModelAlias).addSuccess(ModelAliasView).addError(BadRequest))
  .add(
    HttpApiEndpoint.del("removeAlias", "/api/models/alias")
      .setUrlParams(AliasQuery)
      .addSuccess(Schema.Struct({ removed: ModelAliasView }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("customModels", "/api/provider-models")
      .setUrlParams(ProviderModelQuery)
      .addSuccess(Schema.Struct({ models: Schema.Array(ProviderModelView) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.post("addModel", "/api/provider-models")
      .setPayload(CreateProviderModel)
      .addSuccess(ProviderModelView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.patch("updateModel", "/api/provider-models")
      .setPayload(PatchProviderModel)
      .addSuccess(ProviderModelView)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("removeModel", "/api/provider-models")
      .setUrlParams(ProviderModelKey)
      .addSuccess(Schema.Struct({ removed: ProviderModelView }))
      .addError(BadRequest)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CATALOG) {}
