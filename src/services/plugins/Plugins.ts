/**
 * Installed plugins (docs/plugins.md): their files in `<DATA_DIR>/plugins/<name>/`, their state
 * (enabled, configuration) in the store's `plugins` namespace (so in backups and sync bundles),
 * one sandboxed process each (./sandbox/process.ts) while enabled, attached to the request
 * lifecycle through ./bridge.ts.
 *
 * Supervision: a process that exits or goes over its memory limit is started again with a backoff
 * Schedule; five crashes in a row (a run of a minute or more starts the count again) disable the
 * plugin with the reason shown. Every call has a time limit (`PLUGIN_HOOK_TIMEOUT_MS`) and a rate
 * limit (`PLUGIN_RATE_LIMIT` calls a second, at most `PLUGIN_MAX_QUEUE` waiting): over them the
 * call is skipped (a fail-closed plugin refuses the request instead).
 *
 * With no plugin running, nothing is registered on the request path.
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { BadRequest, Conflict, NotFound, PayloadTooLarge } from "../../domain/errors.js"
import type { PluginView } from "../../domain/plugins.js"
import { RequestHooks } from "../../kernel/hooks.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import { makePluginCalls, type PluginLog } from "./calls.js"
import { copyPlugin, extractTgz, InstallError, pluginPaths, readManifest } from "./install.js"
import { type PluginManifest, validateConfig } from "./manifest.js"
import { type Installed, type PluginRecord, readConfig, view } from "./state.js"
import { makeSupervisor } from "./supervisor.js"

export const PLUGINS_NAMESPACE = "plugins"

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
  readonly configure: (name: string, values: Readonly<Record<string, string | number | boolean | null>>) => Effect.Effect<PluginView, NotFound | BadRequest>
  /** onUninstall, then the plugin's files, data and state are deleted. */
  readonly remove: (name: string) => Effect.Effect<void, NotFound>
  readonly maxUploadBytes: number
}

