import * as os from "node:os"
import * as path from "node:path"

/**
 * What a coding tool's module knows: where its configuration lives, how to write this gateway
 * into it (merging into what is there), how to read the gateway settings back, and how to
 * start it pointed at the gateway without writing anything. Modules are pure: files come in
 * and go out as text; src/management/clitools/plan.ts does the reading, backups and writing.
 */

/** Where tools look for their files: a home directory and the environment (CODEX_HOME, XDG_CONFIG_HOME, ...). */
export interface ToolEnv {
  readonly home: string
  readonly vars: Readonly<Record<string, string | undefined>>
}

/** The gateway a tool is pointed at. */
export interface Target {
  /** The gateway's root URL, no trailing slash and no `/v1`. */
  readonly baseUrl: string
  readonly apiKey: string
  /** The default model. */
  readonly model: string
  /** Chat models of the gateway's catalog, for tools that list models in their configuration. */
  readonly models: ReadonlyArray<string>
  /** Also switch off the tool's update checks, telemetry and other calls home. */
  readonly offline: boolean
}

/** The gateway-related settings found in a tool's files (null: not set). */
export interface CurrentSettings {
  readonly baseUrl: string | null
  readonly apiKey: string | null
  readonly apiKeyEnv: string | null
  readonly model: string | null
}

export type Files = ReadonlyMap<string, string | undefined>

export interface Launch {
  readonly env: Readonly<Record<string, string>>
  /** Put before the user's arguments. */
  readonly args: ReadonlyArray<string>
  /** Files to create in a private temporary directory for this run only (name → content). */
  readonly tempFiles?: Readonly<Record<string, string>>
}

export interface ToolModule {
  readonly id: string
  /** Whether the key is written into the files (else the user sets it in the environment: `userEnv`). */
  readonly keyInFiles: boolean
  /** Absolute paths of the files setup writes, primary first. */
  readonly files: (env: ToolEnv) => ReadonlyArray<string>
  /** New content of the files that change, from their current content (throws ConfigParseError). */
  readonly render: (env: ToolEnv, current: Files, target: Target) => ReadonlyArray<{ readonly path: string; readonly content: string }>
  readonly read: (env: ToolEnv, current: Files) => CurrentSettings
  /** Environment the user has to set for the tool after setup (empty: the files are enough). */
  readonly userEnv: (target: Target) => Readonly<Record<string, string>>
  /** How `gateway launch` starts the tool; `tempDir` is where `tempFiles` will be. */
  readonly launch: (target: Target, tempDir: string) => Launch
  /** What the user should know after setup. */
  readonly notes: ReadonlyArray<string>
}

/** A configuration file that exists but cannot be parsed: setup refuses to touch it. */
export class ConfigParseError extends Error {
  constructor(
    readonly file: string,
    detail: string
  ) {
    super(`cannot read ${file}: ${detail.split("\n")[0]?.slice(0, 200)}; fix or move the file and run setup again`)
  }
}

/** `<dir>` from an environment variable when set (non-empty), else `fallback`. */
export const dirFrom = (env: ToolEnv, name: string, fallback: string): string => {
  const v = env.vars[name]?.trim()
  return v ? path.resolve(v) : fallback
}

/** `$XDG_CONFIG_HOME` or `~/.config`. */
export const xdgConfig = (env: ToolEnv): string => dirFrom(env, "XDG_CONFIG_HOME", path.join(env.home, ".config"))

export const processToolEnv = (): ToolEnv => ({ home: process.env.HOME?.trim() || os.homedir(), vars: process.env })

/** `http://host:port/v1` → `http://host:port` (the gateway root). */
export const gatewayRoot = (url: string): string => url.replace(/\/+$/, "").replace(/\/v1$/, "")

type Json = Record<string, unknown>

export const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** A JSON object file (absent or empty: `{}`); anything else is a ConfigParseError. */
export const parseJsonObject = (file: string, text: string | undefined): Json => {
  if (text === undefined || text.trim() === "") return {}
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    throw new ConfigParseError(file, `not valid JSON (${(e as Error).message}); comments are not supported`)
  }
  if (!isObject(value)) throw new ConfigParseError(file, "the top level is not a JSON object")
  return value
}

/** `obj.a.b` as an object, created (or replaced when not an object) on the way. */
export const objectAt = (obj: Json, ...keys: ReadonlyArray<string>): Json => {
  let at = obj
  for (const k of keys) {
    const next = at[k]
    if (!isObject(next)) at[k] = {}
    at = at[k] as Json
  }
  return at
}

/** `obj.a.b` when it is a non-empty string. */
export const stringAt = (obj: unknown, ...keys: ReadonlyArray<string>): string | null => {
  let at: unknown = obj
  for (const k of keys) {
    if (!isObject(at)) return null
    at = at[k]
  }
  return typeof at === "string" && at !== "" ? at : null
}

export const jsonText = (obj: Json): string => `${JSON.stringify(obj, null, 2)}\n`

/** Parses `KEY=value` lines (quotes removed; comments and blank lines ignored). */
export const parseDotenv = (text: string | undefined): Map<string, string> => {
  const out = new Map<string, string>()
  for (const line of (text ?? "").split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line)
    if (!m) continue
    let v = m[2] ?? ""
    if ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))) v = v.slice(1, -1)
    out.set(m[1]!, v)
  }
  return out
}

/** Sets `values` in dotenv text: lines of those keys are replaced in place, new ones appended; the rest is kept. */
export const mergeDotenv = (text: string | undefined, values: Readonly<Record<string, string>>): string => {
  const wanted = new Map(Object.entries(values))
  const done = new Set<string>()
  const lines = (text ?? "").split(/\r?\n/)
  if (lines[lines.length - 1] === "") lines.pop()
  const out = lines.map((line) => {
    const key = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=/.exec(line)?.[1]
    if (key === undefined || !wanted.has(key)) return line
    done.add(key)
    return `${key}=${wanted.get(key)}`
  })
  for (const [k, v] of wanted) if (!done.has(k)) out.push(`${k}=${v}`)
  return `${out.join("\n")}\n`
}
