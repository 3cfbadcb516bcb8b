import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { localSharedState, SharedState, type SharedStateShape } from "../../platform/state/SharedState.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import type { Candidate, Counters, ObservedStats, QuotaInfo } from "./types.js"

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
  const latencies = samples
    .filter((s) => s.ok)
    .map((s) => s.latencyMs)
    .sort((a, b) => a - b)
  if (latencies.length === 0)
    return { samples: samples.length, p95LatencyMs: undefined, latencyStdDevMs: undefined, errorRate: failures / samples.length }
  const p95 = latencies[Math.min(latencies.length - 1, Math.ceil(latencies.length * 0.95) - 1)]!
  const mean = latencies.reduce((a, b) => a + b, 0) / latencies.length
  const variance = latencies.reduce((a, b) => a + (b - mean) ** 2, 0) / latencies.length
  return { samples: samples.length, p95LatencyMs: p95, latencyStdDevMs: Math.sqrt(variance), errorRate: failures / samples.length }
}

/** A table that forgets its oldest entries beyond `max` (a set makes an entry the newest). */
const bounded = <V>(max: number) => new BoundedMap<string, V>({ maxEntries: max })

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): where a session stuck
 * (X-Session-Id) and the leg a context-relay session is on, so that the session's next request
 * lands on the same target whichever process takes it. The rest of this memory (latency windows,
 * requests in flight, turns, deficits, quota reports) describes this process's own traffic.
 */
export type SessionChange =
  | {
      readonly op: "sticky"
      readonly scope: string
      readonly session: string
      readonly key: string
      readonly at: number
      readonly requests?: number
      readonly apiKeyId?: string | null
    }
  | { readonly op: "unpin"; readonly session: string }
  | { readonly op: "leg"; readonly scope: string; readonly session: string; readonly key: string }
  | { readonly op: "warm"; readonly scope: string; readonly conversation: string; readonly key: string; readonly until: number }

/** A session that stuck to a candidate (X-Session-Id), as GET /api/sessions lists it. */
export interface StickySession {
  readonly session: string
  /** The combo or auto id whose candidates it sticks among. */
  readonly scope: string
  /** `<connection name>/<model>` */
  readonly key: string
  readonly apiKeyId: string | null
  readonly firstSeen: number
  readonly lastSeen: number
  readonly requests: number
}

/** A sticky entry; mutated in place when the same target serves the session again (no allocation). */
interface StickyEntry {
  key: string
  at: number
  since: number
  requests: number
  apiKeyId: string | null
}

/** Where a conversation's prompt cache is warm: the candidate that served it last, until its cache's lifetime ends. */
interface WarmEntry {
  key: string
  until: number
  /** When this process last told the others (a refresh is told at most once per half lifetime). */
  told: number
}

/** What a candidate's answers showed of its speed (RoutingMemoryShape.outputPace). */
export interface OutputPace {
  readonly tokensPerSecond: number
  readonly longestOutput: number
}

