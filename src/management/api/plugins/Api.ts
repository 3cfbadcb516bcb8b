import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound, PayloadTooLarge } from "../../../domain/errors.js"
import { strict } from "../../../domain/parse.js"
import { InstallPlugin, PluginConfigUpdate, PluginList, PluginName, PluginRemoved, PluginView } from "../../../domain/plugins.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

const NamePath = Schema.Struct({ name: PluginName })
const UploadQuery = Schema.Struct({ enable: Schema.optional(Schema.BooleanFromString) }).annotations(strict)

/** Plugins (docs/plugins.md): install, enable, disable, configure, remove, and each one's status. */
export class PluginsGroup extends HttpApiGroup.make("plugins")
  .add(HttpApiEndpoint.get("list", "/api/plugins").addSuccess(PluginList))
  /** Installs from a folder or a .tgz on the server's disk. */
  .add(
    HttpApiEndpoint.post("install", "/api/plugins")
      .setPayload(InstallPlugin)
      .addSuccess(PluginView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  /** Installs an uploaded .tgz (the raw body, e.g. what `npm pack` makes). */
  .add(
    HttpApiEndpoint.post("upload", "/api/plugins/upload")
      .setUrlParams(UploadQuery)
      .addSuccess(PluginView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
      .addError(PayloadTooLarge)
  )
  .add(HttpApiEndpoint.get("get", "/api/plugins/:name").setPath(NamePath).addSuccess(PluginView).addError(NotFound))
  .add(HttpApiEndpoint.post("enable", "/api/plugins/:name/enable").setPath(NamePath).addSuccess(PluginView).addError(NotFound))
  .add(HttpApiEndpoint.post("disable", "/api/plugins/:name/disable").setPath(NamePath).addSuccess(PluginView).addError(NotFound))
  /** Changes settings (the others keep their values; null: back to the default), checked against the plugin's configSchema. */
  .add(
    HttpApiEndpoint.patch("configure", "/api/plugins/:name/config")
      .setPath(NamePath)
      .setPayload(PluginConfigUpdate)
      .addSuccess(PluginView)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.del("remove", "/api/plugins/:name").setPath(NamePath).addSuccess(PluginRemoved).addError(NotFound))
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
