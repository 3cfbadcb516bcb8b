import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { BadRequest } from "../../../domain/errors.js"
import { ClearFeatureFlagsResult, FeatureFlagList, SetFeatureFlag, SetFeatureFlagResult } from "../../../domain/flags.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

export class FeatureFlagsGroup extends HttpApiGroup.make("featureFlags")
  .add(HttpApiEndpoint.get("list", "/api/settings/feature-flags").addSuccess(FeatureFlagList))
  .add(
    HttpApiEndpoint.put("set", "/api/settings/feature-flags")
      .setPayload(SetFeatureFlag)
      .addSuccess(SetFeatureFlagResult)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.del("clear", "/api/settings/feature-flags").addSuccess(ClearFeatureFlagsResult))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
