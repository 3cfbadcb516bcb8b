/**
 * Usage as CSV (`GET /api/usage/export`, `gateway usage --csv`): the history's groups, or one
 * line per request with its key's owner (usageOwners.ts). RFC 4180: a header line, CRLF line
 * ends, fields with a comma, quote or line break quoted.
 */
import * as Effect from "effect/Effect"
import { BadRequest, type NotFound } from "../../domain/errors.js"
import { type ExportQuery, instantMs } from "../../domain/usage.js"
import type { UsageQueriesShape } from "./UsageQueries.js"
import { checkOwners, keyOwners } from "./usageOwners.js"
import { DAY, filters, iso, type Row, type UsageReadDeps } from "./usageRows.js"

/** The most requests one per-request export holds; a range with more is a 400 asking for a narrower one. */
export const EXPORT_MAX_ROWS = 100_000

/**
 * One field. Text that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a
 * carriage return first: key, team and user names are typed by people) gets a `'` before it.
 */
const cell = (v: string | number | null | undefined): string => {
  if (v === null || v === undefined) return ""
  if (typeof v === "number") return String(v)
  const s = /^[=+\-@\t\r]/.test(v) ? `'${v}` : v
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
}

const csv = (header: ReadonlyArray<string>, lines: ReadonlyArray<ReadonlyArray<string | number | null | undefined>>) =>
  [header, ...lines].map((l) => l.map(cell).join(",")).join("\r\n") + "\r\n"

/** A cost as the cost headers write it (10 decimals, never an exponent). */
const usd = (n: number | null) => (n === null ? null : n.toFixed(10))

const GROUP_COLUMNS = [
  "requests",
  "errors",
  "tokens_in",
  "tokens_out",
  "tokens_cached",
  "tokens_reasoning",
  "cost_usd",
  "cache_hits",
  "avg_latency_ms"
]

const REQUEST_COLUMNS = [
  "time",
  "request_id",
  "api_key_id",
  "api_key_name",
  "user_id",
  "user_name",
  "user_email",
  "team_ids",
  "team_names",
  "provider",
  "model",
  "requested_model",
  "endpoint",
  "status",
  "tokens_in",
  "tokens_out",
  "tokens_cached",
  "tokens_reasoning",
  "cost_usd",
  "latency_ms",
  "cache_hit"
]

/** The CSV text of an export: grouped through `history`, or per request. */
export const makeExport =
  (deps: UsageReadDeps, history: UsageQueriesShape["history"]) =>
  (q: typeof ExportQuery.Type): Effect.Effect<string, BadRequest | NotFound> =>
    q.groupBy !== undefined
      ? Effect.map(history(q), (h) => {
          const named = h.groupBy === "apiKey" || h.groupBy === "team" || h.groupBy === "user"
          return csv(
            [h.groupBy, ...(named ? ["name"] : []), ...GROUP_COLUMNS],
            h.rows.map((r) => [
              r.key,
              ...(named ? [r.name ?? null] : []),
              r.requests,
              r.errors,
              r.tokensIn,
              r.tokensOut,
              r.tokensCached,
              r.tokensReasoning,
              usd(r.costUsd),
              r.cacheHits,
              r.avgLatencyMs
            ])
          )
        })
      : perRequest(deps, q)

const perRequest = ({ sql, writer }: UsageReadDeps, q: typeof ExportQuery.Type) =>
  Effect.gen(function* () {
    yield* checkOwners(sql, q)
    yield* writer.flush
    const to = q.to ? instantMs(q.to) : Date.now()
    const from = q.from ? instantMs(q.from) : to - 7 * DAY
    const where = sql.and([sql`ts >= ${from}`, sql`ts <= ${to}`, ...filters(sql, q)])
    const rows = yield* sql<Row>`SELECT * FROM usage WHERE ${where} ORDER BY id LIMIT ${EXPORT_MAX_ROWS + 1}`.pipe(Effect.orDie)
    if (rows.length > EXPORT_MAX_ROWS)
      return yield* new BadRequest({
        message: `the range holds more than ${EXPORT_MAX_ROWS} requests: narrow from/to, add a filter, or export with groupBy`
      })
    const owners = yield* keyOwners(sql, [...new Set(rows.flatMap((r) => (r.api_key_id === null ? [] : [r.api_key_id])))])
    return csv(
      REQUEST_COLUMNS,
      rows.map((r) => {
        const o = r.api_key_id === null ? undefined : owners.get(r.api_key_id)
        return [
          iso(Number(r.ts)),
          r.request_id,
          r.api_key_id,
          o?.keyName,
          o?.userId,
          o?.userName,
          o?.userEmail,
          o ? o.teams.map((t) => t.id).join(";") : null,
          o ? o.teams.map((t) => t.name).join(";") : null,
          r.provider,
          r.model,
          r.requested_model,
          r.endpoint,
          r.status,
          r.tokens_in,
          r.tokens_out,
          r.tokens_cached,
          r.tokens_reasoning,
          usd(r.cost_usd),
          r.latency_ms,
          r.cache_hit ? 1 : 0
        ]
      })
    )
  })
