import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type { Usage } from "../../domain/canonical.js"
import { type Codec, SharedState } from "../../platform/state/SharedState.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { AccountingConfig } from "./AccountingConfig.js"

/** One cached answer. `body` is the client-format JSON answer, ready to send. */
export interface CacheEntry {
  readonly key: string
  /** The model id as requested (what the key was built from). */
  readonly model: string
  /** The client wire format of `body`. */
  readonly format: string
  readonly body: string
  readonly usage: Partial<Usage> | null
  /** What the original upstream call cost; reported as `X-Gateway-Cost-Saved` on a hit. */
  readonly costUsd: number
  readonly provider: string | null
  /** The model that produced the answer (X-Gateway-Model on a hit, as on the miss); absent in entries stored before it was kept. */
  readonly servedModel?: string
  /** `cacheParams` of the request; needed for similarity matching. */
  readonly params?: string
  /** Embedding of `promptText` of the request; needed for similarity matching. */
  readonly embedding?: Float32Array
  readonly createdAt: number
  readonly expiresAt: number
}

/** `put` input: times default to now and now + `cacheTtlMs`. */
export type CachePut = Omit<CacheEntry, "createdAt" | "expiresAt"> & { readonly createdAt?: number; readonly expiresAt?: number }

/** A similarity query: only entries with equal format, model and params are compared. */
export interface SimilarQuery {
  readonly format: string
  readonly model: string
  readonly params: string
  readonly embedding: Float32Array
}

/** A hit: the entry, how it matched, and the cosine similarity (1 for an exact match). */
export type CacheHit = CacheEntry & { readonly match: "exact" | "similar"; readonly similarity: number }

export interface CacheStats {
  readonly memorySize: number
  readonly memoryMaxSize: number
  /** Unexpired rows on disk (rows still queued in the batch writer are not counted yet). */
  readonly dbSize: number
  /** Exact and similar hits. */
  readonly hits: number
  readonly misses: number
  /** hits / (hits + misses), 0 before any lookup. */
  readonly hitRate: number
  readonly similarHits: number
}

export interface ResponseCacheShape {
  /** Exact key (memory, then database), then, with `similar`, the best in-memory entry at or above `cacheSimilarity`. Never fails. */
  readonly get: (key: string, similar?: SimilarQuery) => Effect.Effect<CacheHit | undefined>
  /** Stores in memory and queues the database write; never blocks on disk. */
  readonly put: (entry: CachePut) => Effect.Effect<CacheEntry>
  /** Empties both tiers (waits for queued writes first); answers how many entries each held. */
  readonly clear: Effect.Effect<{ readonly memory: number; readonly db: number }>
  readonly stats: Effect.Effect<CacheStats>
  /** Deletes expired rows from the database and expired entries from memory; answers the rows deleted. Runs every minute. */
  readonly sweep: Effect.Effect<number>
}

/** How often expired rows are deleted from the database. */
export const SWEEP_INTERVAL = "1 minute"

