import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { NotFound } from "../../../domain/errors.js"
import { CloudBundle, CloudVersionList, CloudVersionView, PutBundle, SpacePath, VersionConflict } from "../../../domain/sync.js"
import { ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, Roles } from "../Roles.js"

/**
 * The sync server: sealed configuration bundles per sync space (docs/operations.md, "Cloud
 * sync"). Clients authenticate with an admin key of this gateway.
 */
export class CloudGroup extends HttpApiGroup.make("cloud")
  .add(HttpApiEndpoint.get("latest", "/api/cloud/bundles/:space").setPath(SpacePath).addSuccess(CloudBundle).addError(NotFound))
  .add(
    HttpApiEndpoint.put("put", "/api/cloud/bundles/:space")
      .setPath(SpacePath)
      .setPayload(PutBundle)
      .addSuccess(CloudVersionView, { status: 201 })
      .addError(VersionConflict)
  )
  .add(HttpApiEndpoint.get("versions", "/api/cloud/bundles/:space/versions").setPath(SpacePath).addSuccess(CloudVersionList))
  .middleware(ManagementAuth)
  .annotate(Roles, ADMIN_ONLY) {}
