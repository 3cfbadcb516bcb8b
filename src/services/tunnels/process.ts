/**
 * Helper processes of the tunnel backends (docs/tunnels.md): each runs in its own process group,
 * so stopping it (or the gateway) kills everything it started, and commands that need root go
 * through `sudo -S` with the password on stdin for that one call (never in argv, never logged,
 * never stored). As root, sudo is not used at all: it may not even be installed.
 */
import { type ChildProcess, spawn } from "node:child_process"

/** Kills a helper's whole process group (it may have children), then waits for it to go. */
export const killGroup = (proc: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null || proc.pid === undefined) return resolve()
    const pid = proc.pid
    const timer = setTimeout(() => {
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        // gone already
      }
    }, 2000)
    proc.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    try {
      process.kill(-pid, "SIGTERM")
    } catch {
      clearTimeout(timer)
      resolve()
    }
  })

/** Whether this process runs as root (then privileged commands run directly). */
export const isRoot = (): boolean => typeof process.getuid === "function" && process.getuid() === 0

/** The command line for `bin args`, through `sudo -S` when not root and a password was given. */
export const privilegedArgv = (bin: string, args: ReadonlyArray<string>, sudoPassword: string | undefined): { cmd: string; args: Array<string>; stdin?: string } =>
  sudoPassword === undefined || isRoot()
    ? { cmd: bin, args: [...args] }
    : // -S: the password from stdin; -p "": no prompt text mixed into the output; -k: never a cached credential instead.
      { cmd: "sudo", args: ["-S", "-k", "-p", "", "--", bin, ...args], stdin: `${sudoPassword}\n` }

export interface Spawned {
  readonly proc: ChildProcess
  /** Calls `onLine` with each line the helper prints (stdout and stderr). */
  readonly lines: (onLine: (line: string) => void) => void
  /** Settles when the helper has ended (or could not start: `error`); listened to from the spawn on, so nothing is missed. */
  readonly ended: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly error?: Error }>
}

/** Starts a helper in its own process group, stdin closed after an optional input (the sudo password). */
export const spawnHelper = (cmd: string, args: ReadonlyArray<string>, options: { env?: NodeJS.ProcessEnv; stdin?: string } = {}): Spawned => {
  const proc = spawn(cmd, args, {
    // Its own process group: the whole group is killed on stop, no orphan left.
    detached: true,
    env: options.env ?? process.env,
    stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"]
  })
  if (options.stdin !== undefined) {
    proc.stdin?.on("error", () => {})
    proc.stdin?.end(options.stdin)
  }
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
    proc.once("error", (error) => resolve({ code: null, signal: null, error }))
    proc.once("exit", (code, signal) => resolve({ code, signal }))
  })
  return {
    proc,
    ended,
    lines: (onLine) => {
      for (const stream of [proc.stdout, proc.stderr]) {
        let rest = ""
        stream?.on("data", (chunk: Buffer) => {
          const text = rest + chunk.toString("utf8")
          const parts = text.split(/\r?\n/)
          rest = parts.pop() ?? ""
          if (rest.length > 64 * 1024) rest = rest.slice(-64 * 1024)
          for (const line of parts) onLine(line)
        })
        stream?.on("end", () => {
          if (rest !== "") onLine(rest)
          rest = ""
        })
      }
    }
  }
}

export interface CommandResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs a short command to its end (killed after `timeoutMs`); never rejects: a missing binary is code null with the reason in stderr. */
export const runCommand = (
  cmd: string,
  args: ReadonlyArray<string>,
  options: { env?: NodeJS.ProcessEnv; stdin?: string; timeoutMs?: number; onLine?: (line: string) => void } = {}
): Promise<CommandResult> =>
  new Promise((resolve) => {
    let stdout = ""
    let stderr = ""
    let done = false
    let spawned: Spawned
    try {
      spawned = spawnHelper(cmd, args, options)
    } catch (e) {
      return resolve({ code: null, stdout: "", stderr: (e as Error).message })
    }
    const { proc } = spawned
    proc.stdout?.on("data", (c: Buffer) => (stdout = (stdout + c.toString("utf8")).slice(-256 * 1024)))
    proc.stderr?.on("data", (c: Buffer) => (stderr = (stderr + c.toString("utf8")).slice(-256 * 1024)))
    if (options.onLine) spawned.lines(options.onLine)
    const timer = setTimeout(() => {
      stderr += `\n(stopped after ${Math.round((options.timeoutMs ?? 0) / 1000)} s)`
      void killGroup(proc)
    }, options.timeoutMs ?? 30_000)
    const finish = (code: number | null, extra = "") => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve({ code, stdout, stderr: stderr + extra })
    }
    void spawned.ended.then((e) => {
      if (e.error) finish(null, e.error.message)
    })
    proc.once("close", (code) => finish(code))
  })

/** The last lines of a helper's output, for an error message (at most 300 characters). */
export const lastLines = (text: string, n = 2): string => text.trim().split("\n").slice(-n).join(" ").replace(/\s+/g, " ").slice(0, 300)
