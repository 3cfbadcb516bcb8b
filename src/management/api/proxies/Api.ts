import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import { CreateProxy, PatchProxy, ProxyView } from "../../../domain/proxies.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/v1/management/proxies`: the upstream proxy registry (docs/egress.md). */
export class ProxiesGroup extends HttpApiGroup.make("proxies")
  .add(HttpApiEndpoint.get("list", "/api/v1/management/proxies").addSuccess(Schema.Struct({ proxies: Schema.Array(ProxyView) })))
  .add(
    HttpApiEndpoint.post("create", "/api/v1/management/proxies")
      .setPayload(CreateProxy)
      .addSuccess(ProxyView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("get", "/api/v1/management/proxies/:id").setPath(IdPath).addSuccess(ProxyView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/api/v1/management/proxies/:id")
      .setPath(IdPath)
      .setPayload(PatchProxy)
      .addSuccess(ProxyView)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/v1/management/proxies/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ProxyView }))
      .addError(Conflict)
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
