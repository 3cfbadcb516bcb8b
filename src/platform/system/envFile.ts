import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseEnv } from "node:util"
import type { ProviderSpec } from "../../domain/catalog/modelSpec.js"

/**
 * The env file: `GATEWAY_ENV_FILE`, else `./.env`, loaded at start; its snapshots and their repair are here too
 * (docs/operations.md#the-env-file-and-its-repair). Synchronous: it runs at start, in the CLI and in two management handlers.
 */
export const envFilePath = (env: NodeJS.ProcessEnv = process.env): string => path.resolve(env.GATEWAY_ENV_FILE?.trim() || ".env")

export const backupDir = (dataDir: string): string => path.join(dataDir, "env-backups")

/** Snapshots kept; the oldest beyond this are deleted when a new one is taken. */
export const ENV_BACKUPS_KEPT = 20

export const readEnvText = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

/** The variables of an env file's text (`KEY=value`, comments, quotes, `export` prefixes as Node reads them). */
export const parseEnvText = (text: string): Record<string, string> =>
  parseEnv(text.replace(/^\s*export\s+/gm, "")) as Record<string, string>

export const readEnvFile = (file: string): Record<string, string> => {
  const text = readEnvText(file)
  return text === undefined ? {} : parseEnvText(text)
}

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

/** A value as an env line: quoted when it holds anything a reader would take apart. */
const quote = (value: string): string => (/^[A-Za-z0-9_./:@+,=-]*$/.test(value) ? value : JSON.stringify(value))

/** The env text with `name` set to `value` (the line replaced where it was, else appended). */
export const withVariable = (text: string, name: string, value: string): string => {
  const line = `${name}=${quote(value)}`
  const pattern = new RegExp(`^\\s*(export\\s+)?${name}\\s*=.*$`, "m")
  if (pattern.test(text)) return text.replace(pattern, line)
  return `${text}${text === "" || text.endsWith("\n") ? "" : "\n"}${line}\n`
}

/** Writes a file atomically: a temporary file beside it, then a rename (mode 0600: it holds secrets). */
export const writeAtomically = (file: string, text: string): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString("hex")}.tmp`
  fs.writeFileSync(tmp, text, { mode: 0o600 })
  fs.renameSync(tmp, file)
}

export interface EnvBackup {
  readonly file: string
  readonly createdAt: number
}

/** Snapshots, newest first. */
export const listBackups = (dataDir: string): ReadonlyArray<EnvBackup> => {
  const dir = backupDir(dataDir)
  let names: Array<string>
  try {
    names = fs.readdirSync(dir).filter((n) => /^env-\d+-\d+\.bak$/.test(n))
  } catch {
    return []
  }
  return names
    .map((n) => ({ file: path.join(dir, n), createdAt: Number(n.split("-")[1]), seq: Number(n.split("-")[2]!.split(".")[0]) }))
    .sort((a, b) => b.createdAt - a.createdAt || b.seq - a.seq)
    .map(({ file, createdAt }) => ({ file, createdAt }))
}

/**
 * Copies the env file's current text to `DATA_DIR/env-backups/env-<ms>-<n>.bak` (0600), unless
 * it is missing, empty, or the same as the newest snapshot; keeps the newest ENV_BACKUPS_KEPT.
 * Answers the snapshot's path, or undefined when none was needed.
 */
export const snapshotEnvFile = (file: string, dataDir: string, now = Date.now()): string | undefined => {
  const text = readEnvText(file)
  if (text === undefined || text.trim() === "") return undefined
  const backups = listBackups(dataDir)
  if (backups[0] && readEnvText(backups[0].file) === text) return undefined
  const dir = backupDir(dataDir)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  let n = 0
  let target = path.join(dir, `env-${now}-${n}.bak`)
  while (fs.existsSync(target)) target = path.join(dir, `env-${now}-${++n}.bak`)
  fs.writeFileSync(target, text, { mode: 0o600 })
  for (const old of listBackups(dataDir).slice(ENV_BACKUPS_KEPT)) fs.rmSync(old.file, { force: true })
  return target
}

/** Sets one variable: snapshots the previous file, then writes the new one atomically. */
export const setEnvVariable = (file: string, dataDir: string, name: string, value: string): { readonly backup: string | undefined } => {
  const backup = snapshotEnvFile(file, dataDir)
  writeAtomically(file, withVariable(readEnvText(file) ?? "", name, value))
  return { backup }
}

/** The variables a provider reads from the environment: `<ID>_API_KEY` (when it takes a key) and `<ID>_BASE_URL`. */
export const providerEnvVars = (provider: ProviderSpec): ReadonlyArray<string> => {
  const id = provider.id.toUpperCase().replace(/[^A-Z0-9]+/g, "_")
  return [...(provider.requiresApiKey ? [`${id}_API_KEY`] : []), `${id}_BASE_URL`]
}

export interface RepairResult {
  readonly repaired: ReadonlyArray<string>
  readonly backupPath: string | null
}

/**
 * Restores `names` missing (absent or empty) from the env file, each from the newest snapshot
 * that has it. Takes a snapshot of the file first when anything changes; the write is atomic.
 * `backupPath` is the snapshot the values came from (the newest one used), null when nothing
 * was missing or no snapshot held what was.
 */
export const repairEnvFile = (file: string, dataDir: string, names: ReadonlyArray<string>): RepairResult => {
  const current = readEnvFile(file)
  const missing = names.filter((n) => !current[n])
  if (missing.length === 0) return { repaired: [], backupPath: null }
  const restored: Array<[string, string]> = []
  let source: string | null = null
  for (const name of missing) {
    for (const b of listBackups(dataDir)) {
      const value = readEnvFile(b.file)[name]
      if (value) {
        restored.push([name, value])
        source ??= b.file
        break
      }
    }
  }
  if (restored.length === 0) return { repaired: [], backupPath: null }
  snapshotEnvFile(file, dataDir)
  let text = readEnvText(file) ?? ""
  for (const [name, value] of restored) text = withVariable(text, name, value)
  writeAtomically(file, text)
  return { repaired: restored.map(([n]) => n), backupPath: source }
}

/** A fingerprint of the env file's text (restart needed when it changed since start). */
export const envFingerprint = (file: string): string =>
  crypto
    .createHash("sha256")
    .update(readEnvText(file) ?? "")
    .digest("hex")

/** Variable names whose values are secrets (masked on show). */
export const isSecretName = (name: string): boolean => /KEY|SECRET|TOKEN|PASSWORD|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE/i.test(name)

/** A secret for display: its last 4 characters at most, never the whole value. */
export const maskValue = (value: string): string => (value.length <= 8 ? "****" : `****${value.slice(-4)}`)
