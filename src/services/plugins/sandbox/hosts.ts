/**
 * Which hosts a sandboxed script may fetch from: a list of `host:port` entries (a bare host means
 * its scheme's default port, 80 for http and 443 for https; an IPv6 address in brackets), compared
 * with a URL's host and port, names without regard to case. Only http and https.
 */

const ENTRY = /^(\[[0-9a-f:.]+\]|[^\s:/[\]]+)(?::(\d{1,5}))?$/i

const parseEntry = (entry: string): { readonly host: string; readonly port: string | undefined } | undefined => {
  const m = ENTRY.exec(entry.trim())
  return m === null || Number(m[2] ?? 0) > 65535 ? undefined : { host: m[1]!.toLowerCase(), port: m[2] }
}

type Target = { readonly target: string; readonly defaultPort: string } | { readonly refused: string }

/** The URL's `host:port` (its scheme's default port written out), or why it may not be fetched at all. */
export const targetOf = (url: string): Target => {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return { refused: `${JSON.stringify(url)} is not an absolute URL` }
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return { refused: `${u.protocol} URLs cannot be fetched: only http and https` }
  const defaultPort = u.protocol === "https:" ? "443" : "80"
  return { target: `${u.hostname.toLowerCase()}:${u.port || defaultPort}`, defaultPort }
}

/** Whether the URL's host and port are one of `entries`. */
export const hostAllowed = (url: string, entries: ReadonlyArray<string>): boolean => {
  const t = targetOf(url)
  if (!("target" in t)) return false
  return entries.some((entry) => {
    const e = parseEntry(entry)
    return e !== undefined && `${e.host}:${e.port ?? t.defaultPort}` === t.target
  })
}

/** The entries that are neither `host` nor `host:port` (a manifest's mistakes, to report). */
export const badHostEntries = (entries: ReadonlyArray<string>): Array<string> => entries.filter((e) => parseEntry(e) === undefined)
