/**
 * The system-proxy mode's edits: GNOME's proxy settings (gsettings) and the shells' environment pointed at the HTTP proxy. The prior
 * state is recorded before the first change, a failed step undoes the others, `recover()` reverts what a crashed run left, and revert
 * removes exactly the blocks appended. The guard timer and the SIGTERM hook are the caller's (docs/inspector.md#4-system-proxy).
 */
import { execFile } from "node:child_process"
import { appendFile, chown, lstat, mkdir, readFile, rmdir, stat, unlink, writeFile } from "node:fs/promises"
import * as path from "node:path"

/** Where the proxy listens; only a loopback address is accepted (nothing may leave the machine). */
export interface ProxyTarget {
  readonly host: string
  readonly port: number
}

/** One gsettings key the mode set, with the value it had (GVariant text as `gsettings get` prints it). */
export interface SavedGsetting {
  readonly schema: string
  readonly key: string
  readonly previous: string
  readonly value: string
}

/**
 * A file the mode writes. `env`: the whole file is ours (`previous` is what it held before, null
 * when it did not exist). `rc`: a shell start file we append `appended` to; `previous` is its
 * exact content when it was small enough to keep (null otherwise; "" when it did not exist).
 */
export type SavedFile =
  | { readonly kind: "env"; readonly path: string; readonly existed: boolean; readonly previous: string | null; readonly written: string }
  | { readonly kind: "rc"; readonly path: string; readonly existed: boolean; readonly previous: string | null; readonly appended: string }

/** What the caller persists: enough to undo every change, whatever point a crash interrupted. */
export interface SavedState {
  readonly version: 1
  /** `applying`: saved before the first change; `applied`: all changes made; `reverting`: a revert left the entries below to retry. */
  readonly phase: "applying" | "applied" | "reverting"
  /** Epoch ms. */
  readonly appliedAt: number
  readonly proxy: ProxyTarget
  readonly home: string
  readonly gsettings: ReadonlyArray<SavedGsetting>
  readonly files: ReadonlyArray<SavedFile>
  /** Directories the mode created (outermost first); removed on revert when empty. */
  readonly createdDirs: ReadonlyArray<string>
}

export interface SystemProxyStore {
  readonly load: () => Promise<SavedState | undefined>
  readonly save: (state: SavedState) => Promise<void>
  readonly clear: () => Promise<void>
}

export type RunResult = { readonly code: number; readonly stdout: string; readonly stderr: string }
/** Runs a command; rejects when it cannot start (`code: "ENOENT"`: not installed) or times out. */
export type Run = (cmd: string, args: string[]) => Promise<RunResult>

/** One change, as the API shows it to the user. */
export interface Change {
  readonly kind: "gsettings" | "file"
  readonly target: string
  readonly detail: string
}

export interface AppliedState {
  readonly appliedAt: number
  readonly proxy: ProxyTarget
  readonly proxyUrl: string
  readonly changes: ReadonlyArray<Change>
  /** Why something was not changed (gsettings missing or without a desktop session). */
  readonly notes: ReadonlyArray<string>
}

export interface RevertResult {
  /** False when nothing was applied. */
  readonly reverted: boolean
  /** What was put back. */
  readonly changes: ReadonlyArray<Change>
  /** Steps that failed; they stay recorded (phase `reverting`) and the next revert or recover retries them. */
  readonly failures: ReadonlyArray<{ readonly target: string; readonly error: string }>
}

export interface SystemProxyStatus {
  /** True while anything is recorded: applied, or left by a crash or an incomplete revert. */
  readonly applied: boolean
  readonly phase: SavedState["phase"] | null
  readonly appliedAt: number | null
  readonly proxy: ProxyTarget | null
  readonly changes: ReadonlyArray<Change>
}

export interface SystemProxy {
  /** Rejects with `SystemProxyError` "already-applied" while a state is recorded (not idempotent: revert first). */
  readonly apply: (proxy: ProxyTarget) => Promise<AppliedState>
  readonly revert: () => Promise<RevertResult>
  readonly status: () => Promise<SystemProxyStatus>
  /** At start: reverts what a previous run left applied (a crash, a kill). True when something was found. */
  readonly recover: () => Promise<boolean>
}

export class SystemProxyError extends Error {
  constructor(
    readonly code: "already-applied" | "invalid-proxy" | "invalid-home" | "apply-failed",
    message: string
  ) {
    super(message)
    this.name = "SystemProxyError"
  }
}

