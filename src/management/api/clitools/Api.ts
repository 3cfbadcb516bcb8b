import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import {
  AllToolStatuses,
  SavedToolSettings,
  SaveToolSettings,
  ToolIdPath,
  ToolRuntime,
  ToolSettingsPath,
  ToolSettingsView
} from "../../../domain/clitools.js"
import { BadRequest, NotFound } from "../../../domain/errors.js"
import { ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, Roles } from "../Roles.js"

/** `/api/cli-tools`: coding tools on the server's machine, their status and settings (docs/coding-tools.md). */
export class CliToolsGroup extends HttpApiGroup.make("cliTools")
  .add(HttpApiEndpoint.get("allStatuses", "/api/cli-tools/all-statuses").addSuccess(AllToolStatuses))
  .add(HttpApiEndpoint.get("runtime", "/api/cli-tools/runtime/:toolId").setPath(ToolIdPath).addSuccess(ToolRuntime).addError(NotFound))
  .add(
    HttpApiEndpoint.get("settings", "/api/cli-tools/:tool-settings")
      .setPath(ToolSettingsPath)
      .addSuccess(ToolSettingsView)
      .addError(NotFound)
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.post("saveSettings", "/api/cli-tools/:tool-settings")
      .setPath(ToolSettingsPath)
      .setPayload(SaveToolSettings)
      .addSuccess(SavedToolSettings)
      .addError(NotFound)
      .addError(BadRequest)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, ADMIN_ONLY) {}
