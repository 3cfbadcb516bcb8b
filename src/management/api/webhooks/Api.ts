import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import { CreateWebhook, UpdateWebhook, WebhookList, WebhookSaved, WebhookTestResult, WebhookView } from "../../../domain/webhooks.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `/api/webhooks`: the registry of signed event deliveries (docs/webhooks.md). */
export class WebhooksGroup extends HttpApiGroup.make("webhooks")
  .add(HttpApiEndpoint.get("list", "/api/webhooks").addSuccess(WebhookList))
  .add(
    HttpApiEndpoint.post("create", "/api/webhooks").setPayload(CreateWebhook).addSuccess(WebhookSaved, { status: 201 }).addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/api/webhooks/:id").setPath(IdPath).addSuccess(WebhookView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("update", "/api/webhooks/:id")
      .setPath(IdPath)
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookSaved)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/webhooks/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: WebhookView }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.post("test", "/api/webhooks/:id/test").setPath(IdPath).addSuccess(WebhookTestResult).addError(NotFound))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
