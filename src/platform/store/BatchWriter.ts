import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import { makeBatchWrite } from "./batchWrite.js"
import { makeWorker, newWriterState } from "./batchWorker.js"
import { SqliteWriterThread } from "./SqliteWriterThread.js"
import { StoreHealth } from "./StoreHealth.js"

export { REPLACING } from "./batchWrite.js"
export { MAX_BATCH } from "./batchWorker.js"

/** Tables written only from the queue: appended rows, or rows replaced by key (`cache_entries`). */
export type AppendTable = "usage" | "audit_log" | "cache_entries"

export type Row = Readonly<Record<string, string | number | Uint8Array | null>>

export interface BatchWriterShape {
  /**
   * Queue a row; never blocks and never fails. Written within milliseconds in a batch, or, while
   * the store is unavailable, held (within GATEWAY_STORE_BACKLOG_MAX_ROWS) and written once it is back.
   */
  readonly append: (table: AppendTable, row: Row) => void
  /** Waits until everything queued before the call is on disk. */
  readonly flush: Effect.Effect<void>
  readonly pending: Effect.Effect<number>
}

/**
 * Appended rows (usage, audit, cache entries) leave the request path through an array and are written in batches, one
 * transaction each, on the SQLite writer thread when there is one; shutdown writes what is queued (docs/store.md, "Batched writer").
 */
export class BatchWriter extends Context.Tag("gateway/BatchWriter")<BatchWriter, BatchWriterShape>() {
  static readonly layer = Layer.scoped(
    BatchWriter,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const health = yield* StoreHealth
      // The writer thread of a SQLite file (Db.layer starts it; it closes after this layer's final drain).
      const thread = Option.getOrUndefined(yield* Effect.serviceOption(SqliteWriterThread))?.writer
      const state = newWriterState()

      const { write, writeNow } = makeBatchWrite({ sql, health, thread })
      // A batch's write runs without a fiber while it can, else on this layer's runtime; the final drain lets the one in flight finish.
      const worker = makeWorker({ state, health, writeBatch: write, writeNow, fork: Runtime.runFork(yield* Effect.runtime<never>()) })
      yield* Effect.addFinalizer(() => worker.finalDrain)

      const pending = Effect.sync(() => state.appended - state.done)

      /**
       * Waits until every row queued before the call is written (the rows of a batch in flight
       * included), or answers at once while the store is unavailable: the caller's read then
       * fails as the store does, instead of waiting for the outage to end.
       */
      const flush = Effect.suspend(() => {
        const target = state.appended
        return Effect.repeat(
          Effect.sync(() => state.done >= target || !health.up()),
          { until: (finished) => finished, schedule: Schedule.spaced("5 millis") }
        )
      }).pipe(Effect.asVoid)

      return {
        append: (table, row) => {
          if (state.closed) {
            // Only possible if something outlives the server; keep the row for the final drain.
            console.error(`[gateway] row appended to ${table} after shutdown began`)
          }
          if (!health.hold(table)) return
          state.appended++
          worker.push({ table, row })
        },
        flush,
        pending
      }
    })
  )
}
