/**
 * The sessions `gateway login` keeps (docs/sso.md, "The CLI"): one per gateway address, in
 * `sessions.json` of the user's config directory (`GATEWAY_CONFIG_DIR`, else
 * `$XDG_CONFIG_HOME/gateway`, else `~/.config/gateway`), the directory 0700 and the file 0600. The
 * remote commands send a session as the `gw_session` cookie with its CSRF token, when no admin
 * key is given.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

export interface StoredSession {
  readonly session: string
  readonly csrfToken: string
  readonly expiresAt: string
  readonly provider: string
  readonly user: { readonly id: string; readonly email: string; readonly name: string; readonly role: string }
}

export const configDir = (env: NodeJS.ProcessEnv = process.env): string => {
  const own = env.GATEWAY_CONFIG_DIR?.trim()
  if (own) return path.resolve(own)
  const xdg = env.XDG_CONFIG_HOME?.trim()
  return path.join(xdg ? path.resolve(xdg) : path.join(env.HOME?.trim() || os.homedir(), ".config"), "gateway")
}

export const sessionsFile = (env: NodeJS.ProcessEnv = process.env): string => path.join(configDir(env), "sessions.json")

/** The gateway's address as sessions are keyed: no trailing slash. */
const keyOf = (url: string) => url.replace(/\/+$/, "")

const readAll = (file: string): Record<string, StoredSession> => {
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as unknown
    return parsed !== null && typeof parsed === "object" ? (parsed as Record<string, StoredSession>) : {}
  } catch {
    return {}
  }
}

const writeAll = (file: string, all: Record<string, StoredSession>) => {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString("hex")}.tmp`
  fs.writeFileSync(tmp, `${JSON.stringify(all, null, 2)}\n`, { mode: 0o600 })
  fs.renameSync(tmp, file)
  fs.chmodSync(file, 0o600)
}

/** The session kept for `url`, unless it expired. */
export const loadSession = (url: string): StoredSession | undefined => {
  const s = readAll(sessionsFile())[keyOf(url)]
  return s !== undefined && Date.parse(s.expiresAt) > Date.now() ? s : undefined
}

export const saveSession = (url: string, session: StoredSession): string => {
  const file = sessionsFile()
  writeAll(file, { ...readAll(file), [keyOf(url)]: session })
  return file
}

/** Forgets the session of `url`; whether there was one. */
export const forgetSession = (url: string): boolean => {
  const file = sessionsFile()
  const all = readAll(file)
  if (all[keyOf(url)] === undefined) return false
  const { [keyOf(url)]: _, ...rest } = all
  writeAll(file, rest)
  return true
}

/** The headers a kept session authenticates with: the cookie, and the CSRF token writes need. */
export const sessionHeaders = (s: StoredSession): Record<string, string> => ({
  cookie: `gw_session=${s.session}`,
  "x-csrf-token": s.csrfToken
})
