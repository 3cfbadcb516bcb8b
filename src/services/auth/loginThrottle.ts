import { isIP } from "node:net"

/**
 * Failed-login throttle per (client address, account): growing delays after FREE_FAILURES, never a lockout; IPv6 counts
 * as its /64, a waiting pair is never evicted, and processes share counts via `onChange`/`apply`
 * (docs/auth.md#management-routes, docs/scale-out.md).
 */
export const FREE_FAILURES = 5
export const MAX_DELAY_SECONDS = 15 * 60
/** Longer than the longest delay, so that waiting the delay out does not also reset the count. */
export const FORGET_AFTER_MS = 24 * 60 * 60 * 1000
export const MAX_ENTRIES = 10_000

interface Entry {
  failures: number
  /** Last attempt counted as a failure (ms). */
  last: number
  /** No attempt before this (ms). */
  next: number
}

/** Seconds the pair must wait after its `failures`-th failure. */
export const delaySeconds = (failures: number): number =>
  failures < FREE_FAILURES ? 0 : Math.min(2 ** (failures - FREE_FAILURES + 1), MAX_DELAY_SECONDS)

/**
 * The address the throttle counts: IPv4 as is (also written as IPv4-mapped IPv6), IPv6 as its
 * /64 prefix (`2001:db8:0:1::/64`). Anything else (not an IP address) as is.
 */
export const throttledAddress = (address: string): string => {
  const plain = address.replace(/%.*$/, "")
  if (isIP(plain) !== 6) return address
  const groups = expandIPv6(plain)
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join(".")
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(":")}::/64`
}

/** The eight 16-bit groups of a valid IPv6 address (`::` filled in, a dotted IPv4 tail as two groups). */
const expandIPv6 = (address: string): Array<number> => {
  const parse = (part: string): Array<number> =>
    part === ""
      ? []
      : part.split(":").flatMap((g) => {
          if (!g.includes(".")) return [parseInt(g, 16)]
          const [a, b, c, d] = g.split(".").map(Number) as [number, number, number, number]
          return [(a << 8) | b, (c << 8) | d]
        })
  const [head = "", tail] = address.split("::")
  const front = parse(head)
  const back = tail === undefined ? [] : parse(tail)
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back]
}

/** What one process tells the others: a pair's count after a failure it counted, or a success. */
export type ThrottleChange =
  | { readonly op: "failure"; readonly key: string; readonly failures: number; readonly last: number; readonly next: number }
  | { readonly op: "success"; readonly key: string }

export interface LoginThrottle {
  /**
   * Admits an attempt at `now` and counts it as a failure until `succeeded` says otherwise
   * (counted before the slow password check, so parallel guesses cannot slip past). Returns
   * the seconds to wait instead when the pair must not try yet, or when it is new and there is
   * no room to track it (see `tracks`).
   */
  readonly admit: (address: string, account: string, now: number) => number | undefined
  readonly succeeded: (address: string, account: string) => void
  /** Whether the pair is counted (a refused pair that is not was refused for want of room). */
  readonly tracks: (address: string, account: string) => boolean
  /** Merges what another process counted (the higher count and the later wait win). */
  readonly apply: (change: ThrottleChange) => void
}

export const makeLoginThrottle = (
  options: { readonly maxEntries?: number; readonly onChange?: (change: ThrottleChange) => void } = {}
): LoginThrottle => {
  const onChange = options.onChange
  const maxEntries = options.maxEntries ?? MAX_ENTRIES
  const entries = new Map<string, Entry>()
  const keyOf = (address: string, account: string) => `${throttledAddress(address)}\u0000${account}`
  /** While the map is full of pairs that wait: the end of the first of those delays (ms). */
  let fullUntil = 0

  /**
   * Makes room for a new pair by forgetting pairs that are not waiting (least recently failed
   * first, down to half the map, so that a spray does not sweep on every attempt). False when
   * every pair is still waiting.
   */
  const makeRoom = (now: number): boolean => {
    if (now < fullUntil) return false
    for (const [key, e] of entries) {
      if (entries.size <= maxEntries / 2) break
      if (e.next <= now) entries.delete(key)
    }
    if (entries.size < maxEntries) return true
    fullUntil = Infinity
    for (const e of entries.values()) fullUntil = Math.min(fullUntil, e.next)
    return false
  }

  return {
    admit: (address, account, now) => {
      const key = keyOf(address, account)
      const current = entries.get(key)
      const entry = current && now - current.last < FORGET_AFTER_MS ? current : { failures: 0, last: now, next: now }
      if (now < entry.next) return Math.ceil((entry.next - now) / 1000)
      if (!current && entries.size >= maxEntries && !makeRoom(now)) return Math.max(1, Math.ceil((fullUntil - now) / 1000))
      entry.failures++
      entry.last = now
      entry.next = now + delaySeconds(entry.failures) * 1000
      // Re-inserted, so the map's order is the order of the last failure.
      entries.delete(key)
      entries.set(key, entry)
      onChange?.({ op: "failure", key, failures: entry.failures, last: entry.last, next: entry.next })
      return undefined
    },
    succeeded: (address, account) => {
      const key = keyOf(address, account)
      entries.delete(key)
      onChange?.({ op: "success", key })
    },
    tracks: (address, account) => entries.has(keyOf(address, account)),
    apply: (change) => {
      if (change.op === "success") {
        entries.delete(change.key)
        return
      }
      const current = entries.get(change.key)
      if (current === undefined && entries.size >= maxEntries && !makeRoom(change.last)) return
      const merged = {
        failures: Math.max(current?.failures ?? 0, change.failures),
        last: Math.max(current?.last ?? 0, change.last),
        next: Math.max(current?.next ?? 0, change.next)
      }
      entries.delete(change.key)
      entries.set(change.key, merged)
    }
  }
}
