/**
 * Starting a sandbox process, from the gateway's side (docs/plugins.md, "The sandbox"): `node`
 * running one of this folder's entries (./child.ts for a plugin, ./run.ts for a skill script)
 * under Node's permission model (`--experimental-permission` on Node 20, `--permission` from 22),
 * reading only what it is given, never loading addons or starting workers, and stopped when its
 * resident memory passes its limit.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { PACKAGE_ROOT } from "../../../kernel/packageRoot.js"

/** An entry of this folder, compiled (`child.js`): beside this module (dist/), or, from src/ (tests), the compiled tree's copy. */
export const sandboxScript = (name: string): string => {
  const here = path.dirname(fileURLToPath(import.meta.url))
  const beside = path.join(here, name)
  return fs.existsSync(beside) ? beside : path.join(PACKAGE_ROOT, "dist", "services", "plugins", "sandbox", name)
}

/** Node's permission flag: `--permission` where this Node knows it (22.13+), else the experimental one. */
const permissionFlag = (): string =>
  process.allowedNodeEnvironmentFlags.has("--permission") ? "--permission" : "--experimental-permission"

/** What every sandbox process reads besides its own folder: the sandbox's code and the packages it loads (QuickJS). */
export const sandboxReads = (script: string): Array<string> => [
  path.dirname(script),
  path.join(PACKAGE_ROOT, "node_modules"),
  path.join(PACKAGE_ROOT, "package.json")
]

/**
 * The flags that confine a process: the paths it may read (`*`: any), where it may write, whether
 * it may start processes. Nothing else: no addon, no worker.
 */
export const confinementArgs = (
  reads: ReadonlyArray<string>,
  options: { readonly write?: string; readonly childProcess?: boolean } = {}
): Array<string> => {
  // Each path once: Node 20 aborts on a path given twice (an assertion in its permission tree).
  // Node checks both the path given and the real one it resolves to: a symlinked node_modules (a worktree, pnpm) is allowed at both.
  const real = (r: string) => {
    try {
      return fs.realpathSync(r)
    } catch {
      return path.resolve(r)
    }
  }
  const args = [
    permissionFlag(),
    ...[...new Set(reads.flatMap((r) => (r === "*" ? [r] : [path.resolve(r), real(r)])))].map((r) => `--allow-fs-read=${r}`)
  ]
  if (options.write !== undefined) args.push(`--allow-fs-write=${options.write}`)
  if (options.childProcess === true) args.push("--allow-child-process")
  return args
}

/** A process's resident memory in bytes (Linux /proc), or undefined where it cannot be read. */
const residentBytes = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return m ? Number(m[1]) * 1024 : undefined
  } catch {
    return undefined
  }
}

export interface SandboxChild {
  readonly child: ChildProcess
  /** Resolves with the exit code (or signal) once the process is gone. */
  readonly exited: Promise<number | string | null>
  /** Whether the memory watch stopped it. */
  readonly overLimit: () => boolean
  /** The last lines Node wrote to stderr (its own failures: the sandbox's code writes there nothing of the guest's). */
  readonly stderr: () => string
  readonly kill: () => Promise<void>
}

/**
 * Starts `script` confined by `args`, with an IPC channel, in `cwd`, with `env`; kills it when its
 * resident memory passes `memoryLimitBytes`. The limit is watched from here: code allocating in a
 * tight loop runs few bytecodes per megabyte, and QuickJS looks at its interrupt handler only every
 * ten thousand of them.
 */
export const spawnSandbox = (
  script: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv; readonly memoryLimitBytes: number }
): SandboxChild => {
  const child = spawn(process.execPath, [...args, "--no-warnings", script], {
    stdio: ["ignore", "ignore", "pipe", "ipc"],
    env: options.env,
    cwd: options.cwd
  })
  let stderr = ""
  child.stderr?.on("data", (d: Buffer) => {
    if (stderr.length < 8192) stderr += d.toString("utf8")
  })
  const exited = new Promise<number | string | null>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)))
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    await exited
  }
  let overLimit = false
  const watch = setInterval(() => {
    const rss = residentBytes(child.pid)
    if (rss !== undefined && rss > options.memoryLimitBytes) {
      overLimit = true
      void kill()
    }
  }, 200)
  watch.unref()
  exited.then(() => clearInterval(watch))
  return { child, exited, kill, overLimit: () => overLimit, stderr: () => stderr.trim().split("\n").slice(-3).join(" ") }
}
