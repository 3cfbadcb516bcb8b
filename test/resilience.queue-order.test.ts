import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import { makeQuotaQueue } from "../src/services/resilience/QuotaQueue.js"

/**
 * The quota queue's order (src/services/resilience/QuotaQueue.ts), on the TestClock: a parked
 * request is sent at its reset, never before one parked earlier in its scope, and one sent that
 * meets the quota again keeps its place.
 */
const queueOn = (maxParked = 10) =>
  Effect.map(Effect.clock, (clock) =>
    makeQuotaQueue(
      () => maxParked,
      () => clock.unsafeCurrentTimeMillis()
    )
  )

describe("quota queue", () => {
  it.effect("sends parked requests at their reset, in arrival order per scope", () =>
    Effect.gen(function* () {
      const queue = yield* queueOn()
      const at = yield* Clock.currentTimeMillis
      const sent: Array<string> = []
      const park = (name: string, scope: string, resetAt: number) => {
        const entry = queue.park({ scope, combo: scope, apiKeyId: null, resetAt, now: at })!
        return Effect.fork(Effect.map(queue.turn(entry), () => sent.push(name)))
      }
      // The second parks for an earlier reset, but behind the first of its scope; another scope is not held back.
      const a = yield* park("a", "combo", at + 2000)
      const b = yield* park("b", "combo", at + 1000)
      const c = yield* park("c", "other", at + 1000)
      expect(queue.waiting("combo")).toBe(2)
      yield* TestClock.adjust("1 second")
      expect(sent).toEqual(["c"])
      yield* TestClock.adjust("1 second")
      yield* Fiber.joinAll([a, b, c])
      expect(sent).toEqual(["c", "a", "b"])
      expect(queue.waiting("combo")).toBe(0)
    })
  )

  it.effect("a request sent that meets the quota again keeps its place ahead of later ones", () =>
    Effect.gen(function* () {
      const queue = yield* queueOn()
      const at = yield* Clock.currentTimeMillis
      const first = queue.park({ scope: "s", combo: "s", apiKeyId: null, resetAt: at + 1000, now: at })!
      const second = queue.park({ scope: "s", combo: "s", apiKeyId: null, resetAt: at + 1000, now: at })!
      const one = yield* Effect.fork(queue.turn(first))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(one)
      // Sent, answered 429 again: back to waiting for a new reset, still first in line.
      queue.again(first, at + 3000)
      const two = yield* Effect.fork(queue.turn(second))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.poll(two)).toEqual(expect.objectContaining({ _tag: "None" }))
      const again = yield* Effect.fork(queue.turn(first))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(again)
      yield* Fiber.join(two)
      queue.leave(first, "served")
      queue.leave(second, "served")
      expect(queue.counts()).toEqual({ parked: 0, served: 2, dropped: 0, refused: 0 })
    })
  )

  it.effect("is bounded, and an interrupted wait leaves the queue as dropped", () =>
    Effect.gen(function* () {
      const queue = yield* queueOn(1)
      const at = yield* Clock.currentTimeMillis
      const entry = queue.park({ scope: "s", combo: null, apiKeyId: "k", resetAt: at + 5000, now: at })!
      expect(queue.park({ scope: "s", combo: null, apiKeyId: "k", resetAt: at + 5000, now: at })).toBeUndefined()
      queue.refuse()
      const view = queue.view(at + 1000)
      expect(view).toEqual(
        expect.objectContaining({ parked: 1, maxParked: 1, oldestWaitMs: 1000, refused: 1, nextResetAt: new Date(at + 5000).toISOString() })
      )
      expect(view.groups).toEqual([
        { scope: "s", combo: null, apiKeyId: "k", parked: 1, oldestWaitMs: 1000, nextResetAt: view.nextResetAt }
      ])
      const waiting = yield* Effect.fork(queue.turn(entry).pipe(Effect.onInterrupt(() => Effect.sync(() => queue.leave(entry, "dropped")))))
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(waiting)
      expect(queue.counts()).toEqual({ parked: 0, served: 0, dropped: 1, refused: 1 })
    })
  )
})
