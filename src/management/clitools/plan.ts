import * as fs from "node:fs/promises"
import * as path from "node:path"
import type { CurrentSettings, Files, Target, ToolEnv, ToolModule } from "./tool.js"

/**
 * Reading and writing a tool's files for `gateway setup-<tool>` and
 * `POST /api/cli-tools/{tool}-settings` alike: the module renders the new content from the
 * current one, and only files whose content changes are written, each after a timestamped
 * backup of what it replaces, through a temporary file renamed into place (mode 0600: they
 * hold the gateway key). A symlinked file is written where the link points.
 */

export interface FileChange {
  readonly path: string
  readonly before: string | undefined
  readonly after: string
}

export interface Written {
  readonly path: string
  readonly backup: string | null
}

const readText = async (file: string): Promise<string | undefined> => {
  try {
    return await fs.readFile(file, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw e
  }
}

export const readFiles = async (paths: ReadonlyArray<string>): Promise<Files> =>
  new Map(await Promise.all(paths.map(async (p) => [p, await readText(p)] as const)))

/** What setup would change (files whose content is already right are left out). */
export const planSetup = async (module: ToolModule, env: ToolEnv, target: Target): Promise<ReadonlyArray<FileChange>> => {
  const current = await readFiles(module.files(env))
  return module
    .render(env, current, target)
    .map((r) => ({ path: r.path, before: current.get(r.path), after: r.content }))
    .filter((c) => c.before !== c.after)
}

/** `20261123T122300123Z`: sorts by time, no characters a file system dislikes. */
const stamp = (now: Date) => now.toISOString().replace(/[-:.]/g, "")

const exists = (p: string) =>
  fs.lstat(p).then(
    () => true,
    () => false
  )

const backupName = async (file: string, now: Date): Promise<string> => {
  const base = `${file}.bak-${stamp(now)}`
  for (let i = 0; ; i++) {
    const candidate = i === 0 ? base : `${base}-${i}`
    if (!(await exists(candidate))) return candidate
  }
}

/** Where writing `file` really lands: the target of a symlink, else the file. */
const realTarget = async (file: string): Promise<string> => {
  try {
    return await fs.realpath(file)
  } catch {
    return file
  }
}

/** Writes the changes; an existing file is first copied to `<file>.bak-<timestamp>`. */
export const applyChanges = async (changes: ReadonlyArray<FileChange>, now = new Date()): Promise<ReadonlyArray<Written>> => {
  const written: Array<Written> = []
  for (const change of changes) {
    const target = await realTarget(change.path)
    await fs.mkdir(path.dirname(target), { recursive: true, mode: 0o700 })
    let backup: string | null = null
    if (change.before !== undefined) {
      backup = await backupName(change.path, now)
      await fs.writeFile(backup, change.before, { mode: 0o600, flag: "wx" })
    }
    const tmp = `${target}.tmp-${process.pid}-${Date.now()}`
    await fs.writeFile(tmp, change.after, { mode: 0o600 })
    await fs.rename(tmp, target)
    written.push({ path: change.path, backup })
  }
  return written
}

export interface ToolState {
  readonly settings: CurrentSettings
  /** Whether any of the tool's files exists. */
  readonly exists: boolean
  /** Modification time (ms) of each file that exists: the status cache's key. */
  readonly mtimes: ReadonlyArray<readonly [string, number]>
}

const mtimeOf = (p: string) =>
  fs.stat(p).then(
    (s) => s.mtimeMs,
    () => undefined
  )

/** The files' modification times, a cheap key for "did the configuration change". */
export const mtimesOf = async (paths: ReadonlyArray<string>): Promise<ReadonlyArray<readonly [string, number]>> => {
  const times = await Promise.all(paths.map(async (p) => [p, await mtimeOf(p)] as const))
  return times.filter((t): t is readonly [string, number] => t[1] !== undefined)
}

/** The gateway settings in a tool's files now (throws ConfigParseError on a file it cannot parse). */
export const readToolState = async (module: ToolModule, env: ToolEnv): Promise<ToolState> => {
  const paths = module.files(env)
  const [current, mtimes] = await Promise.all([readFiles(paths), mtimesOf(paths)])
  return { settings: module.read(env, current), exists: mtimes.length > 0, mtimes }
}
