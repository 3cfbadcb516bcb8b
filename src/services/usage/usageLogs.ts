/**
 * The usage log, newest first, a page at a time: a short line per request (GET /api/usage/logs)
 * or each request in full (the request log).
 */
import * as Effect from "effect/Effect"
import type { LogsQuery } from "../../domain/usage.js"
import type { UsageQueriesShape } from "./UsageQueries.js"
import { filters, iso, type Row, type UsageReadDeps } from "./usageRows.js"

/** A request's short line. */
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

/** The log's pages: `logs` (a line per request) and `requestLogs` (each request in full). */
export const makeUsageLogs = ({ sql, writer }: UsageReadDeps) => {
  const page = (q: typeof LogsQuery.Type) =>
    Effect.gen(function* () {
      yield* writer.flush
      const limit = q.limit ?? 100
      const where = filters(sql, q)
      const rows = yield* (
        where.length > 0
          ? sql<Row>`SELECT * FROM usage WHERE ${sql.and(where)} ORDER BY id DESC LIMIT ${limit + 1}`
          : sql<Row>`SELECT * FROM usage ORDER BY id DESC LIMIT ${limit + 1}`
      ).pipe(Effect.orDie)
      const more = rows.length > limit
      const shown = rows.slice(0, limit)
      return { rows: shown, nextBefore: more ? shown[shown.length - 1]!.id : null }
    })

  const logs: UsageQueriesShape["logs"] = (q) => Effect.map(page(q), (p) => ({ logs: p.rows.map(line), nextBefore: p.nextBefore }))

  const requestLogs: UsageQueriesShape["requestLogs"] = (q) =>
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
    }))

  return { logs, requestLogs }
}
