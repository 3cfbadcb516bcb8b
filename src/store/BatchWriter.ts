import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"

/** Tables that only ever receive appended rows. */
export type AppendTable = "usage" | "audit_log"

export type Row = Readonly<Record<string, string | number | null>>

interface Pending {
  readonly table: AppendTable
  readonly row: Row
}

export interface BatchWriterShape {
  /** Queue a row; never blocks and never fails. Written within milliseconds by the worker. */
  readonly append: (table: AppendTable, row: Row) => void
  /** Waits until everything queued before the call is on disk. */
  readonly flush: Effect.Effect<void>
  readonly pending: Effect.Effect<number>
}

const MAX_BATCH = 500

/**
 * Append-only rows (usage, audit) leave the request path through an in-memory queue. A
 * background fiber writes whatever has accumulated in one transaction (one insert costs
 * ~30 µs inside a transaction, ~100 µs or more alone). The layer's finalizer stops the worker
 * between batches and writes what is left, so a SIGTERM loses nothing that was queued.
 */
export class BatchWriter extends Context.Tag("gateway/BatchWriter")<BatchWriter, BatchWriterShape>() {
  static readonly layer = Layer.scoped(
    BatchWriter,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const queue = yield* Queue.unbounded<Pending>()
      let inFlight = 0
      let closed = false

      const insertOne = (p: Pending) => sql`INSERT INTO ${sql(p.table)} ${sql.insert(p.row as Record<string, string | number | null>)}`

      const writeBatch = (batch: ReadonlyArray<Pending>) =>
        sql.withTransaction(Effect.forEach(batch, insertOne, { discard: true })).pipe(
          // Lock contention (another process writing) passes; anything else will not.
          Effect.retry({
            schedule: Schedule.exponential("20 millis").pipe(Schedule.intersect(Schedule.recurs(6))),
            while: isContention
          }),
          Effect.catchAll((error) =>
            // The batch as a whole failed even after retries: write rows one by one so one bad
            // row cannot take the others with it.
            Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, error.message).pipe(
              Effect.zipRight(
                Effect.forEach(
                  batch,
                  (p) =>
                    insertOne(p).pipe(
                      Effect.catchAll((e) =>
                        Effect.logError(`dropping ${p.table} row that cannot be written: ${e.message}`)
                      )
                    ),
                  { discard: true }
                )
              )
            )
          )
        )

      const step = Effect.uninterruptibleMask((restore) =>
        restore(Queue.takeBetween(queue, 1, MAX_BATCH)).pipe(
          Effect.tap((chunk) => {
            inFlight = chunk.length
            return writeBatch(Array.from(chunk))
          }),
          Effect.ensuring(Effect.sync(() => (inFlight = 0)))
        )
      )

      // Registered before the worker starts, so it runs after the worker is interrupted.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          closed = true
          const rest = yield* Queue.takeAll(queue)
          if (rest.length > 0) {
            yield* Effect.forEach(chunksOf(Array.from(rest), MAX_BATCH), writeBatch, { discard: true })
            yield* Effect.logInfo(`flushed ${rest.length} queued rows on shutdown`)
          }
        })
      )
      yield* Effect.forkScoped(Effect.forever(step))

      // Queue.size is negative while the worker waits in take: clamp it.
      const pending = Effect.map(Queue.size(queue), (n) => Math.max(0, n) + inFlight)

      /** Waits for the queue to drain and the current batch to land. */
      const flush = Effect.repeat(pending, { until: (n) => n === 0, schedule: Schedule.spaced("5 millis") }).pipe(Effect.asVoid)

      return {
        append: (table, row) => {
          if (closed) {
            // Only possible if something outlives the server; keep the row for the final drain.
            console.error(`[gateway] row appended to ${table} after shutdown began`)
          }
          Queue.unsafeOffer(queue, { table, row })
        },
        flush,
        pending
      }
    })
  )
}

const isContention = (error: { readonly cause?: unknown }): boolean => {
  const code = (error.cause as { code?: string } | undefined)?.code ?? ""
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")
}

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
