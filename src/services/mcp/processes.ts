/**
 * The processes of stdio MCP servers (docs/mcp.md, "Connections to the upstream servers"): each in its own
 * process group (stopping it stops whatever it started: `npx` and the server under it), with a
 * minimal inherited environment, its stderr's tail kept for the health reason. None outlives the
 * gateway: the layer stops them on shutdown, an `exit` hook kills them when the gateway ends
 * without running its finalizers, and each gateway process records its groups in a file of its
 * own (`<DATA_DIR>/mcp/processes/<gateway pid>.json`), so that the next start stops what a
 * crashed or SIGKILLed gateway left running. No SDK here: this module is loaded with the layer.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/**
 * What a stdio server inherits of the gateway's environment (the record's env is merged over it):
 * where to find programs, who and where the user is, the locale and time zone, the temporary
 * folder. Nothing else: not the gateway's secrets (storage key, provider keys), not its
 * NODE_OPTIONS, not its proxies. A server that needs more gets it from its record's env.
 */
export const INHERITED_ENV =
  process.platform === "win32"
    ? [
        "APPDATA",
        "HOMEDRIVE",
        "HOMEPATH",
        "LOCALAPPDATA",
        "PATH",
        "PATHEXT",
        "COMSPEC",
        "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE",
        "SYSTEMROOT",
        "TEMP",
        "TMP",
        "USERNAME",
        "USERPROFILE",
        "PROGRAMFILES"
      ]
    : ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"]

/** The environment of a stdio server: the inherited minimum, then the record's env. */
export const stdioEnv = (own: Readonly<Record<string, string>>, from: NodeJS.ProcessEnv = process.env): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const key of INHERITED_ENV) {
    const value = from[key]
    // A shell function exported into the environment (`() { ...`): never passed on.
    if (value !== undefined && !value.startsWith("()")) env[key] = value
  }
  return { ...env, ...own }
}

/** How a process ended: its exit code and signal, or the spawn error. */
export interface ProcessEnd {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly error?: Error
}

/** Kept of a server's stderr: its last 4 KB. */
export const STDERR_TAIL_BYTES = 4096

export interface StdioProcess {
  readonly proc: ChildProcess
  readonly pid: number
  /** The command line, for the process record and messages. */
  readonly command: string
  /** The last ~4 KB of its stderr. */
  readonly stderrTail: () => string
  /** Settles when it has exited and its stderr was read (listened to from the spawn on). */
  readonly ended: Promise<ProcessEnd>
  /** The end, as soon as it has exited. */
  readonly end: () => ProcessEnd | undefined
}

/** The last non-empty line a process wrote on stderr (at most 300 characters). */
export const lastLine = (text: string): string =>
  (
    text
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l !== "")
      .pop() ?? ""
  ).slice(0, 300)

/** `process exited with code 1 (signal null): <last stderr line>`, or why it could not start. */
export const describeEnd = (command: string, end: ProcessEnd, stderr: string): string => {
  if (end.error !== undefined) {
    const code = (end.error as NodeJS.ErrnoException).code
    return code === "ENOENT"
      ? `cannot run ${JSON.stringify(command)}: not found (PATH is the gateway's)`
      : `cannot run ${JSON.stringify(command)}: ${end.error.message}`
  }
  const line = lastLine(stderr)
  return `process exited with code ${end.code} (signal ${end.signal})${line === "" ? "" : `: ${line}`}`
}

/** Process groups started and not yet stopped, killed by the `exit` hook if the gateway ends without stopping them. */
const running = new Set<number>()
let exitHook = false
const killAllNow = () => {
  for (const pgid of running) {
    try {
      process.kill(-pgid, "SIGKILL")
    } catch {
      // gone already
    }
  }
}

/**
 * Starts `command args` in its own process group with stdin, stdout and stderr piped. Resolves
 * once it runs; rejects with the spawn error (ENOENT, EACCES, a missing cwd).
 */
