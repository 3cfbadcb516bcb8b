import * as Schema from "effect/Schema"
import { oneOf } from "./parse.js"

/**
 * Usage, telemetry and monitoring views (spec document 2, "Usage" and "Monitoring"). Query
 * parameters arrive as strings; these schemas turn them into numbers with clear messages.
 */

const NumberFromQuery = (name: string, min: number, max: number) =>
  Schema.NumberFromString.pipe(
    Schema.int({ message: () => `${name} must be an integer` }),
    Schema.between(min, max, { message: () => `${name} must be between ${min} and ${max}` })
  ).annotations({ message: () => `${name} must be an integer between ${min} and ${max}` })

/** An ISO 8601 date or epoch milliseconds. */
/** The largest instant a JavaScript Date holds (±8.64e15 ms). */
const MAX_INSTANT = 8.64e15

export const instantMs = (s: string): number => (/^\d+$/.test(s) ? Number(s) : Date.parse(s))

export const Instant = (name: string) =>
  Schema.String.pipe(
    Schema.filter((s) => {
      const ms = instantMs(s)
      return Number.isFinite(ms) && Math.abs(ms) <= MAX_INSTANT
        ? true
        : `${name} must be an ISO 8601 date or epoch milliseconds (at most 8.64e15)`
    })
  )

/**
 * `team` and `user` group by the owner of the request's key as it is now (docs/teams.md, "Usage by
 * team and user"): a user's key counts for that user and for each team the user is a member of, a
 * team's key for the team. `requestedModel` groups by the model id as the client asked for it (a
 * combo's name, an alias, an auto id), `model` by the model that answered.
 */
export const GROUP_BY = ["hour", "day", "model", "requestedModel", "provider", "apiKey", "connection", "endpoint", "team", "user"] as const
export type GroupBy = (typeof GROUP_BY)[number]

/** Only the requests of keys owned by this team (its own keys and its members'), or by this user. */
const OwnerFilters = {
  teamId: Schema.optional(Schema.String),
  userId: Schema.optional(Schema.String)
}

export const HistoryQuery = Schema.Struct({
  from: Schema.optional(Instant("from")),
  to: Schema.optional(Instant("to")),
  groupBy: Schema.optional(oneOf(GROUP_BY, "groupBy")),
  apiKeyId: Schema.optional(Schema.String),
  provider: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  ...OwnerFilters
})

/**
 * `GET /api/usage/export`: the history's range and filters as CSV. With `groupBy`, one line per
 * group (the history's rows); without, one line per request with its key's owner.
 */
export const ExportQuery = HistoryQuery

export const UsageAggregate = Schema.Struct({
  key: Schema.NullOr(Schema.String),
  /** For `groupBy` apiKey, team and user: the key's, team's or user's name (null: none, or no longer known). */
  name: Schema.optional(Schema.NullOr(Schema.String)),
  requests: Schema.Number,
  errors: Schema.Number,
  tokensIn: Schema.Number,
  tokensOut: Schema.Number,
  tokensCached: Schema.Number,
  /**
   * The prompt cache's hit ratio: input tokens the upstream read from its cache over all input
   * tokens (null: no input counted). Per connection, requested model (a combo) or key with `groupBy`
   * (docs/routing.md, "Prompt-cache affinity").
   */
  cachedInputRatio: Schema.NullOr(Schema.Number),
  tokensReasoning: Schema.Number,
  costUsd: Schema.Number,
  cacheHits: Schema.Number,
  avgLatencyMs: Schema.NullOr(Schema.Number)
})

export const UsageHistory = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  groupBy: Schema.String,
  rows: Schema.Array(UsageAggregate),
  totals: UsageAggregate
})

export const LogsQuery = Schema.Struct({
  limit: Schema.optional(NumberFromQuery("limit", 1, 1000)),
  /** Rows with an id below this one (the `nextBefore` of the previous page). */
  before: Schema.optional(NumberFromQuery("before", 1, Number.MAX_SAFE_INTEGER)),
  apiKeyId: Schema.optional(Schema.String),
  provider: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  requestId: Schema.optional(Schema.String),
  ...OwnerFilters,
  /** `ok` (2xx), `error` (anything else), or one status. */
  status: Schema.optional(
    Schema.String.pipe(
      Schema.filter((s) => (s === "ok" || s === "error" || /^\d{3}$/.test(s) ? true : "status must be ok, error or a 3-digit status"))
    )
  )
})

