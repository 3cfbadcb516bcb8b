import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import { multipartBody } from "../../platform/http/multipart.js"
import { str } from "../../upstream/formats/common.js"
import type { Connection, ConnectionsShape } from "../../upstream/providers/Connections.js"
import type { Batch, BatchStatus } from "./Batches.js"
import {
  jsonOf,
  type NativeCall,
  type NativeState,
  NativeUpstreamError,
  type Polled,
  polledAnthropic,
  polledOpenAi,
  runningStatus
} from "./nativeWire.js"

/** How a batch ends once the upstream's is done (the runner's, for both kinds of batch). */
export type Finish = (b: Batch, status: "completed" | "expired" | "cancelled") => Effect.Effect<void, unknown>

/**
 * The life of a forwarded batch: submitted, polled (the runner's step at most every `pollMs`,
 * a GET's refresh at most once a second), cancelled once, and ended with its results read.
 * A batch has one upstream call under way at a time.
 */
export const makeNativeRunner = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly connections: ConnectionsShape
  readonly call: NativeCall
  readonly readResults: (b: Batch, state: NativeState, connection: Connection) => Effect.Effect<void, NativeUpstreamError>
  readonly pollMs: number
}) => {
  const { sql, connections, call, readResults, pollMs } = deps
  const polledAt = new Map<string, number>()
  /** Batches with an upstream call under way (a GET's poll and the runner's step do not overlap). */
  const busy = new Set<string>()

  const save = (id: string, state: NativeState) =>
    sql`UPDATE batches SET native = ${JSON.stringify(state)} WHERE id = ${id}`.pipe(Effect.orDie)
  const load = (id: string) =>
    Effect.map(
      sql<{ status: string; native: string | null }>`SELECT status, native FROM batches WHERE id = ${id}`.pipe(Effect.orDie),
      (rows) => (rows[0]?.native ? { status: rows[0].status as BatchStatus, state: JSON.parse(rows[0].native) as NativeState } : undefined)
    )
  const connectionOf = (state: NativeState) =>
    Effect.mapError(
      connections.get(state.connectionId),
      () => new NativeUpstreamError(`the connection of this native batch (${state.connectionId}) no longer exists`)
    )

  const submit = (b: Batch, state: NativeState, connection: Connection) =>
    Effect.gen(function* () {
      const rows = yield* sql<{
        line: number
        request: string
      }>`SELECT line, request FROM batch_lines WHERE batch_id = ${b.id} ORDER BY line`.pipe(Effect.orDie)
      const params = (r: { request: string }) => ({ ...(JSON.parse(r.request) as Record<string, unknown>), model: state.model })
      if (state.provider === "anthropic") {
        const requests = rows.map((r) => ({ custom_id: `line-${r.line}`, params: params(r) }))
        const res = jsonOf(yield* call(connection, state.model, { path: "/v1/messages/batches", json: { requests } }))
        const id = str(res["id"])
        if (!id) return yield* Effect.fail(new NativeUpstreamError("the upstream's message batch has no id"))
        return { ...state, upstreamId: id, upstreamStatus: str(res["processing_status"]) ?? "in_progress" }
      }
      // The input file is uploaded once; a retry after a failed create reuses it.
      let fileId = state.upstreamInputFileId
      if (!fileId) {
        const jsonl =
          rows.map((r) => JSON.stringify({ custom_id: `line-${r.line}`, method: "POST", url: b.endpoint, body: params(r) })).join("\n") +
          "\n"
        const body = multipartBody([
          { name: "purpose", value: "batch" },
          { name: "file", filename: `${b.id}.jsonl`, contentType: "application/jsonl", data: Buffer.from(jsonl, "utf8") }
        ])
        fileId = str(jsonOf(yield* call(connection, state.model, { path: "/files", bytes: body }))["id"]) ?? null
        if (!fileId) return yield* Effect.fail(new NativeUpstreamError("the upstream's file has no id"))
        yield* save(b.id, { ...state, upstreamInputFileId: fileId })
      }
      const res = jsonOf(
        yield* call(connection, state.model, {
          path: "/batches",
          json: { input_file_id: fileId, endpoint: b.endpoint, completion_window: "24h", metadata: { gateway_batch_id: b.id } }
        })
      )
      const id = str(res["id"])
      if (!id) return yield* Effect.fail(new NativeUpstreamError("the upstream's batch has no id"))
      return { ...state, upstreamInputFileId: fileId, upstreamId: id, upstreamStatus: str(res["status"]) ?? "validating" }
    })

  const poll = (state: NativeState, connection: Connection): Effect.Effect<Polled, NativeUpstreamError> =>
    state.provider === "anthropic"
      ? Effect.map(
          call(connection, state.model, { path: `/v1/messages/batches/${encodeURIComponent(state.upstreamId!)}`, method: "GET" }),
          (res) => polledAnthropic(state, jsonOf(res))
        )
      : Effect.map(call(connection, state.model, { path: `/batches/${encodeURIComponent(state.upstreamId!)}`, method: "GET" }), (res) =>
          polledOpenAi(state, jsonOf(res))
        )

  const applyPoll = (b: Batch, p: Polled) =>
    Effect.gen(function* () {
      yield* save(b.id, p.state)
      const status = runningStatus(p.state, b.status, p.ended)
      const fields: Record<string, unknown> = {
        status,
        ...(p.counts ? { total: p.counts.total || b.total, completed: p.counts.completed, failed: p.counts.failed } : {})
      }
      if (status === "finalizing" && b.finalizingAt === null) fields["finalizing_at"] = Date.now()
      if (status === "cancelling" && b.cancellingAt === null) fields["cancelling_at"] = Date.now()
      // `b` was read before the poll: a cancel that came meanwhile set `cancelling`, which a poll never undoes.
      const from = status === "cancelling" ? ["in_progress", "finalizing", "cancelling"] : ["in_progress", "finalizing"]
      yield* sql`UPDATE batches SET ${sql.update(fields as never)} WHERE id = ${b.id} AND ${sql.in("status", from)}`.pipe(Effect.orDie)
    })

  const exclusive = <A, E>(id: string, e: Effect.Effect<A, E>): Effect.Effect<A | undefined, E> =>
    Effect.suspend(() => {
      if (busy.has(id)) return Effect.succeed(undefined)
      busy.add(id)
      return Effect.ensuring(
        e,
        Effect.sync(() => busy.delete(id))
      )
    })

  const sendCancel = (b: Batch, state: NativeState, connection: Connection) =>
    Effect.gen(function* () {
      const path =
        state.provider === "anthropic"
          ? `/v1/messages/batches/${encodeURIComponent(state.upstreamId!)}/cancel`
          : `/batches/${encodeURIComponent(state.upstreamId!)}/cancel`
      yield* call(connection, state.model, { path, method: "POST", json: {} })
      const next = { ...state, cancelSent: true }
      yield* save(b.id, next)
      return next
    })

  /** Not forwarded yet: submits it (a refusal ends the batch failed; anything else is tried at the next step). */
  const forward = (b: Batch, state: NativeState) =>
    Effect.gen(function* () {
      const connection = yield* connectionOf(state)
      const submitted = yield* Effect.either(submit(b, state, connection))
      if (submitted._tag === "Left") {
        const e = submitted.left
        // The upstream refused the batch (a 4xx other than 408/429): it will not take it on a
        // retry either, so the batch fails with its (scrubbed) reason.
        if (e.status === null || e.status < 400 || e.status >= 500 || e.status === 408 || e.status === 429) return yield* Effect.fail(e)
        const errors = [{ code: "native_batch_refused", message: `the upstream refused the batch: ${e.message}`, param: null, line: null }]
        yield* sql`UPDATE batches SET status = 'failed', errors = ${JSON.stringify(errors)}, failed_at = ${Date.now()} WHERE id = ${b.id} AND status IN ('in_progress', 'cancelling')`
        return
      }
      yield* save(b.id, submitted.right)
      polledAt.set(b.id, Date.now())
    })

  /** The upstream is done: a failed batch fails; otherwise its results are read and it ends through `finish`. */
  const end = (
    b: Batch,
    current: { readonly status: BatchStatus; readonly state: NativeState },
    p: Polled,
    connection: Connection,
    finish: Finish
  ) =>
    Effect.gen(function* () {
      if (p.ended === "failed") {
        const errors = p.state.errors ?? [
          { code: "upstream_failed", message: `the upstream batch ${current.state.upstreamId} failed`, param: null, line: null }
        ]
        yield* sql`UPDATE batches SET status = 'failed', errors = ${JSON.stringify(errors)}, failed_at = ${Date.now()} WHERE id = ${b.id} AND status IN ('in_progress', 'finalizing', 'cancelling')`
        polledAt.delete(b.id)
        return
      }
      yield* readResults(b, p.state, connection)
      // The counts are the recorded lines' from now on (the same rule as a gateway-run batch).
      yield* sql`UPDATE batches SET
          completed = (SELECT COUNT(*) FROM batch_lines WHERE batch_id = ${b.id} AND status_code >= 200 AND status_code < 300),
          failed = (SELECT COUNT(*) FROM batch_lines WHERE batch_id = ${b.id} AND (status_code < 200 OR status_code >= 300))
        WHERE id = ${b.id}`
      const after = yield* load(b.id)
      const batch = { ...b, status: after?.status ?? b.status }
      yield* finish(
        batch,
        current.status === "cancelling" && p.ended === "completed" ? "cancelled" : (p.ended as "completed" | "expired" | "cancelled")
      )
      polledAt.delete(b.id)
    })

  /** One step of the runner: submit, poll, or read the results and end the batch through `finish`. */
  const step = (b: Batch, finish: Finish) =>
    exclusive(
      b.id,
      Effect.gen(function* () {
        const current = yield* load(b.id)
        if (!current) return
        let state = current.state
        if (!state.upstreamId) {
          // Cancelled before it was forwarded: nothing ran.
          if (current.status === "cancelling") return yield* finish(b, "cancelled")
          return yield* forward(b, state)
        }
        const connection = yield* connectionOf(state)
        if (current.status === "cancelling" && !state.cancelSent) state = yield* sendCancel(b, state, connection)
        const last = polledAt.get(b.id) ?? 0
        if (Date.now() - last < pollMs) return
        polledAt.set(b.id, Date.now())
        const p = yield* poll(state, connection)
        yield* applyPoll({ ...b, status: current.status }, p)
        if (p.ended) yield* end(b, { status: current.status, state }, p, connection, finish)
      })
    )

  /** A GET's poll: the upstream's status and counts, at most once a second per batch; failures ignored. */
  const refresh = (b: Batch) =>
    Effect.gen(function* () {
      const state = b.native
      if (!state?.upstreamId || !["in_progress", "finalizing", "cancelling"].includes(b.status)) return
      if (Date.now() - (polledAt.get(b.id) ?? 0) < 1000) return
      yield* exclusive(
        b.id,
        Effect.gen(function* () {
          const connection = yield* connectionOf(state)
          const p = yield* poll(state, connection)
          // Only the status and counts: reading the results and ending the batch is the runner's step.
          const last = (yield* load(b.id))?.state
          yield* applyPoll(b, { ...p, state: { ...p.state, cancelSent: last?.cancelSent ?? p.state.cancelSent } })
        })
      )
    }).pipe(Effect.catchAll((e) => Effect.logDebug(`native batch ${b.id}: poll on GET failed: ${e.message}`)))

  /** Forwards a cancel (once); a failure is tried again by the runner's next step. */
  const forwardCancel = (b: Batch) =>
    Effect.gen(function* () {
      const current = yield* load(b.id)
      const state = current?.state
      if (!state?.upstreamId || state.cancelSent) return
      // A runner step in flight holds the batch: wait for it (briefly) so the cancel goes out
      // now rather than at the next poll, which may be half a minute away.
      yield* Effect.repeat(
        Effect.sync(() => busy.has(b.id)),
        { schedule: Schedule.spaced("20 millis"), while: (held) => held, times: 250 }
      )
      const fresh = (yield* load(b.id))?.state
      if (!fresh?.upstreamId || fresh.cancelSent) return
      yield* exclusive(
        b.id,
        Effect.flatMap(connectionOf(fresh), (connection) => sendCancel(b, fresh, connection))
      )
    }).pipe(
      Effect.catchAll((e) =>
        Effect.logWarning(`native batch ${b.id}: forwarding the cancel failed (tried again by the runner): ${e.message}`)
      )
    )

  return { step, refresh, forwardCancel }
}
