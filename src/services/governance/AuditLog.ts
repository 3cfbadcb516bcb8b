/**
 * The audit log: one append-only `audit_log` table written through the batched writer, with `management`, `guardrail`
 * and `service` rows, pruned hourly past the retention (docs/guardrails.md#audit-log).
 */
import { backgroundJob } from "../../platform/flags/background.js"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { type AuditEntry, type AuditQuery, toEpochMs } from "../../domain/audit.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { redactText } from "../../kernel/redact.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"

/** Before and after are kept up to this many characters of JSON (a larger document is noted as cut). */
const MAX_DOC = 64 * 1024
const DAY = 86_400_000

/** A value as masked JSON text for the log: secret-looking fields and key-shaped strings masked. */
export const maskedJson = (value: unknown): string | null => {
  if (value === undefined) return null
  const text = redactText(JSON.stringify(value) ?? "null")
  return text.length <= MAX_DOC ? text : JSON.stringify({ truncated: true, length: text.length })
}

export interface ManagementChange {
  readonly actor: string
  readonly action: string
  readonly target: string | null
  readonly ip: string
  readonly method: string
  readonly route: string
  readonly status: number
  readonly before: unknown
  readonly after: unknown
}

export interface AuditLogShape {
  readonly recordChange: (change: ManagementChange) => void
  readonly query: (q: AuditQuery) => Effect.Effect<{ entries: ReadonlyArray<AuditEntry>; nextCursor: number | null }>
  /** Every matching entry, oldest first, as JSON lines. */
  readonly exportJsonl: (q: AuditQuery) => Effect.Effect<string>
  readonly retentionDays: number
  /** Waits until every row queued so far is written. */
  readonly flush: Effect.Effect<void>
}

interface Row {
  readonly id: number
  readonly ts: number
  readonly actor: string
  readonly action: string
  readonly target: string | null
  readonly detail: string | null
  readonly kind: string | null
  readonly ip: string | null
  readonly method: string | null
  readonly route: string | null
  readonly status: number | null
  readonly before_json: string | null
  readonly after_json: string | null
}

const parse = (text: string | null): unknown => {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const toEntry = (r: Row): AuditEntry => ({
  id: Number(r.id),
  ts: new Date(Number(r.ts)).toISOString(),
  kind: r.kind ?? "service",
  actor: r.actor,
  action: r.action,
  target: r.target,
  ip: r.ip,
  method: r.method,
  route: r.route,
  status: r.status === null ? null : Number(r.status),
  before: parse(r.before_json),
  after: parse(r.after_json),
  detail: parse(r.detail)
})

export class AuditLog extends Context.Tag("gateway/AuditLog")<AuditLog, AuditLogShape>() {
  static readonly layer = Layer.scoped(
    AuditLog,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const writer = yield* BatchWriter
      const bus = yield* EventBus
      const retentionDays = yield* positiveInteger("GATEWAY_AUDIT_RETENTION_DAYS", "days", 365)

      // Guardrail and policy actions from the bus: a listener, not a subscription (every request
      // publishes, and all but these are skipped at once).
      yield* bus.listen((e) => {
        if (e.event === "mcp.call.completed" || e.event === "mcp.call.failed") {
          const d = e.data
          writer.append("audit_log", {
            ts: Date.parse(e.timestamp) || Date.now(),
            kind: "mcp",
            actor: typeof d["apiKeyId"] === "string" ? d["apiKeyId"] : "anonymous",
            action: `mcp.${String(d["kind"] ?? "tool")}.${String(d["outcome"] ?? "ok")}`,
            target: String(d["exposedName"] ?? ""),
            route: "/v1/mcp",
            detail: maskedJson({
              server: d["server"],
              name: d["name"],
              durationMs: d["durationMs"],
              resultBytes: d["resultBytes"],
              error: d["error"] ?? undefined,
              arguments: d["arguments"] ?? undefined
            })
          })
          return
        }
        if (e.event !== "guardrail.action") return
        const d = e.data
        const { rule: _r, mode, action: _a, endpoint: _e, apiKeyId: _k, requestId, detail, ...rest } = d
        writer.append("audit_log", {
          ts: Date.parse(e.timestamp) || Date.now(),
          kind: "guardrail",
          actor: typeof d["apiKeyId"] === "string" ? d["apiKeyId"] : "anonymous",
          action: `guardrail.${String(d["action"] ?? "action")}`,
          target: String(d["rule"] ?? ""),
          route: typeof d["endpoint"] === "string" ? d["endpoint"] : null,
          detail: maskedJson({ mode, requestId, detail: detail ?? (Object.keys(rest).length > 0 ? rest : undefined) })
        })
      })

      const prune = Effect.gen(function* () {
        const cutoff = (yield* Clock.currentTimeMillis) - retentionDays * DAY
        const deleted = yield* sql<{ n: number }>`DELETE FROM audit_log WHERE ts < ${cutoff} RETURNING 1 AS n`
        if (deleted.length > 0) yield* Effect.logInfo(`audit retention: deleted ${deleted.length} entries older than ${retentionDays} days`)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("audit retention failed; will retry", cause)))
      if (yield* backgroundJob("audit log retention")) yield* Effect.forkScoped(Effect.repeat(prune, Schedule.spaced("1 hour")))

      const where = (q: AuditQuery) => {
        const conditions = []
        if (q.actor !== undefined) conditions.push(sql`actor = ${q.actor}`)
        if (q.kind === "service") conditions.push(sql`kind IS NULL`)
        else if (q.kind !== undefined) conditions.push(sql`kind = ${q.kind}`)
        if (q.action !== undefined) {
          const a = q.action.endsWith("*") ? q.action.slice(0, -1) : q.action
          if (a.endsWith(".")) conditions.push(sql`substr(action, 1, ${a.length}) = ${a}`)
          else conditions.push(sql`action = ${a}`)
        }
        if (q.target !== undefined) conditions.push(sql`target = ${q.target}`)
        if (q.since !== undefined) conditions.push(sql`ts >= ${toEpochMs(q.since)}`)
        if (q.until !== undefined) conditions.push(sql`ts <= ${toEpochMs(q.until)}`)
        return conditions
      }

      return {
        retentionDays,
        recordChange: (c) =>
          writer.append("audit_log", {
            ts: Date.now(),
            kind: "management",
            actor: c.actor,
            action: c.action,
            target: c.target,
            ip: c.ip,
            method: c.method,
            route: c.route,
            status: c.status,
            before_json: maskedJson(c.before),
            after_json: maskedJson(c.after),
            detail: null
          }),
        query: (q) =>
          Effect.gen(function* () {
            const limit = q.limit ?? 100
            const conditions = where(q)
            if (q.cursor !== undefined) conditions.push(sql`id < ${q.cursor}`)
            const rows = yield* sql<Row>`SELECT * FROM audit_log WHERE ${sql.and(conditions)} ORDER BY id DESC LIMIT ${limit + 1}`.pipe(
              Effect.orDie
            )
            const page = rows.slice(0, limit).map(toEntry)
            return { entries: page, nextCursor: rows.length > limit ? page[page.length - 1]!.id : null }
          }),
        exportJsonl: (q) =>
          Effect.map(sql<Row>`SELECT * FROM audit_log WHERE ${sql.and(where(q))} ORDER BY id`.pipe(Effect.orDie), (rows) =>
            rows.map((r) => JSON.stringify(toEntry(r)) + "\n").join("")
          ),
        flush: writer.flush
      }
    })
  )
}
