import * as net from "node:net"

export type HostClass = "loopback" | "lan" | "private" | "metadata" | "public"

export interface UrlPolicyFlags {
  /** OUTBOUND_SSRF_GUARD_ENABLED: when off, every address is allowed. */
  readonly guard: boolean
  /** GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: loopback and LAN (RFC 1918, IPv6 unique-local). */
  readonly allowLocal: boolean
  /** GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS: the remaining non-public ranges. */
  readonly allowPrivate: boolean
}

const METADATA_HOSTS = new Set(["169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "metadata.google.internal", "metadata"])

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

const classifyV6 = (ip: string): HostClass => {
  const h = ip.toLowerCase()
  if (METADATA_HOSTS.has(h)) return "metadata"
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(h)
  if (mapped) return classifyV4(mapped[1]!)
  if (h === "::1") return "loopback"
  if (h === "::") return "private"
  if (/^f[cd][0-9a-f]{2}:/.test(h)) return "lan"
  if (/^fe[89ab][0-9a-f]:/.test(h)) return "private"
  return "public"
}

/**
 * Classifies a URL host without DNS: IP literals by range, `localhost` names as loopback,
 * known metadata names as metadata, other names as public. Names that resolve to private
 * addresses are the egress layer's business (it resolves before connecting).
 */
export const classifyHost = (host: string): HostClass => {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase()
  if (METADATA_HOSTS.has(h)) return "metadata"
  if (h === "localhost" || h.endsWith(".localhost")) return "loopback"
  const kind = net.isIP(h)
  if (kind === 4) return classifyV4(h)
  if (kind === 6) return classifyV6(h)
  return "public"
}

/** Whether the gateway may send provider traffic to this URL. */
export const checkProviderUrl = (
  raw: string,
  flags: UrlPolicyFlags
): { readonly ok: true } | { readonly ok: false; readonly reason: string } => {
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