export const spawnStdioServer = (options: {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env: Record<string, string>
  readonly cwd: string | undefined
}): Promise<StdioProcess> =>
  new Promise((resolve, reject) => {
    if (options.cwd !== undefined && !fs.existsSync(options.cwd)) {
      return reject(new Error(`its working folder ${JSON.stringify(options.cwd)} does not exist`))
    }
    let proc: ChildProcess
    try {
      proc = spawn(options.command, [...options.args], {
        // Its own process group: the whole group is stopped with it, no orphan left.
        detached: true,
        env: options.env,
        cwd: options.cwd,
        stdio: ["pipe", "pipe", "pipe"],
        shell: false,
        windowsHide: true
      })
    } catch (e) {
      return reject(e)
    }
    let tail = ""
    proc.stderr?.on("data", (chunk: Buffer) => {
      tail = (tail + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES)
    })
    let ended: ProcessEnd | undefined
    const endedPromise = new Promise<ProcessEnd>((settle) => {
      proc.once("error", (error) => {
        ended ??= { code: null, signal: null, error }
        settle(ended)
      })
      proc.once("exit", (code, signal) => {
        ended ??= { code, signal }
        const at = ended
        // Settled once its stderr is read to the end ("close"), or shortly after the exit when a
        // process it left behind holds the pipes open.
        proc.once("close", () => settle(at))
        setTimeout(() => settle(at), 250).unref()
      })
    })
    // A write to a server that has exited (EPIPE) is the transport's to report, never an uncaught error.
    proc.stdin?.on("error", () => {})
    proc.once("error", (e) => reject(e))
    proc.once("spawn", () => {
      const pid = proc.pid as number
      running.add(pid)
      if (!exitHook) {
        exitHook = true
        process.once("exit", killAllNow)
      }
      resolve({
        proc,
        pid,
        command: [options.command, ...options.args].join(" "),
        stderrTail: () => tail,
        ended: endedPromise,
        end: () => ended
      })
    })
  })

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

const signalGroup = (pgid: number, signal: NodeJS.Signals) => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // gone already
  }
}

const within = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())])

/**
 * Stops a server the way the MCP spec asks of a client: stdin closed, a moment to exit, then
 * SIGTERM to its whole group, and SIGKILL to what is left after `graceMs`.
 */
export const stopStdioServer = async (p: StdioProcess, graceMs = 2000): Promise<void> => {
  try {
    p.proc.stdin?.end()
  } catch {
    // closed already
  }
  if (p.end() === undefined) await within(p.ended, 300)
  // Its children (npx's server, a shell's command) may run on after it: the group is signalled anyway.
  signalGroup(p.pid, "SIGTERM")
  if (p.end() === undefined) await within(p.ended, graceMs)
  if (groupAlive(p.pid)) {
    signalGroup(p.pid, "SIGKILL")
    await within(p.ended, 1000)
  }
  running.delete(p.pid)
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

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * The process groups this gateway process runs, in `<dir>/<own pid>.json` (one file per gateway
 * process: the workers of one gateway never stop each other's servers). `reap` stops the groups
 * recorded by gateway processes that are gone, whose leader still runs the recorded command (a
 * reused pid is left alone).
 */
export interface ProcessRecord {
  readonly add: (pid: number, command: string) => void
  readonly remove: (pid: number) => void
  readonly reap: () => Promise<number>
}

export const processRecord = (dir: string, self: number = process.pid): ProcessRecord => {
  const fileOf = (owner: number) => path.join(dir, `${owner}.json`)
  // A file under this process's own pid is a previous run's that had the same pid (a container
  // started again): kept aside for `reap`, not overwritten.
  try {
    fs.renameSync(fileOf(self), path.join(dir, `${self}-previous-${Date.now()}.json`))
  } catch {
    // none (the usual case)
  }
  const read = (file: string): Record<string, string> => {
    try {
      const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as unknown
      return parsed !== null && typeof parsed === "object" ? (parsed as Record<string, string>) : {}
    } catch {
      return {}
    }
  }
  const mine: Record<string, string> = {}
  const write = () => {
    const file = fileOf(self)
    try {
      if (Object.keys(mine).length === 0) return fs.rmSync(file, { force: true })
      fs.mkdirSync(dir, { recursive: true })
      const partial = `${file}.tmp`
      fs.writeFileSync(partial, JSON.stringify(mine), { mode: 0o600 })
      fs.renameSync(partial, file)
    } catch {
      // a data folder that cannot be written: the processes are still stopped with the gateway
    }
  }
  return {
    add: (pid, command) => {
      mine[String(pid)] = command
      write()
    },
    remove: (pid) => {
      if (!(String(pid) in mine)) return
      delete mine[String(pid)]
      write()
    },
    reap: async () => {
      let names: Array<string>
      try {
        names = fs.readdirSync(dir)
      } catch {
        return 0
      }
      let reaped = 0
      for (const name of names) {
        const m = /^(\d+)(-previous-\d+)?\.json$/.exec(name)
        if (m === null) continue
        const owner = Number(m[1])
        if (m[2] === undefined && (owner === self || alive(owner))) continue
        for (const [pid, command] of Object.entries(read(path.join(dir, name)))) {
          const n = Number(pid)
          const now = Number.isInteger(n) && n > 1 ? commandOf(n) : undefined
          const program = path.basename(command.split(" ")[0] ?? "")
          if (now === undefined || program === "" || !now.includes(program)) continue
          reaped++
          signalGroup(n, "SIGTERM")
          const end = Date.now() + 3000
          while (Date.now() < end && commandOf(n) !== undefined) await new Promise((r) => setTimeout(r, 50))
          signalGroup(n, "SIGKILL")
        }
        fs.rmSync(path.join(dir, name), { force: true })
      }
      return reaped
    }
  }
}
