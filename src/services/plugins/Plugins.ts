/**
 * Installed plugins: files in `<DATA_DIR>/plugins/<name>/`, state in the store, one supervised sandboxed process each
 * while enabled (docs/plugins.md#limits-and-failures). With no plugin running, nothing is registered on the request path.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type { BadRequest, Conflict, NotFound, PayloadTooLarge } from "../../domain/errors.js"
import type { PluginView } from "../../domain/plugins.js"
import { McpCallHooks } from "../mcp/McpCallHooks.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import { makePluginCalls, type PluginLog } from "./calls.js"
import { makePluginChanges } from "./changes.js"
import { makePluginInstall } from "./installPlugin.js"
import { findIn, makeReconcile, PLUGINS_NAMESPACE, reconcileAndFollow } from "./registry.js"
import { type Installed, readConfig, view } from "./state.js"
import { makeSupervisor } from "./supervisor.js"

export { PLUGINS_NAMESPACE } from "./registry.js"

export interface PluginsShape {
  readonly list: Effect.Effect<ReadonlyArray<PluginView>>
  readonly get: (name: string) => Effect.Effect<PluginView, NotFound>
  /** Installs from a folder or .tgz on this machine; enabled when its manifest says enabledByDefault (or `enable`). */
  readonly installPath: (file: string, enable?: boolean) => Effect.Effect<PluginView, BadRequest | Conflict>
  /** Installs an uploaded .tgz. */
  readonly installArchive: (bytes: Uint8Array, enable?: boolean) => Effect.Effect<PluginView, BadRequest | Conflict | PayloadTooLarge>
  readonly enable: (name: string) => Effect.Effect<PluginView, NotFound>
  readonly disable: (name: string) => Effect.Effect<PluginView, NotFound>
  /** Changes settings (null: back to the default), checked against configSchema; a running plugin starts again with them. */
  readonly configure: (
    name: string,
    values: Readonly<Record<string, string | number | boolean | null>>
  ) => Effect.Effect<PluginView, NotFound | BadRequest>
  /** onUninstall, then the plugin's files, data and state are deleted. */
  readonly remove: (name: string) => Effect.Effect<void, NotFound>
  readonly maxUploadBytes: number
}

/**
 * The plugins of this gateway: the installed ones by name and their reconciliation with the store
 * (./registry.ts), one supervised process each (./supervisor.ts, calls in ./calls.ts), installs
 * (./installPlugin.ts) and changes (./changes.ts), each made of the parts this layer wires.
 */
export class Plugins extends Context.Tag("gateway/Plugins")<Plugins, PluginsShape>() {
  static readonly layer = Layer.scoped(
    Plugins,
    Effect.gen(function* () {
      const app = yield* AppConfig
      const kv = yield* KeyValue
      const hooks = yield* RequestHooks
      const mcpHooks = Option.getOrUndefined(yield* Effect.serviceOption(McpCallHooks))
      const version = yield* Effect.serviceOption(StoreVersion)
      const config = yield* Effect.orDie(readConfig)
      const runtime = yield* Effect.runtime<never>()
      const runFork = Runtime.runFork(runtime)
      const dataDir = app.dataDir
      const installed = new Map<string, Installed>()
      const log: PluginLog = (level, name, message) => {
        const eff = level === "info" ? Effect.logInfo(message) : level === "warning" ? Effect.logWarning(message) : Effect.logError(message)
        runFork(eff.pipe(Effect.annotateLogs({ plugin: name })))
      }
      const save = (p: Installed) => kv.set(PLUGINS_NAMESPACE, p.name, JSON.stringify(p.record))
      const calls = makePluginCalls({ config, log })
      const supervisor = makeSupervisor({ dataDir, config, hooks, mcpHooks, calls, log, runFork, save })
      const reconcile = makeReconcile({ dataDir, config, kv, installed, supervisor })

      const lock = yield* Effect.makeSemaphore(1)
      const serialized = <A, E>(eff: Effect.Effect<A, E>) => lock.withPermits(1)(eff)

      yield* reconcileAndFollow({ version, reconcile, serialized })
      yield* Effect.addFinalizer(() => Effect.forEach([...installed.values()], (p) => supervisor.stop(p, "stopped"), { discard: true }))

      const find = findIn(installed)
      return {
        maxUploadBytes: config.maxUploadMb * 1024 * 1024,
        list: Effect.sync(() => [...installed.values()].sort((a, b) => a.name.localeCompare(b.name)).map(view)),
        get: (name) => Effect.map(find(name), view),
        ...makePluginInstall({ dataDir, config, installed, serialized, supervisor, save, log }),
        ...makePluginChanges({ dataDir, kv, installed, serialized, supervisor, calls, save, log })
      } satisfies PluginsShape
    })
  )
}
