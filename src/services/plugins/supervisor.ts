import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { PluginState } from "../../domain/plugins.js"
import type { RequestHooksShape } from "../../kernel/RequestHooks.js"
import type { McpCallHooksShape } from "../mcp/McpCallHooks.js"
import { contextTracker, hooksOf, mcpCallHookOf, type PluginCaller, REQUEST_PATH_HOOKS, type RequestPathHook } from "./bridge.js"
import type { PluginCalls, PluginLog } from "./calls.js"
import { pluginPaths } from "./install.js"
import { hookSetting } from "./manifest.js"
import { type PluginProcess, spawnPluginProcess } from "./sandbox/process.js"
import type { Installed, PluginsConfigShape } from "./state.js"

/** The request-path hooks the plugin defines and its manifest leaves on, with their priorities. */
const activeHooks = (p: Installed, proc: PluginProcess) =>
  REQUEST_PATH_HOOKS.filter((h) => proc.info.hooks.includes(h))
    .map((hook) => ({ hook, ...hookSetting(p.manifest, hook, proc.info.priority) }))
    .filter((h) => h.enabled)
    .map(({ hook, priority }) => ({ hook: hook as RequestPathHook, priority }))

/** A fail-closed plugin's hooks stay on while it restarts: they refuse requests instead of letting them through unchecked. */
const keepsGuard = (p: Installed) => p.manifest.failClosed === true

/**
 * Each enabled plugin's process in this gateway: spawned, activated (first run only), attached
 * to the request lifecycle; started again on the restart Schedule when it ends unexpectedly, and
 * disabled after `maxRestarts` crashes in a row (a run of a minute or more starts the count again).
 */
export const makeSupervisor = (deps: {
  readonly dataDir: string
  readonly config: PluginsConfigShape
  readonly hooks: RequestHooksShape
  /** Where a plugin's `onMcpCall` sees the calls through `/v1/mcp` (absent where the MCP gateway is not built). */
  readonly mcpHooks?: McpCallHooksShape | undefined
  readonly calls: PluginCalls
  readonly log: PluginLog
  readonly runFork: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void, never>
  /** Stores the plugin's record (a disable the supervisor decides). */
  readonly save: (p: Installed) => Effect.Effect<void>
}) => {
  const { dataDir, config, hooks, mcpHooks, calls, log, runFork, save } = deps
  /** Seam registrations of running plugins (name → removers), and the context tracker's. */
  const registrations = new Map<string, ReadonlyArray<() => void>>()
  let untrack: (() => void) | undefined

  const spawn = (p: Installed) =>
    Effect.tryPromise({
      try: () =>
        spawnPluginProcess({
          dir: pluginPaths(dataDir, p.name).dir,
          main: p.manifest.main,
          permissions: p.manifest.requires?.permissions ?? [],
          dataDir: pluginPaths(dataDir, p.name).data,
          config: p.record.config,
          memoryLimitBytes: config.memoryMb * 1024 * 1024,
          loadTimeoutMs: config.lifecycleTimeoutMs,
          integrity: p.manifest.integrity,
          onLog: (level, text) =>
            log(level === "error" ? "error" : level === "warn" ? "warning" : "info", p.name, `plugin ${p.name}: ${text}`)
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

  const attach = (p: Installed, proc: PluginProcess) => {
    const caller: PluginCaller = {
      name: p.name,
      failClosed: p.manifest.failClosed === true,
      call: (hook, ctx) => calls.call(p, hook, ctx, config.hookTimeoutMs),
      skipped: (hook, reason) => log("warning", p.name, `plugin ${p.name}: ${hook} skipped: ${reason}`)
    }
    const list = activeHooks(p, proc)
    const mcp =
      mcpHooks !== undefined && proc.info.hooks.includes("onMcpCall") && hookSetting(p.manifest, "onMcpCall").enabled
        ? [mcpHooks.register(mcpCallHookOf(caller))]
        : []
    if (list.length === 0) {
      if (mcp.length > 0) registrations.set(p.name, mcp)
      return
    }
    if (untrack === undefined) untrack = hooks.register(contextTracker)
    registrations.set(p.name, [...hooksOf(caller, list).map((h) => hooks.register(h)), ...mcp])
  }

  const detach = (p: Installed) => {
    for (const off of registrations.get(p.name) ?? []) off()
    registrations.delete(p.name)
    if (registrations.size === 0 && untrack !== undefined) {
      untrack()
      untrack = undefined
    }
  }

  const supervise = (p: Installed) => {
    let first = true
    const runOnce = Effect.gen(function* () {
      p.state = first ? "starting" : "restarting"
      const proc = yield* spawn(p)
      p.proc = proc
      if (first) yield* calls.lifecycle(p, proc, "onActivate")
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
      if (proc !== undefined && p.state === "running") yield* calls.lifecycle(p, proc, "onDeactivate")
      const fiber = p.supervisor
      p.supervisor = undefined
      if (fiber !== undefined) yield* Fiber.interrupt(fiber)
      if (proc !== undefined) yield* Effect.promise(() => proc.kill())
      p.proc = undefined
      p.state = state
    })

  /** Spawns the plugin alone (not attached) to run one lifecycle hook: install, uninstall of a stopped plugin. */
  const once = (p: Installed, hook: "onInstall" | "onUninstall") =>
    Effect.gen(function* () {
      const proc = yield* spawn(p)
      yield* calls.lifecycle(p, proc, hook)
      yield* Effect.promise(() => proc.kill())
    })

  return { start, stop, detach, once }
}
