import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as TestClock from "effect/TestClock"
import { EventBus } from "../src/platform/events/EventBus.js"
import { CircuitBreakers } from "../src/services/resilience/CircuitBreakers.js"
import { ResilienceConfig } from "../src/services/resilience/ResilienceConfig.js"
import type { ProviderRef } from "../src/services/resilience/types.js"

const layer = CircuitBreakers.layer.pipe(Layer.provideMerge(Layer.merge(ResilienceConfig.layerTest(), EventBus.layer)))

const APIKEY: ProviderRef = { id: "openai", authClass: "apikey" }
const OAUTH: ProviderRef = { id: "claude-oauth", authClass: "oauth" }
const LOCAL: ProviderRef = { id: "ollama", authClass: "local" }

const fail = (p: ProviderRef, n: number, status = 503) =>
  Effect.flatMap(CircuitBreakers, (b) => Effect.repeatN(b.onFailure(p, status), n - 1))

const state = (p: ProviderRef) => Effect.flatMap(CircuitBreakers, (b) => Effect.map(Clock.currentTimeMillis, (now) => b.stateAt(p, now)))

/** Opens the breaker of `p` with `failures` failures and waits out its reset timeout. */
const halfOpen = (p: ProviderRef, failures: number, timeout: Duration.DurationInput) =>
  Effect.gen(function* () {
    yield* fail(p, failures)
    yield* TestClock.adjust(timeout)
    expect(yield* state(p)).toBe("HALF_OPEN")
  })

describe("provider circuit breaker: state table", () => {
  it.effect("CLOSED → DEGRADED when failures reach the degraded threshold (7 for API-key), traffic still allowed", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 6)
      expect(yield* state(APIKEY)).toBe("CLOSED")
      yield* fail(APIKEY, 1)
      expect(yield* state(APIKEY)).toBe("DEGRADED")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: false, retryAfterMs: null })
    }).pipe(Effect.provide(layer))
  )

  it.effect("opens after 12 consecutive failures for API-key providers and refuses traffic with the time left", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 11)
      expect(yield* state(APIKEY)).toBe("DEGRADED")
      yield* fail(APIKEY, 1)
      expect(yield* state(APIKEY)).toBe("OPEN")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: false, probe: false, retryAfterMs: 30_000 })
      yield* TestClock.adjust("10 seconds")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: false, probe: false, retryAfterMs: 20_000 })
    }).pipe(Effect.provide(layer))
  )

  it.effect("OPEN → HALF_OPEN lazily once the reset timeout elapsed (no timer)", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 12)
      const opened = yield* Clock.currentTimeMillis
      // The state is a function of the time read: no background fiber moves it.
      expect(b.stateAt(APIKEY, opened + 29_999)).toBe("OPEN")
      expect(b.stateAt(APIKEY, opened + 30_000)).toBe("HALF_OPEN")
      yield* TestClock.adjust("29999 millis")
      expect(yield* state(APIKEY)).toBe("OPEN")
      expect((yield* b.list)[0]).toMatchObject({ state: "OPEN", retryAt: opened + 30_000 })
      yield* TestClock.adjust("1 millis")
      expect(yield* state(APIKEY)).toBe("HALF_OPEN")
      expect((yield* b.list)[0]).toMatchObject({ state: "HALF_OPEN", retryAt: null })
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
    }).pipe(Effect.provide(layer))
  )

  it.effect("POST /api/resilience/reset returns every breaker to CLOSED (any state)", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 12)
      yield* fail(OAUTH, 5)
      yield* fail(LOCAL, 1)
      expect(yield* b.reset()).toBe(3)
      for (const p of [APIKEY, OAUTH, LOCAL]) expect(yield* state(p)).toBe("CLOSED")
      expect(yield* b.list).toEqual([])
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: false, retryAfterMs: null })
      // After a reset the count starts from 0 again.
      yield* fail(APIKEY, 11)
      expect(yield* state(APIKEY)).toBe("DEGRADED")
    }).pipe(Effect.provide(layer))
  )

  it.effect("reset of one provider leaves the others alone", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 12)
      yield* fail(OAUTH, 8)
      expect(yield* b.reset("openai")).toBe(1)
      expect(yield* b.reset("unknown")).toBe(0)
      expect(yield* state(APIKEY)).toBe("CLOSED")
      expect(yield* state(OAUTH)).toBe("OPEN")
    }).pipe(Effect.provide(layer))
  )
})

