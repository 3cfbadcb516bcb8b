/**
 * Auto routing self-healing (spec document 1, "Auto routing self-healing"): low-scoring
 * candidates are excluded with progressive backoff, the first request after an exclusion is
 * a probe with a reduced timeout, and incident mode is detected from the pool's breakers.
 * State lives in memory; time is always passed in.
 */
import type { PoolEntry } from "../types.js"

/** A score below this excludes the candidate. */
export const EXCLUSION_THRESHOLD = 0.2
export const BASE_EXCLUSION_MS = 5 * 60 * 1000
export const MAX_EXCLUSION_MS = 30 * 60 * 1000
/** Probe timeout = max(2000 ms, normal × 0.25), never above the normal timeout. */
export const PROBE_TIMEOUT_FACTOR = 0.25
export const PROBE_TIMEOUT_FLOOR_MS = 2000
/** Incident mode: more than this share of the pool's providers have an OPEN breaker. */
export const INCIDENT_OPEN_SHARE = 0.5

/** Exclusion length of the n-th consecutive exclusion (n >= 1): 5, 10, 20, 30, 30... minutes. */
export const exclusionMs = (level: number): number =>
  Math.min(MAX_EXCLUSION_MS, BASE_EXCLUSION_MS * 2 ** Math.max(0, Math.floor(level) - 1))

/** The reduced timeout of a probe request. */
export const probeTimeoutMs = (normalMs: number): number =>
  Math.min(normalMs, Math.max(PROBE_TIMEOUT_FLOOR_MS, normalMs * PROBE_TIMEOUT_FACTOR))

/** True when more than 50% of the distinct providers in the pool have an OPEN breaker. */
export const isIncidentPool = (pool: ReadonlyArray<PoolEntry>): boolean => {
  const open = new Map<string, boolean>()
  for (const e of pool) open.set(e.provider, (open.get(e.provider) ?? false) || e.breaker === "OPEN")
  if (open.size === 0) return false
  let n = 0
  for (const v of open.values()) if (v) n++
  return n / open.size > INCIDENT_OPEN_SHARE
}

interface KeyState {
  /** Consecutive exclusions without a successful probe. */
  level: number
  /** End of the current (or last) exclusion, epoch ms. */
  until: number
}

export interface ExclusionView {
  readonly key: string
  readonly until: number
  readonly level: number
  readonly remainingMs: number
}

export class SelfHealing {
  private readonly states = new Map<string, KeyState>()

  private exclude(key: string, level: number, now: number): void {
    this.states.set(key, { level, until: now + exclusionMs(level) })
  }

  /**
   * Records a candidate's score. Below 0.2 excludes it (5 min, then 10, 20, 30, 30...);
   * ignored while the key is already excluded. A score >= 0.2 changes nothing: a key whose
   * exclusion expired keeps its level until a probe succeeds.
   */
  observe(key: string, score: number, now: number): void {
    if (this.isExcluded(key, now)) return
    if (Number.isNaN(score) || score < EXCLUSION_THRESHOLD) this.exclude(key, (this.states.get(key)?.level ?? 0) + 1, now)
  }

  isExcluded(key: string, now: number): boolean {
    const s = this.states.get(key)
    return s !== undefined && now < s.until
  }

  /** True once the key's exclusion has expired, until probeDone is called. */
  needsProbe(key: string, now: number): boolean {
    const s = this.states.get(key)
    return s !== undefined && now >= s.until
  }

  /** The probe's outcome: ok clears the key (level reset); a failure excludes it again at the next level. */
  probeDone(key: string, ok: boolean, now: number): void {
    const s = this.states.get(key)
    if (ok) this.states.delete(key)
    else this.exclude(key, (s?.level ?? 0) + 1, now)
  }

  /** The exclusion level of a key (0 when it has none). */
  level(key: string): number {
    return this.states.get(key)?.level ?? 0
  }

  isIncident(pool: ReadonlyArray<PoolEntry>): boolean {
    return isIncidentPool(pool)
  }

  /** Keys excluded at `now`, soonest end first. */
  snapshot(now: number): ReadonlyArray<ExclusionView> {
    const out: Array<ExclusionView> = []
    for (const [key, s] of this.states) if (now < s.until) out.push({ key, until: s.until, level: s.level, remainingMs: s.until - now })
    return out.sort((a, b) => a.until - b.until || (a.key < b.key ? -1 : 1))
  }

  /** Keys whose exclusion expired and whose probe has not completed. */
  pendingProbes(now: number): ReadonlyArray<string> {
    const out: Array<string> = []
    for (const [key, s] of this.states) if (now >= s.until) out.push(key)
    return out.sort()
  }

  /** Forgets everything (tests, a management reset). */
  clear(): void {
    this.states.clear()
  }
}
