/**
 * `/v1/batches`: the batch store (`Batches`) and its worker (`BatchRunner`), which sends each line to this gateway on loopback and
 * records its result once, so a restart resumes with the unanswered lines (docs/files-batches.md, "Batches").
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as readline from "node:readline"
import { Readable } from "node:stream"
import { runsOncePerGateway } from "../../platform/state/clusterIpc.js"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { Files, randomId } from "../files/Files.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import { rowsChanged } from "../../platform/store/dialect.js"
import { NativeBatches, type NativeState } from "./NativeBatches.js"

export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/messages", "/v1/completions"] as const
export type BatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled"
export const FINISHED: ReadonlyArray<BatchStatus> = ["completed", "failed", "expired", "cancelled"]
/** The most lines a batch may have (OpenAI's bound). */
export const MAX_LINES = 50_000
/** Validation errors kept (and reported) per batch. */
const MAX_ERRORS = 100

export interface BatchError {
  readonly code: string
  readonly message: string
  readonly param: string | null
  readonly line: number | null
}

export interface Batch {
  readonly id: string
  readonly owner: string
  readonly endpoint: string
  readonly inputFileId: string
  readonly completionWindow: string
  readonly metadata: Record<string, string> | null
  readonly status: BatchStatus
  readonly errors: ReadonlyArray<BatchError> | null
  readonly outputFileId: string | null
  readonly errorFileId: string | null
  readonly total: number
  readonly completed: number
  readonly failed: number
  readonly createdAt: number
  readonly inProgressAt: number | null
  readonly expiresAt: number
  readonly finalizingAt: number | null
  readonly completedAt: number | null
  readonly failedAt: number | null
  readonly expiredAt: number | null
  readonly cancellingAt: number | null
  readonly cancelledAt: number | null
  /** Forwarded to the provider's own batch API (src/inference/batches/NativeBatches.ts); null when the gateway runs it. */
  readonly native: NativeState | null
}

interface Row {
  id: string
  api_key_id: string
  endpoint: string
  input_file_id: string
  completion_window: string
  metadata: string | null
  status: string
  errors: string | null
  output_file_id: string | null
  error_file_id: string | null
  total: number
  completed: number
  failed: number
  created_at: number
  in_progress_at: number | null
  expires_at: number
  finalizing_at: number | null
  completed_at: number | null
  failed_at: number | null
  expired_at: number | null
  cancelling_at: number | null
  cancelled_at: number | null
  native: string | null
}

const num = (v: number | null): number | null => (v === null ? null : Number(v))

const toBatch = (r: Row): Batch => ({
  id: r.id,
  owner: r.api_key_id,
  endpoint: r.endpoint,
  inputFileId: r.input_file_id,
  completionWindow: r.completion_window,
  metadata: r.metadata ? (JSON.parse(r.metadata) as Record<string, string>) : null,
  status: r.status as BatchStatus,
  errors: r.errors ? (JSON.parse(r.errors) as Array<BatchError>) : null,
  outputFileId: r.output_file_id,
  errorFileId: r.error_file_id,
  total: Number(r.total),
  completed: Number(r.completed),
  failed: Number(r.failed),
  createdAt: Number(r.created_at),
  inProgressAt: num(r.in_progress_at),
  expiresAt: Number(r.expires_at),
  finalizingAt: num(r.finalizing_at),
  completedAt: num(r.completed_at),
  failedAt: num(r.failed_at),
  expiredAt: num(r.expired_at),
  cancellingAt: num(r.cancelling_at),
  cancelledAt: num(r.cancelled_at),
  native: r.native ? (JSON.parse(r.native) as NativeState) : null
})

export interface NewBatch {
  readonly owner: string
  readonly endpoint: string
  readonly inputFileId: string
  readonly completionWindow: string
  readonly metadata: Record<string, string> | null
  /** Forward the whole batch to this upstream (checked by `NativeBatches.plan`). */
  readonly native?: NativeState | null
}

export interface BatchesShape {
  readonly create: (batch: NewBatch) => Effect.Effect<Batch>
  readonly find: (owner: string, id: string) => Effect.Effect<Batch | undefined>
  readonly list: (
    owner: string,
    options: { readonly limit: number; readonly after?: string | undefined }
  ) => Effect.Effect<{ data: ReadonlyArray<Batch>; hasMore: boolean }>
  /** Asks a running batch to stop: `cancelling`, its worker then writes what was answered and ends it `cancelled`. */
  readonly cancel: (batch: Batch) => Effect.Effect<Batch>
  /** Forgets a finished batch (its lines; its files stay the owner's). */
  readonly remove: (batch: Batch) => Effect.Effect<void>
  /** Batches this process was asked to stop (read by the worker between lines). */
  readonly stopping: (id: string) => boolean
}

