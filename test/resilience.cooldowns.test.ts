import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import type { PatchResilience } from "../src/domain/resilience.js"
import { classify } from "../src/services/resilience/classify.js"
import { Cooldowns } from "../src/services/resilience/Cooldowns.js"
import { ResilienceConfig } from "../src/services/resilience/ResilienceConfig.js"
import type { ConnectionRef, FailureInfo } from "../src/services/resilience/types.js"
import * as Db from "../src/platform/store/Db.js"
import { queryDb } from "./support/db.js"
import { tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const dbAt = (dataDir: string) => Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))

const cooldownsAt = (dataDir: string, overrides: PatchResilience = {}) =>
  Cooldowns.layer.pipe(Layer.provideMerge(Layer.merge(ResilienceConfig.layerTest(overrides), dbAt(dataDir))), Layer.provide(quiet))

const layer = (overrides: PatchResilience = {}) => cooldownsAt(tempDir(), overrides)

const KEY: ConnectionRef = { id: "c-key", name: "openai-main", provider: { id: "openai", authClass: "apikey" } }
const OAUTH: ConnectionRef = { id: "c-oauth", name: "claude-max", provider: { id: "claude", authClass: "oauth" } }
const LOCAL: ConnectionRef = { id: "c-local", name: "ollama", provider: { id: "ollama", authClass: "local" } }

const f429 = (headers: Record<string, string> = {}): FailureInfo => ({
  status: 429,
  kind: "http",
  message: "rate limited",
  code: "rate_limit_error",
  headers
})
const f401: FailureInfo = { status: 401, kind: "http", message: "invalid api key" }
const f403ban: FailureInfo = { status: 403, kind: "http", message: "Your account has been suspended" }
const f402: FailureInfo = { status: 402, kind: "http", message: "payment required" }
const f500: FailureInfo = { status: 500, kind: "http", message: "internal error" }

/** Reports a failure the way the dispatcher does: classify, then record. */
const failure = (conn: ConnectionRef, f: FailureInfo) =>
  Effect.gen(function* () {
    const cooldowns = yield* Cooldowns
    const now = yield* Clock.currentTimeMillis
    return yield* cooldowns.onFailure(conn, classify(f, now), f)
  })

const health = (id: string) => Effect.flatMap(Cooldowns, (c) => Effect.map(Clock.currentTimeMillis, (now) => c.healthAt(id, now)))

/** Fails `conn` with a plain 429 each time its cooldown has passed; answers the cooldown lengths. */
const cooldownSequence = (conn: ConnectionRef, n: number) =>
  Effect.gen(function* () {
    const lengths: Array<number> = []
    for (let i = 0; i < n; i++) {
      const now = yield* Clock.currentTimeMillis
      const h = yield* failure(conn, f429())
      lengths.push(h.rateLimitedUntil! - now)
      yield* TestClock.adjust(h.rateLimitedUntil! - now)
    }
    return lengths
  })

const insertConnection = (id: string, name: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`INSERT INTO connections (id, provider, name, created_at, updated_at) VALUES (${id}, 'openai', ${name}, 0, 0)`
  )

