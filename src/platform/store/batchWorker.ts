/**
 * The writer's batching, and the drain at shutdown. Appended rows wait in a plain array; the first
 * arms one timer (LINGER, or the next turn of the event loop when a full batch is waiting), which
 * takes up to MAX_BATCH rows and writes them in one batch, holding what an unavailable store could
 * not take and trying it again until it goes through; rows that arrived meanwhile arm the next
 * timer when it is done. At shutdown the write in flight finishes, then the rows in hand and the
 * array are written (a store still unavailable gets a few more seconds), so a SIGTERM loses
 * nothing that was queued.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schedule from "effect/Schedule"
import type { Pending, Settled, WriteBatch, WriteNow } from "./batchWrite.js"
import type { StoreHealthShape } from "./StoreHealth.js"

/** 500 rows of ~21 columns stay well under SQLite's 32766 bound parameters per statement. */
export const MAX_BATCH = 500

/**
 * How long the first row waits for more before its batch is written, unless a full batch is
 * already waiting. This is the durability bound of a kill -9 (docs/accounting.md): a row is
 * committed about LINGER plus the time to write it (and what is ahead of it) after it was queued.
 */
const LINGER_MS = 20

/** Rows the store could not take are tried again after 100 ms, doubling, at most 2 s apart, until it takes them. */
const RETRY = Schedule.exponential("100 millis").pipe(Schedule.union(Schedule.spaced("2 seconds")))
/** At shutdown, a store still unavailable gets about five more seconds. */
const FINAL_RETRY = Schedule.spaced("500 millis").pipe(Schedule.intersect(Schedule.recurs(10)))

/** What the writer counts and holds, shared by `append`, the batches, the final drain and `flush`. */
export interface WriterState {
  /** Rows queued since start. */
  appended: number
  /** Rows written (or given up on) since start: `flush` waits for this to reach what `appended` was when it was called. */
  done: number
  /** Set when the final drain begins. */
  closed: boolean
  /** Rows appended and not taken into a batch yet, oldest first. */
  waiting: Array<Pending>
  /** Rows taken into the batch being written, and, while the store is unavailable, not written yet: retried. */
  inHand: ReadonlyArray<Pending>
}

/** A writer's state before its first row. */
export const newWriterState = (): WriterState => ({ appended: 0, done: 0, closed: false, waiting: [], inHand: [] })

