import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import type { Candidate, ObservedStats, QuotaInfo } from "./types.js"

/** How much history the latency and error window keeps per candidate. */
export const WINDOW_SAMPLES = 100
export const WINDOW_MS = 10 * 60_000
/** Sessions not seen for this long lose their stickiness. */
export const SESSION_TTL_MS = 60 * 60_000
const MAX_SESSIONS = 20_000

interface Sample {
  readonly at: number
  readonly latencyMs: number
  readonly ok: boolean
}

/** A ring of the last WINDOW_SAMPLES outcomes of one candidate, with derived stats cached until the next sample. */
class Window {
  private readonly samples: Array<Sample> = []
  private next = 0
  private cached: { at: number; stats: ObservedStats } | undefined

  add(s: Sample): void {
    if (this.samples.length < WINDOW_SAMPLES) this.samples.push(s)
    else this.samples[this.next] = s
    this.next = (this.next + 1) % WINDOW_SAMPLES
    this.cached = undefined
  }

  stats(now: number): ObservedStats {
    // Recomputed at most once a second, or after a new sample.
    if (this.cached && now - this.cached.at < 1000) return this.cached.stats
    const live = this.samples.filter((s) => now - s.at <= WINDOW_MS)
    const stats = summarize(live)
    this.cached = { at: now, stats }
    return stats
  }
}

const EMPTY: ObservedStats = { samples: 0, p95LatencyMs: undefined, latencyStdDevMs: undefined, errorRate: 0 }

const summarize = (samples: ReadonlyArray<Sample>): ObservedStats => {
  if (samples.length === 0) return EMPTY
  const failures = samples.filter((s) => !s.ok).length
  // Latency of successes only: a failure's latency says little about how fast answers come.
  const latencies = samples.filter((s) => s.ok).map((s) => s.latencyMs).sort((a, b) => a - b)
  if (latencies.length === 0) return { samples: samples.length, p95LatencyMs: undefined, latencyStdDevMs: undefined, errorRate: failures / samples.length }
  const p95 = latencies[Math.min(latencies.length - 1, Math.ceil(latencies.length * 0.95) - 1)]!
  const mean = latencies.reduce((a, b) => a + b, 0) / latencies.length
  const variance = latencies.reduce((a, b) => a + (b - mean) ** 2, 0) / latencies.length
  return { samples: samples.length, p95LatencyMs: p95, latencyStdDevMs: Math.sqrt(variance), errorRate: failures / samples.length }
}

/** A Map that forgets its oldest entries beyond `max` (insertion order is refreshed on set). */
class BoundedMap<V> extends Map<string, V> {
  constructor(private readonly max: number) {
    super()
  }
  override set(key: string, value: V): this {
    if (this.has(key)) this.delete(key)
    super.set(key, value)
    while (this.size > this.max) this.delete(this.keys().next().value!)
    return this
  }
}

export interface RoutingMemoryShape {
  /** Latency/error window of a candidate. */
  readonly stats: (key: string, now: number) => ObservedStats
  /** One finished attempt (success or failure) of a candidate. */
  readonly observe: (key: string, latencyMs: number, ok: boolean, now: number) => void
  readonly inFlight: (connectionId: string) => number
  /** Marks a request in flight on a connection; the returned function ends it (idempotent). */
  readonly begin: (c: Candidate) => () => void
  readonly used: (key: string) => number
  readonly nextTurn: (scope: string) => number
  readonly lastGood: (scope: string) => string | undefined
  /** Records the candidate that served a scope; answers the previous one. */
  readonly setLastGood: (scope: string, key: string) => string | undefined
  readonly relayLeg: (scope: string, session: string) => string | undefined
  readonly setRelayLeg: (scope: string, session: string, key: string) => void
  /** The candidate a session stuck to in a scope (X-Session-Id), while fresh. */
  readonly sticky: (scope: string, session: string, now: number) => string | undefined
  readonly setSticky: (scope: string, session: string, key: string, now: number) => void
  readonly deficits: (group: string) => Map<string, number>
  /** Quota reported for a connection (and model): rate-limit headers, the accounting layer. */
  readonly quota: (connectionId: string, model: string, now: number) => QuotaInfo | undefined
  readonly setQuota: (connectionId: string, model: string | undefined, q: QuotaInfo & { readonly at: number; readonly limit?: number; readonly remainingCount?: number }) => void
  /** Every quota record (GET /api/rate-limits). */
  readonly quotas: () => ReadonlyArray<{ readonly connectionId: string; readonly model: string | undefined; readonly info: QuotaInfo & { readonly at: number; readonly limit?: number; readonly remainingCount?: number } }>
  /** Everything, for tests and operator resets. */
  readonly clear: () => void
}

