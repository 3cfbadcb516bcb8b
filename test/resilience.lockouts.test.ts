import { describe, expect, it } from "@effect/vitest"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import type { PatchResilience } from "../src/domain/resilience.js"
import { type LockoutRef, Lockouts } from "../src/services/resilience/Lockouts.js"
import { ResilienceConfig } from "../src/services/resilience/ResilienceConfig.js"

const provided =
  (modelLockout: PatchResilience["modelLockout"] = { enabled: true }) =>
  <A, E>(self: Effect.Effect<A, E, Lockouts>) =>
    Effect.provide(self, Lockouts.layer.pipe(Layer.provide(ResilienceConfig.layerTest({ modelLockout }))))

const GPT: LockoutRef = { provider: "openai", connectionId: "c1", connectionName: "openai-main", model: "gpt-4o" }
const MINI: LockoutRef = { ...GPT, model: "gpt-4o-mini" }
const OTHER_CONN: LockoutRef = { ...GPT, connectionId: "c2", connectionName: "openai-backup" }
const CLAUDE: LockoutRef = { provider: "anthropic", connectionId: "c3", connectionName: "claude", model: "claude-sonnet-4" }

const locked = (ref: LockoutRef) =>
  Effect.flatMap(Lockouts, (l) => Effect.map(Clock.currentTimeMillis, (now) => l.lockedAt(ref.provider, ref.connectionId, ref.model, now)))

/** Fails `ref` `n` times back to back; answers the lockout durations. */
const durations = (ref: LockoutRef, n: number, status = 503) =>
  Effect.gen(function* () {
    const l = yield* Lockouts
    const out: Array<number> = []
    for (let i = 0; i < n; i++) {
      const now = yield* Clock.currentTimeMillis
      const v = yield* l.onFailure(ref, status, "overloaded")
      out.push(v!.expiresAt - now)
    }
    return out
  })

describe("model lockout: state table", () => {
  it.effect("disabled by default: failures lock nothing", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      expect(yield* l.onFailure(GPT, 503, "overloaded")).toBeUndefined()
      expect((yield* locked(GPT)).locked).toBe(false)
      expect(yield* l.list).toEqual([])
    }).pipe(provided({}))
  )

  it.effect("unlocked → locked on a failure with a status in errorCodes (base 120 s, failure count 1)", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      const now = yield* Clock.currentTimeMillis
      const v = yield* l.onFailure(GPT, 404, "not_found")
      expect(v).toEqual({
        provider: "openai",
        connection: "openai-main",
        model: "gpt-4o",
        reason: "not_found",
        status: 404,
        failures: 1,
        expiresAt: now + 120_000,
        remainingMs: 120_000
      })
      expect(yield* locked(GPT)).toEqual({ locked: true, until: now + 120_000 })
      // The key is provider + connection + model.
      expect((yield* locked(MINI)).locked).toBe(false)
      expect((yield* locked(OTHER_CONN)).locked).toBe(false)
    }).pipe(provided())
  )

  it.effect("only statuses in errorCodes count", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      for (const status of [400, 401, 408, 500, 529]) expect(yield* l.onFailure(GPT, status, "x")).toBeUndefined()
      expect((yield* locked(GPT)).locked).toBe(false)
      for (const status of [403, 404, 429, 502, 503, 504])
        expect(yield* l.onFailure({ ...GPT, model: `m${status}` }, status, "x")).toBeDefined()
    }).pipe(provided())
  )

  it.effect("errorCodes come from the settings in force", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      expect(yield* l.onFailure(GPT, 503, "x")).toBeUndefined()
      expect(yield* l.onFailure(GPT, 500, "x")).toBeDefined()
    }).pipe(provided({ enabled: true, errorCodes: [500] }))
  )

  it.effect("locked → locked with the failure count halved on a success; deleted at 0", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      yield* durations(GPT, 5)
      const until = (yield* locked(GPT)).until
      yield* l.onSuccess(GPT)
      expect((yield* l.list)[0]!.failures).toBe(2)
      // Still locked until its time.
      expect(yield* locked(GPT)).toEqual({ locked: true, until })
      yield* l.onSuccess(GPT)
      expect((yield* l.list)[0]!.failures).toBe(1)
      yield* l.onSuccess(GPT)
      expect((yield* locked(GPT)).locked).toBe(false)
      expect(yield* l.list).toEqual([])
      // A new failure starts over at the base.
      expect(yield* durations(GPT, 1)).toEqual([120_000])
    }).pipe(provided())
  )

  it.effect("locked → unlocked when the cooldown elapsed (lazily)", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      yield* l.onFailure(GPT, 503, "overloaded")
      yield* TestClock.adjust("119999 millis")
      expect((yield* locked(GPT)).locked).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* locked(GPT)).toEqual({ locked: false, until: null })
      expect(yield* l.list).toEqual([])
    }).pipe(provided())
  )

  it.effect("locked → unlocked by DELETE with {provider, model} (all its connections)", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      yield* l.onFailure(GPT, 503, "overloaded")
      yield* l.onFailure(OTHER_CONN, 503, "overloaded")
      yield* l.onFailure(MINI, 503, "overloaded")
      expect(yield* l.clear({ provider: "openai", model: "gpt-4o" })).toBe(2)
      expect((yield* locked(GPT)).locked).toBe(false)
      expect((yield* locked(OTHER_CONN)).locked).toBe(false)
      expect((yield* locked(MINI)).locked).toBe(true)
      expect(yield* l.clear({ provider: "openai", model: "gpt-4o" })).toBe(0)
    }).pipe(provided())
  )

  it.effect("locked → unlocked by DELETE naming the connection by id or by name", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      yield* l.onFailure(GPT, 503, "overloaded")
      yield* l.onFailure(OTHER_CONN, 503, "overloaded")
      expect(yield* l.clear({ provider: "openai", model: "gpt-4o", connection: "c2" })).toBe(1)
      expect((yield* locked(GPT)).locked).toBe(true)
      expect((yield* locked(OTHER_CONN)).locked).toBe(false)
      expect(yield* l.clear({ provider: "openai", model: "gpt-4o", connection: "openai-main" })).toBe(1)
      expect((yield* locked(GPT)).locked).toBe(false)
    }).pipe(provided())
  )

  it.effect("locked → unlocked by DELETE {all: true}", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      yield* l.onFailure(GPT, 503, "overloaded")
      yield* l.onFailure(CLAUDE, 429, "rate_limited")
      expect(yield* l.clear({ all: true })).toBe(2)
      expect(yield* l.list).toEqual([])
      // Cleared entries lose their failure count too.
      expect(yield* durations(GPT, 1)).toEqual([120_000])
    }).pipe(provided())
  )
})

