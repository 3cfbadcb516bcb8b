/**
 * The requests parked until a quota resets (docs/resilience.md, "Waiting out a quota"): bounded in
 * all, first in first out per scope (a combo, or the model id of a request without one). An entry
 * sleeps until its reset, then waits for every entry parked before it in its scope to have been
 * sent; a later arrival never overtakes. The request's own fiber does the waiting, so a client that
 * goes away interrupts it and its entry leaves the queue.
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { QueueView } from "../../domain/quotaQueue.js"
import { ResilienceConfig } from "./ResilienceConfig.js"

/** One parked request. `resetAt` moves when it is sent and meets another quota with a known reset. */
export interface Parked {
  readonly scope: string
  readonly combo: string | null
  readonly apiKeyId: string | null
  readonly parkedAt: number
  resetAt: number
  /** `waiting`: for its reset; `ready`: its reset came, for its turn; `sending`: sent after its reset. */
  state: "waiting" | "ready" | "sending"
  wake: (() => void) | undefined
}

/** Why a parked request left the queue. */
export type LeftBecause = "served" | "failed" | "dropped"

export interface QuotaQueueShape {
  /** Requests parked now, in every scope: the common path reads this one field (0: nothing to queue behind). */
  readonly load: { readonly parked: number }
  /** Requests of `scope` parked and not yet sent: a new arrival that may wait goes behind them. */
  readonly waiting: (scope: string) => number
  /** The latest reset the requests of `scope` wait for (undefined: none waits). */
  readonly lastReset: (scope: string) => number | undefined
  /** Parks a request until `resetAt` (the Clock's time); undefined when the queue is full. */
  readonly park: (p: {
    readonly scope: string
    readonly combo: string | null
    readonly apiKeyId: string | null
    readonly resetAt: number
    readonly now: number
  }) => Parked | undefined
  /** Sleeps until the entry's reset, then until every entry before it in its scope was sent; it is then `sending`. */
  readonly turn: (entry: Parked) => Effect.Effect<void>
  /** A request that would have waited was refused because the queue was full (counted). */
  readonly refuse: () => void
  /** The entry was sent and met a quota again: back to waiting, in its place, for the new reset. */
  readonly again: (entry: Parked, resetAt: number) => void
  /** The entry leaves the queue (idempotent); the counters say why. */
  readonly leave: (entry: Parked, because: LeftBecause) => void
  /** `GET /api/resilience`'s `queue`. */
  readonly view: (now: number) => QueueView
  /** What `/metrics` shows: parked now, and the counters since the start. */
  readonly counts: () => { readonly parked: number; readonly served: number; readonly dropped: number; readonly refused: number }
}

const iso = (ms: number | undefined): string | null => (ms === undefined ? null : new Date(ms).toISOString())

/** The queue's state and its operations, without a layer (tests build it on a setting of their own). */
export const makeQuotaQueue = (maxParked: () => number, now: () => number): QuotaQueueShape => {
  const scopes = new Map<string, Array<Parked>>()
  const load = { parked: 0 }
  const counters = { served: 0, dropped: 0, refused: 0 }

  /** Wakes, in arrival order, the ready entries no waiting entry stands before. */
  const pump = (scope: string): void => {
    const line = scopes.get(scope)
    if (line === undefined) return
    for (const e of line) {
      if (e.state === "waiting") return
      if (e.state === "ready") {
        e.state = "sending"
        const wake = e.wake
        e.wake = undefined
        wake?.()
      }
    }
  }

  const leave = (entry: Parked, because: LeftBecause): void => {
    const line = scopes.get(entry.scope)
    const i = line === undefined ? -1 : line.indexOf(entry)
    if (i < 0) return
    line!.splice(i, 1)
    if (line!.length === 0) scopes.delete(entry.scope)
    load.parked--
    if (because !== "failed") counters[because]++
    entry.wake = undefined
    pump(entry.scope)
  }

  const turn = (entry: Parked): Effect.Effect<void> =>
    Effect.suspend(() => {
      const ms = entry.resetAt - now()
      const ready = Effect.async<void>((resume) => {
        entry.state = "ready"
        entry.wake = () => resume(Effect.void)
        pump(entry.scope)
        return Effect.sync(() => {
          entry.wake = undefined
        })
      })
      return ms > 0 ? Effect.zipRight(Effect.sleep(Duration.millis(ms)), ready) : ready
    })

  return {
    load,
    waiting: (scope) => {
      let n = 0
      for (const e of scopes.get(scope) ?? []) if (e.state !== "sending") n++
      return n
    },
    lastReset: (scope) => {
      let last: number | undefined
      for (const e of scopes.get(scope) ?? []) if (e.state !== "sending" && (last === undefined || e.resetAt > last)) last = e.resetAt
      return last
    },
    park: ({ scope, combo, apiKeyId, resetAt, now: at }) => {
      if (load.parked >= maxParked()) return undefined
      const entry: Parked = { scope, combo, apiKeyId, parkedAt: at, resetAt, state: "waiting", wake: undefined }
      const line = scopes.get(scope)
      if (line === undefined) scopes.set(scope, [entry])
      else line.push(entry)
      load.parked++
      return entry
    },
    turn,
    refuse: () => {
      counters.refused++
    },
    again: (entry, resetAt) => {
      entry.resetAt = resetAt
      entry.state = "waiting"
    },
    leave,
    view: (at) => {
      const groups = new Map<
        string,
        { scope: string; combo: string | null; apiKeyId: string | null; parked: number; oldest: number; next: number }
      >()
      let oldest: number | undefined
      let next: number | undefined
      for (const line of scopes.values()) {
        for (const e of line) {
          const id = `${e.scope}\u0000${e.apiKeyId ?? ""}`
          const g = groups.get(id)
          if (g === undefined)
            groups.set(id, { scope: e.scope, combo: e.combo, apiKeyId: e.apiKeyId, parked: 1, oldest: e.parkedAt, next: e.resetAt })
          else {
            g.parked++
            g.oldest = Math.min(g.oldest, e.parkedAt)
            g.next = Math.min(g.next, e.resetAt)
          }
          oldest = Math.min(oldest ?? e.parkedAt, e.parkedAt)
          next = Math.min(next ?? e.resetAt, e.resetAt)
        }
      }
      return {
        parked: load.parked,
        maxParked: maxParked(),
        oldestWaitMs: oldest === undefined ? null : Math.max(0, at - oldest),
        nextResetAt: iso(next),
        ...counters,
        groups: Array.from(groups.values())
          .sort((a, b) => a.oldest - b.oldest)
          .map((g) => ({
            scope: g.scope,
            combo: g.combo,
            apiKeyId: g.apiKeyId,
            parked: g.parked,
            oldestWaitMs: Math.max(0, at - g.oldest),
            nextResetAt: iso(g.next)
          }))
      }
    },
    counts: () => ({ parked: load.parked, ...counters })
  }
}

export class QuotaQueue extends Context.Tag("gateway/QuotaQueue")<QuotaQueue, QuotaQueueShape>() {
  static readonly layer = Layer.effect(
    QuotaQueue,
    Effect.gen(function* () {
      const config = yield* ResilienceConfig
      // The resilience state keeps the Clock's time (a TestClock in tests).
      const clock = yield* Effect.clock
      return makeQuotaQueue(
        () => config.current().quotaQueue.maxParked,
        () => clock.unsafeCurrentTimeMillis()
      )
    })
  )
}
