import * as net from "node:net"
import { BoundedMap } from "../../kernel/BoundedMap.js"

export type HostClass = "loopback" | "lan" | "private" | "metadata" | "public"

export interface UrlPolicyFlags {
  /** OUTBOUND_SSRF_GUARD_ENABLED: when off, every address is allowed. */
  readonly guard: boolean
  /** GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: loopback and LAN (RFC 1918, IPv6 unique-local). */
  readonly allowLocal: boolean
  /** GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS: the remaining non-public ranges. */
  readonly allowPrivate: boolean
}

/** The eight possible policies, made once: `urlPolicyFlags` hands out one of them, so reading the flags per request allocates nothing. */
const POLICIES: ReadonlyArray<UrlPolicyFlags> = Array.from({ length: 8 }, (_, i) =>
  Object.freeze({ guard: (i & 4) !== 0, allowLocal: (i & 2) !== 0, allowPrivate: (i & 1) !== 0 })
)

/** A policy's place in `POLICIES` (and in the verdict caches). */
const policyIndex = (flags: UrlPolicyFlags): number => (flags.guard ? 4 : 0) | (flags.allowLocal ? 2 : 0) | (flags.allowPrivate ? 1 : 0)

/** The policy of these three flags: a shared, frozen object (the same one for the same flags). */
export const urlPolicyFlags = (guard: boolean, allowLocal: boolean, allowPrivate: boolean): UrlPolicyFlags =>
  POLICIES[(guard ? 4 : 0) | (allowLocal ? 2 : 0) | (allowPrivate ? 1 : 0)]!

const METADATA_HOSTS = new Set(["169.254.169.254", "169.254.170.2", "100.100.100.200", "metadata.google.internal", "metadata"])

const v4ToInt = (ip: string): number => ip.split(".").reduce((acc, part) => (acc << 8) + Number(part), 0) >>> 0

const inV4 = (ip: number, cidr: string): boolean => {
  const [base, bits] = cidr.split("/") as [string, string]
  const mask = Number(bits) === 0 ? 0 : (~0 << (32 - Number(bits))) >>> 0
  return (ip & mask) === (v4ToInt(base) & mask)
}

const classifyV4 = (ip: string): HostClass => {
  if (METADATA_HOSTS.has(ip)) return "metadata"
  const n = v4ToInt(ip)
  if (inV4(n, "127.0.0.0/8")) return "loopback"
  if (inV4(n, "10.0.0.0/8") || inV4(n, "172.16.0.0/12") || inV4(n, "192.168.0.0/16")) return "lan"
  if (
    inV4(n, "0.0.0.0/8") ||
    inV4(n, "100.64.0.0/10") ||
    inV4(n, "169.254.0.0/16") ||
    inV4(n, "198.18.0.0/15") ||
    inV4(n, "224.0.0.0/4") ||
    inV4(n, "240.0.0.0/4")
  )
    return "private"
  return "public"
}

/** The 16 bytes of an IPv6 address (any textual form, embedded dotted quad included). */
const v6Bytes = (ip: string): Array<number> | undefined => {
  let text = ip.toLowerCase().split("%")[0]!
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (quad) {
    const n = v4ToInt(quad[1]!)
    text = text.slice(0, -quad[1]!.length) + `${((n >>> 16) & 0xffff).toString(16)}:${(n & 0xffff).toString(16)}`
  }
  const [head, tail] = text.includes("::") ? (text.split("::") as [string, string]) : [text, undefined]
  const left = head ? head.split(":") : []
  const right = tail === undefined ? [] : tail ? tail.split(":") : []
  const missing = 8 - left.length - right.length
  if (missing < 0 || (tail === undefined && missing !== 0)) return undefined
  const groups = [...left, ...Array.from({ length: missing }, () => "0"), ...right]
  return groups.flatMap((g) => {
    const v = parseInt(g || "0", 16)
    return [(v >> 8) & 0xff, v & 0xff]
  })
}

const classifyV6 = (ip: string): HostClass => {
  const b = v6Bytes(ip)
  if (!b) return "private"
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0)
  // IPv4 inside IPv6: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d).
  const embedded =
    (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) ||
    (zeros(0, 12) && !zeros(12, 16) && !(zeros(12, 15) && b[15] === 1)) ||
    (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12))
  if (embedded) return classifyV4(b.slice(12).join("."))
  if (zeros(0, 15) && b[15] === 1) return "loopback"
  if (zeros(0, 16)) return "private"
  if (b[0] === 0xfd && b[1] === 0x00 && b[2] === 0x0e && b[3] === 0xc2 && zeros(4, 14) && b[14] === 0x02 && b[15] === 0x54)
    return "metadata"
  if ((b[0]! & 0xfe) === 0xfc) return "lan"
  if (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80) return "private"
  if (b[0] === 0xff) return "private"
  return "public"
}

/** Classes by host as written: every upstream request asks about its URL's host (a handful of distinct ones). */
const classes = new BoundedMap<string, HostClass>({ maxEntries: 1000 })

/**
 * Classifies a URL host without DNS: IP literals by range, `localhost` names as loopback,
 * known metadata names as metadata, other names as public. Names that resolve to private
 * addresses are the egress layer's business (it resolves before connecting). Remembered per
 * host, so the request path does not rebuild the name on every call.
 */
export const classifyHost = (host: string): HostClass => {
  let kind = classes.get(host)
  if (kind === undefined) {
    kind = classifyHostNow(host)
    classes.set(host, kind)
  }
  return kind
}

const classifyHostNow = (host: string): HostClass => {
  // `metadata.google.internal.` (trailing dot) is the same name as without it.
  const h = host
    .replace(/^\[|\]$/g, "")
    .toLowerCase()
    .replace(/\.+$/, "")
  if (METADATA_HOSTS.has(h)) return "metadata"
  if (h === "localhost" || h.endsWith(".localhost")) return "loopback"
  const kind = net.isIP(h)
  if (kind === 4) return classifyV4(h)
  if (kind === 6) return classifyV6(h)
  return "public"
}

type Verdict = { readonly ok: true } | { readonly ok: false; readonly reason: string }

/**
 * Verdicts by policy (its `policyIndex`) and URL: every upstream request asks, about a handful of
 * base URLs. One table per policy, keyed by the URL as given: no key is built per request.
 */
const verdicts: ReadonlyArray<BoundedMap<string, Verdict>> = POLICIES.map(() => new BoundedMap<string, Verdict>({ maxEntries: 1000 }))

/** Whether the gateway may send provider traffic to this URL. */
export const checkProviderUrl = (raw: string, flags: UrlPolicyFlags): Verdict => {
  const table = verdicts[policyIndex(flags)]!
  let v = table.get(raw)
  if (v === undefined) {
    v = judge(raw, flags)
    table.set(raw, v)
  }
  return v
}

const judge = (raw: string, flags: UrlPolicyFlags): Verdict => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { ok: false, reason: `'${raw}' is not a valid URL` }
  }
  if (!flags.guard) return { ok: true }
  const kind = classifyHost(url.hostname)
  switch (kind) {
    case "public":
      return { ok: true }
    case "metadata":
      return { ok: false, reason: `${url.hostname} is a cloud metadata address and is always blocked` }
    case "loopback":
    case "lan":
      return flags.allowLocal || flags.allowPrivate
        ? { ok: true }
        : { ok: false, reason: `${url.hostname} is a local address; GATEWAY_ALLOW_LOCAL_PROVIDER_URLS is off` }
    case "private":
      return flags.allowPrivate
        ? { ok: true }
        : { ok: false, reason: `${url.hostname} is a private address; GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS is off` }
  }
}