export class Plugins extends Context.Tag("gateway/Plugins")<Plugins, PluginsShape>() {
  static readonly layer = Layer.scoped(
    Plugins,
    Effect.gen(function* () {
      const app = yield* AppConfig
      const kv = yield* KeyValue
      const hooks = yield* RequestHooks
      const version = yield* Effect.serviceOption(StoreVersion)
      const config = yield* Effect.orDie(readConfig)
      const runtime = yield* Effect.runtime<never>()
      const runFork = Runtime.runFork(runtime)
      const installed = new Map<string, Installed>()
      const log: PluginLog = (level, name, message) => {
        const eff = level === "info" ? Effect.logInfo(message) : level === "warning" ? Effect.logWarning(message) : Effect.logError(message)
        runFork(eff.pipe(Effect.annotateLogs({ plugin: name })))
      }
      const save = (p: Installed) => kv.set(PLUGINS_NAMESPACE, p.name, JSON.stringify(p.record))
      const calls = makePluginCalls({ config, log })
      const { start, stop, detach, once } = makeSupervisor({ dataDir: app.dataDir, config, hooks, calls, log, runFork, save })

      const newInstalled = (name: string, manifest: PluginManifest, record: PluginRecord): Installed => ({
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

      const find = (name: string) =>
        Effect.suspend(() => {
          const p = installed.get(name)
          return p === undefined
            ? Effect.fail(new NotFound({ message: `no plugin ${JSON.stringify(name)} is installed (gateway plugins list, or GET /api/plugins, lists them)` }))
            : Effect.succeed(p)
        })

      /** The store's records against this process: plugins installed, enabled or removed elsewhere (another gateway, a restore) follow. */
      const reconcile = Effect.gen(function* () {
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
              manifest = readManifest(pluginPaths(app.dataDir, name).dir)
            } catch (e) {
              const missing = newInstalled(name, { name, version: record.version, main: "index.js" }, record)
              missing.state = "missing"
              missing.reason = `its files are not in ${pluginPaths(app.dataDir, name).dir}: ${(e as Error).message}`
              installed.set(name, missing)
              continue
            }
            p = newInstalled(name, manifest, record)
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

      const lock = yield* Effect.makeSemaphore(1)
      const serialized = <A, E>(eff: Effect.Effect<A, E>) => lock.withPermits(1)(eff)

      yield* serialized(reconcile)
      // Changes made by another process sharing the store (a second gateway, a restore).
      if (Option.isSome(version)) {
        let seenVersion = yield* version.value.current
        yield* Effect.forkScoped(
          Effect.repeat(
            Effect.gen(function* () {
              const v = yield* version.value.current
              if (v === seenVersion) return
              seenVersion = v
              yield* serialized(reconcile)
            }),
            Schedule.spaced(Duration.seconds(2))
          )
        )
      }
      yield* Effect.addFinalizer(() => Effect.forEach([...installed.values()], (p) => stop(p, "stopped"), { discard: true }))

      const installFrom = (dir: string, enable: boolean | undefined, cleanup: () => void) =>
        serialized(
          Effect.gen(function* () {
            const manifest = yield* Effect.try({ try: () => readManifest(dir), catch: (e) => new BadRequest({ message: (e as Error).message }) })
            if (installed.has(manifest.name))
              return yield* new Conflict({
                message: `a plugin named ${manifest.name} is installed already: to replace it, remove it first (gateway plugins remove ${manifest.name}, or DELETE /api/plugins/${manifest.name}); its settings go with it`
              })
            const defaults = validateConfig(manifest.configSchema, {})
            if (Either.isLeft(defaults)) return yield* new BadRequest({ message: `plugin.json configSchema: ${defaults.left}` })
            const paths = pluginPaths(app.dataDir, manifest.name)
            yield* Effect.try({
              try: () => {
                fs.rmSync(paths.dir, { recursive: true, force: true })
                copyPlugin(dir, paths.dir)
              },
              catch: (e) => new BadRequest({ message: e instanceof InstallError ? e.message : `cannot copy the plugin: ${(e as Error).message}` })
            })
            const record: PluginRecord = {
              version: manifest.version,
              enabled: enable ?? manifest.enabledByDefault === true,
              config: defaults.right,
              installedAt: new Date().toISOString(),
              disabledReason: null
            }
            const p = newInstalled(manifest.name, manifest, record)
            // Loaded once before anything is kept: a plugin that does not load is refused with why.
            const loaded = yield* Effect.either(once(p, "onInstall"))
            if (Either.isLeft(loaded)) {
              fs.rmSync(paths.dir, { recursive: true, force: true })
              fs.rmSync(paths.data, { recursive: true, force: true })
              return yield* new BadRequest({ message: `the plugin ${manifest.name} did not load: ${loaded.left}` })
            }
            installed.set(p.name, p)
            yield* save(p)
            log("info", p.name, `plugin ${p.name} ${p.manifest.version} installed${record.enabled ? " and enabled" : ""}`)
            if (record.enabled) yield* start(p)
            return p
          }).pipe(Effect.ensuring(Effect.sync(cleanup)))
        )

      /** Waits (briefly) for a starting plugin to settle, so an answer shows it running or why not. */
      const settled = (p: Installed) =>
        Effect.gen(function* () {
          for (let i = 0; i < 100 && (p.state === "starting" || (p.state === "restarting" && p.restarts === 0)); i++) yield* Effect.sleep(Duration.millis(50))
          return view(p)
        })

      /** A .tgz unpacked into a temporary folder (at most five times the upload limit), installed from there, the folder removed. */
      const installTgz = (bytes: Uint8Array, enable: boolean | undefined) =>
        Effect.gen(function* () {
          const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gateway-plugin-"))
          const cleanup = () => fs.rmSync(dir, { recursive: true, force: true })
          yield* Effect.tryPromise({
            try: () => extractTgz(bytes, dir, config.maxUploadMb * 5 * 1024 * 1024),
            catch: (e) => new BadRequest({ message: e instanceof Error ? e.message : String(e) })
          }).pipe(Effect.tapError(() => Effect.sync(cleanup)))
          return yield* Effect.flatMap(installFrom(dir, enable, cleanup), settled)
        })

      return {
        maxUploadBytes: config.maxUploadMb * 1024 * 1024,
        list: Effect.sync(() => [...installed.values()].sort((a, b) => a.name.localeCompare(b.name)).map(view)),
        get: (name) => Effect.map(find(name), view),
        installPath: (file, enable) =>
          Effect.gen(function* () {
            const resolved = path.resolve(file)
            const st = yield* Effect.try({ try: () => fs.statSync(resolved), catch: () => new BadRequest({ message: `${resolved} does not exist on the server` }) })
            if (st.isDirectory())
              return yield* Effect.flatMap(
                installFrom(resolved, enable, () => undefined),
                settled
              )
            if (!/\.(tgz|tar\.gz)$/.test(resolved)) return yield* new BadRequest({ message: `${resolved} is neither a plugin folder nor a .tgz` })
            if (st.size > config.maxUploadMb * 1024 * 1024) return yield* new BadRequest({ message: `${resolved} is larger than ${config.maxUploadMb} MB (PLUGIN_MAX_UPLOAD_MB)` })
            return yield* installTgz(fs.readFileSync(resolved), enable)
          }),
        installArchive: (bytes, enable) =>
          Effect.gen(function* () {
            if (bytes.length > config.maxUploadMb * 1024 * 1024)
              return yield* new PayloadTooLarge({ message: `the archive is larger than ${config.maxUploadMb} MB (PLUGIN_MAX_UPLOAD_MB)` })
            return yield* installTgz(bytes, enable)
          }),
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
              const paths = pluginPaths(app.dataDir, name)
              fs.rmSync(paths.dir, { recursive: true, force: true })
              fs.rmSync(paths.data, { recursive: true, force: true })
              log("info", name, `plugin ${name} removed`)
            })
          )
      } satisfies PluginsShape
    })
  )
}
