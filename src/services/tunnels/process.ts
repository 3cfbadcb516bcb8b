/**
 * Helper processes of the tunnel backends (docs/tunnels.md): each runs in its own process group,
 * so stopping it (or the gateway) kills everything it started, and commands that need root go
 * through `sudo -S` with the password on stdin for that one call (never in argv, never logged,
 * never stored). As root, sudo is not used at all: it may not even be installed.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/** Kills a helper's whole process group (it may have children), then waits for it to go. */
export const killGroup = (proc: ChildProcess, graceMs = 2000): Promise<void> =>
  new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null || proc.pid === undefined) return resolve()
    const pid = proc.pid
    const timer = setTimeout(() => {
      try {
        process.kill(-pid, "SIGKILL")
      } catch {
        // gone already
      }
    }, graceMs)
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
export const privilegedArgv = (
  bin: string,
  args: ReadonlyArray<string>,
  sudoPassword: string | undefined
): { cmd: string; args: Array<string>; stdin?: string } =>
  sudoPassword === undefined || isRoot()
    ? { cmd: bin, args: [...args] }
    : // -S: the password from stdin; -p "": no prompt text mixed into the output; -k: never a cached
      // credential instead. The command itself gets /dev/null as its stdin: where sudo asks for no
      // password (NOPASSWD), the password line would otherwise reach the command.
      {
        cmd: "sudo",
        args: ["-S", "-k", "-p", "", "--", "sh", "-c", 'exec "$@" </dev/null', "sh", bin, ...args],
        stdin: `${sudoPassword}\n`
      }

export interface Spawned {
  readonly proc: ChildProcess
  /** What was run (the program's path), as recorded for the next start after a crash. */
  readonly command: string
  /** Calls `onLine` with each line the helper prints (stdout and stderr). */
  readonly lines: (onLine: (line: string) => void) => void
  /** Settles when the helper has ended (or could not start: `error`); listened to from the spawn on, so nothing is missed. */
  readonly ended: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly error?: Error }>
}

/** Starts a helper in its own process group, stdin closed after an optional input (the sudo password). */
export const spawnHelper = (
  cmd: string,
  args: ReadonlyArray<string>,
  options: { env?: NodeJS.ProcessEnv; stdin?: string } = {}
): Spawned => {
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
    command: cmd,
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

/**
 * The helpers running now, kept in a file (`<DATA_DIR>/tunnels/helpers.json`: process group and
 * command of each), so that a gateway that ended without stopping them (a crash, SIGKILL, the
 * machine's OOM killer) stops them when it starts again: a public address must not outlive the
 * gateway that opened it. Written before the helper is relied on, removed once it has exited.
 */
export interface HelperRecord {
  readonly add: (pid: number, command: string) => void
  readonly remove: (pid: number) => void
  /** Stops every recorded group still running the recorded command (a reused pid is left alone); answers how many. */
  readonly reap: () => Promise<number>
}

const commandOf = (pid: number): string | undefined => {
  try {
    // A zombie (exited, not yet collected by its parent) has an empty command line: gone.
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim() || undefined
  } catch {
    if (fs.existsSync("/proc/self")) return undefined
    try {
      return (
        execFileSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim() ||
        undefined
      )
    } catch {
      return undefined
    }
  }
}

export const helperRecord = (file: string): HelperRecord => {
  const read = (): Record<string, string> => {
    try {
      const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as unknown
      return parsed !== null && typeof parsed === "object" ? (parsed as Record<string, string>) : {}
    } catch {
      return {}
    }
  }
  const write = (entries: Record<string, string>) => {
    try {
      fs.mkdirSync(path.dirname(file), { recursive: true })
      const partial = `${file}.${process.pid}`
      fs.writeFileSync(partial, JSON.stringify(entries), { mode: 0o600 })
      fs.renameSync(partial, file)
    } catch {
      // a data folder that cannot be written: the helpers are still stopped with the gateway
    }
  }
  return {
    add: (pid, command) => write({ ...read(), [String(pid)]: command }),
    remove: (pid) => {
      const entries = read()
      if (!(String(pid) in entries)) return
      delete entries[String(pid)]
      write(entries)
    },
    reap: async () => {
      const entries = read()
      let reaped = 0
      for (const [pid, command] of Object.entries(entries)) {
        const n = Number(pid)
        const now = Number.isInteger(n) && n > 1 ? commandOf(n) : undefined
        if (now === undefined || !now.includes(path.basename(command))) continue
        reaped++
        try {
          process.kill(-n, "SIGTERM")
        } catch {
          continue
        }
        const end = Date.now() + 3000
        while (Date.now() < end && commandOf(n) !== undefined) await new Promise((r) => setTimeout(r, 50))
        try {
          process.kill(-n, "SIGKILL")
        } catch {
          // gone
        }
      }
      write({})
      return reaped
    }
  }
}