describe("model lockout: escalation", () => {
  it.effect("escalates ×2 per failure, capped at 30 minutes", () =>
    Effect.gen(function* () {
      expect(yield* durations(GPT, 6)).toEqual([120_000, 240_000, 480_000, 960_000, 1_800_000, 1_800_000])
    }).pipe(provided())
  )

  it.effect("escalation stops at maxBackoffSteps", () =>
    Effect.gen(function* () {
      expect(yield* durations(GPT, 5)).toEqual([120_000, 240_000, 480_000, 480_000, 480_000])
    }).pipe(provided({ enabled: true, maxBackoffSteps: 2 }))
  )

  it.effect("10 escalation steps at most (defaults with a high cap)", () =>
    Effect.gen(function* () {
      const d = yield* durations(GPT, 13)
      expect(d[10]).toBe(1000 * 1024)
      expect(d[11]).toBe(1000 * 1024)
      expect(d[12]).toBe(1000 * 1024)
    }).pipe(provided({ enabled: true, baseCooldownMs: 1000, maxCooldownMs: 86_400_000 }))
  )

  it.effect("without exponential backoff every lockout is the base", () =>
    Effect.gen(function* () {
      expect(yield* durations(GPT, 3)).toEqual([120_000, 120_000, 120_000])
    }).pipe(provided({ enabled: true, useExponentialBackoff: false }))
  )

  it.effect("escalation window: a failure after expiry but within maxCooldownMs of the last one escalates", () =>
    Effect.gen(function* () {
      expect(yield* durations(GPT, 1)).toEqual([120_000])
      yield* TestClock.adjust("10 minutes")
      expect((yield* locked(GPT)).locked).toBe(false)
      expect(yield* durations(GPT, 1)).toEqual([240_000])
    }).pipe(provided())
  )

  it.effect("escalation window: a failure more than maxCooldownMs after the last one starts over", () =>
    Effect.gen(function* () {
      expect(yield* durations(GPT, 3)).toEqual([120_000, 240_000, 480_000])
      yield* TestClock.adjust("30 minutes")
      yield* TestClock.adjust("1 millis")
      expect(yield* durations(GPT, 1)).toEqual([120_000])
    }).pipe(provided())
  )
})

describe("model lockout: list", () => {
  it.effect("lists active lockouts only, sorted by remaining time", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      yield* durations(GPT, 3) // 480 s
      yield* l.onFailure(CLAUDE, 429, "rate_limited") // 120 s
      yield* durations(MINI, 2) // 240 s
      yield* TestClock.adjust("10 seconds")
      const now = yield* Clock.currentTimeMillis
      const views = yield* l.list
      expect(views.map((v) => [v.model, v.remainingMs])).toEqual([
        ["claude-sonnet-4", 110_000],
        ["gpt-4o-mini", 230_000],
        ["gpt-4o", 470_000]
      ])
      expect(views[0]).toEqual({
        provider: "anthropic",
        connection: "claude",
        model: "claude-sonnet-4",
        reason: "rate_limited",
        status: 429,
        failures: 1,
        expiresAt: now + 110_000,
        remainingMs: 110_000
      })
      yield* TestClock.adjust("110 seconds")
      expect((yield* l.list).map((v) => v.model)).toEqual(["gpt-4o-mini", "gpt-4o"])
    }).pipe(provided())
  )

  it.effect("turning the master toggle off lifts every lockout", () =>
    Effect.gen(function* () {
      const l = yield* Lockouts
      const config = yield* ResilienceConfig
      yield* l.onFailure(GPT, 503, "overloaded")
      yield* config.update({ modelLockout: { enabled: false } })
      expect((yield* locked(GPT)).locked).toBe(false)
      expect(yield* l.list).toEqual([])
    }).pipe(Effect.provide(Lockouts.layer.pipe(Layer.provideMerge(ResilienceConfig.layerTest({ modelLockout: { enabled: true } })))))
  )
})
