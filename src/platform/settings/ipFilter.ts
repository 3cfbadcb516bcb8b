import { isIP } from "node:net"
import { isLoopbackHost } from "../config/AppConfig.js"
import type { IpFilterSettings } from "../../domain/settings.js"

/**
 * The inbound IP filter (`/api/settings/ip-filter`), compiled once per change into plain
 * numbers so the per-request check is a few comparisons; with both lists empty `active` is
 * false and the server does nothing else. Pure: no Effect, no I/O.
 */

/** An address as a family and a bigint (IPv4-mapped IPv6 counts as IPv4). */
interface Parsed {
  readonly v4: boolean
  readonly n: bigint
}

const parseV4 = (s: string): bigint | undefined => {
  const parts = s.split(".")
  if (parts.length !== 4) return undefined
  let n = 0n
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return undefined
    n = (n << 8n) | BigInt(Number(p))
  }
  return n
}

const parseV6 = (s: string): bigint | undefined => {
  let text = s
  const zone = text.indexOf("%")
  if (zone !== -1) text = text.slice(0, zone)
  // An embedded IPv4 (`::ffff:1.2.3.4`) is its two last groups.
  const lastColon = text.lastIndexOf(":")
  const last = text.slice(lastColon + 1)
  if (last.includes(".")) {
    const v4 = parseV4(last)
    if (v4 === undefined) return undefined
    text = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const head = halves[0] ? halves[0].split(":") : []
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : []
  if (halves.length === 1 ? head.length !== 8 : head.length + tail.length > 7) return undefined
  const groups = [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail]
  let n = 0n
  for (const g of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined
    n = (n << 16n) | BigInt(parseInt(g, 16))
  }
  return n
}

/** An address from a socket or a header, or undefined when it is not an IP. */
export const parseAddress = (s: string): Parsed | undefined => {
  const family = isIP(s)
  if (family === 4) {
    const n = parseV4(s)
    return n === undefined ? undefined : { v4: true, n }
  }
  if (family === 6) {
    const n = parseV6(s.replace(/^\[|\]$/g, ""))
    if (n === undefined) return undefined
    if (n >> 32n === 0xffffn) return { v4: true, n: n & 0xffffffffn }
    return { v4: false, n }
  }
  return undefined
}

interface Range {
  readonly v4: boolean
  readonly base: bigint
  readonly mask: bigint
}

const rangeOf = (entry: string): Range | undefined => {
  const slash = entry.indexOf("/")
  const a = parseAddress(slash === -1 ? entry : entry.slice(0, slash))
  if (!a) return undefined
  const width = a.v4 ? 32 : 128
  let bits = slash === -1 ? width : Number(entry.slice(slash + 1))
  // `::ffff:10.0.0.0/104` is the IPv4 range 10.0.0.0/8.
  if (a.v4 && isIP(slash === -1 ? entry : entry.slice(0, slash)) === 6) bits = Math.max(0, bits - 96)
  const all = (1n << BigInt(width)) - 1n
  const mask = bits === 0 ? 0n : (all << BigInt(width - bits)) & all
  return { v4: a.v4, base: a.n & mask, mask }
}

const inAny = (ranges: ReadonlyArray<Range>, a: Parsed): boolean => {
  for (const r of ranges) if (r.v4 === a.v4 && (a.n & r.mask) === r.base) return true
  return false
}

export type IpVerdict = undefined | "denied" | "not-allowed"

export interface CompiledIpFilter {
  /** False when both lists are empty: the server skips the check. */
  readonly active: boolean
  /** undefined: let it in; else why not. Loopback addresses are always let in (docs/operations.md). */
  readonly check: (address: string) => IpVerdict
}

export const compileIpFilter = (settings: IpFilterSettings): CompiledIpFilter => {
  const allow = settings.allow.map(rangeOf).filter((r): r is Range => r !== undefined)
  const deny = settings.deny.map(rangeOf).filter((r): r is Range => r !== undefined)
  if (allow.length === 0 && deny.length === 0) return { active: false, check: () => undefined }
  return {
    active: true,
    check: (address) => {
      if (isLoopbackHost(address)) return undefined
      const a = parseAddress(address)
      // Not an IP at all (a forwarded header with a name in it): only an empty allow list lets it in.
      if (!a) return allow.length > 0 ? "not-allowed" : undefined
      if (inAny(deny, a)) return "denied"
      if (allow.length > 0 && !inAny(allow, a)) return "not-allowed"
      return undefined
    }
  }
}

export const ipRefusal = (verdict: "denied" | "not-allowed"): string =>
  verdict === "denied" ? "your address is on this gateway's deny list" : "your address is not on this gateway's allow list"
