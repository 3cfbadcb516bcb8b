/**
 * What the Plugins service (./Plugins.ts) keeps of each plugin: the stored record, the settings
 * read from the environment, the in-process state and counts, and the view the API shows.
 */
import type * as Fiber from "effect/Fiber"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import type { PluginState, PluginView } from "../../domain/plugins.js"
import { hookSetting, type PluginManifest } from "./manifest.js"
import type { PluginProcess } from "./sandbox/process.js"
import { PLUGIN_HOOKS } from "./sandbox/protocol.js"

/** What the store keeps of a plugin. */
export interface PluginRecord {
  readonly version: string
  readonly enabled: boolean
  readonly config: Readonly<Record<string, string | number | boolean>>
  readonly installedAt: string
  /** Why the gateway disabled it (repeated crashes); cleared by enable. */
  readonly disabledReason: string | null
}

export interface PluginsConfigShape {
  /** A request-path hook's time limit (`PLUGIN_HOOK_TIMEOUT_MS`, 500). */
  readonly hookTimeoutMs: number
  /** A lifecycle hook's and a load's time limit (`PLUGIN_LIFECYCLE_TIMEOUT_MS`, 5000). */
  readonly lifecycleTimeoutMs: number
  /** Calls a second per plugin (`PLUGIN_RATE_LIMIT`, 1000); past it calls are skipped. */
  readonly rateLimit: number
  /** Calls waiting on one plugin (`PLUGIN_MAX_QUEUE`, 256); past it calls are skipped. */
  readonly maxQueue: number
  /** A plugin process's memory (`PLUGIN_MEMORY_MB`, 256). */
  readonly memoryMb: number
  /** An uploaded .tgz, MB (`PLUGIN_MAX_UPLOAD_MB`, 20); also what it may unpack to (times 5). */
  readonly maxUploadMb: number
  /** Crashes in a row before the plugin is disabled (`PLUGIN_MAX_RESTARTS`, 5). */
  readonly maxRestarts: number
  /** The first restart's delay, doubled each time (`PLUGIN_RESTART_BASE_MS`, 500). */
  readonly restartBaseMs: number
}

export const readConfig = Effect.gen(function* () {
  const int = (name: string, fallback: number, min: number, max: number) =>
    Config.integer(name).pipe(
      Config.validate({ message: `${name} must be an integer from ${min} to ${max}`, validation: (n) => n >= min && n <= max }),
      Config.withDefault(fallback)
    )
  return {
    hookTimeoutMs: yield* int("PLUGIN_HOOK_TIMEOUT_MS", 500, 10, 60_000),
    lifecycleTimeoutMs: yield* int("PLUGIN_LIFECYCLE_TIMEOUT_MS", 5000, 100, 600_000),
    rateLimit: yield* int("PLUGIN_RATE_LIMIT", 1000, 1, 1_000_000),
    maxQueue: yield* int("PLUGIN_MAX_QUEUE", 256, 1, 100_000),
    memoryMb: yield* int("PLUGIN_MEMORY_MB", 256, 32, 16_384),
    maxUploadMb: yield* int("PLUGIN_MAX_UPLOAD_MB", 20, 1, 1024),
    maxRestarts: yield* int("PLUGIN_MAX_RESTARTS", 5, 1, 1000),
    restartBaseMs: yield* int("PLUGIN_RESTART_BASE_MS", 500, 10, 600_000)
  } satisfies PluginsConfigShape
})

export interface HookStats {
  calls: number
  failures: number
  skipped: number
  totalMs: number
  lastError: string | null
  lastErrorAt: string | null
}

/** One installed plugin in this process. */
export interface Installed {
  readonly name: string
  manifest: PluginManifest
  record: PluginRecord
  state: PluginState
  reason: string | null
  proc: PluginProcess | undefined
  restarts: number
  supervisor: Fiber.RuntimeFiber<void, never> | undefined
  readonly stats: Map<string, HookStats>
  /** Token bucket of the rate limit. */
  tokens: number
  refilledAt: number
  queued: number
}

/** What the API, the CLI and the dashboard show of a plugin: its manifest, state and per-hook counts. */
export const view = (p: Installed): PluginView => {
  const definedHooks = p.proc?.info.hooks
  return {
    name: p.name,
    version: p.manifest.version,
    description: p.manifest.description ?? null,
    author: p.manifest.author ?? null,
    enabled: p.record.enabled,
    state: p.state,
    reason: p.record.disabledReason ?? p.reason,
    permissions: [...(p.manifest.requires?.permissions ?? [])],
    failClosed: p.manifest.failClosed === true,
    pid: p.proc?.pid ?? null,
    restarts: p.restarts,
    installedAt: p.record.installedAt,
    configSchema: { ...(p.manifest.configSchema ?? {}) },
    config: { ...p.record.config },
    hooks: PLUGIN_HOOKS.filter((h) => definedHooks === undefined || definedHooks.includes(h) || p.stats.has(h)).map((hook) => {
      const setting = hookSetting(p.manifest, hook, p.proc?.info.priority ?? 100)
      const s = p.stats.get(hook)
      return {
        hook,
        enabled: setting.enabled && (definedHooks === undefined || definedHooks.includes(hook)),
        priority: setting.priority,
        calls: s?.calls ?? 0,
        failures: s?.failures ?? 0,
        skipped: s?.skipped ?? 0,
        totalMs: Math.round((s?.totalMs ?? 0) * 1000) / 1000,
        averageMs: s && s.calls > 0 ? Math.round((s.totalMs / s.calls) * 1000) / 1000 : null,
        lastError: s?.lastError ?? null,
        lastErrorAt: s?.lastErrorAt ?? null
      }
    })
  }
}
