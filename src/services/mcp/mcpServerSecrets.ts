/**
 * What of an MCP server's record is secret, and how it is kept out of what the gateway shows
 * and records (docs/mcp.md, "Secrets"): env and header values are masked by field in listings;
 * the same values, and the credentials a url or a command line carries, are also scrubbed by
 * value from everything recorded about the server (health reasons, logs, inspector entries,
 * audit entries, webhook payloads), since a server may echo its own environment or print a
 * token on its stderr.
 */
import type { McpServerRecord } from "../../domain/mcpServers.js"
import { maskSecret, redactText, secretScrubber } from "../../kernel/redact.js"

/** A query parameter or command-line flag whose value is a credential by its name. */
const SECRET_NAME = /(key|token|secret|password|passwd|pwd|auth|credential|signature|sig)$/i
/** `--api-key`, `-token`, `--client_secret`: a flag whose next argument is its value. */
const SECRET_FLAG = /^--?[A-Za-z0-9_-]*(key|token|secret|password|passwd|auth|credential)$/i
/** `--api-key=value`. */
const SECRET_FLAG_WITH_VALUE = /^(--?[A-Za-z0-9_-]*(?:key|token|secret|password|passwd|auth|credential))=(.+)$/i

/** The url's credentials: its password and the values of query parameters named like credentials. */
const urlSecrets = (raw: string | null): Array<string> => {
  if (raw === null) return []
  try {
    const u = new URL(raw)
    const out: Array<string> = []
    if (u.password !== "") out.push(decodeURIComponent(u.password))
    for (const [name, value] of u.searchParams) if (value !== "" && SECRET_NAME.test(name)) out.push(value)
    return out
  } catch {
    return []
  }
}

/** Which of `args` are credentials: the argument after a credential flag, and the value of `--flag=value`. */
const argSecrets = (args: ReadonlyArray<string>): Array<string> => {
  const out: Array<string> = []
  args.forEach((a, i) => {
    const inline = SECRET_FLAG_WITH_VALUE.exec(a)
    if (inline) out.push(inline[2]!)
    else if (i > 0 && SECRET_FLAG.test(args[i - 1]!)) out.push(a)
  })
  return out
}

/** Every secret value of a record: env and header values, the url's credentials, credential arguments. */
export const secretValuesOf = (r: McpServerRecord): ReadonlyArray<string> => [
  ...Object.values(r.env),
  ...Object.values(r.headers),
  ...urlSecrets(r.url),
  ...argSecrets(r.args)
]

// Records are replaced whole on every change of the registry, so a scrubber made for one stays right for it.
const scrubbers = new WeakMap<McpServerRecord, (text: string) => string>()

/** A scrubber of `r`'s secrets (and of anything shaped like a credential), made once per record. */
export const scrubberOf = (r: McpServerRecord | undefined): ((text: string) => string) => {
  if (r === undefined) return redactText
  let scrub = scrubbers.get(r)
  if (scrub === undefined) {
    scrub = secretScrubber(secretValuesOf(r))
    scrubbers.set(r, scrub)
  }
  return scrub
}

/** The url as listings show it: its password and its credential-named query values masked. */
export const maskUrl = (raw: string | null): string | null => {
  if (raw === null) return null
  let u: URL
  try {
    u = new URL(raw)
  } catch {
    return raw
  }
  let changed = false
  if (u.password !== "") {
    u.password = "****"
    changed = true
  }
  for (const [name, value] of [...u.searchParams]) {
    if (value !== "" && SECRET_NAME.test(name)) {
      u.searchParams.set(name, maskSecret(value))
      changed = true
    }
  }
  return changed ? u.toString() : raw
}

/** The arguments as listings show them: credential values masked, and anything shaped like a key. */
export const maskArgs = (args: ReadonlyArray<string>): Array<string> =>
  args.map((a, i) => {
    const inline = SECRET_FLAG_WITH_VALUE.exec(a)
    if (inline) return `${inline[1]}=${maskSecret(inline[2]!)}`
    if (i > 0 && SECRET_FLAG.test(args[i - 1]!)) return maskSecret(a)
    return redactText(a)
  })

/** An update's url: the masked form of the stored one (a listing sent back) keeps the stored url. */
export const unmaskUrl = (given: string | null, stored: string | null): string | null =>
  given !== null && stored !== null && given !== stored && given === maskUrl(stored) ? stored : given

/** An update's arguments: each one that is the masked form of the stored one at its place keeps the stored one. */
export const unmaskArgs = (given: ReadonlyArray<string>, stored: ReadonlyArray<string>): Array<string> => {
  const masked = maskArgs(stored)
  return given.map((a, i) => (i < stored.length && a !== stored[i] && a === masked[i] ? stored[i]! : a))
}