export const BLOCK_START = "# >>> gateway inspector system proxy >>>"
export const BLOCK_END = "# <<< gateway inspector system proxy <<<"
export const BLOCK = `${BLOCK_START}\n[ -f "$HOME/.config/gateway/proxy.env" ] && . "$HOME/.config/gateway/proxy.env"\n${BLOCK_END}\n`
export const NO_PROXY = "localhost,127.0.0.1,::1"
/** Start files larger than this are not copied into the store; revert then relies on removing the block alone. */
export const MAX_SAVED_CONTENT = 64 * 1024

/** When the guard timer must revert the mode (epoch ms). */
export const guardDeadline = (appliedAt: number, minutes: number): number => appliedAt + minutes * 60_000

const isLoopbackHost = (host: string): boolean =>
  host === "localhost" || host === "::1" || /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.test(host)

export const proxyUrl = (p: ProxyTarget): string => `http://${p.host.includes(":") ? `[${p.host}]` : p.host}:${p.port}`

const gvString = (s: string) => `'${s}'`

/** The keys set, in order, with the value each gets. */
const gsettingsPlan = (p: ProxyTarget): ReadonlyArray<{ schema: string; key: string; value: string }> => [
  { schema: "org.gnome.system.proxy", key: "mode", value: gvString("manual") },
  { schema: "org.gnome.system.proxy.http", key: "host", value: gvString(p.host) },
  { schema: "org.gnome.system.proxy.http", key: "port", value: String(p.port) },
  { schema: "org.gnome.system.proxy.https", key: "host", value: gvString(p.host) },
  { schema: "org.gnome.system.proxy.https", key: "port", value: String(p.port) },
  { schema: "org.gnome.system.proxy", key: "ignore-hosts", value: "['localhost', '127.0.0.0/8', '::1']" }
]

const envVars = (p: ProxyTarget): ReadonlyArray<readonly [string, string]> => {
  const url = proxyUrl(p)
  return [
    ["http_proxy", url],
    ["https_proxy", url],
    ["HTTP_PROXY", url],
    ["HTTPS_PROXY", url],
    ["no_proxy", NO_PROXY],
    ["NO_PROXY", NO_PROXY]
  ]
}

const HEADER = "# Written by the gateway's traffic inspector (system-wide proxy mode); removed when the mode is reverted.\n"

/** `<home>/.config/gateway/proxy.env`, sourced by the block in the shell start files. */
export const shellEnvFile = (p: ProxyTarget): string =>
  HEADER +
  envVars(p)
    .map(([k, v]) => `export ${k}="${v}"\n`)
    .join("")

/** `<home>/.config/environment.d/gateway-proxy.conf`: systemd user sessions read plain `KEY=value` lines. */
export const environmentDFile = (p: ProxyTarget): string =>
  HEADER +
  envVars(p)
    .map(([k, v]) => `${k}=${v}\n`)
    .join("")

/**
 * Removes every marked block from `text`, leaving the other bytes as they were. A block left
 * without its end marker (edited by hand) is kept rather than guessed at. `addedNewline`: apply
 * put a newline before the block (the file did not end with one); it goes too when the block is
 * still the file's end, and stays when the user has written lines after it (they need it).
 */
export const removeBlocks = (text: string, addedNewline = false): string => {
  let out = text
  let from = 0
  for (;;) {
    const start = out.indexOf(BLOCK_START, from)
    if (start < 0) return out
    if (start > 0 && out[start - 1] !== "\n") {
      from = start + BLOCK_START.length
      continue
    }
    const endAt = out.indexOf(BLOCK_END, start)
    if (endAt < 0) return out
    const nl = out.indexOf("\n", endAt)
    const stop = nl < 0 ? out.length : nl + 1
    const atEnd = stop === out.length
    const begin = addedNewline && atEnd && start > 0 && out[start - 1] === "\n" ? start - 1 : start
    out = out.slice(0, begin) + out.slice(stop)
    from = begin
  }
}

const errorCode = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code
const message = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const readOrNull = async (file: string): Promise<string | null> => {
  try {
    return await readFile(file, "utf8")
  } catch (e) {
    if (errorCode(e) === "ENOENT") return null
    throw e
  }
}

const exists = (p: string): Promise<boolean> =>
  lstat(p).then(
    () => true,
    (e) => (errorCode(e) === "ENOENT" ? false : Promise.reject(e))
  )