/** Cosine similarity; 0 when the lengths differ or either vector is zero. */
export const cosine = (a: Float32Array, b: Float32Array): number => {
  if (a.length !== b.length || a.length === 0) return 0
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!
    const y = b[i]!
    dot += x * y
    na += x * x
    nb += y * y
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

const norm = (v: Float32Array): number => {
  let s = 0
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!
  return Math.sqrt(s)
}

interface Slot {
  readonly entry: CacheEntry
  /** Norm of the embedding, computed once (0 when there is none). */
  readonly norm: number
}

interface DbRow {
  readonly key: string
  readonly model: string
  readonly format: string
  readonly body: string
  readonly usage: string | null
  readonly cost_usd: number
  readonly provider: string | null
  readonly embedding: Uint8Array | null
  readonly created_at: number
  readonly expires_at: number
}

/**
 * The `usage` column holds the usage object as JSON; the similarity params and the serving
 * model ride along in it as `"_params"` and `"_served"` (the migration has no columns for
 * them). A row with those but no usage holds only them.
 */
const encodeUsage = (usage: Partial<Usage> | null, params: string | undefined, served: string | undefined): string | null =>
  usage === null && params === undefined && served === undefined
    ? null
    : JSON.stringify({
        ...(usage ?? {}),
        ...(params !== undefined ? { _params: params } : {}),
        ...(served !== undefined ? { _served: served } : {})
      })

const decodeUsage = (text: string | null): { usage: Partial<Usage> | null; params: string | undefined; served: string | undefined } => {
  if (text === null) return { usage: null, params: undefined, served: undefined }
  try {
    const { _params, _served, ...rest } = JSON.parse(text) as Record<string, unknown>
    const params = typeof _params === "string" ? _params : undefined
    const served = typeof _served === "string" ? _served : undefined
    const usage = Object.keys(rest).length === 0 && (params !== undefined || served !== undefined) ? null : (rest as Partial<Usage>)
    return { usage, params, served }
  } catch {
    return { usage: null, params: undefined, served: undefined }
  }
}

const encodeEmbedding = (e: Float32Array | undefined): Buffer | null =>
  e === undefined ? null : Buffer.from(e.buffer, e.byteOffset, e.byteLength)

/** Copies: a BLOB's bytes need not be 4-byte aligned. */
const decodeEmbedding = (b: Uint8Array | null): Float32Array | undefined => {
  if (b === null || b.byteLength === 0 || b.byteLength % 4 !== 0) return undefined
  const copy = new Uint8Array(b.byteLength)
  copy.set(b)
  return new Float32Array(copy.buffer)
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): an entry it stored (the
 * other processes keep it in their memory tier; the database row is written once, by the
 * process that stored it), or an operator's clear.
 */
export type CacheChange = { readonly op: "put"; readonly entry: CacheEntry } | { readonly op: "clear" }

const changeCodec: Codec<CacheChange> = {
  encode: (c) =>
    JSON.stringify(
      c.op === "put" && c.entry.embedding !== undefined ? { ...c, entry: { ...c.entry, embedding: Array.from(c.entry.embedding) } } : c
    ),
  decode: (text) => {
    const c = JSON.parse(text)
    return c.op === "put" && Array.isArray(c.entry.embedding)
      ? { ...c, entry: { ...c.entry, embedding: Float32Array.from(c.entry.embedding) } }
      : c
  }
}

const fromRow = (r: DbRow): CacheEntry => {
  const { params, usage, served } = decodeUsage(r.usage)
  const embedding = decodeEmbedding(r.embedding)
  return {
    key: r.key,
    model: r.model,
    format: r.format,
    body: r.body,
    usage,
    costUsd: r.cost_usd,
    provider: r.provider,
    ...(served !== undefined ? { servedModel: served } : {}),
    ...(params !== undefined ? { params } : {}),
    ...(embedding !== undefined ? { embedding } : {}),
    createdAt: r.created_at,
    expiresAt: r.expires_at
  }
}

const toRow = (e: CacheEntry) => ({
  key: e.key,
  model: e.model,
  format: e.format,
  body: e.body,
  usage: encodeUsage(e.usage, e.params, e.servedModel),
  cost_usd: e.costUsd,
  provider: e.provider,
  embedding: encodeEmbedding(e.embedding),
  created_at: e.createdAt,
  expires_at: e.expiresAt
})

/**
 * The response cache: memory LRU, database tier, in-memory similarity tier (docs/accounting.md#tiers); stored entries
 * also reach the other processes' memory tier on the `response-cache` channel.
 */
export class ResponseCache extends Context.Tag("gateway/ResponseCache")<ResponseCache, ResponseCacheShape>() {
  static readonly layer = Layer.scoped(
    ResponseCache,
    Effect.gen(function* () {
      const config = yield* AccountingConfig
      const sql = yield* SqlClient.SqlClient
      const writer = yield* BatchWriter
      const shared = yield* SharedState.orLocal
      const max = Math.max(1, config.cacheMaxEntries)
      /** Recency order (a hit refreshes it): the first key is the least recently used. */
      const memory = new BoundedMap<string, Slot>({ maxEntries: max, order: "lru" })
      let hits = 0
      let misses = 0
      let similarHits = 0

      const remember = (entry: CacheEntry) => {
        memory.set(entry.key, { entry, norm: entry.embedding ? norm(entry.embedding) : 0 })
      }

      /** A hit: the entry becomes the most recently used. */
      const touch = (slot: Slot) => {
        memory.get(slot.entry.key)
      }

      const channel = shared.channel<CacheChange>(
        "response-cache",
        (c) => {
          // An entry that expires meanwhile is dropped on read, as any other.
          if (c.op === "clear") memory.clear()
          else remember(c.entry)
        },
        changeCodec
      )

      const fromDb = (key: string, now: number) =>
        sql<DbRow>`SELECT key, model, format, body, usage, cost_usd, provider, embedding, created_at, expires_at
          FROM cache_entries WHERE key = ${key} AND expires_at > ${now}`.pipe(
          Effect.map((rows) => (rows[0] ? fromRow(rows[0]) : undefined)),
          Effect.catchAll((error) => Effect.as(Effect.logWarning("response cache: database read failed", error.message), undefined))
        )

      const mostSimilar = (q: SimilarQuery, now: number): { slot: Slot; similarity: number } | undefined => {
        const qNorm = norm(q.embedding)
        if (qNorm === 0) return undefined
        let best: { slot: Slot; similarity: number } | undefined
        for (const [key, slot] of memory) {
          const e = slot.entry
          if (e.expiresAt <= now) {
            memory.delete(key)
            continue
          }
          if (e.embedding === undefined || e.params !== q.params || e.format !== q.format || e.model !== q.model) continue
          if (e.embedding.length !== q.embedding.length || slot.norm === 0) continue
          let dot = 0
          for (let i = 0; i < e.embedding.length; i++) dot += e.embedding[i]! * q.embedding[i]!
          const similarity = dot / (slot.norm * qNorm)
          if (similarity >= config.cacheSimilarity && (best === undefined || similarity > best.similarity)) best = { slot, similarity }
        }
        return best
      }

      const get = (key: string, similar?: SimilarQuery): Effect.Effect<CacheHit | undefined> =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const slot = memory.peek(key)
          if (slot !== undefined) {
            if (slot.entry.expiresAt > now) {
              touch(slot)
              hits++
              return { ...slot.entry, match: "exact" as const, similarity: 1 }
            }
            memory.delete(key)
          }
          const row = yield* fromDb(key, now)
          if (row !== undefined) {
            remember(row)
            hits++
            return { ...row, match: "exact" as const, similarity: 1 }
          }
          if (similar !== undefined) {
            const best = mostSimilar(similar, now)
            if (best !== undefined) {
              touch(best.slot)
              hits++
              similarHits++
              return { ...best.slot.entry, match: "similar" as const, similarity: best.similarity }
            }
          }
          misses++
          return undefined
        })

      const put = (input: CachePut): Effect.Effect<CacheEntry> =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const createdAt = input.createdAt ?? now
          const entry: CacheEntry = { ...input, createdAt, expiresAt: input.expiresAt ?? createdAt + config.cacheTtlMs }
          if (entry.expiresAt > now) {
            remember(entry)
            if (channel.shared) channel.publish({ op: "put", entry })
          }
          writer.append("cache_entries", toRow(entry))
          return entry
        })

      const dropExpiredMemory = (now: number) => {
        for (const [key, slot] of memory) if (slot.entry.expiresAt <= now) memory.delete(key)
      }

      const sweep: Effect.Effect<number> = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        dropExpiredMemory(now)
        return rowsChanged(yield* sql`DELETE FROM cache_entries WHERE expires_at <= ${now}`.raw)
      }).pipe(Effect.catchAll((error) => Effect.as(Effect.logWarning("response cache: sweep failed", error.message), 0)))

      const clear = Effect.gen(function* () {
        const inMemory = memory.size
        memory.clear()
        if (channel.shared) channel.publish({ op: "clear" })
        // Writes still queued would land after the DELETE and bring entries back.
        yield* writer.flush
        const deleted = rowsChanged(yield* sql`DELETE FROM cache_entries`.raw)
        // Anything put while the flush ran.
        memory.clear()
        hits = 0
        misses = 0
        similarHits = 0
        return { memory: inMemory, db: deleted }
      }).pipe(Effect.orDie)

      const stats = Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        dropExpiredMemory(now)
        const rows = yield* sql<{ n: number }>`SELECT count(*) AS n FROM cache_entries WHERE expires_at > ${now}`
        const total = hits + misses
        return {
          memorySize: memory.size,
          memoryMaxSize: max,
          dbSize: rows[0]?.n ?? 0,
          hits,
          misses,
          hitRate: total === 0 ? 0 : hits / total,
          similarHits
        }
      }).pipe(Effect.orDie)

      yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(SWEEP_INTERVAL)))

      return { get, put, clear, stats, sweep } satisfies ResponseCacheShape
    })
  )
}
