import type * as dns from "node:dns"
import * as net from "node:net"
import type { ProxyFamily, ProxyType } from "../../domain/proxies.js"
import type { Resolve } from "../client/egressGuard.js"

/**
 * The egress family policy of spec document 2 ("Egress family policy behavior"), one function
 * per numbered rule. docs/egress.md.
 */

export const PROXY_FAMILY_UNAVAILABLE = "PROXY_FAMILY_UNAVAILABLE"

/** The refusal of rules 3 to 5: status 503, code PROXY_FAMILY_UNAVAILABLE. */
export class ProxyFamilyUnavailable extends Error {
  readonly code = PROXY_FAMILY_UNAVAILABLE
  constructor(message: string) {
    super(message)
    this.name = "ProxyFamilyUnavailable"
  }
}

export const familyNumber = (family: ProxyFamily): 0 | 4 | 6 => (family === "ipv4" ? 4 : family === "ipv6" ? 6 : 0)

const bare = (host: string) => host.replace(/^\[(.*)\]$/, "$1")

/** What a proxy is, whoever stores it (a registry entry, the global settings URL). */
export interface ProxySpec {
  readonly type: ProxyType
  readonly host: string
  readonly port: number
  readonly username: string | null
  readonly password: string | null
  readonly family: ProxyFamily
}

/**
 * Rules 1 and 2: the normalised proxy URL (`scheme://[user:password@]host:port/`), unchanged for
 * `auto`; for `ipv4`/`ipv6` with the marker query `family=<value>` appended once (a URL that
 * already carries a marker gets it replaced, never repeated).
 */
export const proxyUrl = (p: ProxySpec): string => {
  const host = net.isIPv6(bare(p.host)) ? `[${bare(p.host)}]` : p.host
  const auth = p.username
    ? `${encodeURIComponent(p.username)}${p.password !== null ? `:${p.password === "****" ? "****" : encodeURIComponent(p.password)}` : ""}@`
    : ""
  return withFamilyMarker(`${p.type}://${auth}${host}:${p.port}/`, p.family)
}

export const withFamilyMarker = (url: string, family: ProxyFamily): string => {
  if (family === "auto") return url
  const u = new URL(url)
  u.searchParams.delete("family")
  u.searchParams.append("family", family)
  return u.href
}

/** A proxy URL (the global settings proxy) as a spec: socks5/socks5h are `socks5`. */
export const specOfUrl = (url: string, family: ProxyFamily): ProxySpec => {
  const u = new URL(url)
  const type: ProxyType = u.protocol.startsWith("socks") ? "socks5" : u.protocol === "https:" ? "https" : "http"
  return {
    type,
    host: bare(u.hostname),
    port: Number(u.port || (type === "socks5" ? 1080 : type === "https" ? 443 : 80)),
    username: u.username ? decodeURIComponent(u.username) : null,
    password: u.password ? decodeURIComponent(u.password) : null,
    family
  }
}

/** Rule 3: why an IP-literal host contradicts the directive, or undefined. */
export const literalContradiction = (host: string, family: ProxyFamily): string | undefined => {
  const kind = net.isIP(bare(host))
  if (kind === 0 || family === "auto") return undefined
  const wanted = familyNumber(family)
  return kind === wanted ? undefined : `proxy host ${host} is an IPv${kind} address; family ${family} contradicts it`
}

/**
 * Rule 4: for a host name with a pinned family, a record of that family must exist; a lookup
 * failure is refused too. IP literals (checked by rule 3) and `auto` skip the lookup.
 */
export const preflight = async (resolve: Resolve, host: string, family: ProxyFamily): Promise<void> => {
  if (family === "auto" || net.isIP(bare(host)) !== 0) return
  const wanted = familyNumber(family)
  let all: ReadonlyArray<{ readonly family: 4 | 6 }>
  try {
    all = await resolve(host)
  } catch (e) {
    throw new ProxyFamilyUnavailable(
      `proxy host ${host} could not be resolved (${(e as Error).message}); egress pinned to ${family} is refused`
    )
  }
  if (!all.some((a) => a.family === wanted))
    throw new ProxyFamilyUnavailable(`proxy host ${host} has no IPv${wanted} address; egress pinned to ${family} is refused`)
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | Array<dns.LookupAddress>, family?: number) => void
export type LookupFunction = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => void

/**
 * Rule 2 at connect time: the proxy's host name resolved in the pinned family only (no fallback
 * to the other one); no address of that family, or a failed lookup, is PROXY_FAMILY_UNAVAILABLE.
 * `lookup` is the SSRF guard's, so the proxy's own addresses are checked like any upstream's.
 */
export const pinnedLookup =
  (lookup: LookupFunction, family: ProxyFamily): LookupFunction =>
  (hostname, options, callback) => {
    const wanted = familyNumber(family)
    if (wanted === 0) return lookup(hostname, options, callback)
    lookup(hostname, { ...options, family: wanted }, (err, address, fam) => {
      if (err && (err as { code?: string }).code !== "ESSRF_BLOCKED") {
        return callback(
          new ProxyFamilyUnavailable(`proxy host ${hostname} has no usable IPv${wanted} address (${err.message})`),
          options.all ? [] : "",
          0
        )
      }
      callback(err, address, fam)
    })
  }