export interface RoutingMemoryShape {
  /** Latency/error window of a candidate. */
  readonly stats: (key: string, now: number) => ObservedStats
  /** One finished attempt (success or failure) of a candidate. */
  readonly observe: (key: string, latencyMs: number, ok: boolean, now: number) => void
  /**
   * A candidate's output pace, from the answers it gave: tokens per second (a moving average over
   * whole requests, first byte included: a cautious figure) and the longest answer seen. Undefined
   * until it answered with a token count. Read to decide whether a non-streamed request may be
   * asked whole (`timeouts.nonStreamed: "auto"`, src/inference/nonStreamed.ts).
   */
  readonly outputPace: (key: string) => OutputPace | undefined
  /** An answer of `tokens` output tokens took `ms` from sending to its end. */
  readonly observeOutput: (key: string, tokens: number, ms: number) => void
  readonly inFlight: (connectionId: string) => number
  /** Marks a request in flight on a connection; `end` ends it, once (the caller keeps whether it did: no closure per request). */
  readonly begin: (c: Candidate) => void
  /** A request `begin` marked in flight on the candidate's connection has ended: call once per `begin`. */
  readonly end: (c: Candidate) => void
  readonly used: (key: string) => number
  readonly nextTurn: (scope: string) => number
  readonly lastGood: (scope: string) => string | undefined
  /** Records the candidate that served a scope; answers the previous one. */
  readonly setLastGood: (scope: string, key: string) => string | undefined
  readonly relayLeg: (scope: string, session: string) => string | undefined
  readonly setRelayLeg: (scope: string, session: string, key: string) => void
  /** The candidate a session stuck to in a scope (X-Session-Id), while fresh. */
  readonly sticky: (scope: string, session: string, now: number) => string | undefined
  /** Records that a session's request was served by `key` (`apiKeyId`: the caller's key, for listings). */
  readonly setSticky: (scope: string, session: string, key: string, now: number, apiKeyId?: string | null) => void
  /** Live sticky sessions, newest first (GET /api/sessions). */
  readonly stickySessions: (now: number) => ReadonlyArray<StickySession>
  /** Forgets a session's stickiness in every scope (and its relay legs); answers how many scopes it had. */
  readonly unpin: (session: string) => number
  /**
   * The candidate whose prompt cache holds a conversation's prefix in a scope (docs/routing.md,
   * "Prompt-cache affinity"), while that cache is expected to live; undefined: none known.
   */
  readonly warm: (scope: string, conversation: string, now: number) => string | undefined
  /** A conversation was served by `key`: its prompt cache there lives `ttlMs` from `now`. */
  readonly setWarm: (scope: string, conversation: string, key: string, now: number, ttlMs: number) => void
  /** Conversations with a warm candidate now (GET /api/resilience shows the count). */
  readonly warmCount: (now: number) => number
  readonly deficits: (group: string) => Counters
  /** Quota reported for a connection (and model): rate-limit headers, the accounting layer. */
  readonly quota: (connectionId: string, model: string, now: number) => QuotaInfo | undefined
  readonly setQuota: (
    connectionId: string,
    model: string | undefined,
    q: QuotaInfo & { readonly at: number; readonly limit?: number; readonly remainingCount?: number }
  ) => void
  /** Every quota record (GET /api/rate-limits). */
  readonly quotas: () => ReadonlyArray<{
    readonly connectionId: string
    readonly model: string | undefined
    readonly info: QuotaInfo & { readonly at: number; readonly limit?: number; readonly remainingCount?: number }
  }>
  /** Everything, for tests and operator resets. */
  readonly clear: () => void
}

type QuotaRecord = QuotaInfo & { readonly at: number; readonly limit?: number; readonly remainingCount?: number }

/**
 * What the router remembers between requests, in process memory (docs/routing.md#decisions-the-specification-leaves-open);
 * sticky sessions and relay legs also go to the other processes on the `sessions` channel (docs/internals.md#seam-4-shared-state).
 */