export class Batches extends Context.Tag("gateway/Batches")<Batches, BatchesShape>() {
  static readonly layer = Layer.effect(
    Batches,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const windowMs = (yield* positiveInteger("GATEWAY_BATCH_WINDOW_SECONDS", "seconds", 24 * 3600)) * 1000
      const cancelled = new Set<string>()
      const load = (id: string) =>
        Effect.map(sql<Row>`SELECT * FROM batches WHERE id = ${id}`, (rows) => (rows[0] ? toBatch(rows[0]) : undefined)).pipe(Effect.orDie)
      return {
        create: (b) =>
          Effect.gen(function* () {
            const now = Date.now()
            const id = randomId("batch_")
            yield* sql`INSERT INTO batches ${sql.insert({
              id,
              api_key_id: b.owner,
              endpoint: b.endpoint,
              input_file_id: b.inputFileId,
              completion_window: b.completionWindow,
              metadata: b.metadata ? JSON.stringify(b.metadata) : null,
              status: "validating",
              created_at: now,
              expires_at: now + windowMs,
              native: b.native ? JSON.stringify(b.native) : null
            })}`
            return (yield* load(id))!
          }).pipe(Effect.orDie),
        find: (owner, id) => Effect.map(load(id), (b) => (b && b.owner === owner ? b : undefined)),
        list: (owner, o) =>
          Effect.gen(function* () {
            const cursor = o.after ? (yield* sql<Row>`SELECT * FROM batches WHERE id = ${o.after} AND api_key_id = ${owner}`)[0] : undefined
            const after = cursor
              ? sql`AND (created_at < ${cursor.created_at} OR (created_at = ${cursor.created_at} AND id < ${cursor.id}))`
              : sql``
            const rows =
              yield* sql<Row>`SELECT * FROM batches WHERE api_key_id = ${owner} ${after} ORDER BY created_at DESC, id DESC LIMIT ${o.limit + 1}`
            return { data: rows.slice(0, o.limit).map(toBatch), hasMore: rows.length > o.limit }
          }).pipe(Effect.orDie),
        cancel: (b) =>
          Effect.gen(function* () {
            cancelled.add(b.id)
            yield* sql`UPDATE batches SET status = 'cancelling', cancelling_at = ${Date.now()} WHERE id = ${b.id} AND status IN ('validating', 'in_progress')`
            return (yield* load(b.id)) ?? b
          }).pipe(Effect.orDie),
        remove: (b) =>
          Effect.gen(function* () {
            yield* sql`DELETE FROM batch_lines WHERE batch_id = ${b.id}`
            yield* sql`DELETE FROM batches WHERE id = ${b.id}`
          }).pipe(Effect.orDie),
        stopping: (id) => cancelled.has(id)
      } satisfies BatchesShape
    })
  )
}

// ---------------------------------------------------------------- the worker

interface LineRequest {
  readonly line: number
  readonly customId: string
  readonly body: string
}

/** A line's answer that should be tried again later (429, 503, the gateway unreachable). */
class TryLater {
  readonly _tag = "TryLater"
  constructor(readonly waitMs: number | null) {}
}

interface LineResult {
  readonly statusCode: number
  readonly requestId: string | null
  readonly body: unknown
}

