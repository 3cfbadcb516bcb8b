/**
 * Failed-login throttle, per (client address, account). There is one admin account, so the
 * account is always `admin`; the pair is still the key, so that a username can join it later.
 *
 * Not a lockout: the first FREE_FAILURES failures cost nothing; after that every further attempt
 * of the pair waits 2^n seconds (n = failures beyond the free ones, so 2 s, 4 s, 8 s, …) up to
 * MAX_DELAY_SECONDS. An address only ever slows itself down: another address (the admin's own,
 * when an attacker shares nothing with it but the internet) is never affected, and one behind
 * the same NAT waits at most MAX_DELAY_SECONDS per attempt instead of being locked out. A
 * success forgets the pair; so does FORGET_AFTER_MS without a failure.
 */
export const FREE_FAILURES = 5
export const MAX_DELAY_SECONDS = 15 * 60
/** Longer than the longest delay, so that waiting the delay out does not also reset the count. */
export const FORGET_AFTER_MS = 24 * 60 * 60 * 1000
const MAX_ENTRIES = 10_000

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

export interface LoginThrottle {
  /**
   * Admits an attempt at `now` and counts it as a failure until `succeeded` says otherwise
   * (counted before the slow password check, so parallel guesses cannot slip past). Returns
   * the seconds to wait instead when the pair must not try yet.
   */
  readonly admit: (address: string, account: string, now: number) => number | undefined
  readonly succeeded: (address: string, account: string) => void
}

export const makeLoginThrottle = (): LoginThrottle => {
  const entries = new Map<string, Entry>()
  const keyOf = (address: string, account: string) => `${address}\u0000${account}`

  const sweep = (now: number) => {
    for (const [key, e] of entries) if (now - e.last >= FORGET_AFTER_MS) entries.delete(key)
    // Still full (a spray from many addresses): forget the least recently failed pairs.
    for (const key of entries.keys()) {
      if (entries.size <= MAX_ENTRIES / 2) break
      entries.delete(key)
    }
  }

  return {
    admit: (address, account, now) => {
      const key = keyOf(address, account)
      const current = entries.get(key)
      const entry = current && now - current.last < FORGET_AFTER_MS ? current : { failures: 0, last: now, next: now }
      if (now < entry.next) return Math.ceil((entry.next - now) / 1000)
      entry.failures++
      entry.last = now
      entry.next = now + delaySeconds(entry.failures) * 1000
      // Re-inserted, so the map's order is the order of the last failure.
      entries.delete(key)
      if (entries.size >= MAX_ENTRIES) sweep(now)
      entries.set(key, entry)
      return undefined
    },
    succeeded: (address, account) => {
      entries.delete(keyOf(address, account))
    }
  }
}