/** `execFile` with a 5 s timeout; a non-zero exit resolves with its code, a failure to start rejects. */
export const defaultRun: Run = (cmd, args) =>
  new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 5000, encoding: "utf8", windowsHide: true }, (err, stdout, stderr) => {
      if (err === null) return resolve({ code: 0, stdout, stderr })
      if (typeof err.code === "number") return resolve({ code: err.code, stdout, stderr })
      reject(err.killed ? new Error(`${cmd} ${args.join(" ")} timed out`) : err)
    })
  })

export interface SystemProxyOptions {
  /** The home directory edited (INSPECTOR_SYSTEM_PROXY_HOME). */
  readonly home: string
  readonly store: SystemProxyStore
  readonly run?: Run
}

export const makeSystemProxy = (opts: SystemProxyOptions): SystemProxy => {
  const home = path.resolve(opts.home)
  const run = opts.run ?? defaultRun
  const { store } = opts

  // One operation at a time: an apply racing a revert (two API calls, the guard timer) would interleave edits.
  let queue: Promise<unknown> = Promise.resolve()
  const serialized = <A>(fn: () => Promise<A>): Promise<A> => {
    const next = queue.then(fn, fn)
    queue = next.catch(() => undefined)
    return next
  }

  const gsettings = async (args: string[]): Promise<string> => {
    const r = await run("gsettings", args)
    if (r.code !== 0)
      throw new Error(`gsettings ${args.join(" ")} exited with ${r.code}${r.stderr.trim() === "" ? "" : `: ${r.stderr.trim()}`}`)
    return r.stdout.trim()
  }

  /**
   * The previous values of the keys to set, or why gsettings is left alone: not installed, no such
   * schema (no GNOME), or no session bus reachable (gsettings then falls back to a memory backend and
   * a change would be silently lost).
   */
  const readGsettings = async (p: ProxyTarget): Promise<{ saved: SavedGsetting[]; note: string | null }> => {
    const plan = gsettingsPlan(p)
    const first = plan[0]!
    // gsettings writes the settings of the user running it: for another user's home they would land in the wrong account.
    const homeOwner = (await stat(home)).uid
    if (process.getuid !== undefined && homeOwner !== process.getuid())
      return { saved: [], note: `${home} belongs to another user (uid ${homeOwner}): desktop proxy settings left unchanged` }
    let probe: RunResult
    try {
      probe = await run("gsettings", ["get", first.schema, first.key])
    } catch (e) {
      if (errorCode(e) === "ENOENT") return { saved: [], note: "gsettings not found: desktop proxy settings left unchanged" }
      return { saved: [], note: `gsettings unusable (${message(e)}): desktop proxy settings left unchanged` }
    }
    if (probe.code !== 0)
      return {
        saved: [],
        note: `gsettings unusable (${probe.stderr.trim() || `exit ${probe.code}`}): desktop proxy settings left unchanged`
      }
    if (/memory.{0,3} GSettings backend/i.test(probe.stderr))
      return { saved: [], note: "gsettings has no desktop session to write to (memory backend): desktop proxy settings left unchanged" }
    const saved: SavedGsetting[] = [{ ...first, previous: probe.stdout.trim() }]
    for (const k of plan.slice(1)) saved.push({ ...k, previous: await gsettings(["get", k.schema, k.key]) })
    return { saved, note: null }
  }

  const rcFiles = [path.join(home, ".profile"), path.join(home, ".bashrc")]
  const configDir = path.join(home, ".config")
  const gatewayDir = path.join(configDir, "gateway")
  const environmentDir = path.join(configDir, "environment.d")

  /** Records every file before anything is written: existence, and the exact content where it is kept. */
  const readFiles = async (p: ProxyTarget): Promise<SavedFile[]> => {
    const files: SavedFile[] = []
    const envs: ReadonlyArray<readonly [string, string]> = [
      [path.join(gatewayDir, "proxy.env"), shellEnvFile(p)],
      [path.join(environmentDir, "gateway-proxy.conf"), environmentDFile(p)]
    ]
    for (const [file, written] of envs) {
      const previous = await readOrNull(file)
      files.push({ kind: "env", path: file, existed: previous !== null, previous, written })
    }
    for (const file of rcFiles) {
      const content = await readOrNull(file)
      if (content !== null && !(await stat(file)).isFile()) throw new SystemProxyError("invalid-home", `${file} is not a regular file`)
      const current = content ?? ""
      // A block left by an earlier run is reused (and removed on revert) rather than doubled.
      const hasBlock = removeBlocks(current) !== current
      const appended = hasBlock ? "" : (current === "" || current.endsWith("\n") ? "" : "\n") + BLOCK
      const previous = content === null ? "" : Buffer.byteLength(content) <= MAX_SAVED_CONTENT ? content : null
      files.push({ kind: "rc", path: file, existed: content !== null, previous, appended })
    }
    return files
  }

  // Run as root for another user's home: what we create belongs to that user, as if they had written it.
  const owner = async (): Promise<{ uid: number; gid: number } | null> => {
    if (process.getuid?.() !== 0) return null
    const s = await stat(home)
    return s.uid === 0 ? null : { uid: s.uid, gid: s.gid }
  }

  interface Step {
    readonly change: Change
    readonly apply: () => Promise<void>
    readonly undo: () => Promise<Change | null>
  }

  const dirStep = (dir: string, own: { uid: number; gid: number } | null): Step => ({
    change: { kind: "file", target: dir, detail: "directory created" },
    apply: async () => {
      await mkdir(dir)
      if (own !== null) await chown(dir, own.uid, own.gid)
    },
    undo: async () => {
      try {
        await rmdir(dir)
        return { kind: "file", target: dir, detail: "directory removed" }
      } catch (e) {
        // Not empty (the user keeps other files there) or already gone: left as it is, not a failure.
        if (errorCode(e) === "ENOTEMPTY" || errorCode(e) === "EEXIST" || errorCode(e) === "ENOENT") return null
        throw e
      }
    }
  })

  const fileStep = (f: SavedFile, own: { uid: number; gid: number } | null): Step => {
    if (f.kind === "env")
      return {
        change: { kind: "file", target: f.path, detail: f.existed ? "replaced (previous content saved)" : "created" },
        apply: async () => {
          await writeFile(f.path, f.written, { mode: 0o644 })
          if (own !== null && !f.existed) await chown(f.path, own.uid, own.gid)
        },
        undo: async () => {
          if (f.existed && f.previous !== null) {
            await writeFile(f.path, f.previous)
            return { kind: "file", target: f.path, detail: "previous content restored" }
          }
          try {
            await unlink(f.path)
            return { kind: "file", target: f.path, detail: "removed" }
          } catch (e) {
            if (errorCode(e) === "ENOENT") return null
            throw e
          }
        }
      }
    return {
      change: {
        kind: "file",
        target: f.path,
        detail: f.appended === "" ? "proxy block already present" : f.existed ? "proxy block appended" : "created with the proxy block"
      },
      // Appending (not rewriting) leaves the rest of the file alone even if the user saves it at the same moment; a symlinked start file
      // stays a symlink.
      apply: async () => {
        if (f.appended === "") return
        await appendFile(f.path, f.appended)
        if (own !== null && !f.existed) await chown(f.path, own.uid, own.gid)
      },
      undo: async () => {
        const current = await readOrNull(f.path)
        if (current === null) return null
        let next = f.previous !== null && current === f.previous + f.appended ? f.previous : current
        next = removeBlocks(next, f.appended.startsWith("\n"))
        if (!f.existed && next === "") {
          await unlink(f.path)
          return { kind: "file", target: f.path, detail: "removed (created by the proxy mode)" }
        }
        if (next === current) return null
        await writeFile(f.path, next)
        return { kind: "file", target: f.path, detail: "proxy block removed" }
      }
    }
  }

  const gsettingStep = (g: SavedGsetting): Step => ({
    change: { kind: "gsettings", target: `${g.schema} ${g.key}`, detail: `${g.previous} → ${g.value}` },
    apply: async () => void (await gsettings(["set", g.schema, g.key, g.value])),
    undo: async () => {
      await gsettings(["set", g.schema, g.key, g.previous])
      return { kind: "gsettings", target: `${g.schema} ${g.key}`, detail: `restored ${g.previous}` }
    }
  })

  /**
   * The steps of a state, in the order apply makes them: directories, our files, the start files'
   * blocks, then the desktop settings. Every undo copes with its step not having happened, which
   * is what a crash between the save and the last step leaves.
   */
  const steps = (
    s: SavedState,
    own: { uid: number; gid: number } | null
  ): Array<{ step: Step; entry: string | SavedFile | SavedGsetting }> => [
    ...s.createdDirs.map((d) => ({ step: dirStep(d, own), entry: d })),
    ...s.files.filter((f) => f.kind === "env").map((f) => ({ step: fileStep(f, own), entry: f })),
    ...s.files.filter((f) => f.kind === "rc").map((f) => ({ step: fileStep(f, own), entry: f })),
    ...s.gsettings.map((g) => ({ step: gsettingStep(g), entry: g }))
  ]

  /** Undoes the given steps in reverse order, going on past failures. */
  const undoAll = async (list: ReadonlyArray<{ step: Step; entry: string | SavedFile | SavedGsetting }>) => {
    const changes: Change[] = []
    const failures: Array<{ target: string; error: string }> = []
    const failed = new Set<unknown>()
    for (const { step, entry } of [...list].reverse()) {
      try {
        const c = await step.undo()
        if (c !== null) changes.push(c)
      } catch (e) {
        failures.push({ target: step.change.target, error: message(e) })
        failed.add(entry)
      }
    }
    return { changes, failures, failed }
  }

  /** Keeps only the failed entries recorded, so a later revert or recover retries just those. */
  const settle = async (s: SavedState, failed: Set<unknown>, failures: Array<{ target: string; error: string }>) => {
    try {
      if (failed.size === 0) await store.clear()
      else
        await store.save({
          ...s,
          phase: "reverting",
          createdDirs: s.createdDirs.filter((d) => failed.has(d)),
          files: s.files.filter((f) => failed.has(f)),
          gsettings: s.gsettings.filter((g) => failed.has(g))
        })
    } catch (e) {
      failures.push({ target: "store", error: message(e) })
    }
  }

  const apply = (proxy: ProxyTarget): Promise<AppliedState> =>
    serialized(async () => {
      if (!isLoopbackHost(proxy.host))
        throw new SystemProxyError(
          "invalid-proxy",
          `the proxy host must be a loopback address (127.0.0.0/8, ::1, localhost), not ${JSON.stringify(proxy.host)}`
        )
      if (!Number.isInteger(proxy.port) || proxy.port < 1 || proxy.port > 65535)
        throw new SystemProxyError("invalid-proxy", `invalid proxy port ${proxy.port}`)
      const recorded = await store.load()
      if (recorded !== undefined)
        throw new SystemProxyError(
          "already-applied",
          recorded.phase === "applied"
            ? `the system proxy is already applied (since ${new Date(recorded.appliedAt).toISOString()}): revert it first`
            : "a previous system proxy state is still recorded (interrupted apply or revert): revert it first"
        )
      const homeStat = await stat(home).catch(() => null)
      if (homeStat === null || !homeStat.isDirectory()) throw new SystemProxyError("invalid-home", `home directory ${home} does not exist`)
      const target = { host: proxy.host, port: proxy.port }

      // Everything is read first and recorded before the first change.
      const { saved: gsaved, note } = await readGsettings(target)
      const files = await readFiles(target)
      const createdDirs: string[] = []
      for (const d of [configDir, gatewayDir, environmentDir]) if (!(await exists(d))) createdDirs.push(d)
      const state: SavedState = {
        version: 1,
        phase: "applying",
        appliedAt: Date.now(),
        proxy: target,
        home,
        gsettings: gsaved,
        files,
        createdDirs
      }
      await store.save(state)

      const own = await owner().catch(() => null)
      const list = steps(state, own)
      let done = 0
      try {
        for (const { step } of list) {
          done++
          await step.apply()
        }
        await store.save({ ...state, phase: "applied" })
      } catch (e) {
        // The failed step is undone too: a write may have got halfway.
        const { failures, failed } = await undoAll(list.slice(0, done))
        await settle(state, failed, failures)
        const left =
          failures.length === 0
            ? ""
            : `; undoing it failed for ${failures.map((f) => `${f.target} (${f.error})`).join(", ")}, kept recorded for revert`
        throw new SystemProxyError("apply-failed", `applying the system proxy failed: ${message(e)}${left}`)
      }
      return {
        appliedAt: state.appliedAt,
        proxy: target,
        proxyUrl: proxyUrl(target),
        changes: list.map(({ step }) => step.change),
        notes: note === null ? [] : [note]
      }
    })

  const revertRecorded = async (): Promise<RevertResult> => {
    const s = await store.load()
    if (s === undefined) return { reverted: false, changes: [], failures: [] }
    const { changes, failures, failed } = await undoAll(steps(s, null))
    await settle(s, failed, failures)
    return { reverted: true, changes, failures }
  }

  const revert = (): Promise<RevertResult> => serialized(revertRecorded)

  const status = async (): Promise<SystemProxyStatus> => {
    const s = await store.load()
    if (s === undefined) return { applied: false, phase: null, appliedAt: null, proxy: null, changes: [] }
    return { applied: true, phase: s.phase, appliedAt: s.appliedAt, proxy: s.proxy, changes: steps(s, null).map(({ step }) => step.change) }
  }

  const recover = (): Promise<boolean> => serialized(async () => (await revertRecorded()).reverted)

  return { apply, revert, status, recover }
}
