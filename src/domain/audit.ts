import * as Schema from "effect/Schema"

/** One audit log entry (docs/guardrails.md, "Audit log"). */
export const AuditEntry = Schema.Struct({
  id: Schema.Number,
  ts: Schema.String,
  /** `management` (a change through the management API), `guardrail` (a policy or guardrail acted on a request), `service` (an older row
   * written by a service). */
  kind: Schema.String,
  /** The admin API key id, `admin-session`, the inference API key id (guardrail rows), `anonymous`, or a client address (login rows). */
  actor: Schema.String,
  action: Schema.String,
  target: Schema.NullOr(Schema.String),
  ip: Schema.NullOr(Schema.String),
  method: Schema.NullOr(Schema.String),
  route: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.Number),
  /** The resource before the change (its GET, secrets masked), when there was one. */
  before: Schema.Unknown,
  /** The answer of the change (secrets masked). */
  after: Schema.Unknown,
  detail: Schema.Unknown
})
export type AuditEntry = typeof AuditEntry.Type

const Time = Schema.String.pipe(
  Schema.filter((s) => (/^\d+$/.test(s) ? true : !Number.isNaN(Date.parse(s))) || "expected an ISO 8601 date or epoch milliseconds")
)

export const AuditQuery = Schema.Struct({
  actor: Schema.optional(Schema.String),
  kind: Schema.optional(Schema.Literal("management", "guardrail", "service", "mcp")),
  /** An action, or a prefix ending in `.` or `*` (`policies.`, `guardrail.*`). */
  action: Schema.optional(Schema.String),
  target: Schema.optional(Schema.String),
  since: Schema.optional(Time),
  until: Schema.optional(Time),
  /** `nextCursor` of the previous page: entries older than it. */
  cursor: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.positive())),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1000)))
})
export type AuditQuery = typeof AuditQuery.Type

export const AuditPage = Schema.Struct({
  entries: Schema.Array(AuditEntry),
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  nextCursor: Schema.NullOr(Schema.Number),
  retentionDays: Schema.Number
})

export const toEpochMs = (s: string): number => (/^\d+$/.test(s) ? Number(s) : Date.parse(s))
