import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { PluginName } from "../../domain/plugins.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { schemaArg } from "../schema.js"

const impl = () => import("./plugins.impl.js")
const name = schemaArg("name", PluginName)

export const listOptions = { ...remoteOptions, json }
export const installOptions = {
  ...remoteOptions,
  source: Args.text({ name: "dir|tgz" }).pipe(Args.withDescription("The plugin's folder (with plugin.json) or a .tgz (npm pack).")),
  enable: Options.boolean("enable").pipe(Options.withDescription("Enable it now, whatever its manifest's enabledByDefault says.")),
  json
}
export const nameOptions = { ...remoteOptions, name, json }
export const configOptions = {
  ...remoteOptions,
  name,
  settings: Args.text({ name: "key=value" }).pipe(
    Args.withDescription(
      "Settings to change (values read by the field's type; `key=` sets it back to its default). None: print the configuration."
    ),
    Args.repeated
  ),
  json
}

const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription("Installed plugins: version, state, permissions, restarts and calls."))
const install = Command.make(
  "install",
  installOptions,
  lazy(impl, (m) => m.install)
).pipe(
  Command.withDescription(
    "Install a plugin from a folder or .tgz; it starts when its manifest says enabledByDefault (or with --enable). A folder is installed by path, so the gateway must run on this machine; a .tgz is uploaded."
  )
)
const enable = Command.make(
  "enable",
  nameOptions,
  lazy(impl, (m) => m.enable)
).pipe(Command.withDescription("Start a plugin and attach its hooks."))
const disable = Command.make(
  "disable",
  nameOptions,
  lazy(impl, (m) => m.disable)
).pipe(Command.withDescription("Detach a plugin's hooks and stop its process."))
const config = Command.make(
  "config",
  configOptions,
  lazy(impl, (m) => m.config)
).pipe(
  Command.withDescription(
    "Print a plugin's configuration, or change it with key=value pairs (checked against its configSchema, applied live)."
  )
)
const remove = Command.make(
  "remove",
  nameOptions,
  lazy(impl, (m) => m.remove)
).pipe(Command.withDescription("Uninstall a plugin (its onUninstall runs first), deleting its files and data."))

/** `gateway plugins list|install|enable|disable|config|remove`: over the management plugins API (`/api/plugins*`). */
export const pluginsCommand = Command.make("plugins").pipe(
  Command.withDescription("Plugins of the running server (docs/plugins.md)."),
  Command.withSubcommands([list, install, enable, disable, config, remove])
)