type QuotaRecord = QuotaInfo & { readonly at: number; readonly limit?: number; readonly remainingCount?: number }

/**
 * What the router remembers between requests, in process memory: a rolling latency and error
 * window per candidate (p95, deviation, error rate over the last 100 attempts or 10 minutes),
 * requests in flight per connection, use counts, round-robin turns, last-known-good targets,
 * relay legs and sticky sessions, deficit counters of quota-share groups, and quota reports.
 * A multi-instance deployment would move the shared parts behind the same interface.
 */
export class RoutingMemory extends Context.Tag("gateway/RoutingMemory")<RoutingMemory, RoutingMemoryShape>() {
  static readonly make = (): RoutingMemoryShape => {
    const windows = new BoundedMap<Window>(10_000)
    const inFlight = new Map<string, number>()
    const used = new BoundedMap<number>(10_000)
    const turns = new BoundedMap<number>(10_000)
    const lastGood = new BoundedMap<string>(10_000)
    const legs = new BoundedMap<string>(MAX_SESSIONS)
    const sessions = new BoundedMap<{ key: string; at: number }>(MAX_SESSIONS)
    const deficits = new BoundedMap<Map<string, number>>(1_000)
    const quotas = new BoundedMap<{ connectionId: string; model: string | undefined; info: QuotaRecord }>(10_000)

    const quotaKey = (connectionId: string, model: string | undefined) => `${connectionId}\u0000${model ?? ""}`
    const fresh = (q: QuotaRecord | undefined, now: number): QuotaInfo | undefined => {
      if (!q) return undefined
      // A report whose window has reset no longer says anything.
      if (q.resetAt !== undefined && q.resetAt <= now) return undefined
      return q
    }

    return {
      stats: (key, now) => windows.get(key)?.stats(now) ?? EMPTY,
      observe: (key, latencyMs, ok, now) => {
        let w = windows.get(key)
        if (!w) {
          w = new Window()
          windows.set(key, w)
        }
        w.add({ at: now, latencyMs, ok })
      },
      inFlight: (connectionId) => inFlight.get(connectionId) ?? 0,
      begin: (c) => {
        const id = c.connection.id
        inFlight.set(id, (inFlight.get(id) ?? 0) + 1)
        used.set(c.key, (used.get(c.key) ?? 0) + 1)
        let ended = false
        return () => {
          if (ended) return
          ended = true
          const n = (inFlight.get(id) ?? 1) - 1
          if (n <= 0) inFlight.delete(id)
          else inFlight.set(id, n)
        }
      },
      used: (key) => used.get(key) ?? 0,
      nextTurn: (scope) => {
        const n = turns.get(scope) ?? 0
        turns.set(scope, n + 1)
        return n
      },
      lastGood: (scope) => lastGood.get(scope),
      setLastGood: (scope, key) => {
        const previous = lastGood.get(scope)
        lastGood.set(scope, key)
        return previous
      },
      relayLeg: (scope, session) => legs.get(`${scope}\u0000${session}`),
      setRelayLeg: (scope, session, key) => {
        legs.set(`${scope}\u0000${session}`, key)
      },
      sticky: (scope, session, now) => {
        const s = sessions.get(`${scope}\u0000${session}`)
        return s && now - s.at <= SESSION_TTL_MS ? s.key : undefined
      },
      setSticky: (scope, session, key, now) => {
        sessions.set(`${scope}\u0000${session}`, { key, at: now })
      },
      deficits: (group) => {
        let d = deficits.get(group)
        if (!d) {
          // Bounded: a group's keys come from model ids a client may vary at will.
          d = new BoundedMap<number>(1_000)
          deficits.set(group, d)
        }
        return d
      },
      quota: (connectionId, model, now) => fresh(quotas.get(quotaKey(connectionId, model))?.info, now) ?? fresh(quotas.get(quotaKey(connectionId, undefined))?.info, now),
      setQuota: (connectionId, model, info) => {
        quotas.set(quotaKey(connectionId, model), { connectionId, model, info })
      },
      quotas: () => Array.from(quotas.values()),
      clear: () => {
        for (const m of [windows, inFlight, used, turns, lastGood, legs, sessions, deficits, quotas]) m.clear()
      }
    }
  }

  static readonly layer = Layer.sync(RoutingMemory, RoutingMemory.make)
}
