import { backgroundJob } from "../../platform/flags/background.js"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { AccountingConfig } from "../accounting/AccountingConfig.js"
import { instantMs } from "../../domain/usage.js"
import type { ConnectionUsage, HistoryQuery, LogsQuery, RequestLogs, TelemetrySummary, UsageAggregate, UsageHistory, UsageLogs } from "../../domain/usage.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { bucketLabel, bucketStart } from "../../platform/store/dialect.js"

const DAY = 86_400_000
/** Rows deleted per statement by retention. */
const CHUNK = 5000

interface Row {
  readonly id: number
  readonly ts: number
  readonly request_id: string
  readonly api_key_id: string | null
  readonly connection_id: string | null
  readonly provider: string | null
  readonly model: string | null
  readonly requested_model: string | null
  readonly endpoint: string
  readonly stream: number
  readonly status: number
  readonly tokens_in: number | null
  readonly tokens_out: number | null
  readonly tokens_cached: number | null
  readonly tokens_reasoning: number | null
  readonly tokens_cache_write: number | null
  readonly latency_ms: number | null
  readonly ttft_ms: number | null
  readonly cost_usd: number | null
  readonly fallback_attempts: number
  readonly cache_hit: number
  readonly error: string | null
}

interface AggregateRow {
  readonly key: string | number | null
  readonly requests: number
  readonly errors: number
  readonly tokens_in: number | null
  readonly tokens_out: number | null
  readonly tokens_cached: number | null
  readonly tokens_reasoning: number | null
  readonly cost_usd: number | null
  readonly cache_hits: number | null
  readonly avg_latency: number | null
}

const aggregate = (r: AggregateRow | undefined, key: string | null): typeof UsageAggregate.Type => ({
  key,
  requests: r?.requests ?? 0,
  errors: r?.errors ?? 0,
  tokensIn: r?.tokens_in ?? 0,
  tokensOut: r?.tokens_out ?? 0,
  tokensCached: r?.tokens_cached ?? 0,
  tokensReasoning: r?.tokens_reasoning ?? 0,
  costUsd: Math.round((r?.cost_usd ?? 0) * 1e10) / 1e10,
  cacheHits: r?.cache_hits ?? 0,
  avgLatencyMs: r?.avg_latency === null || r?.avg_latency === undefined ? null : Math.round(r.avg_latency)
})

/** The value at quantile `q` of sorted numbers (nearest rank). */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number | null =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