export const UsageLogLine = Schema.Struct({
  id: Schema.Number,
  time: Schema.String,
  requestId: Schema.String,
  apiKeyId: Schema.NullOr(Schema.String),
  provider: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  endpoint: Schema.String,
  status: Schema.Number,
  tokensIn: Schema.NullOr(Schema.Number),
  tokensOut: Schema.NullOr(Schema.Number),
  costUsd: Schema.NullOr(Schema.Number),
  latencyMs: Schema.NullOr(Schema.Number)
})

export const UsageLogs = Schema.Struct({ logs: Schema.Array(UsageLogLine), nextBefore: Schema.NullOr(Schema.Number) })

export const RequestLog = Schema.Struct({
  ...UsageLogLine.fields,
  connectionId: Schema.NullOr(Schema.String),
  requestedModel: Schema.NullOr(Schema.String),
  stream: Schema.Boolean,
  tokensCached: Schema.NullOr(Schema.Number),
  tokensReasoning: Schema.NullOr(Schema.Number),
  tokensCacheWrite: Schema.NullOr(Schema.Number),
  ttftMs: Schema.NullOr(Schema.Number),
  fallbackAttempts: Schema.Number,
  cacheHit: Schema.Boolean,
  error: Schema.NullOr(Schema.String)
})

export const RequestLogs = Schema.Struct({ requests: Schema.Array(RequestLog), nextBefore: Schema.NullOr(Schema.Number) })

export const WindowSummary = Schema.Struct({
  requests: Schema.Number,
  errors: Schema.Number,
  errorRate: Schema.Number,
  tokensIn: Schema.Number,
  tokensOut: Schema.Number,
  costUsd: Schema.Number,
  p50LatencyMs: Schema.NullOr(Schema.Number),
  p95LatencyMs: Schema.NullOr(Schema.Number)
})

export const ConnectionUsage = Schema.Struct({
  connectionId: Schema.String,
  name: Schema.String,
  provider: Schema.String,
  lastRequestAt: Schema.NullOr(Schema.String),
  last24h: WindowSummary,
  last7d: WindowSummary,
  last30d: WindowSummary,
  models: Schema.Array(
    Schema.Struct({
      model: Schema.NullOr(Schema.String),
      requests: Schema.Number,
      tokensIn: Schema.Number,
      tokensOut: Schema.Number,
      costUsd: Schema.Number
    })
  )
})

export const TelemetryQuery = Schema.Struct({ hours: Schema.optional(NumberFromQuery("hours", 1, 24 * 90)) })

export const ProviderTelemetry = Schema.Struct({
  provider: Schema.String,
  count: Schema.Number,
  errors: Schema.Number,
  p50: Schema.NullOr(Schema.Number),
  p95: Schema.NullOr(Schema.Number),
  p99: Schema.NullOr(Schema.Number),
  p50TtftMs: Schema.NullOr(Schema.Number)
})

export const TelemetrySummary = Schema.Struct({
  windowHours: Schema.Number,
  from: Schema.String,
  to: Schema.String,
  providers: Schema.Array(ProviderTelemetry)
})

export const MonitoringHealth = Schema.Struct({
  /** `ok`: every enabled connection usable; `degraded`: some are not; `down`: none is (or none configured). */
  status: Schema.Literal("ok", "degraded", "down"),
  catalogCount: Schema.Number,
  configuredCount: Schema.Number,
  activeCount: Schema.Number,
  monitoredCount: Schema.Number,
  providers: Schema.Array(
    Schema.Struct({
      connection: Schema.String,
      provider: Schema.String,
      enabled: Schema.Boolean,
      state: Schema.String,
      breaker: Schema.String,
      requests24h: Schema.Number,
      errorRate24h: Schema.Number
    })
  )
})
