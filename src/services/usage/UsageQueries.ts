/**
 * The usage table read for the management API: history by group, the log pages, a connection's
 * usage, the providers' latencies, and the last day per connection (monitoring). Retention
 * (UsageRetention) keeps the table bounded.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { BadRequest, NotFound } from "../../domain/errors.js"
import type {
  ConnectionUsage,
  ExportQuery,
  HistoryQuery,
  LogsQuery,
  RequestLogs,
  TelemetrySummary,
  UsageHistory,
  UsageLogs
} from "../../domain/usage.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { makeExport } from "./usageExport.js"
import { makeUsageLogs } from "./usageLogs.js"
import { makeConnectionUsage, makeHistory, makeTelemetry, recentByConnection } from "./usageSummaries.js"

export { UsageRetention } from "./usageRetention.js"
export { DAY, quantile } from "./usageRows.js"

export interface UsageQueriesShape {
  /** A `teamId` or `userId` that names no team or user: NotFound. */
  readonly history: (q: typeof HistoryQuery.Type) => Effect.Effect<typeof UsageHistory.Type, NotFound>
  /** The history's groups, or one line per request with its key's owner, as CSV text (usageExport.ts). */
  readonly export: (q: typeof ExportQuery.Type) => Effect.Effect<string, BadRequest | NotFound>
  readonly logs: (q: typeof LogsQuery.Type) => Effect.Effect<typeof UsageLogs.Type>
  readonly requestLogs: (q: typeof LogsQuery.Type) => Effect.Effect<typeof RequestLogs.Type>
  readonly connection: (c: {
    readonly id: string
    readonly name: string
    readonly provider: string
  }) => Effect.Effect<typeof ConnectionUsage.Type>
  readonly telemetry: (hours: number) => Effect.Effect<typeof TelemetrySummary.Type>
  /** Per connection over the last 24 h: requests and error rate (monitoring). */
  readonly recentByConnection: Effect.Effect<ReadonlyMap<string, { readonly requests: number; readonly errors: number }>>
}

/**
 * Reads over the usage table for the management API. Rows are written by the batched writer;
 * queries see everything flushed (within ~20 ms of a request's end). The rows and aggregates are
 * usageRows.ts's, the log pages usageLogs.ts's, the summaries usageSummaries.ts's.
 */
export class UsageQueries extends Context.Tag("gateway/UsageQueries")<UsageQueries, UsageQueriesShape>() {
  static readonly layer = Layer.effect(
    UsageQueries,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* BatchWriter
      const deps = { sql, writer }

      const { logs, requestLogs } = makeUsageLogs(deps)
      const history = makeHistory(deps)
      return {
        history,
        export: makeExport(deps, history),
        logs,
        requestLogs,
        connection: makeConnectionUsage(deps),
        telemetry: makeTelemetry(deps),
        recentByConnection: recentByConnection(deps)
      } satisfies UsageQueriesShape
    })
  )
}