describe("connection cooldown: state table", () => {
  it.effect("available → cooldown on a transient failure: rateLimitedUntil in the future, testStatus unavailable", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      const now = yield* Clock.currentTimeMillis
      expect(c.availability(KEY.id, now)).toEqual({ ok: true, state: "available", until: null })
      const h = yield* failure(KEY, f429())
      expect(h).toEqual({
        rateLimitedUntil: now + 3000,
        testStatus: "unavailable",
        lastError: "rate limited",
        lastErrorType: "rate_limited",
        errorCode: "rate_limit_error",
        backoffLevel: 1
      })
      expect(c.availability(KEY.id, now)).toEqual({ ok: false, state: "cooldown", until: now + 3000 })
    }).pipe(Effect.provide(layer()))
  )

  it.effect("cooldown → available once rateLimitedUntil passed (lazy, keeping backoffLevel and lastError)", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      yield* failure(KEY, f429())
      yield* TestClock.adjust("2999 millis")
      expect((yield* health(KEY.id)).testStatus).toBe("unavailable")
      yield* TestClock.adjust("1 millis")
      const now = yield* Clock.currentTimeMillis
      expect(yield* health(KEY.id)).toEqual({
        rateLimitedUntil: null,
        testStatus: null,
        lastError: "rate limited",
        lastErrorType: "rate_limited",
        errorCode: "rate_limit_error",
        backoffLevel: 1
      })
      expect(c.availability(KEY.id, now)).toEqual({ ok: true, state: "available", until: null })
    }).pipe(Effect.provide(layer()))
  )

  it.effect("cooldown → available on a successful use, every error field cleared", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      yield* failure(KEY, f429())
      yield* failure(KEY, f500)
      yield* c.onSuccess(KEY.id)
      expect(yield* health(KEY.id)).toEqual({
        rateLimitedUntil: null,
        testStatus: null,
        lastError: null,
        lastErrorType: null,
        errorCode: null,
        backoffLevel: 0
      })
      expect(yield* c.list).toEqual([])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("any → terminal on ban, expiry or exhausted credits", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      const now = yield* Clock.currentTimeMillis
      yield* failure(KEY, f429())
      const banned = yield* failure(KEY, f403ban)
      expect(banned).toMatchObject({
        testStatus: "banned",
        rateLimitedUntil: null,
        lastErrorType: "banned",
        errorCode: "403",
        lastError: "Your account has been suspended"
      })
      expect(c.availability(KEY.id, now)).toEqual({ ok: false, state: "banned", until: null })
      expect((yield* failure(OAUTH, f401)).testStatus).toBe("expired")
      expect(c.availability(OAUTH.id, now)).toEqual({ ok: false, state: "expired", until: null })
      expect((yield* failure(LOCAL, f402)).testStatus).toBe("credits_exhausted")
      expect(c.availability(LOCAL.id, now).state).toBe("credits_exhausted")
      // Terminal states do not run out with time.
      yield* TestClock.adjust("1 day")
      expect((yield* health(KEY.id)).testStatus).toBe("banned")
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a terminal state is never overwritten by a transient cooldown", () =>
    Effect.gen(function* () {
      yield* failure(KEY, f401)
      const before = yield* health(KEY.id)
      const after = yield* failure(KEY, f429({ "retry-after": "10" }))
      expect(after).toEqual(before)
      yield* failure(KEY, f500)
      expect(yield* health(KEY.id)).toEqual(before)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("an operator reset clears a terminal state (one connection or all)", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      yield* failure(KEY, f403ban)
      yield* failure(OAUTH, f401)
      yield* failure(LOCAL, f429())
      expect(yield* c.reset(KEY.id)).toBe(1)
      expect(yield* c.reset(KEY.id)).toBe(0)
      expect((yield* health(KEY.id)).testStatus).toBeNull()
      expect(yield* c.reset()).toBe(2)
      expect(yield* c.list).toEqual([])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("forget drops every state of a connection whose credentials changed", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      yield* failure(KEY, f402)
      yield* c.forget(KEY.id)
      expect(yield* health(KEY.id)).toMatchObject({ testStatus: null, backoffLevel: 0, lastError: null })
    }).pipe(Effect.provide(layer()))
  )
})

describe("connection cooldown: lengths", () => {
  it.effect("API-key connections: 3 s × 2^n, capped at maxCooldownMs", () =>
    Effect.gen(function* () {
      expect(yield* cooldownSequence(KEY, 8)).toEqual([3000, 6000, 12_000, 24_000, 48_000, 96_000, 192_000, 300_000])
      expect((yield* health(KEY.id)).backoffLevel).toBe(8)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("OAuth connections: 5 s × 2^n", () =>
    Effect.gen(function* () {
      expect(yield* cooldownSequence(OAUTH, 4)).toEqual([5000, 10_000, 20_000, 40_000])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("local connections use the API-key base", () =>
    Effect.gen(function* () {
      expect(yield* cooldownSequence(LOCAL, 2)).toEqual([3000, 6000])
    }).pipe(Effect.provide(layer()))
  )

  it.effect("bases and cap come from the settings in force", () =>
    Effect.gen(function* () {
      expect(yield* cooldownSequence(KEY, 3)).toEqual([1000, 2000, 2500])
    }).pipe(Effect.provide(layer({ connectionCooldown: { apiKeyBaseMs: 1000, maxCooldownMs: 2500 } })))
  )

  // Found by the bench's fallback run, which switches cooldowns off (base and cap 0) and fails
  // one target thousands of times: at backoff level 1024, 0 × 2^1024 was NaN.
  it.effect("cooldowns switched off (base and cap 0) stay off after thousands of failures in a row", () =>
    Effect.gen(function* () {
      for (let i = 0; i < 1100; i++) yield* failure(KEY, f500)
      const cooldowns = yield* Cooldowns
      const now = yield* Clock.currentTimeMillis
      const h = cooldowns.healthAt(KEY.id, now)
      expect(h.backoffLevel).toBe(1100)
      expect(Number.isFinite(h.rateLimitedUntil ?? 0)).toBe(true)
      expect(cooldowns.availability(KEY.id, now).state).toBe("available")
    }).pipe(Effect.provide(layer({ connectionCooldown: { apiKeyBaseMs: 0, maxCooldownMs: 0 } })))
  )

  it.effect("API-key 429: the upstream Retry-After is preferred over the backoff", () =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const h = yield* failure(KEY, f429({ "retry-after": "20" }))
      expect(h.rateLimitedUntil).toBe(now + 20_000)
      expect(h.backoffLevel).toBe(1)
      yield* TestClock.adjust("20 seconds")
      // A short reset header wins over the 6 s the backoff would give.
      const later = yield* Clock.currentTimeMillis
      expect((yield* failure(KEY, f429({ "x-ratelimit-reset-requests": "1s" }))).rateLimitedUntil).toBe(later + 1000)
      yield* TestClock.adjust("1 second")
      // Reset text in the body counts as well; a long wait is capped at maxCooldownMs.
      const t = yield* Clock.currentTimeMillis
      expect((yield* failure(KEY, { ...f429(), message: "Please try again in 1h2m" })).rateLimitedUntil).toBe(t + 300_000)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("OAuth 429: the computed backoff, but never less than Retry-After", () =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      expect((yield* failure(OAUTH, f429({ "retry-after": "1" }))).rateLimitedUntil).toBe(now + 5000)
      yield* TestClock.adjust("5 seconds")
      const later = yield* Clock.currentTimeMillis
      expect((yield* failure(OAUTH, f429({ "retry-after": "45" }))).rateLimitedUntil).toBe(later + 45_000)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a concurrent failure during a cooldown does not increment backoffLevel", () =>
    Effect.gen(function* () {
      const start = yield* Clock.currentTimeMillis
      yield* failure(KEY, f429())
      // Requests already in flight fail too: same level, same end without a Retry-After.
      yield* failure(KEY, f429())
      yield* failure(KEY, f429())
      expect(yield* health(KEY.id)).toMatchObject({ backoffLevel: 1, rateLimitedUntil: start + 3000 })
      // With a Retry-After the end moves out (never in).
      yield* TestClock.adjust("1 second")
      const now = yield* Clock.currentTimeMillis
      expect(yield* failure(KEY, f429({ "retry-after": "10" }))).toMatchObject({ backoffLevel: 1, rateLimitedUntil: now + 10_000 })
      expect(yield* failure(KEY, f429({ "retry-after": "1" }))).toMatchObject({ backoffLevel: 1, rateLimitedUntil: now + 10_000 })
      // After the cooldown the next failure escalates.
      yield* TestClock.adjust("10 seconds")
      const t = yield* Clock.currentTimeMillis
      expect(yield* failure(KEY, f429())).toMatchObject({ backoffLevel: 2, rateLimitedUntil: t + 6000 })
    }).pipe(Effect.provide(layer()))
  )

  it.effect("failures without cooldown or terminal state only record the last error", () =>
    Effect.gen(function* () {
      const h = yield* failure(KEY, { status: 404, kind: "http", message: "model not found" })
      expect(h).toEqual({
        rateLimitedUntil: null,
        testStatus: null,
        lastError: "model not found",
        lastErrorType: "not_found",
        errorCode: "404",
        backoffLevel: 0
      })
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a 5xx, a timeout or a transport failure cools the connection down like a 429 (3 s × 2^n for API keys)", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      const start = yield* Clock.currentTimeMillis
      const h = yield* failure(KEY, f500)
      expect(h).toEqual({
        rateLimitedUntil: start + 3000,
        testStatus: "unavailable",
        lastError: "internal error",
        lastErrorType: "server_error",
        errorCode: "500",
        backoffLevel: 1
      })
      expect(c.availability(KEY.id, start)).toEqual({ ok: false, state: "cooldown", until: start + 3000 })
      yield* TestClock.adjust("3 seconds")
      const t1 = yield* Clock.currentTimeMillis
      expect(
        (yield* failure(KEY, { status: 504, kind: "timeout", message: "upstream timed out", code: "upstream_timeout" })).rateLimitedUntil
      ).toBe(t1 + 6000)
      yield* TestClock.adjust("6 seconds")
      const t2 = yield* Clock.currentTimeMillis
      expect(
        (yield* failure(KEY, { status: 502, kind: "unreachable", message: "connection refused", code: "upstream_unreachable" }))
          .rateLimitedUntil
      ).toBe(t2 + 12_000)
      // OAuth: 5 s base.
      const o = yield* failure(OAUTH, { status: 503, kind: "http", message: "overloaded" })
      expect(o.rateLimitedUntil).toBe(t2 + 5000)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("a 503's Retry-After lengthens its cooldown but never shortens the backoff", () =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      expect((yield* failure(KEY, { status: 503, kind: "http", message: "busy", headers: { "retry-after": "1" } })).rateLimitedUntil).toBe(
        now + 3000
      )
      expect(
        (yield* failure(LOCAL, { status: 503, kind: "http", message: "busy", headers: { "retry-after": "20" } })).rateLimitedUntil
      ).toBe(now + 20_000)
    }).pipe(Effect.provide(layer()))
  )

  it.effect("lists connections with recorded state, sorted by id", () =>
    Effect.gen(function* () {
      const c = yield* Cooldowns
      yield* failure(OAUTH, f429())
      yield* failure(KEY, f401)
      expect((yield* c.list).map((e) => [e.connectionId, e.testStatus])).toEqual([
        ["c-key", "expired"],
        ["c-oauth", "unavailable"]
      ])
    }).pipe(Effect.provide(layer()))
  )
})

describe("connection cooldown: persistence", () => {
  it.effect("terminal states and active cooldowns survive a restart on the same database file", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      const first = yield* Scope.make()
      const ctx = yield* Layer.buildWithScope(cooldownsAt(dir), first)
      const start = yield* Clock.currentTimeMillis
      yield* Effect.gen(function* () {
        yield* insertConnection(KEY.id, KEY.name)
        yield* insertConnection(OAUTH.id, OAUTH.name)
        yield* insertConnection(LOCAL.id, LOCAL.name)
        yield* insertConnection("c-quiet", "quiet")
        yield* failure(KEY, f403ban)
        yield* failure(OAUTH, f429())
        yield* failure(LOCAL, f429())
        yield* Effect.flatMap(Cooldowns, (c) => c.onSuccess(LOCAL.id))
      }).pipe(Effect.provide(ctx))
      // The scope's finalizer writes what the background writer has not.
      yield* Scope.close(first, Exit.void)

      const rows = queryDb(
        dir,
        "SELECT id, rate_limited_until, test_status, last_error, last_error_type, error_code, backoff_level FROM connections ORDER BY id"
      )
      expect(rows).toEqual([
        {
          id: "c-key",
          rate_limited_until: null,
          test_status: "banned",
          last_error: "Your account has been suspended",
          last_error_type: "banned",
          error_code: "403",
          backoff_level: 0
        },
        {
          id: "c-local",
          rate_limited_until: null,
          test_status: null,
          last_error: null,
          last_error_type: null,
          error_code: null,
          backoff_level: 0
        },
        {
          id: "c-oauth",
          rate_limited_until: start + 5000,
          test_status: "unavailable",
          last_error: "rate limited",
          last_error_type: "rate_limited",
          error_code: "rate_limit_error",
          backoff_level: 1
        },
        {
          id: "c-quiet",
          rate_limited_until: null,
          test_status: null,
          last_error: null,
          last_error_type: null,
          error_code: null,
          backoff_level: 0
        }
      ])

      yield* Effect.gen(function* () {
        const c = yield* Cooldowns
        const now = yield* Clock.currentTimeMillis
        expect(c.availability(KEY.id, now)).toEqual({ ok: false, state: "banned", until: null })
        expect(c.availability(OAUTH.id, now)).toEqual({ ok: false, state: "cooldown", until: start + 5000 })
        expect(c.healthAt(OAUTH.id, now).backoffLevel).toBe(1)
        expect(c.availability(LOCAL.id, now).ok).toBe(true)
        expect((yield* c.list).map((e) => e.connectionId)).toEqual(["c-key", "c-oauth"])
        // The loaded backoff level carries on.
        yield* TestClock.adjust("5 seconds")
        const later = yield* Clock.currentTimeMillis
        expect((yield* failure(OAUTH, f429())).rateLimitedUntil).toBe(later + 10_000)
      }).pipe(Effect.provide(cooldownsAt(dir)))
    })
  )

  it.live("changes reach the database in the background, without a flush", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* Effect.gen(function* () {
        yield* insertConnection(KEY.id, KEY.name)
        yield* failure(KEY, f401)
        yield* Effect.sleep("400 millis")
        expect(queryDb(dir, "SELECT test_status FROM connections WHERE id = ?", KEY.id)).toEqual([{ test_status: "expired" }])
        yield* Effect.flatMap(Cooldowns, (c) => c.reset(KEY.id))
        yield* Effect.sleep("400 millis")
        expect(queryDb(dir, "SELECT test_status FROM connections WHERE id = ?", KEY.id)).toEqual([{ test_status: null }])
      }).pipe(Effect.provide(cooldownsAt(dir)))
    })
  )

  it.effect("does not load test results that are not resilience state", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* Effect.gen(function* () {
        yield* insertConnection(KEY.id, KEY.name)
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE connections SET test_status = 'error', last_error = 'test failed' WHERE id = ${KEY.id}`
      }).pipe(Effect.provide(dbAt(dir)))
      yield* Effect.gen(function* () {
        const c = yield* Cooldowns
        expect(yield* c.list).toEqual([])
      }).pipe(Effect.provide(cooldownsAt(dir)))
    })
  )
})
