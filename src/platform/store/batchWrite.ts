/**
 * Writing one batch of queued rows: in one transaction, one multi-row INSERT per table and column
 * set, on the SQLite writer thread when there is one (here, on the main connection, once it
 * failed); a batch that fails as a whole is written row by row so one bad row cannot take the
 * others with it. What the store cannot take because it is unavailable is answered, to be held.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { AppendTable, Row } from "./BatchWriter.js"
import { isBusy, transaction, upsert } from "./dialect.js"
import type { BatchResult, SqliteWriter } from "./SqliteWriterThread.js"
import type { StoreHealthShape } from "./StoreHealth.js"

/** Tables whose rows replace an existing row with the same primary key: the key's columns. */
export const REPLACING: Partial<Record<AppendTable, ReadonlyArray<string>>> = { cache_entries: ["key"] }

/** A row queued for its table. */
export interface Pending {
  readonly table: AppendTable
  readonly row: Row
}

/** Writes a batch; answers the rows not written because the store is unavailable (none when it went through). */
export type WriteBatch = (batch: ReadonlyArray<Pending>) => Effect.Effect<ReadonlyArray<Pending>>

/**
 * A batch's first write as the writer thread answered it: the rows it did not take because the
 * store is unavailable (`left`, to hold and retry), with what must be logged of the others (rows
 * written singly or dropped); or, when the thread failed, the Effect that writes the batch here
 * instead (answering the rows not taken).
 */
export type Settled =
  | { readonly left: ReadonlyArray<Pending>; readonly log?: Effect.Effect<void> }
  | { readonly instead: Effect.Effect<ReadonlyArray<Pending>> }

/**
 * A batch written without a fiber, the usual way (on the writer thread): a promise of what the
 * thread's answer leaves (`Settled`; it never rejects). Undefined where there is no writer thread:
 * the batch is then `WriteBatch`'s. At a few rows a batch (a request now and then), a fiber forked
 * per batch was a quarter of a request's CPU (docs/performance.md, "The usage batch without a fiber").
 */
export type WriteNow = (batch: ReadonlyArray<Pending>) => Promise<Settled> | undefined

/** A batch's two ways out: `write` on a fiber, `writeNow` without one while it can. */
export interface BatchWrites {
  readonly write: WriteBatch
  readonly writeNow: WriteNow
}

/** No rows left to hold: the batch went through. */
const NONE_LEFT: ReadonlyArray<Pending> = []

export interface BatchWriteDeps {
  readonly sql: SqlClient.SqlClient
  readonly health: StoreHealthShape
  /** The writer thread of a SQLite file (Db.layer starts it; it closes after the writer's final drain), if there is one. */
  readonly thread: SqliteWriter | undefined
}

/** The batch write: through the writer thread while it works, here otherwise; rows that can never be written are dropped, logged and
 * counted. */
export const makeBatchWrite = ({ sql, health, thread: started }: BatchWriteDeps): BatchWrites => {
  let thread = started

  const insert = (table: AppendTable, rows: Row | ReadonlyArray<Row>) => {
    const key = REPLACING[table]
    return key
      ? upsert(sql, table, rows, key)
      : sql`INSERT INTO ${sql(table)} ${sql.insert(rows as Array<Record<string, string | number | null>>)}`
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
    Effect.sync(() => health.drop(table, 1, undefined)).pipe(
      Effect.zipRight(Effect.logError(`dropping ${table} row that cannot be written: ${error}`))
    )

  /** The writer thread's answer to a batch, or how it failed (a throw included: the thread starts with the first batch). */
  type ThreadAnswer = { readonly ok: BatchResult } | { readonly failed: Error }
  const askThread = (w: SqliteWriter, batch: ReadonlyArray<Pending>): Promise<ThreadAnswer> => {
    try {
      return w.write(batch).then(
        (r) => ({ ok: r }),
        (e: Error) => ({ failed: e })
      )
    } catch (e) {
      return Promise.resolve({ failed: e instanceof Error ? e : new Error(String(e)) })
    }
  }

  /**
   * What the thread's answer leaves (`Settled`): the rows it did not take because the store is
   * unavailable, and what must be logged of the others (rows written singly or dropped); or, when
   * the thread failed, the batch's write here instead (and here from then on).
   */
  const settle = (w: SqliteWriter, batch: ReadonlyArray<Pending>, r: ThreadAnswer): Settled => {
    if ("failed" in r) {
      if (thread === w) thread = undefined
      return {
        instead: Effect.logWarning("the SQLite writer thread failed; writing on the main thread from now on", r.failed.message).pipe(
          Effect.zipRight(writeHere(batch))
        )
      }
    }
    const { singly, dropped, unavailable } = r.ok
    const left = unavailable === undefined ? NONE_LEFT : batch.slice(unavailable.from)
    if (unavailable !== undefined) health.failed(unavailable)
    else health.succeeded()
    // The usual batch (every row written, nothing to log) answers without the logging's effects.
    if (singly === undefined && dropped.length === 0) return { left }
    return {
      left,
      log: Effect.zipRight(
        singly === undefined ? Effect.void : Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, singly),
        Effect.forEach(dropped, (d) => dropBad(d.table, d.error), { discard: true })
      )
    }
  }

  /** The batch through the writer thread (if the thread has failed, here from then on): the rows not written because the store is
   * unavailable. */
  const writeOffThread = (w: SqliteWriter, batch: ReadonlyArray<Pending>): Effect.Effect<ReadonlyArray<Pending>> =>
    Effect.flatMap(
      Effect.promise(() => askThread(w, batch)),
      (r) => {
        const settled = settle(w, batch, r)
        if ("instead" in settled) return settled.instead
        return settled.log === undefined ? Effect.succeed(settled.left) : Effect.as(settled.log, settled.left)
      }
    )

  /** Writes the batch; answers the rows not written because the store is unavailable (none when it went through). */
  const write: WriteBatch = (batch) => (thread === undefined ? writeHere(batch) : writeOffThread(thread, batch))

  /** `WriteNow`: the thread's write and its answer as a promise, while there is a thread. */
  const writeNow: WriteNow = (batch) => {
    const w = thread
    return w === undefined ? undefined : askThread(w, batch).then((r) => settle(w, batch, r))
  }

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
            Effect.logWarning(`batch write failed (${batch.length} rows), writing rows singly`, error.message).pipe(
              Effect.zipRight(writeSingly(batch))
            )
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

  return { write, writeNow }
}
