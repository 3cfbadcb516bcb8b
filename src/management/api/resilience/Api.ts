import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../../domain/errors.js"
import {
  ClearModelCooldowns,
  InboundKeyLimitStatus,
  LockoutViewSchema,
  PatchResilience,
  RateLimitConfig,
  RateLimitStatus,
  ResetResilienceBody,
  ResetResult,
  ResilienceSettings,
  ResilienceStatus
} from "../../../domain/resilience.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

export class ResilienceGroup extends HttpApiGroup.make("resilience")
  .add(HttpApiEndpoint.get("status", "/api/resilience").addSuccess(ResilienceStatus))
  .add(
    HttpApiEndpoint.patch("update", "/api/resilience")
      .setPayload(PatchResilience)
      .addSuccess(Schema.Struct({ settings: ResilienceSettings }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.post("reset", "/api/resilience/reset").setPayload(ResetResilienceBody).addSuccess(ResetResult).addError(BadRequest))
  .add(
    HttpApiEndpoint.get("modelCooldowns", "/api/resilience/model-cooldowns").addSuccess(
      Schema.Struct({ modelCooldowns: Schema.Array(LockoutViewSchema) })
    )
  )
  .add(
    HttpApiEndpoint.del("clearModelCooldowns", "/api/resilience/model-cooldowns")
      .setPayload(ClearModelCooldowns)
      .addSuccess(Schema.Struct({ cleared: Schema.Number }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("rateLimits", "/api/rate-limits").addSuccess(
      Schema.Struct({ accounts: Schema.Array(RateLimitStatus), inbound: Schema.Array(InboundKeyLimitStatus) })
    )
  )
  .add(HttpApiEndpoint.get("rateLimit", "/api/rate-limit").addSuccess(RateLimitConfig))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
