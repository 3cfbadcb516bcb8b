import * as Effect from "effect/Effect"
import type { PluginProcess } from "./sandbox/process.js"
import type { PluginHook } from "./sandbox/protocol.js"
import type { HookStats, Installed, PluginsConfigShape } from "./state.js"

/** Logs on a plugin's behalf (annotated with its name). */
export type PluginLog = (level: "info" | "warning" | "error", name: string, message: string) => void

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

/**
 * Calls into a plugin's process, each counted in its hook's stats: a request-path call is
 * rate-limited (a token bucket of `rateLimit` a second, at most `maxQueue` waiting) and timed; a
 * lifecycle call is timed and logged when it fails.
 */
export const makePluginCalls = (deps: { readonly config: PluginsConfigShape; readonly log: PluginLog }) => {
  const { config, log } = deps

  /** One call, counted, rate-limited and timed; rejects saying why it was not answered. */
  const call = (p: Installed, hook: PluginHook, ctx: unknown, timeoutMs: number): Promise<unknown> => {
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
      return Promise.reject(
        new Error(p.tokens < 1 ? `over its rate limit (${config.rateLimit} calls a second)` : `${p.queued} calls are waiting on it`)
      )
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

  /** A lifecycle hook on a process (logged when it fails; never stops what called it). */
  const lifecycle = (p: Installed, proc: PluginProcess, hook: "onInstall" | "onActivate" | "onDeactivate" | "onUninstall") =>
    Effect.promise(async () => {
      if (!proc.info.hooks.includes(hook)) return
      const s = statsOf(p, hook)
      s.calls++
      const started = performance.now()
      try {
        await proc.call(hook, { hook, name: p.name, version: p.manifest.version, manifest: p.manifest }, config.lifecycleTimeoutMs)
      } catch (e) {
        const message = e instanceof Error ? e.message : String(e)
        failed(p, hook, message)
        log("warning", p.name, `plugin ${p.name}: ${hook} failed: ${message}`)
      } finally {
        s.totalMs += performance.now() - started
      }
    })

  return { call, lifecycle }
}

export type PluginCalls = ReturnType<typeof makePluginCalls>
