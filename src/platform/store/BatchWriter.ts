import * as SqlClient from "@effect/sql/SqlClient"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import { isBusy, transaction, upsert } from "./dialect.js"
import { type SqliteWriter, SqliteWriterThread } from "./sqliteWriter.js"
import { StoreHealth } from "./StoreHealth.js"

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
  /**
   * Queue a row; never blocks and never fails. Written within milliseconds by the worker, or, while
   * the store is unavailable, held (within GATEWAY_STORE_BACKLOG_MAX_ROWS) and written once it is back.
   */
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
      const health = yield* StoreHealth
      const queue = yield* Queue.unbounded<Pending>()
      // Rows queued and rows written (or given up on) since start: `flush` waits for the second
      // to reach what the first was when it was called.
      let appended = 0
      let done = 0
      let closed = false
      /** Rows taken from the queue and not written yet because the store is unavailable: retried. */
      let inHand: ReadonlyArray<Pending> = []

      // The writer thread of a SQLite file (Db.layer starts it; it closes after this layer's final drain).
      let thread: SqliteWriter | undefined = Option.getOrUndefined(yield* Effect.serviceOption(SqliteWriterThread))?.writer

      const insert = (table: AppendTable, rows: Row | ReadonlyArray<Row>) => {
        const key = REPLACING[table]
        return key ? upsert(sql, table, rows, key) : sql`INSERT INTO ${sql(table)} ${sql.insert(rows as Array<Record<string, string | number | null>>)}`
      }

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

      /** A row that can never be written (not the store's fault): logged and counted. */
      const dropBad = (table: string, error: string) =>
        Effect.sync(() => health.drop(table, 1, undefined)).pipe(Effect.zipRight(Effect.logError(`dropping ${table} row that cannot be written: ${error}`)))

      /** The batch through the writer thread (if the thread has failed, here from then on): the rows not written because the store is unavailable. */
      const writeOffThread = (w: SqliteWriter, batch: ReadonlyArray<Pending>): Effect.Effect<ReadonlyArray<Pending>> =>
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
            const { singly, dropped, unavailable } = r.ok
            const rest = unavailable === undefined ? [] : batch.slice(unavailable.from)
            if (unavailable !== undefined) health.failed(unavailable)
            else health.succeeded()
            return Effect.as(
              Effect.zipRight(
                singly === undefined ? Effect.void : Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, singly),
                Effect.forEach(dropped, (d) => dropBad(d.table, d.error), { discard: true })
              ),
              rest
            )
          }
        )

      /** Writes the batch; answers the rows not written because the store is unavailable (none when it went through). */
      const writeBatch = (batch: ReadonlyArray<Pending>) => (thread === undefined ? writeHere(batch) : writeOffThread(thread, batch))

      const writeHere = (batch: ReadonlyArray<Pending>): Effect.Effect<ReadonlyArray<Pending>> =>
        transaction(sql, insertGrouped(batch)).pipe(
          // Lock contention (another process writing) passes; anything else will not.
          Effect.retry({
            schedule: Schedule.exponential("20 millis").pipe(Schedule.intersect(Schedule.recurs(6))),
            while: (error) => isBusy(error)
          }),
          Effect.tap(() => health.succeeded()),
          Effect.as([] as ReadonlyArray<Pending>),
          Effect.catchAll((error) =>
            health.failed(error) !== undefined
              ? Effect.succeed(batch)
              : // The batch as a whole failed even after retries: write rows one by one so one bad
                // row cannot take the others with it.
                Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, error.message).pipe(Effect.zipRight(writeSingly(batch)))
          )
        )

      /** Row by row; stops at the first the store cannot take and answers it and the rest. */
      const writeSingly = (batch: ReadonlyArray<Pending>): Effect.Effect<ReadonlyArray<Pending>> =>
        Effect.suspend(() => {
          const loop = (i: number): Effect.Effect<ReadonlyArray<Pending>> =>
            i >= batch.length
              ? Effect.succeed([])
              : Effect.flatMap(Effect.either(insert(batch[i]!.table, batch[i]!.row)), (r) => {
                  if (r._tag === "Right") return loop(i + 1)
                  if (health.failed(r.left) !== undefined) return Effect.succeed(batch.slice(i))
                  return Effect.zipRight(dropBad(batch[i]!.table, r.left.message), loop(i + 1))
                })
          return loop(0)
        })

      /**
       * Writes the rows in hand, holding what the store cannot take yet and trying it again on RETRY until
       * it goes through. Only the waits between tries can be interrupted (at shutdown: the
       * finalizer then has the rows still in hand); a write once started finishes.
       */
      const writeHeld: Effect.Effect<void> = Effect.gen(function* () {
        const retry = yield* Schedule.driver(RETRY)
        for (;;) {
          // The write and its bookkeeping in one uninterruptible step: a shutdown never sees rows
          // written and still in hand (it would write them twice).
          const left = yield* Effect.uninterruptible(
            Effect.map(writeBatch(inHand), (notTaken) => {
              const finished = inHand.length - notTaken.length
              done += finished
              health.release(finished)
              inHand = notTaken
              return notTaken
            })
          )
          if (left.length === 0) return
          yield* Effect.orDie(retry.next(undefined))
        }
      })

      // Only the wait for the first row and the waits between tries while the store is
      // unavailable are interruptible: rows once taken are written (or, at shutdown, handed to the
      // finalizer). After the first row the worker lingers briefly so rows arriving together share
      // one transaction (at 1-2k requests a second a commit per row cost more than the rest of a
      // request). A full batch does not linger: a backlog is written back to back, not LINGER per
      // 500 rows, so the time a row waits for its commit stays bounded after a burst.
      const step = Effect.uninterruptibleMask((restore) =>
        restore(Queue.takeBetween(queue, 1, MAX_BATCH)).pipe(
          Effect.flatMap((first) =>
            Queue.size(queue).pipe(
              Effect.flatMap((waiting) => (first.length + waiting >= MAX_BATCH ? Effect.void : Effect.sleep(LINGER))),
              Effect.zipRight(Queue.takeUpTo(queue, MAX_BATCH - first.length)),
              Effect.map((more) => Chunk.appendAll(first, more))
            )
          ),
          Effect.flatMap((chunk) => {
            inHand = Array.from(chunk)
            return restore(writeHeld)
          })
        )
      )

      // Registered before the worker starts, so it runs after the worker is interrupted.
      yield* Effect.addFinalizer(() =>
        Effect.gen(function* () {
          closed = true
          const rest = [...inHand, ...(yield* Queue.takeAll(queue))]
          inHand = []
          if (rest.length === 0) return
          let left: ReadonlyArray<Pending> = []
          for (const batch of chunksOf(rest, MAX_BATCH)) {
            // A store still unavailable at shutdown gets a few more seconds, then what it has not taken is lost.
            const notTaken =
              left.length > 0
                ? batch
                : yield* writeBatch(batch).pipe(
                    Effect.flatMap((l) => (l.length === 0 ? Effect.succeed(l) : Effect.fail(l))),
                    Effect.retry(FINAL_RETRY),
                    Effect.merge
                  )
            const finished = batch.length - notTaken.length
            done += finished
            health.release(finished)
            left = [...left, ...notTaken]
          }
          if (left.length > 0) {
            const perTable = new Map<string, number>()
            for (const p of left) perTable.set(p.table, (perTable.get(p.table) ?? 0) + 1)
            for (const [table, n] of perTable) health.drop(table, n, `the gateway stopped while the store was unavailable (${health.cause() ?? "unknown cause"})`)
            done += left.length
            health.release(left.length)
            yield* Effect.logError(`${left.length} queued rows could not be written before the gateway stopped: ${health.cause() ?? "the store is unavailable"}`)
          }
          yield* Effect.logInfo(`flushed ${rest.length - left.length} queued rows on shutdown`)
        })
      )
      yield* Effect.forkScoped(Effect.forever(step))

      const pending = Effect.sync(() => appended - done)

      /**
       * Waits until every row queued before the call is written (a row handed to the worker fiber
       * included), or answers at once while the store is unavailable: the caller's read then
       * fails as the store does, instead of waiting for the outage to end.
       */
      const flush = Effect.suspend(() => {
        const target = appended
        return Effect.repeat(
          Effect.sync(() => done >= target || !health.up()),
          { until: (finished) => finished, schedule: Schedule.spaced("5 millis") }
        )
      }).pipe(Effect.asVoid)

      return {
        append: (table, row) => {
          if (closed) {
            // Only possible if something outlives the server; keep the row for the final drain.
            console.error(`[gateway] row appended to ${table} after shutdown began`)
          }
          if (!health.hold(table)) return
          appended++
          Queue.unsafeOffer(queue, { table, row })
        },
        flush,
        pending
      }
    })
  )
}

/** Rows the store could not take are tried again after 100 ms, doubling, at most 2 s apart, until it takes them. */
const RETRY = Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds")))
/** At shutdown, a store still unavailable gets about five more seconds. */
const FINAL_RETRY = Schedule.spaced("500 millis").pipe(Schedule.intersect(Schedule.recurs(10)))

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
