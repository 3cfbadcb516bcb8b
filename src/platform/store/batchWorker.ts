/**
 * The worker that drains the writer's queue, and the drain at shutdown. The worker takes what has
 * accumulated (lingering briefly after the first row), writes it in one batch and holds what an
 * unavailable store could not take, trying it again until it goes through. At shutdown the queue
 * and the rows in hand are written (a store still unavailable gets a few more seconds), so a
 * SIGTERM loses nothing that was queued.
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type { Pending, WriteBatch } from "./batchWrite.js"
import type { StoreHealthShape } from "./StoreHealth.js"

/** 500 rows of ~21 columns stay well under SQLite's 32766 bound parameters per statement. */
export const MAX_BATCH = 500

/**
 * How long the worker waits for more rows once one has arrived, unless a full batch is already
 * waiting. This is the durability bound of a kill -9 (docs/accounting.md): a row is committed
 * about LINGER plus the time to write it (and what is ahead of it) after it was queued.
 */
const LINGER = "20 millis"

/** Rows the store could not take are tried again after 100 ms, doubling, at most 2 s apart, until it takes them. */
const RETRY = Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds")))
/** At shutdown, a store still unavailable gets about five more seconds. */
const FINAL_RETRY = Schedule.spaced("500 millis").pipe(Schedule.intersect(Schedule.recurs(10)))

/** What the writer counts and holds, shared by `append`, the worker, the final drain and `flush`. */
export interface WriterState {
  /** Rows queued since start. */
  appended: number
  /** Rows written (or given up on) since start: `flush` waits for this to reach what `appended` was when it was called. */
  done: number
  /** Set when the final drain begins. */
  closed: boolean
  /** Rows taken from the queue and not written yet because the store is unavailable: retried. */
  inHand: ReadonlyArray<Pending>
}

/** A writer's state before its first row. */
export const newWriterState = (): WriterState => ({ appended: 0, done: 0, closed: false, inHand: [] })

export interface WorkerDeps {
  readonly queue: Queue.Queue<Pending>
  readonly state: WriterState
  readonly health: StoreHealthShape
  readonly writeBatch: WriteBatch
}

/**
 * One round of the worker (run forever in the layer's scope): the rows that accumulated, written
 * and, while the store is unavailable, held and tried again. Only the wait for the first row and
 * the waits between tries are interruptible: rows once taken are written (or, at shutdown, handed
 * to the final drain).
 */
export const makeWorkerStep = ({ queue, state, health, writeBatch }: WorkerDeps): Effect.Effect<void> => {
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
        Effect.map(writeBatch(state.inHand), (notTaken) => {
          const finished = state.inHand.length - notTaken.length
          state.done += finished
          health.release(finished)
          state.inHand = notTaken
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
  return Effect.uninterruptibleMask((restore) =>
    restore(Queue.takeBetween(queue, 1, MAX_BATCH)).pipe(
      Effect.flatMap((first) =>
        Queue.size(queue).pipe(
          Effect.flatMap((waiting) => (first.length + waiting >= MAX_BATCH ? Effect.void : Effect.sleep(LINGER))),
          Effect.zipRight(Queue.takeUpTo(queue, MAX_BATCH - first.length)),
          // One array of both takes, copied from their arrays: iterating a chunk makes a result object per row.
          Effect.map((more) => Chunk.toReadonlyArray(first).concat(Chunk.toReadonlyArray(more)))
        )
      ),
      Effect.flatMap((rows) => {
        state.inHand = rows
        return restore(writeHeld)
      })
    )
  )
}

/**
 * The drain at shutdown (the layer's finalizer, run after the worker is interrupted): the rows in
 * hand and everything queued, written in batches; a store still unavailable gets FINAL_RETRY, then
 * what it has not taken is counted as dropped, with the cause.
 */
export const makeFinalDrain = ({ queue, state, health, writeBatch }: WorkerDeps): Effect.Effect<void> =>
  Effect.gen(function* () {
    state.closed = true
    const rest = [...state.inHand, ...(yield* Queue.takeAll(queue))]
    state.inHand = []
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
      state.done += finished
      health.release(finished)
      left = [...left, ...notTaken]
    }
    if (left.length > 0) {
      const perTable = new Map<string, number>()
      for (const p of left) perTable.set(p.table, (perTable.get(p.table) ?? 0) + 1)
      for (const [table, n] of perTable)
        health.drop(table, n, `the gateway stopped while the store was unavailable (${health.cause() ?? "unknown cause"})`)
      state.done += left.length
      health.release(left.length)
      yield* Effect.logError(
        `${left.length} queued rows could not be written before the gateway stopped: ${health.cause() ?? "the store is unavailable"}`
      )
    }
    yield* Effect.logInfo(`flushed ${rest.length - left.length} queued rows on shutdown`)
  })

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
