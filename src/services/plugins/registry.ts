/**
 * The plugins installed in this process, by name: a new entry, a lookup, the wait for a starting
 * plugin to settle, and the reconciliation with the records of the store (plugins installed,
 * changed, enabled or removed by another gateway or a restore follow).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { NotFound } from "../../domain/errors.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { followVersion, type StoreVersionShape } from "../../platform/store/StoreVersion.js"
import { pluginPaths, readManifest } from "./install.js"
import type { PluginManifest } from "./manifest.js"
import { type Installed, type PluginRecord, type PluginsConfigShape, view } from "./state.js"
import type { makeSupervisor } from "./supervisor.js"

/** The store's namespace of plugin records (so they are in backups and sync bundles). */
export const PLUGINS_NAMESPACE = "plugins"

/** The supervisor's controls (./supervisor.ts). */
export type Supervisor = ReturnType<typeof makeSupervisor>

/** Runs a change to the installed plugins after any other one (one at a time in this process). */
export type Serialized = <A, E>(eff: Effect.Effect<A, E>) => Effect.Effect<A, E>

/** A plugin as this process first keeps it: stopped, no process, a full rate-limit bucket. */
export const newInstalled = (name: string, manifest: PluginManifest, record: PluginRecord, config: PluginsConfigShape): Installed => ({
  name,
  manifest,
  record,
  state: "stopped",
  reason: null,
  proc: undefined,
  restarts: 0,
  supervisor: undefined,
  stats: new Map(),
  tokens: config.rateLimit,
  refilledAt: Date.now(),
  queued: 0
})

/** The installed plugin of that name, or NotFound saying how to list them. */
export const findIn = (installed: ReadonlyMap<string, Installed>) => (name: string) =>
  Effect.suspend(() => {
    const p = installed.get(name)
    return p === undefined
      ? Effect.fail(
          new NotFound({
            message: `no plugin ${JSON.stringify(name)} is installed (gateway plugins list, or GET /api/plugins, lists them)`
          })
        )
      : Effect.succeed(p)
  })

/** Waits (briefly) for a starting plugin to settle, so an answer shows it running or why not. */
export const settled = (p: Installed) =>
  Effect.gen(function* () {
    for (let i = 0; i < 100 && (p.state === "starting" || (p.state === "restarting" && p.restarts === 0)); i++)
      yield* Effect.sleep(Duration.millis(50))
    return view(p)
  })

export interface ReconcileDeps {
  readonly dataDir: string
  readonly config: PluginsConfigShape
  readonly kv: KeyValueShape
  readonly installed: Map<string, Installed>
  readonly supervisor: Pick<Supervisor, "start" | "stop">
}

/** The store's records against this process: each plugin added, changed (a new configuration restarts it), started, stopped or forgotten to
 * match. */
export const makeReconcile = ({ dataDir, config, kv, installed, supervisor }: ReconcileDeps) => {
  const { start, stop } = supervisor
  return Effect.gen(function* () {
    const entries = yield* kv.entries(PLUGINS_NAMESPACE)
    const seen = new Set<string>()
    for (const [name, json] of entries) {
      let record: PluginRecord
      try {
        record = JSON.parse(json) as PluginRecord
      } catch {
        continue
      }
      seen.add(name)
      let p = installed.get(name)
      if (p === undefined) {
        let manifest: PluginManifest
        try {
          manifest = readManifest(pluginPaths(dataDir, name).dir)
        } catch (e) {
          const missing = newInstalled(name, { name, version: record.version, main: "index.js" }, record, config)
          missing.state = "missing"
          missing.reason = `its files are not in ${pluginPaths(dataDir, name).dir}: ${(e as Error).message}`
          installed.set(name, missing)
          continue
        }
        p = newInstalled(name, manifest, record, config)
        installed.set(name, p)
      } else if (JSON.stringify(p.record) !== json) {
        const configChanged = JSON.stringify(p.record.config) !== JSON.stringify(record.config)
        p.record = record
        if (configChanged && p.supervisor !== undefined) yield* stop(p, "stopped")
      }
      if (p.state === "missing") continue
      if (p.record.enabled && p.supervisor === undefined && p.state !== "disabled") yield* start(p)
      if (!p.record.enabled && p.supervisor !== undefined) yield* stop(p, p.record.disabledReason ? "disabled" : "stopped")
      if (!p.record.enabled && p.record.disabledReason && p.state === "stopped") p.state = "disabled"
    }
    for (const [name, p] of installed)
      if (!seen.has(name)) {
        yield* stop(p, "stopped")
        installed.delete(name)
      }
  })
}

/**
 * Reconciles now, then (with a StoreVersion) whenever another process sharing the store (a second
 * gateway, a restore) committed, checked every second in the layer's scope.
 */
export const reconcileAndFollow = (deps: {
  readonly version: Option.Option<StoreVersionShape>
  readonly reconcile: Effect.Effect<void>
  readonly serialized: Serialized
}) =>
  Effect.gen(function* () {
    const { version, reconcile, serialized } = deps
    yield* serialized(reconcile)
    // Changes made by another process sharing the store (a second gateway, a restore).
    if (Option.isSome(version)) {
      let seenVersion = yield* version.value.current
      // On the timer shared with the other followers of the store version (FOLLOW_RENEW_EVERY_MS).
      yield* followVersion(
        version,
        Effect.gen(function* () {
          const v = yield* version.value.current
          if (v === seenVersion) return
          seenVersion = v
          yield* serialized(reconcile)
        })
      )
    }
  })
