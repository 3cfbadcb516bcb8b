/**
 * The usage table's rows as the management API reads them: a row, an aggregate over rows, the
 * filters of a query and the aggregate SELECT they go under.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { UsageAggregate } from "../../domain/usage.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import { bucketStart } from "../../platform/store/dialect.js"
import { ownerFilters } from "./usageOwners.js"

export const DAY = 86_400_000

export const iso = (ms: number) => new Date(ms).toISOString()

export interface Row {
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

export interface AggregateRow {
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

/** An aggregate row as the API shows it (zeros when there were no rows). */
export const aggregate = (r: AggregateRow | undefined, key: string | null): typeof UsageAggregate.Type => ({
  key,
  requests: r?.requests ?? 0,
  errors: r?.errors ?? 0,
  tokensIn: r?.tokens_in ?? 0,
  tokensOut: r?.tokens_out ?? 0,
  tokensCached: r?.tokens_cached ?? 0,
  cachedInputRatio: r?.tokens_in ? Math.round(((r.tokens_cached ?? 0) / r.tokens_in) * 1e4) / 1e4 : null,
  tokensReasoning: r?.tokens_reasoning ?? 0,
  costUsd: Math.round((r?.cost_usd ?? 0) * 1e10) / 1e10,
  cacheHits: r?.cache_hits ?? 0,
  avgLatencyMs: r?.avg_latency === null || r?.avg_latency === undefined ? null : Math.round(r.avg_latency)
})

/** The value at quantile `q` of sorted numbers (nearest rank). */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number | null =>
  sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!

/** The conditions of a query's filters (its key, its key's team or user, provider, model, request, status, and the page's `before`). */
export const filters = (
  sql: SqlClient.SqlClient,
  q: {
    apiKeyId?: string | undefined
    provider?: string | undefined
    model?: string | undefined
    requestId?: string | undefined
    status?: string | undefined
    before?: number | undefined
    teamId?: string | undefined
    userId?: string | undefined
  }
) => {
  const parts = []
  if (q.apiKeyId) parts.push(sql`api_key_id = ${q.apiKeyId}`)
  parts.push(...ownerFilters(sql, q))
  if (q.provider) parts.push(sql`provider = ${q.provider}`)
  if (q.model) parts.push(sql`(model = ${q.model} OR requested_model = ${q.model})`)
  if (q.requestId) parts.push(sql`request_id = ${q.requestId}`)
  if (q.status === "ok") parts.push(sql`status BETWEEN 200 AND 299`)
  else if (q.status === "error") parts.push(sql`(status < 200 OR status > 299)`)
  else if (q.status) parts.push(sql`status = ${Number(q.status)}`)
  if (q.before !== undefined) parts.push(sql`id < ${q.before}`)
  return parts
}

/** `SELECT <key>, <the aggregates> FROM usage` (or `from`, a table like it): a WHERE (and GROUP BY) follows. */
export const aggregateSelect = (
  sql: SqlClient.SqlClient,
  key: ReturnType<SqlClient.SqlClient["literal"]>,
  from: ReturnType<SqlClient.SqlClient["literal"]> = sql`usage`
) => sql`SELECT ${key} AS key, COUNT(*) AS requests,
          SUM(CASE WHEN status BETWEEN 200 AND 299 THEN 0 ELSE 1 END) AS errors,
          SUM(tokens_in) AS tokens_in, SUM(tokens_out) AS tokens_out, SUM(tokens_cached) AS tokens_cached,
          SUM(tokens_reasoning) AS tokens_reasoning, SUM(cost_usd) AS cost_usd, SUM(cache_hit) AS cache_hits,
          AVG(latency_ms) AS avg_latency FROM ${from}`

/** The column (or bucket expression) each `groupBy` of a history groups by. */
export const GROUP_KEYS: Record<string, string> = {
  hour: bucketStart("ts", "hour"),
  day: bucketStart("ts", "day"),
  model: "model",
  requestedModel: "COALESCE(requested_model, model)",
  provider: "provider",
  apiKey: "api_key_id",
  connection: "connection_id",
  endpoint: "endpoint",
  /** Columns of `ownedUsage` (usageOwners.ts). */
  team: "owner_team",
  user: "owner_user"
}

/** What the reads are given. */
export interface UsageReadDeps {
  readonly sql: SqlClient.SqlClient
  /** The batched writer: flushed before a read, so the read sees every request that ended. */
  readonly writer: BatchWriterShape
}
