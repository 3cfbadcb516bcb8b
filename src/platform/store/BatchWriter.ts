import * as SqlClient from "@effect/sql/SqlClient"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { isBusy, upsert } from "./dialect.js"
import { type SqliteWriter, SqliteWriterThread } from "./sqliteWriter.js"

/** Tables written only from the queue: appended rows, or rows replaced by key (`cache_entries`). */
export type AppendTable = "usage" | "audit_log" | "cache_entries"

/** Tables whose rows replace an existing row with the same primary key: the key's columns. */
export const REPLACING: Partial<Record<AppendTable, ReadonlyArray<string>>> = { cache_entries: ["key"] }

export type Row = Readonly<Record<string, string | number | Uint8Array | null>>

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

/** 500 rows of ~21 columns stay well under SQLite's 32766 bound parameters per statement. */
export const MAX_BATCH = 500

/**
 * How long the worker waits for more rows once one has arrived, unless a full batch is already
 * waiting. This is the durability bound of a kill -9 (docs/accounting.md): a row is committed
 * about LINGER plus the time to write it (and what is ahead of it) after it was queued.
 */
const LINGER = "20 millis"

/**
 * Append-only rows (usage, audit) leave the request path through an in-memory queue. A
 * background fiber writes whatever has accumulated in one transaction, one multi-row INSERT per
 * table (one insert per row cost ~30 µs inside a transaction, ~100 µs or more alone). The layer's finalizer stops the worker
 * between batches and writes what is left, so a SIGTERM loses nothing that was queued. A kill -9
 * loses only what was queued in the last LINGER and the batch being written: each commit is in the
 * WAL (synchronous = NORMAL, see Db.ts), which survives the process, only not a power loss.
 *
 * On a SQLite file the transactions run on a worker thread with its own connection
 * (src/platform/store/sqliteWriter.ts): better-sqlite3 blocks the thread it runs on, and a batch held every
 * request that arrived meanwhile. Should the thread fail, the writer goes on here, on the main
 * connection. PostgreSQL (and an in-memory SQLite) are written here: their client does not block.
 */
export class BatchWriter extends Context.Tag("gateway/BatchWriter")<BatchWriter, BatchWriterShape>() {
  static readonly layer = Layer.scoped(
    BatchWriter,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const queue = yield* Queue.unbounded<Pending>()
      // Rows queued and rows written (or given up on) since start: `flush` waits for the second
      // to reach what the first was when it was called.
      let appended = 0
      let done = 0
      let closed = false

      // The writer thread of a SQLite file (Db.layer starts it; it closes after this layer's final drain).
      let thread: SqliteWriter | undefined = Option.getOrUndefined(yield* Effect.serviceOption(SqliteWriterThread))?.writer

      const insert = (table: AppendTable, rows: Row | ReadonlyArray<Row>) => {
        const key = REPLACING[table]
        return key ? upsert(sql, table, rows, key) : sql`INSERT INTO ${sql(table)} ${sql.insert(rows as Array<Record<string, string | number | null>>)}`
      }
      const insertOne = (p: Pending) => insert(p.table, p.row)

      /** Rows of one table with the same columns go into one multi-row INSERT. */
      const insertGrouped = (batch: ReadonlyArray<Pending>) => {
        const groups = new Map<string, { table: AppendTable; rows: Array<Row> }>()
        for (const p of batch) {
          const key = `${p.table}|${Object.keys(p.row).join(",")}`
          const group = groups.get(key) ?? { table: p.table, rows: [] }
          group.rows.push(p.row)
          groups.set(key, group)
        }
        return Effect.forEach(groups.values(), (g) => insert(g.table, g.rows), { discard: true })
      }

      /** The batch through the writer thread; if the thread has failed, here from then on. */
      const writeOffThread = (w: SqliteWriter, batch: ReadonlyArray<Pending>): Effect.Effect<void> =>
        Effect.flatMap(
          Effect.promise(() =>
            w.write(batch).then(
              (r) => ({ ok: r }),
              (e: Error) => ({ failed: e })
            )
          ),
          (r) => {
            if ("failed" in r) {
              if (thread === w) thread = undefined
              return Effect.logWarning("the SQLite writer thread failed; writing on the main thread from now on", r.failed.message).pipe(Effect.zipRight(writeHere(batch)))
            }
            const { singly, dropped } = r.ok
            if (singly === undefined && dropped.length === 0) return Effect.void
            return Effect.zipRight(
              singly === undefined ? Effect.void : Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, singly),
              Effect.forEach(dropped, (d) => Effect.logError(`dropping ${d.table} row that cannot be written: ${d.error}`), { discard: true })
            )
          }
        )

