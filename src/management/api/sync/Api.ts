import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../../domain/errors.js"
import { SyncAction, SyncConflict, SyncInitialize, SyncResult, SyncServerError, SyncStatus } from "../../../domain/sync.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** The sync client: this gateway's configuration kept in a space on a sync server (docs/operations.md, "Cloud sync"). */
export class SyncGroup extends HttpApiGroup.make("sync")
  .add(
    HttpApiEndpoint.post("initialize", "/api/sync/initialize")
      .setPayload(SyncInitialize)
      .addSuccess(SyncStatus)
      .addError(BadRequest)
      .addError(SyncServerError)
  )
  .add(HttpApiEndpoint.get("status", "/api/sync/cloud").addSuccess(SyncStatus))
  .add(
    HttpApiEndpoint.post("run", "/api/sync/cloud")
      .setPayload(SyncAction)
      .addSuccess(SyncResult)
      .addError(BadRequest)
      .addError(SyncConflict)
      .addError(SyncServerError)
  )
  .add(HttpApiEndpoint.del("disconnect", "/api/sync/cloud").addSuccess(Schema.Struct({ disconnected: Schema.Boolean })))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
