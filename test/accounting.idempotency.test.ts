import { describe, expect, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import type { RecordedResponse } from "../src/services/accounting/Idempotency.js"
import { Idempotency, idempotencyKey, MAX_KEYS, WINDOW_MS } from "../src/services/accounting/Idempotency.js"

const response = (text: string, status = 200): RecordedResponse => ({
  status,
  headers: { "content-type": "application/json" },
  body: Buffer.from(JSON.stringify({ text }))
})

/** A producer that counts its runs and answers `text` after `delay`. */
const counting = (text: string, delay: Duration.DurationInput = "1 second") => {
  let runs = 0
  const produce = Effect.sleep(delay).pipe(
    Effect.zipRight(Effect.sync(() => ++runs)),
    Effect.map((n) => response(`${text}#${n}`))
  )
  return { produce, runs: () => runs }
}

/** Lets forked fibers reach their first suspension point. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("Idempotency", () => {
  it.effect("50 concurrent calls with one key run produce once; all get the same response, 49 as duplicates", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const p = counting("answer")
      const fibers = yield* Effect.forEach(Array.from({ length: 50 }), () => Effect.fork(idem.run("k", p.produce)))
      yield* settle
      expect((yield* idem.stats).activeKeys).toBe(1)
      yield* TestClock.adjust("1 second")
      const results = yield* Effect.forEach(fibers, Fiber.join)
      expect(p.runs()).toBe(1)
      expect(results.filter((r) => r.duplicate)).toHaveLength(49)
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1)
      for (const r of results) expect(r.response).toBe(results[0]!.response)
      expect(results[0]!.response.body.toString()).toBe('{"text":"answer#1"}')
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("within 5 s after completion a call is a duplicate served at once; after the window it runs again", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const p = counting("w", "0 millis")
      const first = yield* idem.run("k", p.produce)
      expect(first.duplicate).toBe(false)
      yield* TestClock.adjust("4900 millis")
      const second = yield* idem.run("k", p.produce)
      expect(second).toEqual({ response: first.response, duplicate: true })
      expect(p.runs()).toBe(1)
      yield* TestClock.adjust("200 millis")
      const third = yield* idem.run("k", p.produce)
      expect(third.duplicate).toBe(false)
      expect(third.response.body.toString()).toBe('{"text":"w#2"}')
      expect(p.runs()).toBe(2)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("the window starts when the first call completes, not when it started", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const p = counting("slow", "3 seconds")
      const f = yield* Effect.fork(idem.run("k", p.produce))
      yield* settle
      yield* TestClock.adjust("3 seconds")
      yield* Fiber.join(f)
      yield* TestClock.adjust("4 seconds")
      expect((yield* idem.run("k", p.produce)).duplicate).toBe(true)
      expect(p.runs()).toBe(1)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("a failing first call is not shared or stored: the next waiter runs produce itself", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const gate = yield* Deferred.make<void>()
      const failing = Effect.zipRight(Deferred.await(gate), Effect.fail("upstream down" as const))
      const p = counting("retry", "0 millis")
      const first = yield* Effect.fork(idem.run("k", failing))
      yield* settle
      const second = yield* Effect.fork(idem.run("k", p.produce))
      const third = yield* Effect.fork(idem.run("k", p.produce))
      yield* settle
      yield* Deferred.succeed(gate, undefined)
      expect(yield* Fiber.await(first)).toEqual(Exit.fail("upstream down"))
      const r2 = yield* Fiber.join(second)
      const r3 = yield* Fiber.join(third)
      expect(p.runs()).toBe(1)
      expect([r2.duplicate, r3.duplicate].sort()).toEqual([false, true])
      expect(r3.response).toBe(r2.response)
      // The success is what is stored now.
      expect((yield* idem.run("k", p.produce)).duplicate).toBe(true)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("a failure with nobody waiting leaves nothing behind", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      expect(yield* Effect.exit(idem.run("k", Effect.fail("nope")))).toEqual(Exit.fail("nope"))
      expect((yield* idem.stats).activeKeys).toBe(0)
      const p = counting("ok", "0 millis")
      expect((yield* idem.run("k", p.produce)).duplicate).toBe(false)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("an interrupted first call does not leave waiters hanging", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const first = yield* Effect.fork(idem.run("k", Effect.never))
      yield* settle
      const p = counting("after", "1 second")
      const waiter = yield* Effect.fork(idem.run("k", p.produce))
      yield* settle
      yield* Fiber.interrupt(first)
      yield* settle
      yield* TestClock.adjust("1 second")
      const r = yield* Fiber.join(waiter)
      expect(r.duplicate).toBe(false)
      expect(p.runs()).toBe(1)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("an interrupted waiter does not disturb the producer", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const p = counting("x", "1 second")
      const producer = yield* Effect.fork(idem.run("k", p.produce))
      yield* settle
      const waiter = yield* Effect.fork(idem.run("k", p.produce))
      yield* settle
      yield* Fiber.interrupt(waiter)
      yield* TestClock.adjust("1 second")
      expect((yield* Fiber.join(producer)).duplicate).toBe(false)
      expect(p.runs()).toBe(1)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("different keys never share", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const p = counting("k", "1 second")
      const fibers = yield* Effect.forEach(["a", "b", "c", "a", "b", "c"], (k) => Effect.fork(idem.run(k, p.produce)))
      yield* settle
      yield* TestClock.adjust("1 second")
      const results = yield* Effect.forEach(fibers, Fiber.join)
      expect(p.runs()).toBe(3)
      expect(new Set(results.map((r) => r.response)).size).toBe(3)
      expect(results[0]!.response).toBe(results[3]!.response)
      expect(results[0]!.response).not.toBe(results[1]!.response)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect("stats count keys in flight or within their window; clear forgets them", () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      expect(yield* idem.stats).toEqual({ activeKeys: 0, windowMs: 5000 })
      expect(WINDOW_MS).toBe(5000)
      const quick = counting("q", "0 millis")
      yield* idem.run("done-1", quick.produce)
      yield* idem.run("done-2", quick.produce)
      const slow = counting("s", "10 seconds")
      const inflight = yield* Effect.fork(idem.run("inflight", slow.produce))
      yield* settle
      expect(yield* idem.stats).toEqual({ activeKeys: 3, windowMs: 5000 })
      yield* TestClock.adjust("5 seconds")
      expect((yield* idem.stats).activeKeys).toBe(1)
      expect(yield* idem.clear).toBe(1)
      expect((yield* idem.stats).activeKeys).toBe(0)
      // The in-flight call still completes, but stores nothing.
      yield* TestClock.adjust("5 seconds")
      expect((yield* Fiber.join(inflight)).duplicate).toBe(false)
      expect((yield* idem.stats).activeKeys).toBe(0)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it.effect(`keeps at most ${MAX_KEYS} keys, dropping the oldest completed ones`, () =>
    Effect.gen(function* () {
      const idem = yield* Idempotency
      const p = counting("n", "0 millis")
      for (let i = 0; i < MAX_KEYS + 50; i++) yield* idem.run(`k${i}`, p.produce)
      expect((yield* idem.stats).activeKeys).toBe(MAX_KEYS)
      expect((yield* idem.run(`k${MAX_KEYS + 49}`, p.produce)).duplicate).toBe(true)
      expect((yield* idem.run("k0", p.produce)).duplicate).toBe(false)
    }).pipe(Effect.provide(Idempotency.layer))
  )

  it("idempotencyKey scopes the client key by API key, method and path", () => {
    const base = { apiKeyId: "key-1", method: "post", path: "/v1/chat/completions", clientKey: "abc" }
    const k = idempotencyKey(base)
    expect(idempotencyKey({ ...base, method: "POST" })).toBe(k)
    expect(idempotencyKey({ ...base, apiKeyId: "key-2" })).not.toBe(k)
    expect(idempotencyKey({ ...base, path: "/v1/messages" })).not.toBe(k)
    expect(idempotencyKey({ ...base, clientKey: "abd" })).not.toBe(k)
    expect(idempotencyKey({ ...base, apiKeyId: null })).not.toBe(k)
  })
})
