/**
 * The plugins management API's shapes (`/api/plugins*`, docs/plugins.md): the CLI, the dashboard
 * and the generated docs read these same schemas.
 */
import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

export const PluginName = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9]+(-[a-z0-9]+)*$/, { message: () => "a plugin's name is kebab-case, e.g. my-plugin" }),
  Schema.maxLength(100)
)

export const PluginState = Schema.Literal("running", "starting", "restarting", "stopped", "disabled", "failed", "missing")
export type PluginState = typeof PluginState.Type

export const ConfigValue = Schema.Union(Schema.String, Schema.Number, Schema.Boolean)

export const PluginHookStatus = Schema.Struct({
  hook: Schema.String,
  /** Whether the plugin defines it and its manifest leaves it on. */
  enabled: Schema.Boolean,
  priority: Schema.Number,
  calls: Schema.Number,
  failures: Schema.Number,
  /** Calls not made: the plugin was over its rate limit, or not running. */
  skipped: Schema.Number,
  /** Total time of the calls made, ms. */
  totalMs: Schema.Number,
  averageMs: Schema.NullOr(Schema.Number),
  lastError: Schema.NullOr(Schema.String),
  lastErrorAt: Schema.NullOr(Schema.String)
})

export const PluginView = Schema.Struct({
  name: Schema.String,
  version: Schema.String,
  description: Schema.NullOr(Schema.String),
  author: Schema.NullOr(Schema.String),
  /** What the operator chose (install with enabledByDefault, enable, disable). */
  enabled: Schema.Boolean,
  /** What the plugin's process is doing in this gateway. */
  state: PluginState,
  /** Why the gateway disabled it (repeated crashes), else its last crash or why it cannot start (null: none since enabled). */
  reason: Schema.NullOr(Schema.String),
  permissions: Schema.Array(Schema.String),
  failClosed: Schema.Boolean,
  pid: Schema.NullOr(Schema.Number),
  restarts: Schema.Number,
  installedAt: Schema.String,
  /** The plugin's configSchema (plugin.json), for forms. */
  configSchema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** Its configuration, defaults filled. */
  config: Schema.Record({ key: Schema.String, value: ConfigValue }),
  hooks: Schema.Array(PluginHookStatus)
})
export type PluginView = typeof PluginView.Type

export const PluginList = Schema.Struct({ plugins: Schema.Array(PluginView) })

/** Install from a folder (or a .tgz file) on the server's disk. */
export const InstallPlugin = Schema.Struct({
  path: Schema.String.pipe(Schema.minLength(1, { message: () => "path is the plugin's folder or .tgz on the server" })),
  /** Enable it now whatever its manifest's enabledByDefault says. */
  enable: Schema.optional(Schema.Boolean)
}).annotations(strict)

export const PluginConfigUpdate = Schema.Struct({
  /** The settings to change; the others keep their values. `null` sets one back to its default. */
  values: Schema.Record({ key: Schema.String, value: Schema.NullOr(ConfigValue) })
}).annotations(strict)

export const PluginRemoved = Schema.Struct({ removed: Schema.String })
