/**
 * Changes to an installed plugin, each after any other (one at a time in this process): enabled
 * (a disable by repeated crashes cleared), disabled, configured (checked against its configSchema;
 * a running plugin starts again with the new values), removed (`onUninstall`, then its files, data
 * and record).
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fs from "node:fs"
import { BadRequest } from "../../domain/errors.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import type { PluginCalls, PluginLog } from "./calls.js"
import { pluginPaths } from "./install.js"
import { validateConfig } from "./manifest.js"
import type { PluginsShape } from "./Plugins.js"
import { findIn, PLUGINS_NAMESPACE, type Serialized, settled, type Supervisor } from "./registry.js"
import { type Installed, view } from "./state.js"

export interface ChangeDeps {
  readonly dataDir: string
  readonly kv: KeyValueShape
  readonly installed: Map<string, Installed>
  readonly serialized: Serialized
  readonly supervisor: Supervisor
  readonly calls: PluginCalls
  readonly save: (p: Installed) => Effect.Effect<void>
  readonly log: PluginLog
}

/** `enable`, `disable`, `configure` and `remove` of the Plugins service. */
export const makePluginChanges = (deps: ChangeDeps): Pick<PluginsShape, "enable" | "disable" | "configure" | "remove"> => {
  const { dataDir, kv, installed, serialized, calls, save, log } = deps
  const { start, stop, detach, once } = deps.supervisor
  const find = findIn(installed)
  return {
    enable: (name) =>
      serialized(
        Effect.gen(function* () {
          const p = yield* find(name)
          p.record = { ...p.record, enabled: true, disabledReason: null }
          yield* save(p)
          if (p.state === "disabled") p.state = "stopped"
          p.restarts = 0
          p.reason = null
          if (p.state !== "missing") yield* start(p)
          return p
        })
      ).pipe(Effect.flatMap(settled)),
    disable: (name) =>
      serialized(
        Effect.gen(function* () {
          const p = yield* find(name)
          p.record = { ...p.record, enabled: false, disabledReason: null }
          yield* save(p)
          if (p.state !== "missing") yield* stop(p, "stopped")
          return view(p)
        })
      ),
    configure: (name, values) =>
      serialized(
        Effect.gen(function* () {
          const p = yield* find(name)
          const merged: Record<string, unknown> = { ...p.record.config }
          for (const [k, v] of Object.entries(values)) {
            if (v === null) delete merged[k]
            else merged[k] = v
          }
          const checked = validateConfig(p.manifest.configSchema, merged)
          if (Either.isLeft(checked)) return yield* new BadRequest({ message: `${name}: ${checked.left}` })
          p.record = { ...p.record, config: checked.right }
          yield* save(p)
          // Applied live: a running plugin starts again with the new values.
          if (p.supervisor !== undefined) {
            yield* stop(p, "stopped")
            yield* start(p)
          }
          return p
        })
      ).pipe(Effect.flatMap(settled)),
    remove: (name) =>
      serialized(
        Effect.gen(function* () {
          const p = yield* find(name)
          const proc = p.proc
          if (proc !== undefined && p.state === "running") {
            detach(p)
            yield* calls.lifecycle(p, proc, "onUninstall")
          } else if (p.state !== "missing") yield* Effect.ignore(once(p, "onUninstall"))
          yield* stop(p, "stopped")
          installed.delete(name)
          yield* kv.remove(PLUGINS_NAMESPACE, name)
          const paths = pluginPaths(dataDir, name)
          fs.rmSync(paths.dir, { recursive: true, force: true })
          fs.rmSync(paths.data, { recursive: true, force: true })
          log("info", name, `plugin ${name} removed`)
        })
      )
  }
}