describe("provider circuit breaker: profiles", () => {
  it.effect("OAuth providers degrade at 5, open at 8, probe after 60 s", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(OAUTH, 4)
      expect(yield* state(OAUTH)).toBe("CLOSED")
      yield* fail(OAUTH, 1)
      expect(yield* state(OAUTH)).toBe("DEGRADED")
      yield* fail(OAUTH, 2)
      expect(yield* state(OAUTH)).toBe("DEGRADED")
      yield* fail(OAUTH, 1)
      expect(yield* state(OAUTH)).toBe("OPEN")
      expect((yield* b.acquire(OAUTH)).retryAfterMs).toBe(60_000)
      yield* TestClock.adjust("59 seconds")
      expect(yield* state(OAUTH)).toBe("OPEN")
      yield* TestClock.adjust("1 second")
      expect(yield* state(OAUTH)).toBe("HALF_OPEN")
    }).pipe(Effect.provide(layer))
  )

  it.effect("local providers degrade at the first failure, open at 2, probe after 15 s", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(LOCAL, 1)
      expect(yield* state(LOCAL)).toBe("DEGRADED")
      yield* fail(LOCAL, 1)
      expect(yield* state(LOCAL)).toBe("OPEN")
      expect((yield* b.list)[0]).toMatchObject({
        provider: "ollama",
        providerClass: "local",
        degradationThreshold: 1,
        failureThreshold: 2,
        resetTimeoutMs: 15_000
      })
      yield* TestClock.adjust("15 seconds")
      expect(yield* state(LOCAL)).toBe("HALF_OPEN")
    }).pipe(Effect.provide(layer))
  )

  it.effect("reads thresholds from the settings in force", () =>
    Effect.gen(function* () {
      yield* fail(APIKEY, 3)
      expect(yield* state(APIKEY)).toBe("OPEN")
    }).pipe(
      Effect.provide(
        CircuitBreakers.layer.pipe(
          Layer.provideMerge(
            Layer.merge(
              ResilienceConfig.layerTest({ providerBreaker: { apikey: { degradationThreshold: 2, failureThreshold: 3 } } }),
              EventBus.layer
            )
          )
        )
      )
    )
  )

  it.effect("a success in CLOSED or DEGRADED resets the count", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 11)
      expect(yield* state(APIKEY)).toBe("DEGRADED")
      yield* b.onSuccess(APIKEY)
      expect(yield* state(APIKEY)).toBe("CLOSED")
      expect((yield* b.list)[0]!.consecutiveFailures).toBe(0)
      yield* fail(APIKEY, 11)
      expect(yield* state(APIKEY)).toBe("DEGRADED") // not OPEN: the count started again
    }).pipe(Effect.provide(layer))
  )

  it.effect("a straggler success while OPEN does not close the breaker", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(APIKEY, 12)
      yield* b.onSuccess(APIKEY)
      expect(yield* state(APIKEY)).toBe("OPEN")
    }).pipe(Effect.provide(layer))
  )
})

describe("provider circuit breaker: HALF_OPEN probe", () => {
  it.effect("lets one probe through at a time", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* halfOpen(APIKEY, 12, "30 seconds")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: false, probe: false, retryAfterMs: null })
      yield* TestClock.adjust("5 seconds")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: false, probe: false, retryAfterMs: null })
    }).pipe(Effect.provide(layer))
  )

  it.effect("a successful probe closes the breaker with no failures", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* halfOpen(APIKEY, 12, "30 seconds")
      yield* b.acquire(APIKEY)
      yield* b.onSuccess(APIKEY)
      expect(yield* state(APIKEY)).toBe("CLOSED")
      expect((yield* b.list)[0]).toMatchObject({ state: "CLOSED", consecutiveFailures: 0, retryAt: null })
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: false, retryAfterMs: null })
    }).pipe(Effect.provide(layer))
  )

  it.effect("a failed probe re-opens the breaker for a full reset timeout", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* halfOpen(APIKEY, 12, "45 seconds")
      yield* b.acquire(APIKEY)
      yield* b.onFailure(APIKEY, 502)
      expect(yield* state(APIKEY)).toBe("OPEN")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: false, probe: false, retryAfterMs: 30_000 })
      yield* TestClock.adjust("29 seconds")
      expect(yield* state(APIKEY)).toBe("OPEN")
      yield* TestClock.adjust("1 second")
      expect(yield* state(APIKEY)).toBe("HALF_OPEN")
      expect((yield* b.acquire(APIKEY)).probe).toBe(true)
    }).pipe(Effect.provide(layer))
  )

  it.effect("releaseProbe frees the slot without a verdict", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* halfOpen(APIKEY, 12, "30 seconds")
      expect((yield* b.acquire(APIKEY)).probe).toBe(true)
      yield* b.releaseProbe(APIKEY)
      expect(yield* state(APIKEY)).toBe("HALF_OPEN")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
    }).pipe(Effect.provide(layer))
  )

  it.effect("a probe held longer than the reset timeout is lost and freed on the next acquire", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* halfOpen(APIKEY, 12, "30 seconds")
      expect((yield* b.acquire(APIKEY)).probe).toBe(true)
      yield* TestClock.adjust("30 seconds")
      expect((yield* b.acquire(APIKEY)).allowed).toBe(false)
      yield* TestClock.adjust("1 millis")
      expect(yield* b.acquire(APIKEY)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
    }).pipe(Effect.provide(layer))
  )
})

