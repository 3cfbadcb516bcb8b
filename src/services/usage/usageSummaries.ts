/**
 * Summaries of the usage table: totals over a time range by group, a connection's usage, the
 * providers' latencies, and the last day per connection.
 */
import * as Effect from "effect/Effect"
import { instantMs } from "../../domain/usage.js"
import { bucketLabel } from "../../platform/store/dialect.js"
import type { UsageQueriesShape } from "./UsageQueries.js"
import { checkOwners, namesOf, ownedUsage } from "./usageOwners.js"
import { type AggregateRow, aggregate, aggregateSelect, DAY, filters, GROUP_KEYS, iso, quantile, type UsageReadDeps } from "./usageRows.js"

/**
 * Totals from `from` to `to` (the last 7 days by default) grouped by hour, day, model, provider,
 * key, connection, endpoint, or the key's team or user (usageOwners.ts). The totals count each
 * request once, also when a user's key counts for several teams.
 */
export const makeHistory =
  ({ sql, writer }: UsageReadDeps): UsageQueriesShape["history"] =>
  (q) =>
    Effect.gen(function* () {
      yield* checkOwners(sql, q)
      yield* writer.flush
      const to = q.to ? instantMs(q.to) : Date.now()
      const from = q.from ? instantMs(q.from) : to - 7 * DAY
      const groupBy = q.groupBy ?? "day"
      const where = sql.and([sql`ts >= ${from}`, sql`ts <= ${to}`, ...filters(sql, q)])
      const source = groupBy === "team" || groupBy === "user" ? ownedUsage(sql, groupBy === "team") : sql`usage`
      const rows =
        yield* sql<AggregateRow>`${aggregateSelect(sql, sql.literal(GROUP_KEYS[groupBy]!), source)} WHERE ${where} GROUP BY 1 ORDER BY 1`.pipe(
          Effect.orDie
        )
      const [totals] = yield* sql<AggregateRow>`${aggregateSelect(sql, sql.literal("NULL"))} WHERE ${where}`.pipe(Effect.orDie)
      // Time buckets come back as their start (epoch ms) and are shown as `2024-05-01T13:00:00Z` / `2024-05-01`.
      const label = groupBy === "hour" || groupBy === "day" ? (k: string | number) => bucketLabel(k, groupBy) : String
      const named = groupBy === "apiKey" || groupBy === "team" || groupBy === "user"
      const names = named
        ? yield* namesOf(
            sql,
            groupBy,
            rows.flatMap((r) => (r.key === null ? [] : [String(r.key)]))
          )
        : undefined
      return {
        from: iso(from),
        to: iso(to),
        groupBy,
        rows: rows.map((r) => {
          const a = aggregate(r, r.key === null ? null : label(r.key))
          return names ? { ...a, name: a.key === null ? null : (names.get(a.key) ?? null) } : a
        }),
        totals: aggregate(totals, null)
      }
    })

/** One connection's usage: its last request, its last 24 hours, 7 and 30 days, and its models over 30 days. */
export const makeConnectionUsage = ({ sql, writer }: UsageReadDeps): UsageQueriesShape["connection"] => {
  const windowSummary = (connectionId: string, since: number) =>
    Effect.gen(function* () {
      const [agg] =
        yield* sql<AggregateRow>`${aggregateSelect(sql, sql.literal("NULL"))} WHERE connection_id = ${connectionId} AND ts >= ${since}`.pipe(
          Effect.orDie
        )
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

  return (c) =>
    Effect.gen(function* () {
      yield* writer.flush
      const now = Date.now()
      const [last] = yield* sql<{ ts: number | null }>`SELECT MAX(ts) AS ts FROM usage WHERE connection_id = ${c.id}`.pipe(Effect.orDie)
      const models =
        yield* sql<AggregateRow>`${aggregateSelect(sql, sql.literal("model"))} WHERE connection_id = ${c.id} AND ts >= ${now - 30 * DAY} GROUP BY 1 ORDER BY 2 DESC`.pipe(
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
    })
}

/** Per provider over the last `hours`: requests, errors, and the latency and time-to-first-token percentiles of the answered ones. */
export const makeTelemetry =
  ({ sql, writer }: UsageReadDeps): UsageQueriesShape["telemetry"] =>
  (hours) =>
    Effect.gen(function* () {
      yield* writer.flush
      const to = Date.now()
      const from = to - hours * 3_600_000
      const rows = yield* sql<{
        provider: string | null
        status: number
        latency_ms: number | null
        ttft_ms: number | null
      }>`SELECT provider, status, latency_ms, ttft_ms FROM usage WHERE ts >= ${from} AND provider IS NOT NULL ORDER BY id DESC LIMIT 200000`.pipe(
        Effect.orDie
      )
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
            return {
              provider,
              count: p.count,
              errors: p.errors,
              p50: quantile(l, 0.5),
              p95: quantile(l, 0.95),
              p99: quantile(l, 0.99),
              p50TtftMs: quantile(t, 0.5)
            }
          })
      }
    })

/** Per connection over the last 24 hours: requests and errors (monitoring). */
export const recentByConnection = ({ sql, writer }: UsageReadDeps): UsageQueriesShape["recentByConnection"] =>
  Effect.gen(function* () {
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