export interface WorkerDeps {
  readonly state: WriterState
  readonly health: StoreHealthShape
  readonly writeBatch: WriteBatch
  /** The batch written without a fiber while it can be (batchWrite.ts); absent: every batch by `writeBatch` on a fiber. */
  readonly writeNow?: WriteNow | undefined
  /** Runs a batch's write as a fiber of the writer layer's runtime (its logger, its services). */
  readonly fork: (write: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
}

export interface Worker {
  /** Queues a row: plain data on the request path (a push, and a timer armed once per batch). */
  readonly push: (row: Pending) => void
  /** The drain at shutdown (the layer's finalizer). */
  readonly finalDrain: Effect.Effect<void>
}

/**
 * The batching: at most one of a timer armed and a write in flight at any time, so batches are
 * written one after the other. Rows arriving together share one transaction (at 1-2k requests a
 * second a commit per row cost more than the rest of a request). A full batch does not linger: a
 * backlog is written back to back, not LINGER per 500 rows, so the time a row waits for its commit
 * stays bounded after a burst. No fiber for the usual batch: its write goes to the writer thread
 * from the timer and its answer is taken in the promise's callback (`writeNow`); a fiber runs
 * what is not usual (a store unavailable: the retries; a failed thread, rows to log) and every
 * batch where there is no writer thread (PostgreSQL). A fiber per batch was most of what a row
 * cost at ~30 rows a batch when it was woken by every row, and a quarter of a request's CPU when
 * each request is a batch of its own (requests a few a second).
 */
export const makeWorker = ({ state, health, writeBatch, writeNow, fork }: WorkerDeps): Worker => {
  /** The linger armed for the rows waiting, if any. */
  let linger: ReturnType<typeof setTimeout> | undefined
  /** The next turn of the event loop, armed instead when a full batch is waiting. */
  let immediate: ReturnType<typeof setImmediate> | undefined
  /** A batch is being written, from the timer that took it until its rows are written (or held at shutdown). */
  let inFlight = false
  /** Its fiber, interrupted at shutdown (unset if it ended before `fork` returned it). */
  let writing: Fiber.RuntimeFiber<void> | undefined
  /** A batch written without a fiber, until its answer is taken: the final drain waits for it. */
  let settling: Promise<void> | undefined

  const arm = () => {
    if (state.waiting.length >= MAX_BATCH) immediate = setImmediate(startBatch)
    else linger = setTimeout(startBatch, LINGER_MS)
  }

  /** Up to MAX_BATCH of the rows waiting, oldest first (the whole array, not a copy, when they fit in one batch). */
  const takeBatch = (): ReadonlyArray<Pending> => {
    const waiting = state.waiting
    if (waiting.length <= MAX_BATCH) {
      state.waiting = []
      return waiting
    }
    return waiting.splice(0, MAX_BATCH)
  }

  /** A write's answer taken: the rows written are done, those the store could not take stay in hand. */
  const took = (notTaken: ReadonlyArray<Pending>): ReadonlyArray<Pending> => {
    const finished = state.inHand.length - notTaken.length
    state.done += finished
    health.release(finished)
    state.inHand = notTaken
    return notTaken
  }

  /**
   * A write and its bookkeeping in one uninterruptible step: a shutdown never sees rows written
   * and still in hand (it would write them twice).
   */
  const taken = (write: Effect.Effect<ReadonlyArray<Pending>>): Effect.Effect<ReadonlyArray<Pending>> =>
    Effect.uninterruptible(Effect.map(write, took))
  /**
   * Writes the rows in hand, holding what the store cannot take yet and trying it again on RETRY
   * until it goes through. Only the waits between tries can be interrupted (at shutdown: the final
   * drain then has the rows still in hand); a write once started finishes.
   */
  const writeInHand: Effect.Effect<ReadonlyArray<Pending>> = taken(Effect.suspend(() => writeBatch(state.inHand)))
  /** The tries after the first, while the store is unavailable: RETRY apart until none is left. */
  const retryHeld: Effect.Effect<void> = Effect.gen(function* () {
    const retry = yield* Schedule.driver(RETRY)
    for (;;) {
      yield* Effect.orDie(retry.next(undefined))
      if ((yield* writeInHand).length === 0) return
    }
  })
  /**
   * A batch's write is over: rows that arrived meanwhile arm the next batch. Rows still in hand
   * then (before shutdown) are a batch whose write died with a defect, its answer never taken:
   * counted as dropped and logged, rather than left for the next batch to overwrite (and `flush` to
   * wait for forever).
   */
  const finished = () => {
    inFlight = false
    writing = undefined
    if (!state.closed && state.inHand.length > 0) {
      const lost = state.inHand
      state.inHand = []
      const perTable = new Map<string, number>()
      for (const p of lost) perTable.set(p.table, (perTable.get(p.table) ?? 0) + 1)
      for (const [table, n] of perTable) health.drop(table, n, "their batch's write failed unexpectedly (a defect)")
      state.done += lost.length
      health.release(lost.length)
    }
    if (!state.closed && state.waiting.length > 0) arm()
  }
  /** The rest of a batch after its first try, on a fiber: the retries (after shutdown began the final drain has the rows instead). */
  const afterFirst = (left: ReadonlyArray<Pending>): Effect.Effect<void> => (left.length === 0 || state.closed ? Effect.void : retryHeld)
  /** One batch: the first try, then (rarely) the retries; when it ends, rows that arrived meanwhile arm the next batch. */
  const writeHeld: Effect.Effect<void> = Effect.ensuring(Effect.flatMap(writeInHand, afterFirst), Effect.sync(finished))
  const forked = (rest: Effect.Effect<void>) => {
    const fiber = fork(Effect.ensuring(rest, Effect.sync(finished)))
    if (inFlight) writing = fiber
  }

  /**
   * The answer of a batch written without a fiber, taken at once (the same bookkeeping as
   * `writeInHand`, in one synchronous step: rows the thread wrote are never still in hand when the
   * final drain looks); the retries, what must be logged, or a failed thread's write here
   * (uninterruptible with its bookkeeping, as `writeInHand`), on a fiber.
   */
  const settled = (answer: Settled): void => {
    settling = undefined
    if ("instead" in answer) return forked(Effect.flatMap(taken(answer.instead), afterFirst))
    const left = took(answer.left)
    const retry = left.length !== 0 && !state.closed
    if (answer.log === undefined && !retry) return finished()
    const rest = retry ? retryHeld : Effect.void
    forked(answer.log === undefined ? rest : Effect.zipRight(answer.log, rest))
  }

  /** The timer: takes a batch and starts its write. */
  const startBatch = () => {
    linger = undefined
    immediate = undefined
    if (state.closed || state.waiting.length === 0) return
    state.inHand = takeBatch()
    inFlight = true
    const now = writeNow?.(state.inHand)
    if (now !== undefined) {
      // A failure here is a defect, as a write's defect on the fiber is: the batch ends (its rows counted as dropped), the next is armed.
      settling = now.then(settled).catch((e: unknown) => forked(Effect.die(e)))
      return
    }
    const fiber = fork(writeHeld)
    if (inFlight) writing = fiber
  }

  const push = (row: Pending) => {
    state.waiting.push(row)
    // A batch in flight arms the next one when it is done; after shutdown began the final drain has the rows.
    if (inFlight || state.closed) return
    if (linger === undefined && immediate === undefined) arm()
    else if (linger !== undefined && state.waiting.length >= MAX_BATCH) {
      // A full batch is waiting: it does not linger.
      clearTimeout(linger)
      linger = undefined
      arm()
    }
  }

  /**
   * The drain at shutdown: the write in flight finishes (only a wait between tries is
   * interrupted), then the rows in hand and everything queued are written in batches; a store still
   * unavailable gets FINAL_RETRY, then what it has not taken is counted as dropped, with the cause.
   */
  const finalDrain = Effect.gen(function* () {
    state.closed = true
    if (linger !== undefined) clearTimeout(linger)
    if (immediate !== undefined) clearImmediate(immediate)
    linger = undefined
    immediate = undefined
    // A batch written without a fiber is answered first (its retries, if any, are then a fiber's).
    if (settling !== undefined) {
      const answer = settling
      yield* Effect.promise(() => answer)
    }
    if (writing !== undefined) yield* Fiber.interrupt(writing)
    const rest = [...state.inHand, ...state.waiting]
    state.inHand = []
    state.waiting = []
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

  return { push, finalDrain }
}

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
