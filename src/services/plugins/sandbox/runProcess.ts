/**
 * One script run in its own sandbox process (./run.ts), from the gateway's side: the process
 * reads only the script's folder and the sandbox's code, writes nothing, starts nothing, and gets
 * no environment; it is stopped at its time limit (inside, by QuickJS's interrupt; a second later
 * from here, should the process be wedged) and at its memory limit (resident, watched from here).
 */
import * as fs from "node:fs"
import type { RunMessage, RunRequest } from "./protocol.js"
import { confinementArgs, sandboxReads, sandboxScript, spawnSandbox } from "./spawn.js"

export interface ScriptRunOptions {
  /** The folder (absolute) the script may read and import from. */
  readonly dir: string
  /** The script, relative to `dir`. */
  readonly script: string
  readonly args: ReadonlyArray<string>
  readonly stdin: string
  readonly timeoutMs: number
  readonly memoryLimitBytes: number
  /** Set: no network, every fetch fails with this message. */
  readonly networkOff: string | null
  readonly hosts: ReadonlyArray<string>
  /** How much of each of stdout and stderr is kept (characters). */
  readonly outputLimit: number
}

export interface ScriptRun {
  /** The script's exit status: 0, its `process.exit` code, 1 when it threw; null when a limit stopped it or it could not start. */
  readonly exitCode: number | null
  /** Why it failed (its uncaught error, the limit that stopped it); null on a normal end. */
  readonly error: string | null
  readonly stopped: "time" | "memory" | null
  readonly stdout: string
  readonly stderr: string
  /** Whether stdout or stderr went past the output limit (the rest was dropped). */
  readonly truncated: boolean
  /** Each fetch the script asked for (`host:port`) and whether it went out. */
  readonly fetches: ReadonlyArray<{ readonly target: string; readonly allowed: boolean }>
  readonly durationMs: number
}

/** How long a process may take to start and set up its VM, on top of the script's own time. */
const START_ALLOWANCE_MS = 5_000

export const runScript = (opts: ScriptRunOptions): Promise<ScriptRun> => {
  const started = Date.now()
  const script = sandboxScript("run.js")
  const out = { stdout: "", stderr: "" }
  let truncated = false
  const fetches: Array<{ target: string; allowed: boolean }> = []
  const finish = (r: Pick<ScriptRun, "exitCode" | "error" | "stopped">): ScriptRun => ({
    ...r,
    ...out,
    truncated,
    fetches,
    durationMs: Date.now() - started
  })
  if (!fs.existsSync(script))
    return Promise.resolve(
      finish({ exitCode: null, error: `the script sandbox is not built (${script}): run npm run build`, stopped: null })
    )

  const sandbox = spawnSandbox(script, confinementArgs([opts.dir, ...sandboxReads(script)]), {
    env: { PATH: process.env["PATH"] ?? "" },
    cwd: opts.dir,
    memoryLimitBytes: opts.memoryLimitBytes
  })
  return new Promise<ScriptRun>((resolve) => {
    let done: Pick<ScriptRun, "exitCode" | "error" | "stopped"> | undefined
    let wedged = false
    const timer = setTimeout(() => {
      wedged = true
      void sandbox.kill()
    }, opts.timeoutMs + START_ALLOWANCE_MS)
    sandbox.child.on("message", (m: RunMessage) => {
      if (m.t === "out") {
        const kept = out[m.stream]
        if (kept.length >= opts.outputLimit) truncated = true
        else {
          out[m.stream] = kept + m.text.slice(0, opts.outputLimit - kept.length)
          if (kept.length + m.text.length > opts.outputLimit) truncated = true
        }
      } else if (m.t === "fetch") {
        if (fetches.length < 100) fetches.push({ target: m.target, allowed: m.allowed })
      } else done = { exitCode: m.exitCode, error: m.error, stopped: m.stopped }
    })
    sandbox.exited.then((how) => {
      clearTimeout(timer)
      const mb = Math.round(opts.memoryLimitBytes / 1024 / 1024)
      if (sandbox.overLimit())
        resolve(
          finish({ exitCode: null, error: `the script went over its memory limit (${mb} MB); its process was stopped`, stopped: "memory" })
        )
      else if (done !== undefined) resolve(finish(done))
      else if (wedged)
        resolve(
          finish({ exitCode: null, error: `the script did not end in ${opts.timeoutMs} ms; its process was stopped`, stopped: "time" })
        )
      else
        resolve(
          finish({
            exitCode: null,
            error: `the script's process exited (${how})${sandbox.stderr() ? `: ${sandbox.stderr()}` : ""}`,
            stopped: null
          })
        )
    })
    const request: RunRequest = {
      t: "run",
      dir: opts.dir,
      script: opts.script,
      argv: opts.args,
      stdin: opts.stdin,
      timeoutMs: opts.timeoutMs,
      memoryLimitBytes: opts.memoryLimitBytes,
      networkOff: opts.networkOff,
      hosts: opts.hosts
    }
    sandbox.child.send(request)
  })
}