export interface UsageQueriesShape {
  readonly history: (q: typeof HistoryQuery.Type) => Effect.Effect<typeof UsageHistory.Type>
  readonly logs: (q: typeof LogsQuery.Type) => Effect.Effect<typeof UsageLogs.Type>
  readonly requestLogs: (q: typeof LogsQuery.Type) => Effect.Effect<typeof RequestLogs.Type>
  readonly connection: (c: { readonly id: string; readonly name: string; readonly provider: string }) => Effect.Effect<typeof ConnectionUsage.Type>
  readonly telemetry: (hours: number) => Effect.Effect<typeof TelemetrySummary.Type>
  /** Per connection over the last 24 h: requests and error rate (monitoring). */
  readonly recentByConnection: Effect.Effect<ReadonlyMap<string, { readonly requests: number; readonly errors: number }>>
}

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * Reads over the usage table for the management API. Rows are written by the batched writer;
 * queries see everything flushed (within ~20 ms of a request's end).
 */
export class UsageQueries extends Context.Tag("gateway/UsageQueries")<UsageQueries, UsageQueriesShape>() {
  static readonly layer = Layer.effect(
    UsageQueries,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* BatchWriter

      const filters = (q: {
        apiKeyId?: string | undefined
        provider?: string | undefined
        model?: string | undefined
        requestId?: string | undefined
        status?: string | undefined
        before?: number | undefined
      }) => {
        const parts = []
        if (q.apiKeyId) parts.push(sql`api_key_id = ${q.apiKeyId}`)
        if (q.provider) parts.push(sql`provider = ${q.provider}`)
        if (q.model) parts.push(sql`(model = ${q.model} OR requested_model = ${q.model})`)
        if (q.requestId) parts.push(sql`request_id = ${q.requestId}`)
        if (q.status === "ok") parts.push(sql`status BETWEEN 200 AND 299`)
        else if (q.status === "error") parts.push(sql`(status < 200 OR status > 299)`)
        else if (q.status) parts.push(sql`status = ${Number(q.status)}`)
        if (q.before !== undefined) parts.push(sql`id < ${q.before}`)
        return parts
      }

      const AGG = (key: ReturnType<typeof sql.literal>) => sql`SELECT ${key} AS key, COUNT(*) AS requests,
          SUM(CASE WHEN status BETWEEN 200 AND 299 THEN 0 ELSE 1 END) AS errors,
          SUM(tokens_in) AS tokens_in, SUM(tokens_out) AS tokens_out, SUM(tokens_cached) AS tokens_cached,
          SUM(tokens_reasoning) AS tokens_reasoning, SUM(cost_usd) AS cost_usd, SUM(cache_hit) AS cache_hits,
          AVG(latency_ms) AS avg_latency FROM usage`

      const GROUP_KEYS: Record<string, string> = {
        hour: bucketStart("ts", "hour"),
        day: bucketStart("ts", "day"),
        model: "model",
        provider: "provider",
        apiKey: "api_key_id",
        connection: "connection_id",
        endpoint: "endpoint"
      }

      const history: UsageQueriesShape["history"] = (q) =>
        Effect.gen(function* () {
          yield* writer.flush
          const to = q.to ? instantMs(q.to) : Date.now()
          const from = q.from ? instantMs(q.from) : to - 7 * DAY
          const groupBy = q.groupBy ?? "day"
          const where = sql.and([sql`ts >= ${from}`, sql`ts <= ${to}`, ...filters(q)])
          const rows = yield* sql<AggregateRow>`${AGG(sql.literal(GROUP_KEYS[groupBy]!))} WHERE ${where} GROUP BY 1 ORDER BY 1`.pipe(Effect.orDie)
          const [totals] = yield* sql<AggregateRow>`${AGG(sql.literal("NULL"))} WHERE ${where}`.pipe(Effect.orDie)
          // Time buckets come back as their start (epoch ms) and are shown as `2024-05-01T13:00:00Z` / `2024-05-01`.
          const label = groupBy === "hour" || groupBy === "day" ? (k: string | number) => bucketLabel(k, groupBy) : String
          return { from: iso(from), to: iso(to), groupBy, rows: rows.map((r) => aggregate(r, r.key === null ? null : label(r.key))), totals: aggregate(totals, null) }
        })

      const page = (q: typeof LogsQuery.Type) =>
        Effect.gen(function* () {
          yield* writer.flush
          const limit = q.limit ?? 100
          const where = filters(q)
          const rows = yield* (
            where.length > 0
              ? sql<Row>`SELECT * FROM usage WHERE ${sql.and(where)} ORDER BY id DESC LIMIT ${limit + 1}`
              : sql<Row>`SELECT * FROM usage ORDER BY id DESC LIMIT ${limit + 1}`
          ).pipe(Effect.orDie)
          const more = rows.length > limit
          const shown = rows.slice(0, limit)
          return { rows: shown, nextBefore: more ? shown[shown.length - 1]!.id : null }
        })

      const line = (r: Row) => ({
        id: r.id,
        time: iso(r.ts),
        requestId: r.request_id,
        apiKeyId: r.api_key_id,
        provider: r.provider,
        model: r.model,
        endpoint: r.endpoint,
        status: r.status,
        tokensIn: r.tokens_in,
        tokensOut: r.tokens_out,
        costUsd: r.cost_usd,
        latencyMs: r.latency_ms
      })

      const windowSummary = (connectionId: string, since: number) =>
        Effect.gen(function* () {
          const [agg] = yield* sql<AggregateRow>`${AGG(sql.literal("NULL"))} WHERE connection_id = ${connectionId} AND ts >= ${since}`.pipe(Effect.orDie)
          const latencies = (yield* sql<{
            l: number
          }>`SELECT latency_ms AS l FROM usage WHERE connection_id = ${connectionId} AND ts >= ${since} AND latency_ms IS NOT NULL AND status BETWEEN 200 AND 299 ORDER BY latency_ms LIMIT 100000`.pipe(
            Effect.orDie
          )).map((r) => r.l)
          const a = aggregate(agg, null)
          return {
            requests: a.requests,
            errors: a.errors,
            errorRate: a.requests === 0 ? 0 : a.errors / a.requests,
            tokensIn: a.tokensIn,
            tokensOut: a.tokensOut,
            costUsd: a.costUsd,
            p50LatencyMs: quantile(latencies, 0.5),
            p95LatencyMs: quantile(latencies, 0.95)
          }
        })

      return {
        history,
        logs: (q) => Effect.map(page(q), (p) => ({ logs: p.rows.map(line), nextBefore: p.nextBefore })),
        requestLogs: (q) =>
          Effect.map(page(q), (p) => ({
            requests: p.rows.map((r) => ({
              ...line(r),
              connectionId: r.connection_id,
              requestedModel: r.requested_model,
              stream: r.stream === 1,
              tokensCached: r.tokens_cached,
              tokensReasoning: r.tokens_reasoning,
              tokensCacheWrite: r.tokens_cache_write,
              ttftMs: r.ttft_ms,
              fallbackAttempts: r.fallback_attempts,
              cacheHit: r.cache_hit === 1,
              error: r.error
            })),
            nextBefore: p.nextBefore
          })),
        connection: (c) =>
          Effect.gen(function* () {
            yield* writer.flush
            const now = Date.now()
            const [last] = yield* sql<{ ts: number | null }>`SELECT MAX(ts) AS ts FROM usage WHERE connection_id = ${c.id}`.pipe(Effect.orDie)
            const models = yield* sql<AggregateRow>`${AGG(sql.literal("model"))} WHERE connection_id = ${c.id} AND ts >= ${now - 30 * DAY} GROUP BY 1 ORDER BY 2 DESC`.pipe(
              Effect.orDie
            )
            return {
              connectionId: c.id,
              name: c.name,
              provider: c.provider,
              lastRequestAt: last?.ts ? iso(last.ts) : null,
              last24h: yield* windowSummary(c.id, now - DAY),
              last7d: yield* windowSummary(c.id, now - 7 * DAY),
              last30d: yield* windowSummary(c.id, now - 30 * DAY),
              models: models.map((m) => {
                const a = aggregate(m, m.key === null ? null : String(m.key))
                return { model: a.key, requests: a.requests, tokensIn: a.tokensIn, tokensOut: a.tokensOut, costUsd: a.costUsd }
              })
            }
          }),
        telemetry: (hours) =>
          Effect.gen(function* () {
            yield* writer.flush
            const to = Date.now()
            const from = to - hours * 3_600_000
            const rows = yield* sql<{
              provider: string | null
              status: number
              latency_ms: number | null
              ttft_ms: number | null
            }>`SELECT provider, status, latency_ms, ttft_ms FROM usage WHERE ts >= ${from} AND provider IS NOT NULL ORDER BY id DESC LIMIT 200000`.pipe(Effect.orDie)
            const byProvider = new Map<string, { count: number; errors: number; latencies: Array<number>; ttfts: Array<number> }>()
            for (const r of rows) {
              const p = byProvider.get(r.provider!) ?? { count: 0, errors: 0, latencies: [], ttfts: [] }
              p.count++
              if (r.status < 200 || r.status > 299) p.errors++
              else {
                if (r.latency_ms !== null) p.latencies.push(r.latency_ms)
                if (r.ttft_ms !== null) p.ttfts.push(r.ttft_ms)
              }
              byProvider.set(r.provider!, p)
            }
            return {
              windowHours: hours,
              from: iso(from),
              to: iso(to),
              providers: [...byProvider.entries()]
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([provider, p]) => {
                  const l = p.latencies.sort((a, b) => a - b)
                  const t = p.ttfts.sort((a, b) => a - b)
                  return { provider, count: p.count, errors: p.errors, p50: quantile(l, 0.5), p95: quantile(l, 0.95), p99: quantile(l, 0.99), p50TtftMs: quantile(t, 0.5) }
                })
            }
          }),
        recentByConnection: Effect.gen(function* () {
          yield* writer.flush
          const rows = yield* sql<{
            connection_id: string
            requests: number
            errors: number
          }>`SELECT connection_id, COUNT(*) AS requests, SUM(CASE WHEN status BETWEEN 200 AND 299 THEN 0 ELSE 1 END) AS errors FROM usage WHERE ts >= ${Date.now() - DAY} AND connection_id IS NOT NULL GROUP BY connection_id`.pipe(
            Effect.orDie
          )
          return new Map(rows.map((r) => [r.connection_id, { requests: r.requests, errors: r.errors }]))
        })
      }
    })
  )
}