const validateLine = (text: string, line: number, endpoint: string, seen: Set<string>): { request?: LineRequest; error?: BatchError } => {
  const err = (message: string, param: string | null = null, code = "invalid_request"): { error: BatchError } => ({
    error: { code, message: `line ${line}: ${message}`, param, line }
  })
  let v: unknown
  try {
    v = JSON.parse(text)
  } catch {
    return err("not valid JSON", null, "invalid_json_line")
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return err("a line must be a JSON object", null, "invalid_json_line")
  const o = v as Record<string, unknown>
  if (typeof o["custom_id"] !== "string" || o["custom_id"] === "")
    return err("'custom_id' must be a non-empty string", "custom_id", "missing_required_parameter")
  if (seen.has(o["custom_id"]))
    return err(`'custom_id' '${o["custom_id"].slice(0, 64)}' is used by an earlier line`, "custom_id", "duplicate_custom_id")
  if (o["method"] !== "POST") return err("'method' must be 'POST'", "method", "invalid_method")
  if (o["url"] !== endpoint)
    return err(`'url' must be the batch's endpoint '${endpoint}', got ${JSON.stringify(o["url"])?.slice(0, 80)}`, "url", "invalid_url")
  const body = o["body"]
  if (typeof body !== "object" || body === null || Array.isArray(body)) return err("'body' must be a JSON object", "body", "invalid_body")
  const b = body as Record<string, unknown>
  if (typeof b["model"] !== "string" || b["model"] === "")
    return err("'body.model' must be a non-empty string", "body.model", "missing_required_parameter")
  if (b["stream"] === true) return err("'body.stream' cannot be true in a batch", "body.stream", "invalid_body")
  seen.add(o["custom_id"])
  return { request: { line, customId: o["custom_id"], body: JSON.stringify(body) } }
}

/** Runs the batches: one fiber per active batch, found by a sweep (every GATEWAY_BATCH_POLL_MS). */
export class BatchRunner {
  static readonly layer = Layer.scopedDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const health = yield* StoreHealth
      const files = yield* Files
      const batches = yield* Batches
      const own = yield* OwnRoutes
      const native = yield* NativeBatches
      const pollMs = yield* positiveInteger("GATEWAY_BATCH_POLL_MS", "milliseconds", 1000)
      const concurrency = yield* positiveInteger("GATEWAY_BATCH_CONCURRENCY", "lines", 8)
      const retries = yield* positiveInteger("GATEWAY_BATCH_LINE_RETRIES", "tries", 6)
      const retryBaseMs = yield* positiveInteger("GATEWAY_BATCH_RETRY_BASE_MS", "milliseconds", 1000)
      const running = new Set<string>()

      const load = (id: string) =>
        Effect.map(sql<Row>`SELECT * FROM batches WHERE id = ${id}`, (rows) => (rows[0] ? toBatch(rows[0]) : undefined))
      const setStatus = (id: string, from: ReadonlyArray<BatchStatus>, fields: Record<string, unknown>) =>
        sql`UPDATE batches SET ${sql.update(fields as never)} WHERE id = ${id} AND status IN ${sql.in(from as Array<string>)}`

      /** Reads the input file line by line, every line checked; valid: the lines stored and `in_progress`; else `failed` with the errors.
       * */
      const validate = (b: Batch) =>
        Effect.gen(function* () {
          yield* sql`DELETE FROM batch_lines WHERE batch_id = ${b.id}`
          const input = yield* files.content(b.owner, b.inputFileId)
          const now = () => Date.now()
          if (!input) {
            const errors: Array<BatchError> = [
              {
                code: "input_file_not_found",
                message: `the input file '${b.inputFileId}' no longer exists`,
                param: "input_file_id",
                line: null
              }
            ]
            yield* setStatus(b.id, ["validating"], { status: "failed", errors: JSON.stringify(errors), failed_at: now() })
            return
          }
          const errors: Array<BatchError> = []
          const seen = new Set<string>()
          let pending: Array<LineRequest> = []
          let lineNo = 0
          let count = 0
          const flush = Effect.suspend(() => {
            const rows = pending.map((r) => ({ batch_id: b.id, line: r.line, custom_id: r.customId, request: r.body }))
            pending = []
            return rows.length === 0 ? Effect.void : Effect.asVoid(sql`INSERT INTO batch_lines ${sql.insert(rows as never)}`)
          })
          const lines = readline.createInterface({ input: input.stream, crlfDelay: Infinity })
          const iterator = lines[Symbol.asyncIterator]()
          while (true) {
            const next = yield* Effect.promise(() => iterator.next())
            if (next.done) break
            lineNo++
            const text = next.value as string
            if (text.trim() === "") continue
            count++
            if (count > MAX_LINES) {
              errors.push({ code: "too_many_requests", message: `a batch has at most ${MAX_LINES} lines`, param: null, line: lineNo })
              break
            }
            const checked = validateLine(text, lineNo, b.endpoint, seen)
            if (checked.error) {
              if (errors.length < MAX_ERRORS) errors.push(checked.error)
            } else if (errors.length === 0) {
              pending.push(checked.request!)
              if (pending.length >= 500) yield* flush
            }
          }
          lines.close()
          input.stream.destroy()
          if (errors.length === 0 && count === 0)
            errors.push({ code: "empty_file", message: "the input file has no lines", param: "input_file_id", line: null })
          if (errors.length > 0) {
            yield* sql`DELETE FROM batch_lines WHERE batch_id = ${b.id}`
            yield* setStatus(b.id, ["validating", "cancelling"], { status: "failed", errors: JSON.stringify(errors), failed_at: now() })
            return
          }
          yield* flush
          yield* setStatus(b.id, ["validating"], { status: "in_progress", total: count, in_progress_at: now() })
        })

      /** One line through the gateway's own route, as the batch's owner; 429/503 and no answer: tried again later. */
      const callLine = (b: Batch, r: LineRequest) =>
        Effect.tryPromise({
          try: async (signal) => {
            const res = await own.fetch(b.endpoint, { body: r.body, onBehalfOf: b.owner, requestId: `${b.id}_${r.line}`, signal })
            const text = await res.text()
            let body: unknown = text
            try {
              body = JSON.parse(text)
            } catch {
              // not JSON: kept as text
            }
            return {
              statusCode: res.status,
              requestId: res.headers.get("x-gateway-request-id"),
              body,
              retryAfter: res.headers.get("retry-after")
            }
          },
          catch: () => new TryLater(null)
        }).pipe(
          Effect.flatMap((res) => {
            if (res.statusCode !== 429 && res.statusCode !== 503) return Effect.succeed<LineResult>(res)
            const s = Number(res.retryAfter)
            return Effect.fail(new TryLater(Number.isFinite(s) && s > 0 ? Math.min(s * 1000, 60_000) : null))
          })
        )

      const lineSchedule = Schedule.exponential(Duration.millis(retryBaseMs), 2).pipe(
        Schedule.union(Schedule.spaced("60 seconds")),
        Schedule.intersect(Schedule.recurs(retries))
      )

      const answerLine = (b: Batch, r: LineRequest): Effect.Effect<LineResult> => {
        let last: LineResult | undefined
        const once = Effect.tapError(callLine(b, r), (e) =>
          // Retry-After (bounded) is waited out on top of the backoff.
          e.waitMs ? Effect.sleep(Duration.millis(e.waitMs)) : Effect.void
        )
        return Effect.retry(once, { schedule: lineSchedule, while: () => !batches.stopping(b.id) && Date.now() < b.expiresAt }).pipe(
          Effect.catchAll(() =>
            Effect.succeed<LineResult>(
              last ?? {
                statusCode: 503,
                requestId: `${b.id}_${r.line}`,
                body: {
                  error: {
                    message: "the line could not be answered: the gateway had no capacity (429/503) after retries",
                    type: "server_error",
                    code: "retries_exhausted"
                  }
                }
              }
            )
          )
        )
      }

      const record = (b: Batch, r: LineRequest, res: LineResult) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const ok = res.statusCode >= 200 && res.statusCode < 300
            const result = {
              id: `batch_req_${b.id.slice(6)}_${r.line}`,
              custom_id: r.customId,
              response: { status_code: res.statusCode, request_id: res.requestId, body: res.body },
              error: null
            }
            const raw = yield* sql`UPDATE batch_lines SET status_code = ${res.statusCode}, result = ${JSON.stringify(result)}
              WHERE batch_id = ${b.id} AND line = ${r.line} AND status_code IS NULL`.raw
            if (rowsChanged(raw) !== 1) return
            if (ok) yield* sql`UPDATE batches SET completed = completed + 1 WHERE id = ${b.id}`
            else yield* sql`UPDATE batches SET failed = failed + 1 WHERE id = ${b.id}`
          })
        )

      /** The output (2xx lines) and error files (the rest, and lines never run when it stopped), then the final status. */
      const finish = (b: Batch, status: "completed" | "expired" | "cancelled") =>
        Effect.gen(function* () {
          const unrun =
            status === "completed"
              ? null
              : {
                  code: status === "expired" ? "batch_expired" : "batch_cancelled",
                  message:
                    status === "expired"
                      ? "this request could not be executed before the completion window expired"
                      : "the batch was cancelled before this request ran"
                }
          const page = (ok: boolean, from: number) =>
            Effect.runPromise(
              sql<{
                line: number
                custom_id: string
                status_code: number | null
                result: string | null
              }>`SELECT line, custom_id, status_code, result FROM batch_lines
                WHERE batch_id = ${b.id} AND line > ${from} AND ${ok ? sql`status_code >= 200 AND status_code < 300` : sql`(status_code IS NULL OR status_code < 200 OR status_code >= 300)`}
                ORDER BY line LIMIT 1000`.pipe(Effect.orDie)
            )
          async function* lines(ok: boolean): AsyncGenerator<string> {
            let from = 0
            while (true) {
              const rows = await page(ok, from)
              if (rows.length === 0) return
              let chunk = ""
              for (const row of rows) {
                from = Number(row.line)
                if (row.result) chunk += row.result + "\n"
                else if (unrun)
                  chunk +=
                    JSON.stringify({
                      id: `batch_req_${b.id.slice(6)}_${row.line}`,
                      custom_id: row.custom_id,
                      response: null,
                      error: unrun
                    }) + "\n"
              }
              if (chunk) yield chunk
            }
          }
          const counts = (yield* sql<{ ok: number; other: number }>`SELECT
              SUM(CASE WHEN status_code >= 200 AND status_code < 300 THEN 1 ELSE 0 END) AS ok,
              SUM(CASE WHEN status_code >= 200 AND status_code < 300 THEN 0 ELSE 1 END) AS other
            FROM batch_lines WHERE batch_id = ${b.id}`)[0]
          const nonEmpty = (n: unknown) => Number(n ?? 0) > 0
          const write = (ok: boolean, name: string) =>
            Effect.map(
              Effect.orDie(
                files.create(
                  { owner: b.owner, filename: `${b.id}_${name}.jsonl`, purpose: "batch_output", expiresAt: null },
                  Readable.from(lines(ok))
                )
              ),
              (f) => f.id
            )
          const output = nonEmpty(counts?.ok) ? yield* write(true, "output") : null
          const errorsFile =
            nonEmpty(counts?.other) && (status !== "completed" || Number(counts?.other) > 0) ? yield* write(false, "error") : null
          const at = Date.now()
          const stamp = status === "completed" ? { completed_at: at } : status === "expired" ? { expired_at: at } : { cancelled_at: at }
          yield* setStatus(b.id, ["in_progress", "finalizing", "cancelling"], {
            status,
            output_file_id: output,
            error_file_id: errorsFile,
            ...stamp
          })
        })

      const runLines = (b: Batch) =>
        Effect.gen(function* () {
          const pending = yield* sql<{ line: number; custom_id: string; request: string }>`SELECT line, custom_id, request FROM batch_lines
            WHERE batch_id = ${b.id} AND status_code IS NULL ORDER BY line`
          yield* Effect.forEach(
            pending,
            (p) =>
              Effect.suspend(() => {
                if (batches.stopping(b.id) || Date.now() >= b.expiresAt) return Effect.void
                const r: LineRequest = { line: Number(p.line), customId: p.custom_id, body: p.request }
                return Effect.flatMap(answerLine(b, r), (res) => record(b, r, res))
              }),
            { concurrency, discard: true }
          )
        })

      const run = (id: string): Effect.Effect<void, unknown> =>
        Effect.gen(function* () {
          for (;;) {
            const b = yield* load(id)
            if (!b) return
            if (b.status === "validating") {
              if (batches.stopping(b.id)) {
                yield* setStatus(b.id, ["validating"], { status: "cancelled", cancelled_at: Date.now() })
                return
              }
              yield* validate(b)
              continue
            }
            // Forwarded whole to the provider's batch API: submitted, polled and ended by its step.
            if (b.native && (b.status === "in_progress" || b.status === "finalizing" || b.status === "cancelling"))
              return yield* native.step(b, finish)
            if (b.status === "cancelling") return yield* finish(b, "cancelled")
            if (b.status === "finalizing") return yield* finish(b, "completed")
            if (b.status !== "in_progress") return
            if (Date.now() >= b.expiresAt) return yield* finish(b, "expired")
            yield* runLines(b)
            const after = yield* load(id)
            if (!after) return
            if (after.status === "cancelling" || batches.stopping(id)) {
              yield* setStatus(id, ["in_progress"], { status: "cancelling", cancelling_at: Date.now() })
              continue
            }
            if (Date.now() >= after.expiresAt) return yield* finish(after, "expired")
            const left = (yield* sql<{
              n: number
            }>`SELECT COUNT(*) AS n FROM batch_lines WHERE batch_id = ${id} AND status_code IS NULL`)[0]
            if (Number(left?.n ?? 0) > 0) continue
            yield* setStatus(id, ["in_progress"], { status: "finalizing", finalizing_at: Date.now() })
          }
        })

      const sweep = Effect.gen(function* () {
        const active = yield* sql<{
          id: string
        }>`SELECT id FROM batches WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling') ORDER BY created_at`
        for (const { id } of active) {
          if (running.has(id)) continue
          running.add(id)
          yield* Effect.forkScoped(
            run(id).pipe(
              Effect.catchAllCause((cause) => Effect.logWarning(`batch ${id} stopped; it resumes at the next sweep`, cause)),
              Effect.ensuring(Effect.sync(() => running.delete(id)))
            )
          )
        }
      }).pipe(Effect.catchAllCause((cause) => health.warn("the batch sweep failed", cause)))
      // With `gateway --workers N`, worker 1 runs every batch (the others would run the same lines again).
      if (runsOncePerGateway()) yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(Duration.millis(pollMs))))
    })
  )
}