export class RoutingMemory extends Context.Tag("gateway/RoutingMemory")<RoutingMemory, RoutingMemoryShape>() {
  static readonly make = (shared: SharedStateShape = localSharedState): RoutingMemoryShape => {
    const windows = bounded<Window>(10_000)
    const inFlight = new Map<string, number>()
    const used = bounded<number>(10_000)
    const turns = bounded<number>(10_000)
    const lastGood = bounded<string>(10_000)
    const legs = bounded<string>(MAX_SESSIONS)
    const warmth = bounded<WarmEntry>(MAX_SESSIONS)
    const sessions = bounded<StickyEntry>(MAX_SESSIONS)
    const deficits = bounded<BoundedMap<string, number>>(1_000)
    const quotas = bounded<{ connectionId: string; model: string | undefined; info: QuotaRecord }>(10_000)
    const paces = bounded<{ tokensPerSecond: number; longestOutput: number }>(10_000)

    const channel = shared.channel<SessionChange>("sessions", (c) => {
      if (c.op === "sticky") {
        const k = `${c.scope}\u0000${c.session}`
        const since = sessions.peek(k)?.since ?? c.at
        sessions.set(k, { key: c.key, at: c.at, since, requests: c.requests ?? 1, apiKeyId: c.apiKeyId ?? null })
      } else if (c.op === "unpin") unpinLocal(c.session)
      else if (c.op === "warm") warmth.set(`${c.scope}\u0000${c.conversation}`, { key: c.key, until: c.until, told: 0 })
      else legs.set(`${c.scope}\u0000${c.session}`, c.key)
    })

    const unpinLocal = (session: string): number => {
      let n = 0
      const suffix = `\u0000${session}`
      for (const k of Array.from(sessions.keys())) if (k.endsWith(suffix) && sessions.delete(k)) n++
      for (const k of Array.from(legs.keys())) if (k.endsWith(suffix)) legs.delete(k)
      return n
    }

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
      outputPace: (key) => paces.get(key),
      observeOutput: (key, tokens, ms) => {
        if (!(tokens > 0) || !(ms > 0)) return
        const rate = (tokens * 1000) / ms
        const p = paces.get(key)
        if (p === undefined) paces.set(key, { tokensPerSecond: rate, longestOutput: tokens })
        else {
          // Half weight to the newest answer: a slower upstream is believed within a few answers.
          p.tokensPerSecond = (p.tokensPerSecond + rate) / 2
          if (tokens > p.longestOutput) p.longestOutput = tokens
        }
      },
      inFlight: (connectionId) => inFlight.get(connectionId) ?? 0,
      begin: (c) => {
        const id = c.connection.id
        inFlight.set(id, (inFlight.get(id) ?? 0) + 1)
        used.set(c.key, (used.get(c.key) ?? 0) + 1)
      },
      end: (c) => {
        const id = c.connection.id
        // A connection's count stays, at 0, once its last request ended: connections are the
        // operator's (few), and deleting then adding its entry whenever it goes idle and busy
        // again would leave deleted entries in the table, rebuilt (allocated anew) every few.
        const n = (inFlight.get(id) ?? 1) - 1
        inFlight.set(id, Math.max(n, 0))
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
        if (channel.shared) channel.publish({ op: "leg", scope, session, key })
      },
      sticky: (scope, session, now) => {
        const s = sessions.get(`${scope}\u0000${session}`)
        return s && now - s.at <= SESSION_TTL_MS ? s.key : undefined
      },
      setSticky: (scope, session, key, now, apiKeyId) => {
        const k = `${scope}\u0000${session}`
        let entry = sessions.peek(k)
        if (entry !== undefined && now - entry.at <= SESSION_TTL_MS) {
          entry.key = key
          entry.at = now
          entry.requests++
          if (apiKeyId != null) entry.apiKeyId = apiKeyId
        } else entry = { key, at: now, since: now, requests: 1, apiKeyId: apiKeyId ?? null }
        sessions.set(k, entry)
        if (channel.shared)
          channel.publish({ op: "sticky", scope, session, key, at: now, requests: entry.requests, apiKeyId: entry.apiKeyId })
      },
      stickySessions: (now) => {
        const out: Array<StickySession> = []
        for (const [k, e] of sessions) {
          if (now - e.at > SESSION_TTL_MS) continue
          const cut = k.indexOf("\u0000")
          out.push({
            scope: k.slice(0, cut),
            session: k.slice(cut + 1),
            key: e.key,
            apiKeyId: e.apiKeyId,
            firstSeen: e.since,
            lastSeen: e.at,
            requests: e.requests
          })
        }
        return out.reverse()
      },
      unpin: (session) => {
        const n = unpinLocal(session)
        if (channel.shared) channel.publish({ op: "unpin", session })
        return n
      },
      warm: (scope, conversation, now) => {
        const w = warmth.peek(`${scope}\u0000${conversation}`)
        return w !== undefined && now < w.until ? w.key : undefined
      },
      setWarm: (scope, conversation, key, now, ttlMs) => {
        const k = `${scope}\u0000${conversation}`
        const until = now + ttlMs
        let w = warmth.peek(k)
        // The same target again: the entry is refreshed in place; the others hear of it only
        // when the target changed or half the lifetime went by (no message per request).
        const tell = w === undefined || w.key !== key || now - w.told >= ttlMs / 2
        if (w === undefined) w = { key, until, told: 0 }
        else {
          w.key = key
          w.until = until
        }
        if (tell) w.told = now
        warmth.set(k, w)
        if (tell && channel.shared) channel.publish({ op: "warm", scope, conversation, key, until })
      },
      warmCount: (now) => {
        let n = 0
        for (const w of warmth.values()) if (now < w.until) n++
        return n
      },
      deficits: (group) => {
        let d = deficits.get(group)
        if (!d) {
          // Bounded: a group's keys come from model ids a client may vary at will.
          d = bounded<number>(1_000)
          deficits.set(group, d)
        }
        return d
      },
      quota: (connectionId, model, now) =>
        fresh(quotas.get(quotaKey(connectionId, model))?.info, now) ?? fresh(quotas.get(quotaKey(connectionId, undefined))?.info, now),
      setQuota: (connectionId, model, info) => {
        quotas.set(quotaKey(connectionId, model), { connectionId, model, info })
      },
      quotas: () => Array.from(quotas.values()),
      clear: () => {
        for (const m of [windows, inFlight, used, turns, lastGood, legs, sessions, warmth, deficits, quotas, paces]) m.clear()
      }
    }
  }

  static readonly layer = Layer.effect(RoutingMemory, Effect.map(SharedState.orLocal, RoutingMemory.make))
}
