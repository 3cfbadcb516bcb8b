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
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { BadRequest, Conflict, NotFound, PayloadTooLarge } from "../../domain/errors.js"
import type { PluginState, PluginView } from "../../domain/plugins.js"
import { RequestHooks } from "../../kernel/hooks.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { StoreVersion } from "../../platform/store/StoreVersion.js"
import { contextTracker, hooksOf, type PluginCaller, REQUEST_PATH_HOOKS, type RequestPathHook } from "./bridge.js"
import { copyPlugin, extractTgz, InstallError, pluginPaths, readManifest } from "./install.js"
import { hookSetting, type PluginManifest, validateConfig } from "./manifest.js"
import { type PluginProcess, spawnPluginProcess } from "./sandbox/process.js"
import type { PluginHook } from "./sandbox/protocol.js"
import { type HookStats, type Installed, type PluginRecord, readConfig, view } from "./state.js"

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
      /** Seam registrations of running plugins (name → removers), and the context tracker's. */
      const registrations = new Map<string, ReadonlyArray<() => void>>()
      let untrack: (() => void) | undefined

      const log = (level: "info" | "warning" | "error", name: string, message: string) => {
        const eff = level === "info" ? Effect.logInfo(message) : level === "warning" ? Effect.logWarning(message) : Effect.logError(message)
        runFork(eff.pipe(Effect.annotateLogs({ plugin: name })))
      }

      const statsOf = (p: Installed, hook: string): HookStats => {
        let s = p.stats.get(hook)
        if (s === undefined) {
          s = { calls: 0, failures: 0, skipped: 0, totalMs: 0, lastError: null, lastErrorAt: null }
          p.stats.set(hook, s)
        }
        return s
      }
      const failed = (p: Installed, hook: string, message: string) => {
        const s = statsOf(p, hook)
        s.failures++
        s.lastError = message
        s.lastErrorAt = new Date().toISOString()
      }

      /** One call, counted, rate-limited and timed; rejects saying why it was not answered. */
      const callPlugin = (p: Installed, hook: PluginHook, ctx: unknown, timeoutMs: number): Promise<unknown> => {
        const proc = p.proc
        const s = statsOf(p, hook)
        if (proc === undefined || p.state !== "running") {
          s.skipped++
          return Promise.reject(new Error(`the plugin is ${p.state}`))
        }
        const now = Date.now()
        p.tokens = Math.min(config.rateLimit, p.tokens + ((now - p.refilledAt) / 1000) * config.rateLimit)
        p.refilledAt = now
        if (p.tokens < 1 || p.queued >= config.maxQueue) {
          s.skipped++
          return Promise.reject(new Error(p.tokens < 1 ? `over its rate limit (${config.rateLimit} calls a second)` : `${p.queued} calls are waiting on it`))
        }
        p.tokens--
        p.queued++
        s.calls++
        const started = performance.now()
        return new Promise<unknown>((resolve, reject) => {
          // Waiting behind other calls counts against the limit: the request never waits longer,
          // and a call still queued at its deadline is never sent (process.ts).
          let settled = false
          const timer = setTimeout(() => {
            settled = true
            failed(p, hook, `${hook} did not answer in ${timeoutMs} ms`)
            reject(new Error(`${hook} did not answer in ${timeoutMs} ms`))
          }, timeoutMs + 50)
          proc.call(hook, ctx, timeoutMs, Date.now() + timeoutMs).then(
            (value) => {
              clearTimeout(timer)
              p.queued--
              s.totalMs += performance.now() - started
              if (!settled) resolve(value)
            },
            (e: unknown) => {
              clearTimeout(timer)
              p.queued--
              s.totalMs += performance.now() - started
              const message = e instanceof Error ? e.message : String(e)
              // A call already counted as timed out is not counted twice.
              if (!settled) {
                failed(p, hook, message)
                reject(new Error(message))
              }
            }
          )
        })
      }

      const lifecycleCtx = (p: Installed, hook: PluginHook) => ({ hook, name: p.name, version: p.manifest.version, manifest: p.manifest })

      /** A lifecycle hook on a process (logged when it fails; never stops what called it). */
      const lifecycle = (p: Installed, proc: PluginProcess, hook: "onInstall" | "onActivate" | "onDeactivate" | "onUninstall") =>
        Effect.promise(async () => {
          if (!proc.info.hooks.includes(hook)) return
          const s = statsOf(p, hook)
          s.calls++
          const started = performance.now()
          try {
            await proc.call(hook, lifecycleCtx(p, hook), config.lifecycleTimeoutMs)
          } catch (e) {
            const message = e instanceof Error ? e.message : String(e)
            failed(p, hook, message)
            log("warning", p.name, `plugin ${p.name}: ${hook} failed: ${message}`)
          } finally {
            s.totalMs += performance.now() - started
          }
        })

      const spawn = (p: Installed) =>
        Effect.tryPromise({
          try: () =>
            spawnPluginProcess({
              dir: pluginPaths(app.dataDir, p.name).dir,
              main: p.manifest.main,
              permissions: p.manifest.requires?.permissions ?? [],
              dataDir: pluginPaths(app.dataDir, p.name).data,
              config: p.record.config,
              memoryLimitBytes: config.memoryMb * 1024 * 1024,
              loadTimeoutMs: config.lifecycleTimeoutMs,
              integrity: p.manifest.integrity,
              onLog: (level, text) => log(level === "error" ? "error" : level === "warn" ? "warning" : "info", p.name, `plugin ${p.name}: ${text}`)
            }),
          catch: (e) => (e instanceof Error ? e.message : String(e))
        }).pipe(
          Effect.filterOrFail(
            (proc) => proc.info.name === p.name,
            (proc) => {
              void proc.kill()
              return `its code defines the plugin ${JSON.stringify(proc.info.name)}, but its plugin.json names ${JSON.stringify(p.name)}`
            }
          )
        )

      /** The request-path hooks the plugin defines and its manifest leaves on, with their priorities. */
      const activeHooks = (p: Installed, proc: PluginProcess) =>
        REQUEST_PATH_HOOKS.filter((h) => proc.info.hooks.includes(h))
          .map((hook) => ({ hook, ...hookSetting(p.manifest, hook, proc.info.priority) }))
          .filter((h) => h.enabled)
          .map(({ hook, priority }) => ({ hook: hook as RequestPathHook, priority }))

      const attach = (p: Installed, proc: PluginProcess) => {
        const caller: PluginCaller = {
          name: p.name,
          failClosed: p.manifest.failClosed === true,
          call: (hook, ctx) => callPlugin(p, hook, ctx, config.hookTimeoutMs),
          skipped: (hook, reason) => log("warning", p.name, `plugin ${p.name}: ${hook} skipped: ${reason}`)
        }
        const list = activeHooks(p, proc)
        if (list.length === 0) return
        if (untrack === undefined) untrack = hooks.register(contextTracker)
        registrations.set(
          p.name,
          hooksOf(caller, list).map((h) => hooks.register(h))
        )
      }
      const detach = (p: Installed) => {
        for (const off of registrations.get(p.name) ?? []) off()
        registrations.delete(p.name)
        if (registrations.size === 0 && untrack !== undefined) {
          untrack()
          untrack = undefined
        }
      }

      /** A fail-closed plugin's hooks stay on while it restarts: they refuse requests instead of letting them through unchecked. */
      const keepsGuard = (p: Installed) => p.manifest.failClosed === true

      /**
       * The plugin's life in this process: started, activated (first run only), attached; when its
       * process ends unexpectedly, started again on the restart Schedule; disabled after too many.
       */
      const supervise = (p: Installed) => {
        let first = true
        const runOnce = Effect.gen(function* () {
          p.state = first ? "starting" : "restarting"
          const proc = yield* spawn(p)
          p.proc = proc
          if (first) yield* lifecycle(p, proc, "onActivate")
          first = false
          if (!registrations.has(p.name)) attach(p, proc)
          // Running once its hooks are on the request path: an answer that says so is true at once.
          p.state = "running"
          const how = yield* Effect.promise(() => proc.exited)
          return yield* Effect.fail(`its process ended (${how})`)
        }).pipe(
          Effect.onExit((exit) =>
            Effect.sync(() => {
              const proc = p.proc
              p.proc = undefined
              if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) {
                const message = Option.getOrElse(Cause.failureOption(exit.cause), () => Cause.pretty(exit.cause))
                p.reason = message
                p.restarts++
                p.state = "restarting"
                if (!keepsGuard(p)) detach(p)
                log("warning", p.name, `plugin ${p.name}: ${message}; starting it again`)
              }
              if (proc) void proc.kill()
            })
          )
        )
        const schedule = Schedule.exponential(Duration.millis(config.restartBaseMs), 2).pipe(
          Schedule.intersect(Schedule.recurs(config.maxRestarts - 1)),
          Schedule.resetAfter(Duration.minutes(1))
        )
        return Effect.retry(runOnce, schedule).pipe(
          Effect.catchAll((reason) =>
            Effect.gen(function* () {
              detach(p)
              p.supervisor = undefined
              const why = `disabled after ${config.maxRestarts} crashes in a row; the last: ${reason}`
              p.state = "disabled"
              p.reason = why
              p.record = { ...p.record, enabled: false, disabledReason: why }
              yield* save(p)
              log("error", p.name, `plugin ${p.name} ${why}`)
            })
          ),
          Effect.asVoid
        )
      }

      const save = (p: Installed) => kv.set(PLUGINS_NAMESPACE, p.name, JSON.stringify(p.record))

      const start = (p: Installed) =>
        Effect.sync(() => {
          if (p.supervisor !== undefined) return
          p.tokens = config.rateLimit
          p.refilledAt = Date.now()
          p.supervisor = runFork(supervise(p))
        })

      /** Detached, deactivated (a short call), its process stopped. */
      const stop = (p: Installed, state: PluginState) =>
        Effect.gen(function* () {
          detach(p)
          const proc = p.proc
          if (proc !== undefined && p.state === "running") yield* lifecycle(p, proc, "onDeactivate")
          const fiber = p.supervisor
          p.supervisor = undefined
          if (fiber !== undefined) yield* Fiber.interrupt(fiber)
          if (proc !== undefined) yield* Effect.promise(() => proc.kill())
          p.proc = undefined
          p.state = state
        })

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

      /** Spawns the plugin alone (not attached) to run one lifecycle hook: install, uninstall of a stopped plugin. */
      const once = (p: Installed, hook: "onInstall" | "onUninstall") =>
        Effect.gen(function* () {
          const proc = yield* spawn(p)
          yield* lifecycle(p, proc, hook)
          yield* Effect.promise(() => proc.kill())
        })

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
                yield* lifecycle(p, proc, "onUninstall")
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
