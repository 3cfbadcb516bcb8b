import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { NotFound } from "../../../domain/errors.js"
import { SessionList, SessionsQuery, UnpinResult } from "../../../domain/sessions.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** Sticky sessions (X-Session-Id) the router keeps in memory: list and unpin (docs/operations.md). */
export class SessionsGroup extends HttpApiGroup.make("sessions")
  .add(HttpApiEndpoint.get("list", "/api/sessions").setUrlParams(SessionsQuery).addSuccess(SessionList))
  .add(HttpApiEndpoint.del("unpin", "/api/sessions/:id").setPath(IdPath).addSuccess(UnpinResult).addError(NotFound))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
