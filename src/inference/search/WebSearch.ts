/**
 * The web search state of this process (docs/search.md, "Web search"): the answer cache (a
 * `BoundedMap` with the TTL of `SEARCH_CACHE_TTL_SECONDS`, keyed by API key and normalised
 * request), the searches in flight (identical concurrent requests wait for one upstream call) and
 * the analytics counters, all in memory since the process started.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { InferenceError } from "../../kernel/errors.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import type { SearchResult } from "./providers.js"

/** One answer as it is kept and shared (the client's `query` and `cached` are set per request). */
export interface StoredAnswer {
  readonly id: string
  readonly provider: string
  readonly connection: string
  readonly results: ReadonlyArray<SearchResult>
}

/** What a search in flight settles to: its answer, or undefined when its caller went away before it finished (a waiter then searches
 * itself). */
export type InFlightSearch = Deferred.Deferred<StoredAnswer | undefined, InferenceError>

/** Latency samples kept per connection for the percentiles. */
const SAMPLES = 512

interface Counters {
  provider: string
  requests: number
  hits: number
  errors: number
  cacheHits: number
  cacheMisses: number
  latencies: Array<number>
  next: number
}

export interface ProviderAnalytics {
  readonly connection: string
  readonly provider: string
  /** Upstream calls made to it (fallback tries included). */
  readonly requests: number
  /** Upstream calls that answered with at least one result. */
  readonly hits: number
  /** Upstream calls that failed (an error status, a transport failure, an answer it could not read). */
  readonly errors: number
  readonly latency_ms: { readonly p50: number | null; readonly p95: number | null; readonly samples: number }
  /** Answers served from the cache (or by waiting for an identical search in flight) that this connection had answered. */
  readonly cache_hits: number
  /** Answers this connection served from upstream. */
  readonly cache_misses: number
}

export interface WebSearchShape {
  readonly ttlMs: number
  readonly cache: BoundedMap<string, StoredAnswer>
  readonly inFlight: Map<string, InFlightSearch>
  /** An upstream call to a connection ended: its latency, and whether it failed or found anything. */
  readonly recordCall: (connection: string, provider: string, latencyMs: number, outcome: "hit" | "empty" | "error") => void
  readonly recordCache: (connection: string, provider: string, hit: boolean) => void
  /** Requests answered, cache hits (coalesced waiters included), of which coalesced. */
  readonly recordRequest: (kind: "upstream" | "cached" | "coalesced") => void
  readonly analytics: () => {
    readonly since: string
    readonly totals: { readonly requests: number; readonly cache_hits: number; readonly cache_misses: number; readonly coalesced: number }
    readonly providers: ReadonlyArray<ProviderAnalytics>
  }
}

/** Nearest-rank percentile of unsorted samples; null without samples. */
export const percentile = (samples: ReadonlyArray<number>, p: number): number | null => {
  if (samples.length === 0) return null
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

export const makeWebSearch = (options: {
  readonly ttlSeconds: number
  readonly maxEntries: number
  readonly now?: () => number
}): WebSearchShape => {
  const startedAt = (options.now ?? Date.now)()
  const byConnection = new Map<string, Counters>()
  const totals = { requests: 0, cache_hits: 0, cache_misses: 0, coalesced: 0 }
  const counters = (connection: string, provider: string): Counters => {
    let c = byConnection.get(connection)
    if (!c) {
      c = { provider, requests: 0, hits: 0, errors: 0, cacheHits: 0, cacheMisses: 0, latencies: [], next: 0 }
      byConnection.set(connection, c)
    }
    return c
  }
  return {
    ttlMs: options.ttlSeconds * 1000,
    // A TTL of 0 keeps nothing (coalescing still applies).
    cache: new BoundedMap({ maxEntries: Math.max(1, options.maxEntries), ttlMs: Math.max(1, options.ttlSeconds * 1000), order: "lru" }),
    inFlight: new Map(),
    recordCall: (connection, provider, latencyMs, outcome) => {
      const c = counters(connection, provider)
      c.requests++
      if (outcome === "hit") c.hits++
      if (outcome === "error") c.errors++
      if (c.latencies.length < SAMPLES) c.latencies.push(latencyMs)
      else c.latencies[c.next] = latencyMs
      c.next = (c.next + 1) % SAMPLES
    },
    recordCache: (connection, provider, hit) => {
      const c = counters(connection, provider)
      if (hit) c.cacheHits++
      else c.cacheMisses++
    },
    recordRequest: (kind) => {
      totals.requests++
      if (kind === "upstream") totals.cache_misses++
      else totals.cache_hits++
      if (kind === "coalesced") totals.coalesced++
    },
    analytics: () => ({
      since: new Date(startedAt).toISOString(),
      totals: { ...totals },
      providers: Array.from(byConnection, ([connection, c]) => ({
        connection,
        provider: c.provider,
        requests: c.requests,
        hits: c.hits,
        errors: c.errors,
        latency_ms: { p50: percentile(c.latencies, 50), p95: percentile(c.latencies, 95), samples: c.latencies.length },
        cache_hits: c.cacheHits,
        cache_misses: c.cacheMisses
      })).sort((a, b) => a.connection.localeCompare(b.connection))
    })
  }
}

const nonNegative = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a whole number, 0 or more`, validation: (n) => n >= 0 }),
    Config.withDefault(fallback)
  )

export class WebSearch extends Context.Tag("gateway/WebSearch")<WebSearch, WebSearchShape>() {
  /** `SEARCH_CACHE_TTL_SECONDS` (default 300; 0 turns the cache off) and `SEARCH_CACHE_MAX_ENTRIES` (default 1000). */
  static readonly layer = Layer.effect(
    WebSearch,
    Effect.gen(function* () {
      const ttlSeconds = yield* nonNegative("SEARCH_CACHE_TTL_SECONDS", 300)
      const maxEntries = yield* nonNegative("SEARCH_CACHE_MAX_ENTRIES", 1000)
      return makeWebSearch({ ttlSeconds, maxEntries })
    }).pipe(Effect.orDie)
  )

  static readonly layerTest = (options: { readonly ttlSeconds?: number; readonly maxEntries?: number } = {}) =>
    Layer.succeed(WebSearch, makeWebSearch({ ttlSeconds: options.ttlSeconds ?? 300, maxEntries: options.maxEntries ?? 1000 }))
}