/**
 * Keeps the usage table bounded: every hour (and a minute after start) rows older than the
 * retention period are deleted, then the oldest beyond the row cap. Runs in the server only.
 */
export const UsageRetention = Layer.scopedDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AccountingConfig
    /**
     * Deletes in chunks of 5000 with a pause between them: SQLite runs on the event loop, and one
     * large DELETE (a million rows after downtime) would stall every request for seconds.
     */
    const chunked = (deleteChunk: Effect.Effect<number, unknown>) =>
      Effect.iterate(
        { total: 0, last: CHUNK },
        {
          while: (s) => s.last >= CHUNK,
          body: (s) => Effect.map(Effect.zipLeft(deleteChunk, Effect.sleep("5 millis")), (n) => ({ total: s.total + n, last: n }))
        }
      ).pipe(Effect.map((s) => s.total))
    const count = (rows: ReadonlyArray<unknown>) => rows.length
    const prune = Effect.gen(function* () {
      const cutoff = (yield* Clock.currentTimeMillis) - config.usageRetentionDays * DAY
      const old = yield* chunked(Effect.map(sql`DELETE FROM usage WHERE id IN (SELECT id FROM usage WHERE ts < ${cutoff} LIMIT ${CHUNK}) RETURNING 1 AS n`, count))
      const [edge] = yield* sql<{ id: number }>`SELECT id FROM usage ORDER BY id DESC LIMIT 1 OFFSET ${config.usageMaxRows}`
      const excess = edge ? yield* chunked(Effect.map(sql`DELETE FROM usage WHERE id IN (SELECT id FROM usage WHERE id <= ${edge.id} LIMIT ${CHUNK}) RETURNING 1 AS n`, count)) : 0
      if (old + excess > 0)
        yield* Effect.logInfo(`usage retention: deleted ${old} rows older than ${config.usageRetentionDays} days and ${excess} beyond ${config.usageMaxRows} rows`)
    }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("usage retention failed; will retry", cause)))
    if (!(yield* backgroundJob("usage retention"))) return
    yield* Effect.forkScoped(Effect.sleep("1 minute").pipe(Effect.zipRight(Effect.repeat(prune, Schedule.spaced("1 hour")))))
  })
)

export { DAY }
