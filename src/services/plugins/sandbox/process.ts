/**
 * A plugin's process, from the gateway's side (docs/plugins.md#the-sandbox): calls are answered one at a time, each within
 * its time limit; one that overruns it by a further second kills the process, and an exit rejects what is waiting.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { PACKAGE_ROOT } from "../../../kernel/packageRoot.js"
import { type ChildMessage, type PluginHook, type PluginPermission, SDK_FILE } from "./protocol.js"
import { confinementArgs, sandboxReads, sandboxScript, spawnSandbox } from "./spawn.js"

export interface PluginProcessOptions {
  /** The plugin's folder (absolute). */
  readonly dir: string
  /** Its entry file, relative to `dir`. */
  readonly main: string
  readonly permissions: ReadonlyArray<PluginPermission>
  /** Where `file-write` may write; made if missing. */
  readonly dataDir: string
  readonly config?: Readonly<Record<string, unknown>>
  /** The plugin process's memory limit (resident; default 256 MB): past it the plugin's code is interrupted. */
  readonly memoryLimitBytes?: number
  /** How long loading may take (default 5 s). */
  readonly loadTimeoutMs?: number
  /** The manifest's `integrity` (`sha256-<base64>`): the entry file must hash to it, or nothing is started. */
  readonly integrity?: string | undefined
  /** A line the plugin logged (console.*). */
  readonly onLog?: (level: string, text: string) => void
}

export interface PluginInfo {
  readonly name: string
  readonly priority: number
  readonly enabled: boolean
  readonly hooks: ReadonlyArray<PluginHook>
}

export interface PluginProcess {
  readonly info: PluginInfo
  readonly pid: number
  /**
   * The hook's answer (`null` for nothing), or a rejection saying why (thrown, timed out, process
   * gone). With `deadline` (epoch ms), a call still waiting behind others then is not sent at all,
   * and one sent later gets only the time left: a caller that gave up costs the plugin nothing.
   */
  readonly call: (hook: PluginHook, ctx: unknown, timeoutMs: number, deadline?: number) => Promise<unknown>
  /** Resolves with the exit code (or signal) once the process is gone. */
  readonly exited: Promise<number | string | null>
  readonly kill: () => Promise<void>
}

const DEFAULT_MEMORY_LIMIT = 256 * 1024 * 1024

export class PluginProcessError extends Error {
  override readonly name = "PluginProcessError"
}

/** The flags that confine the process: what it may read and write, and what it may start. */
export const permissionArgs = (opts: Pick<PluginProcessOptions, "dir" | "permissions" | "dataDir">, script: string): Array<string> => {
  const granted = new Set(opts.permissions)
  return confinementArgs(granted.has("file-read") ? ["*"] : [opts.dir, ...sandboxReads(script)], {
    ...(granted.has("file-write") ? { write: opts.dataDir } : {}),
    childProcess: granted.has("exec")
  })
}