describe("provider circuit breaker: events", () => {
  it.scoped("publishes provider.error on every failure and provider.recovered on closing", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus
      const events = yield* bus.subscribe
      const b = yield* CircuitBreakers
      yield* fail(LOCAL, 1, 500)
      yield* fail(LOCAL, 1, 504)
      const errors = Chunk.toArray(yield* Queue.takeAll(events))
      expect(errors.map((e) => [e.event, e.data])).toEqual([
        [
          "provider.error",
          { provider: "ollama", origin: null, breaker: "ollama", status: 500, consecutive_failures: 1, circuit_state: "DEGRADED" }
        ],
        [
          "provider.error",
          { provider: "ollama", origin: null, breaker: "ollama", status: 504, consecutive_failures: 2, circuit_state: "OPEN" }
        ]
      ])
      yield* TestClock.adjust("15 seconds")
      yield* b.acquire(LOCAL)
      yield* b.onSuccess(LOCAL)
      const now = yield* Clock.currentTimeMillis
      const recovered = Chunk.toArray(yield* Queue.takeAll(events))
      expect(recovered.map((e) => [e.event, e.data])).toEqual([
        [
          "provider.recovered",
          { provider: "ollama", origin: null, breaker: "ollama", previous_state: "HALF_OPEN", recovered_at: new Date(now).toISOString() }
        ]
      ])
    }).pipe(Effect.provide(layer))
  )

  it.scoped("publishes provider.recovered from DEGRADED, not for a success in CLOSED", () =>
    Effect.gen(function* () {
      const bus = yield* EventBus
      const events = yield* bus.subscribe
      const b = yield* CircuitBreakers
      yield* fail(OAUTH, 5)
      yield* Queue.takeAll(events)
      yield* b.onSuccess(OAUTH)
      yield* b.onSuccess(OAUTH)
      const all = Chunk.toArray(yield* Queue.takeAll(events))
      expect(all).toHaveLength(1)
      expect(all[0]).toMatchObject({ event: "provider.recovered", data: { provider: "claude-oauth", previous_state: "DEGRADED" } })
    }).pipe(Effect.provide(layer))
  )
})

describe("provider circuit breaker: list", () => {
  it.effect("lists providers with recorded state, sorted by id", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* b.onSuccess({ id: "never-failed", authClass: "apikey" })
      yield* fail(OAUTH, 1, 408)
      yield* fail(APIKEY, 2, 500)
      const now = yield* Clock.currentTimeMillis
      const views = yield* b.list
      expect(views.map((v) => v.provider)).toEqual(["claude-oauth", "openai"])
      expect(views[1]).toEqual({
        key: "openai",
        provider: "openai",
        origin: null,
        providerClass: "apikey",
        state: "CLOSED",
        consecutiveFailures: 2,
        degradationThreshold: 7,
        failureThreshold: 12,
        resetTimeoutMs: 30_000,
        retryAt: null,
        lastFailureAt: now,
        lastStatus: 500,
        probing: false
      })
    }).pipe(Effect.provide(layer))
  )
})

describe("provider circuit breaker: one per provider and upstream origin", () => {
  const HOST_A: ProviderRef = { id: "ollama", authClass: "local", origin: "http://10.0.0.1:11434" }
  const HOST_B: ProviderRef = { id: "ollama", authClass: "local", origin: "http://10.0.0.2:11434" }

  it.effect("failures at one origin open only that origin's breaker", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(HOST_A, 2)
      expect(yield* state(HOST_A)).toBe("OPEN")
      expect(yield* state(HOST_B)).toBe("CLOSED")
      expect(yield* b.acquire(HOST_B)).toEqual({ allowed: true, probe: false, retryAfterMs: null })
      const views = yield* b.list
      expect(views.map((v) => [v.key, v.provider, v.origin, v.state])).toEqual([
        ["ollama@http://10.0.0.1:11434", "ollama", "http://10.0.0.1:11434", "OPEN"]
      ])
    }).pipe(Effect.provide(layer))
  )

  it.effect("reset by provider id covers every origin; by key or with an origin, only one", () =>
    Effect.gen(function* () {
      const b = yield* CircuitBreakers
      yield* fail(HOST_A, 2)
      yield* fail(HOST_B, 2)
      expect(yield* b.reset("ollama@http://10.0.0.1:11434")).toBe(1)
      expect(yield* state(HOST_A)).toBe("CLOSED")
      expect(yield* state(HOST_B)).toBe("OPEN")
      yield* fail(HOST_A, 2)
      expect(yield* b.reset("ollama", "http://10.0.0.2:11434")).toBe(1)
      expect(yield* state(HOST_B)).toBe("CLOSED")
      yield* fail(HOST_B, 2)
      expect(yield* b.reset("ollama")).toBe(2)
      expect(yield* b.list).toEqual([])
    }).pipe(Effect.provide(layer))
  )
})