      const writeBatch = (batch: ReadonlyArray<Pending>) => (thread === undefined ? writeHere(batch) : writeOffThread(thread, batch))

      const writeHere = (batch: ReadonlyArray<Pending>): Effect.Effect<void> =>
        sql.withTransaction(insertGrouped(batch)).pipe(
          // Lock contention (another process writing) passes; anything else will not.
          Effect.retry({
            schedule: Schedule.exponential("20 millis").pipe(Schedule.intersect(Schedule.recurs(6))),
            while: (error) => isBusy(error)
          }),
          Effect.catchAll((error) =>
            // The batch as a whole failed even after retries: write rows one by one so one bad
            // row cannot take the others with it.
            Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, error.message).pipe(
              Effect.zipRight(
                Effect.forEach(batch, (p) => insertOne(p).pipe(Effect.catchAll((e) => Effect.logError(`dropping ${p.table} row that cannot be written: ${e.message}`))), {
                  discard: true
                })
              )
            )
          )
        )

      // Only the wait for the first row is interruptible: rows once taken are always written.
      // After the first row the worker lingers briefly so rows arriving together share one
      // transaction (at 1-2k requests a second a commit per row cost more than the rest of a request).
      // A full batch does not linger: a backlog is written back to back, not LINGER per 500 rows,
      // so the time a row waits for its commit stays bounded after a burst.
      const step = Effect.uninterruptibleMask((restore) =>
        restore(Queue.takeBetween(queue, 1, MAX_BATCH)).pipe(
          Effect.flatMap((first) =>
            Queue.size(queue).pipe(
              Effect.flatMap((waiting) => (first.length + waiting >= MAX_BATCH ? Effect.void : Effect.sleep(LINGER))),
              Effect.zipRight(Queue.takeUpTo(queue, MAX_BATCH - first.length)),
              Effect.map((more) => Chunk.appendAll(first, more))
            )
          ),
          Effect.tap((chunk) =>
            Effect.ensuring(
              writeBatch(Array.from(chunk)),
              Effect.sync(() => (done += chunk.length))
            )
          )
        )
      )

      // Registered before the worker starts, so it runs after the worker is interrupted.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          closed = true
          const rest = yield* Queue.takeAll(queue)
          if (rest.length > 0) {
            yield* Effect.forEach(
              chunksOf(Array.from(rest), MAX_BATCH),
              (batch) =>
                Effect.ensuring(
                  writeBatch(batch),
                  Effect.sync(() => (done += batch.length))
                ),
              { discard: true }
            )
            yield* Effect.logInfo(`flushed ${rest.length} queued rows on shutdown`)
          }
        })
      )
      yield* Effect.forkScoped(Effect.forever(step))

      const pending = Effect.sync(() => appended - done)

      /** Waits until every row queued before the call is written (a row handed to the worker fiber included). */
      const flush = Effect.suspend(() => {
        const target = appended
        return Effect.repeat(
          Effect.sync(() => done),
          { until: (n) => n >= target, schedule: Schedule.spaced("5 millis") }
        )
      }).pipe(Effect.asVoid)

      return {
        append: (table, row) => {
          if (closed) {
            // Only possible if something outlives the server; keep the row for the final drain.
            console.error(`[gateway] row appended to ${table} after shutdown began`)
          }
          appended++
          Queue.unsafeOffer(queue, { table, row })
        },
        flush,
        pending
      }
    })
  )
}

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
