import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as TestContext from "effect/TestContext"
import { describe, expect, it } from "vitest"
import { FOLLOW_RENEW_EVERY_MS, followVersion, polledVersion } from "../src/platform/store/StoreVersion.js"

/**
 * `followVersion`: the background rounds that follow one StoreVersion (settings, policies, the
 * directory, shadow targets, plugins) run on one shared timer, each tick after renewing the
 * version, sooner than its freshness lasts (FOLLOW_RENEW_EVERY_MS against the layer's second),
 * for as long as each follower's scope is open; without a version each round keeps a timer of its
 * own, every second.
 */
const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(Effect.provide(effect, TestContext.TestContext))

/** A polled version over a probe that counts its reads of the store. */
const countedVersion = (intervalMs: number) => {
  let reads = 0
  const version = polledVersion(
    Effect.sync(() => ++reads),
    intervalMs
  )
  return { version, probes: () => reads }
}

describe("followVersion", () => {
  it("runs every follower's round at each tick, reading the version once a tick, until each scope closes", async () => {
    await run(
      Effect.gen(function* () {
        const { version, probes } = countedVersion(1_000)
        const counts = { a: 0, b: 0 }
        const a = yield* Scope.make()
        const b = yield* Scope.make()
        const round = (k: "a" | "b") => Effect.asVoid(Effect.tap(version.current, () => Effect.sync(() => counts[k]++)))
        yield* Scope.extend(followVersion(Option.some(version), round("a")), a)
        yield* Scope.extend(followVersion(Option.some(version), round("b")), b)
        expect(counts).toEqual({ a: 0, b: 0 })
        yield* TestClock.adjust("1 second")
        expect(counts).toEqual({ a: 1, b: 1 })
        // One read of the store for the round, whichever follower made it.
        expect(probes()).toBe(1)
        yield* TestClock.adjust("1 second")
        expect(counts).toEqual({ a: 2, b: 2 })
        expect(probes()).toBe(2)
        yield* Scope.close(a, Exit.void)
        yield* TestClock.adjust("1 second")
        expect(counts).toEqual({ a: 2, b: 3 })
        yield* Scope.close(b, Exit.void)
        yield* TestClock.adjust("3 seconds")
        expect(counts).toEqual({ a: 2, b: 3 })
        // A follower that comes after the last one left starts the timer again.
        const c = yield* Scope.make()
        yield* Scope.extend(followVersion(Option.some(version), round("a")), c)
        yield* TestClock.adjust("1 second")
        expect(counts).toEqual({ a: 3, b: 3 })
        yield* Scope.close(c, Exit.void)
      })
    )
  })

  it("renews the version at each tick, before the freshness of the last read runs out", async () => {
    await run(
      Effect.gen(function* () {
        // A version checked at most once an hour: within that, reading it never asks the store.
        const { version, probes } = countedVersion(3_600_000)
        yield* version.current
        yield* version.current
        expect(probes()).toBe(1)
        const scope = yield* Scope.make()
        yield* Scope.extend(followVersion(Option.some(version), Effect.asVoid(version.current)), scope)
        // The followers' ticks read it each time (`renew`), the rounds then find it fresh.
        yield* TestClock.adjust(FOLLOW_RENEW_EVERY_MS)
        expect(probes()).toBe(2)
        expect(version.peek()).toBe(yield* version.current)
        yield* TestClock.adjust(FOLLOW_RENEW_EVERY_MS * 3)
        expect(probes()).toBe(5)
        yield* Scope.close(scope, Exit.void)
        yield* TestClock.adjust(FOLLOW_RENEW_EVERY_MS * 3)
        expect(probes()).toBe(5)
        // Sooner than the layer's interval (a second): `peek` answers from one tick to the next.
        expect(FOLLOW_RENEW_EVERY_MS).toBeLessThan(1_000)
      })
    )
  })

  it("renews on a fixed interval from one tick's start to the next, however long the rounds take", async () => {
    await run(
      Effect.gen(function* () {
        const { version, probes } = countedVersion(3_600_000)
        const scope = yield* Scope.make()
        // A round that takes most of the interval (a reload on a slow store).
        yield* Scope.extend(followVersion(Option.some(version), Effect.sleep(FOLLOW_RENEW_EVERY_MS - 100)), scope)
        yield* TestClock.adjust(FOLLOW_RENEW_EVERY_MS)
        expect(probes()).toBe(1)
        // The next renewal comes one interval after the first began, not after the round ended.
        yield* TestClock.adjust(FOLLOW_RENEW_EVERY_MS)
        expect(probes()).toBe(2)
        yield* TestClock.adjust(FOLLOW_RENEW_EVERY_MS * 2)
        expect(probes()).toBe(4)
        yield* Scope.close(scope, Exit.void)
      })
    )
  })

  it("a failed round does not stop the others nor its own next round", async () => {
    await run(
      Effect.gen(function* () {
        const version = polledVersion(Effect.succeed(1), 1_000)
        let ok = 0
        let failed = 0
        const scope = yield* Scope.make()
        yield* Scope.extend(
          followVersion(
            Option.some(version),
            Effect.suspend(() => {
              failed++
              return Effect.die("boom")
            })
          ),
          scope
        )
        yield* Scope.extend(
          followVersion(
            Option.some(version),
            Effect.sync(() => {
              ok++
            })
          ),
          scope
        )
        yield* TestClock.adjust("2 seconds")
        expect({ ok, failed }).toEqual({ ok: 2, failed: 2 })
        yield* Scope.close(scope, Exit.void)
      })
    )
  })

  it("without a version, the round runs every second on a timer of its own", async () => {
    await run(
      Effect.gen(function* () {
        let n = 0
        const scope = yield* Scope.make()
        yield* Scope.extend(
          followVersion(
            Option.none(),
            Effect.sync(() => {
              n++
            })
          ),
          scope
        )
        yield* TestClock.adjust("2 seconds")
        yield* Scope.close(scope, Exit.void)
        yield* TestClock.adjust("2 seconds")
        // The first run at once (as Effect.repeat), then one a second, none after the scope closed.
        expect(n).toBe(3)
      })
    )
  })
})