export const spawnPluginProcess = (opts: PluginProcessOptions): Promise<PluginProcess> => {
  const script = sandboxScript("child.js")
  if (!fs.existsSync(script))
    return Promise.reject(new PluginProcessError(`the plugin sandbox is not built (${script}): run npm run build`))
  if (opts.integrity !== undefined) {
    let actual: string
    try {
      actual = `sha256-${crypto
        .createHash("sha256")
        .update(fs.readFileSync(path.join(opts.dir, opts.main)))
        .digest("base64")}`
    } catch (e) {
      return Promise.reject(new PluginProcessError(`${opts.main} cannot be read: ${(e as Error).message}`))
    }
    if (actual !== opts.integrity)
      return Promise.reject(
        new PluginProcessError(
          `${opts.main} does not match the manifest's integrity (${opts.integrity}, the file is ${actual}): not loaded`
        )
      )
  }
  let sdkSource: string
  try {
    sdkSource = fs.readFileSync(path.join(PACKAGE_ROOT, SDK_FILE), "utf8")
  } catch (e) {
    return Promise.reject(new PluginProcessError(`the plugin SDK (${SDK_FILE}) cannot be read: ${(e as Error).message}`))
  }
  fs.mkdirSync(opts.dataDir, { recursive: true })
  const limit = opts.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT
  const { child, exited, kill, overLimit, stderr } = spawnSandbox(script, permissionArgs(opts, script), {
    // The plugin sees the gateway's environment only with `env` (through the sandbox); the process itself needs none of it.
    env: opts.permissions.includes("env") ? process.env : { PATH: process.env["PATH"] ?? "" },
    cwd: opts.dir,
    memoryLimitBytes: limit
  })
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: ReturnType<typeof setTimeout> }>()
  let nextId = 1
  let queue: Promise<unknown> = Promise.resolve()
  let gone: string | undefined

  exited.then((how) => {
    gone = overLimit()
      ? `the plugin went over its memory limit (${Math.round(limit / 1024 / 1024)} MB); its process was stopped`
      : `the plugin's process exited (${how})${stderr() ? `: ${stderr()}` : ""}`
    for (const [, w] of waiting) {
      clearTimeout(w.timer)
      w.reject(new PluginProcessError(gone))
    }
    waiting.clear()
  })

  return new Promise<PluginProcess>((resolve, reject) => {
    const loadTimeoutMs = opts.loadTimeoutMs ?? 5_000
    const loadTimer = setTimeout(() => {
      reject(new PluginProcessError(`the plugin did not load in ${loadTimeoutMs} ms`))
      void kill()
    }, loadTimeoutMs + 2_000)
    exited.then(() => {
      clearTimeout(loadTimer)
      reject(new PluginProcessError(gone ?? "the plugin's process exited"))
    })
    child.on("message", (m: ChildMessage) => {
      switch (m.t) {
        case "loaded": {
          clearTimeout(loadTimer)
          const info: PluginInfo = { name: m.name, priority: m.priority, enabled: m.enabled, hooks: m.hooks }
          resolve({
            info,
            pid: child.pid ?? -1,
            exited,
            kill,
            call: (hook, ctx, timeoutMs, deadline) => {
              const run = () =>
                new Promise<unknown>((ok, fail) => {
                  if (gone !== undefined) return fail(new PluginProcessError(gone))
                  if (deadline !== undefined) {
                    const left = deadline - Date.now()
                    if (left <= 0)
                      return fail(new PluginProcessError(`${hook} waited past its time limit behind the plugin's other calls; not sent`))
                    timeoutMs = Math.min(timeoutMs, left)
                  }
                  const id = nextId++
                  // The sandbox stops the call at its limit; past one more second the process is wedged.
                  const timer = setTimeout(() => {
                    waiting.delete(id)
                    fail(new PluginProcessError(`${hook} did not answer in ${timeoutMs} ms; the plugin's process was stopped`))
                    void kill()
                  }, timeoutMs + 1_000)
                  waiting.set(id, { resolve: ok, reject: fail, timer })
                  child.send({ t: "call", id, hook, ctx, timeoutMs })
                })
              const next = queue.then(run, run)
              queue = next.catch(() => undefined)
              return next
            }
          })
          return
        }
        case "error":
          clearTimeout(loadTimer)
          reject(new PluginProcessError(`the plugin did not load: ${m.message}`))
          void kill()
          return
        case "result":
        case "failed": {
          const w = waiting.get(m.id)
          if (w === undefined) return
          waiting.delete(m.id)
          clearTimeout(w.timer)
          if (m.t === "result") w.resolve(m.value)
          else w.reject(new PluginProcessError(m.message))
          return
        }
        case "log":
          opts.onLog?.(m.level, m.text)
          return
      }
    })
    child.send({
      t: "load",
      dir: opts.dir,
      main: opts.main,
      permissions: opts.permissions,
      dataDir: opts.dataDir,
      config: opts.config ?? {},
      memoryLimitBytes: limit,
      timeoutMs: loadTimeoutMs,
      sdkSource
    })
  })
}
