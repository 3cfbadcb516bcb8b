import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Queue from "effect/Queue"
import * as TestClock from "effect/TestClock"
import { Budgets } from "../src/services/accounting/Budgets.js"
import { fixedWindow, windowEnd, windowStart } from "../src/services/accounting/windows.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { EventBus } from "../src/platform/events/EventBus.js"
import * as Db from "../src/platform/store/Db.js"
import { StoreVersion } from "../src/platform/store/StoreVersion.js"
import { tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const dbAt = (dataDir: string) => Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))
const budgetsAt = (dataDir: string) =>
  Budgets.layer.pipe(
    Layer.provideMerge(Layer.merge(EventBus.layer, StoreVersion.layer(0))),
    Layer.provideMerge(dbAt(dataDir)),
    Layer.provide(quiet)
  )

const t = (iso: string) => Date.parse(iso)
const iso = (ms: number) => new Date(ms).toISOString()

const addKey = (id: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO api_keys (id, name, key_hash, masked, scopes, created_at) VALUES (${id}, ${id}, ${"hash-" + id}, 'gwk_…', '["inference"]', 0)`
  ).pipe(Effect.orDie)

const addUsage = (apiKeyId: string, ts: number, costUsd: number) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO usage (ts, request_id, api_key_id, provider, model, endpoint, status, tokens_in, tokens_out, cost_usd)
          VALUES (${ts}, ${"r" + ts}, ${apiKeyId}, 'openai', 'gpt-4o', '/v1/chat/completions', 200, 10, 10, ${costUsd})`
  ).pipe(Effect.orDie)

const failure = (input: unknown) => Effect.flatMap(Budgets, (b) => Effect.map(Effect.flip(b.set(input)), (e) => `${e._tag}: ${e.message}`))

const statusOf = (apiKeyId: string) => Effect.flatMap(Budgets, (b) => Effect.map(b.status(apiKeyId), (s) => s[0]!))

describe("budget windows (UTC)", () => {
  it("daily: today's resetTime or yesterday's", () => {
    expect(iso(windowStart("daily", "06:00", t("2025-03-12T05:59:59.999Z")))).toBe("2025-03-11T06:00:00.000Z")
    expect(iso(windowEnd("daily", "06:00", t("2025-03-12T05:59:59.999Z")))).toBe("2025-03-12T06:00:00.000Z")
    expect(iso(windowStart("daily", "06:00", t("2025-03-12T06:00:00.000Z")))).toBe("2025-03-12T06:00:00.000Z")
    expect(iso(windowEnd("daily", "06:00", t("2025-03-12T06:00:00.000Z")))).toBe("2025-03-13T06:00:00.000Z")
    expect(iso(windowStart("daily", "00:00", t("2025-03-01T00:00:00.000Z")))).toBe("2025-03-01T00:00:00.000Z")
    expect(iso(windowStart("daily", "23:59", t("2025-01-01T12:00:00.000Z")))).toBe("2024-12-31T23:59:00.000Z")
  })

  it("weekly: the most recent Monday at resetTime", () => {
    // 2025-03-12 is a Wednesday; 2025-03-10 a Monday; 2025-03-16 a Sunday.
    expect(iso(windowStart("weekly", "06:00", t("2025-03-12T12:00:00Z")))).toBe("2025-03-10T06:00:00.000Z")
    expect(iso(windowEnd("weekly", "06:00", t("2025-03-12T12:00:00Z")))).toBe("2025-03-17T06:00:00.000Z")
    expect(iso(windowStart("weekly", "06:00", t("2025-03-10T05:00:00Z")))).toBe("2025-03-03T06:00:00.000Z")
    expect(iso(windowStart("weekly", "00:00", t("2025-03-16T23:59:00Z")))).toBe("2025-03-10T00:00:00.000Z")
    expect(iso(windowStart("weekly", "00:00", t("2025-03-02T10:00:00Z")))).toBe("2025-02-24T00:00:00.000Z")
  })

  it("monthly: the 1st of this month at resetTime, or of last month", () => {
    expect(iso(windowStart("monthly", "06:00", t("2025-03-12T12:00:00Z")))).toBe("2025-03-01T06:00:00.000Z")
    expect(iso(windowEnd("monthly", "06:00", t("2025-03-12T12:00:00Z")))).toBe("2025-04-01T06:00:00.000Z")
    expect(iso(windowStart("monthly", "06:00", t("2025-03-01T05:00:00Z")))).toBe("2025-02-01T06:00:00.000Z")
    expect(iso(windowEnd("monthly", "06:00", t("2025-03-01T05:00:00Z")))).toBe("2025-03-01T06:00:00.000Z")
    expect(iso(windowStart("monthly", "01:00", t("2025-01-01T00:30:00Z")))).toBe("2024-12-01T01:00:00.000Z")
    expect(iso(windowEnd("monthly", "00:00", t("2024-12-31T23:00:00Z")))).toBe("2025-01-01T00:00:00.000Z")
  })

  it("token-limit windows are fixed UTC windows; weeks start Monday 00:00", () => {
    const now = t("2025-03-12T05:59:30.500Z")
    const w = (k: Parameters<typeof fixedWindow>[0]) => {
      const r = fixedWindow(k, now)
      return [iso(r.start), iso(r.end)]
    }
    expect(w("minute")).toEqual(["2025-03-12T05:59:00.000Z", "2025-03-12T06:00:00.000Z"])
    expect(w("hour")).toEqual(["2025-03-12T05:00:00.000Z", "2025-03-12T06:00:00.000Z"])
    expect(w("day")).toEqual(["2025-03-12T00:00:00.000Z", "2025-03-13T00:00:00.000Z"])
    expect(w("week")).toEqual(["2025-03-10T00:00:00.000Z", "2025-03-17T00:00:00.000Z"])
    expect(w("month")).toEqual(["2025-03-01T00:00:00.000Z", "2025-04-01T00:00:00.000Z"])
  })
})

describe("POST /api/usage/budget rules", () => {
  it.effect("legacy shape, no positive limit, unknown key, unknown field, bad values: messages", () =>
    Effect.gen(function* () {
      yield* addKey("k1")
      const legacy = yield* failure({ keyId: "k1", limit: 10, period: "monthly" })
      expect(legacy).toMatch(
        /^BadRequest: the legacy budget shape \(keyId, limit, period\) is not accepted; send apiKeyId and at least one of dailyLimitUsd, weeklyLimitUsd, monthlyLimitUsd/
      )
      expect(legacy).toContain("resetTime")
      expect(yield* failure({ apiKeyId: "k1", limit: 10 })).toBe(legacy)
      const none = "BadRequest: set at least one limit greater than 0: dailyLimitUsd, weeklyLimitUsd or monthlyLimitUsd"
      expect(yield* failure({ apiKeyId: "k1" })).toBe(none)
      expect(yield* failure({ apiKeyId: "k1", dailyLimitUsd: 0, monthlyLimitUsd: 0 })).toBe(none)
      expect(yield* failure({ apiKeyId: "nope", dailyLimitUsd: 1 })).toBe("NotFound: no API key with id 'nope'")
      expect(yield* failure({ apiKeyId: "k1", dailyLimitUsd: 1, daily: 2 })).toMatch(/^BadRequest: daily: is unexpected/)
      const badTime = "BadRequest: resetTime: resetTime must be HH:MM (UTC), from 00:00 to 23:59"
      for (const resetTime of ["6:00", "24:00", "12:60", "06:00:00", "noon"]) {
        expect(yield* failure({ apiKeyId: "k1", dailyLimitUsd: 1, resetTime })).toBe(badTime)
      }
      expect(yield* failure({ apiKeyId: "k1", dailyLimitUsd: -1, monthlyLimitUsd: 5 })).toBe(
        "BadRequest: dailyLimitUsd: dailyLimitUsd must be a non-negative number of USD"
      )
      expect(yield* failure({ apiKeyId: "k1", dailyLimitUsd: 1, warningThreshold: 1.5 })).toBe(
        "BadRequest: warningThreshold: warningThreshold must be a fraction between 0 and 1"
      )
      expect(yield* failure({ apiKeyId: "k1", dailyLimitUsd: 1, resetInterval: "yearly" })).toBe(
        'BadRequest: resetInterval: resetInterval must be one of: daily, weekly, monthly (got "yearly")'
      )
      expect(yield* failure({ apiKeyId: "k1", monthlyLimitUsd: 1, resetInterval: "daily" })).toBe(
        "BadRequest: resetInterval is daily but dailyLimitUsd is not set (greater than 0); limited windows: monthly"
      )
      expect(yield* failure({ apiKeyId: "", dailyLimitUsd: 1 })).toBe("BadRequest: apiKeyId: apiKeyId must not be empty")
      expect(yield* failure([1])).toMatch(/^BadRequest: /)
    }).pipe(Effect.provide(budgetsAt(tempDir())))
  )

  it.effect("defaults: threshold 0.8, resetTime 00:00, resetInterval the shortest limited window; a set replaces the budget", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(t("2025-03-12T12:00:00Z"))
      yield* addKey("k1")
      const budgets = yield* Budgets
      const s = yield* budgets.set({ apiKeyId: "k1", weeklyLimitUsd: 10, monthlyLimitUsd: 30 })
      expect(s).toMatchObject({
        apiKeyId: "k1",
        dailyLimitUsd: null,
        weeklyLimitUsd: 10,
        monthlyLimitUsd: 30,
        warningThreshold: 0.8,
        resetInterval: "weekly",
        resetTime: "00:00",
        limitUsd: 10,
        spentUsd: 0,
        remainingUsd: 10,
        resetsAt: "2025-03-17T00:00:00.000Z",
        warning: false,
        exceeded: false,
        createdAt: "2025-03-12T12:00:00.000Z"
      })
      expect(Object.keys(s.windows)).toEqual(["weekly", "monthly"])
      expect(s.windows.monthly).toEqual({
        limitUsd: 30,
        spentUsd: 0,
        remainingUsd: 30,
        windowStart: "2025-03-01T00:00:00.000Z",
        resetsAt: "2025-04-01T00:00:00.000Z",
        warning: false,
        exceeded: false
      })
      yield* budgets.record("k1", 2)
      yield* TestClock.adjust("1 hour")
      const replaced = yield* budgets.set({ apiKeyId: "k1", dailyLimitUsd: 5, resetInterval: "daily", warningThreshold: 0.5 })
      expect(replaced).toMatchObject({
        dailyLimitUsd: 5,
        weeklyLimitUsd: null,
        monthlyLimitUsd: null,
        resetInterval: "daily",
        limitUsd: 5,
        spentUsd: 2,
        createdAt: "2025-03-12T12:00:00.000Z",
        updatedAt: "2025-03-12T13:00:00.000Z"
      })
      expect(Object.keys(replaced.windows)).toEqual(["daily"])
      expect(yield* budgets.status()).toHaveLength(1)
      expect(yield* budgets.status("other")).toEqual([])
      yield* budgets.remove("k1")
      expect(yield* budgets.status()).toEqual([])
      expect(budgets.check("k1", yield* Clock.currentTimeMillis)).toEqual({ ok: true })
      expect(yield* Effect.flip(budgets.remove("k1"))).toMatchObject({ _tag: "NotFound", message: "API key 'k1' has no budget" })
    }).pipe(Effect.provide(budgetsAt(tempDir())))
  )
})

describe("budget spend and windows", () => {
  it.effect(
    "resetTime 06:00: spend before 06:00 belongs to yesterday's window; past 06:00 the daily spend resets, the monthly does not",
    () =>
      Effect.gen(function* () {
        yield* TestClock.setTime(t("2025-03-12T05:00:00Z"))
        yield* addKey("k1")
        const budgets = yield* Budgets
        yield* budgets.set({ apiKeyId: "k1", dailyLimitUsd: 1, monthlyLimitUsd: 100, resetTime: "06:00" })
        yield* budgets.record("k1", 0.5)
        let s = yield* statusOf("k1")
        expect(s.windows.daily).toMatchObject({
          spentUsd: 0.5,
          windowStart: "2025-03-11T06:00:00.000Z",
          resetsAt: "2025-03-12T06:00:00.000Z"
        })
        expect(s.windows.monthly).toMatchObject({ spentUsd: 0.5, windowStart: "2025-03-01T06:00:00.000Z" })
        expect(s).toMatchObject({
          resetInterval: "daily",
          spentUsd: 0.5,
          limitUsd: 1,
          remainingUsd: 0.5,
          resetsAt: "2025-03-12T06:00:00.000Z"
        })

        yield* TestClock.adjust("59 minutes")
        expect((yield* statusOf("k1")).windows.daily?.spentUsd).toBe(0.5)
        yield* TestClock.adjust("1 minute")
        s = yield* statusOf("k1")
        expect(s.windows.daily).toMatchObject({
          spentUsd: 0,
          windowStart: "2025-03-12T06:00:00.000Z",
          resetsAt: "2025-03-13T06:00:00.000Z"
        })
        expect(s.windows.monthly?.spentUsd).toBe(0.5)
        yield* budgets.record("k1", 0.25)
        s = yield* statusOf("k1")
        expect(s.windows.daily?.spentUsd).toBe(0.25)
        expect(s.windows.monthly?.spentUsd).toBe(0.75)
      }).pipe(Effect.provide(budgetsAt(tempDir())))
  )

  it.effect("check is not ok exactly when spend reaches a limit; retryAfterMs until the longest exceeded window resets", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(t("2025-03-12T12:00:00Z"))
      yield* addKey("k1")
      const budgets = yield* Budgets
      yield* budgets.set({ apiKeyId: "k1", dailyLimitUsd: 1, weeklyLimitUsd: 1.5 })
      const now = () => Clock.currentTimeMillis
      expect(budgets.check("k1", yield* now())).toEqual({ ok: true })
      expect(budgets.check(null, yield* now())).toEqual({ ok: true })
      expect(budgets.check("no-budget", yield* now())).toEqual({ ok: true })
      // Ten records of 0.1 sum to 0.9999999999999999 in floating point: still reaches 1.
      for (let i = 0; i < 9; i++) yield* budgets.record("k1", 0.1)
      expect(budgets.check("k1", yield* now())).toEqual({ ok: true })
      yield* budgets.record("k1", 0.1)
      expect(budgets.check("k1", yield* now())).toEqual({
        ok: false,
        window: "daily",
        limitUsd: 1,
        spentUsd: expect.closeTo(1, 12),
        retryAfterMs: 12 * 3_600_000,
        level: "key",
        subjectId: "k1",
        subject: "this API key"
      })
      expect((yield* statusOf("k1")).exceeded).toBe(true)
      // Next day the daily window is fresh; then the weekly limit is reached too.
      yield* TestClock.adjust("12 hours")
      expect(budgets.check("k1", yield* now())).toEqual({ ok: true })
      yield* budgets.record("k1", 0.5)
      // 2025-03-13T00:00 → weekly resets Monday 2025-03-17T00:00: 4 days.
      expect(budgets.check("k1", yield* now())).toMatchObject({ ok: false, window: "weekly", limitUsd: 1.5, retryAfterMs: 4 * 86_400_000 })
      yield* budgets.record("k1", 0.5)
      // Both daily and weekly exceeded: the one that resets last wins.
      expect(budgets.check("k1", yield* now())).toMatchObject({ ok: false, window: "weekly", retryAfterMs: 4 * 86_400_000 })
      yield* TestClock.adjust("1 day")
      expect(budgets.check("k1", yield* now())).toMatchObject({ ok: false, window: "weekly", retryAfterMs: 3 * 86_400_000 })
      yield* TestClock.adjust("3 days")
      expect(budgets.check("k1", yield* now())).toEqual({ ok: true })
    }).pipe(Effect.provide(budgetsAt(tempDir())))
  )

  it.scoped("quota.exceeded: warning and exceeded once each per window", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(t("2025-03-12T12:00:00Z"))
      yield* addKey("k1")
      const budgets = yield* Budgets
      const events = yield* (yield* EventBus).subscribe
      const drain = Effect.map(Queue.takeAll(events), (c) => [...c].map((e): Record<string, unknown> => ({ event: e.event, ...e.data })))
      yield* budgets.set({ apiKeyId: "k1", dailyLimitUsd: 1, warningThreshold: 0.5 })
      yield* budgets.record("k1", 0.3)
      expect(yield* drain).toEqual([])
      yield* budgets.record("k1", 0.3)
      expect(yield* drain).toEqual([
        {
          event: "quota.exceeded",
          source: "budget",
          api_key_id: "k1",
          window: "daily",
          kind: "warning",
          threshold: 0.5,
          spent_usd: 0.6,
          limit_usd: 1,
          window_start: "2025-03-12T00:00:00.000Z",
          resets_at: "2025-03-13T00:00:00.000Z"
        }
      ])
      yield* budgets.record("k1", 0.1)
      expect(yield* drain).toEqual([])
      yield* budgets.record("k1", 0.5)
      expect(yield* drain).toMatchObject([
        { kind: "exceeded", window: "daily", threshold: 1, limit_usd: 1, spent_usd: expect.closeTo(1.2, 12) }
      ])
      yield* budgets.record("k1", 0.5)
      expect(yield* drain).toEqual([])
      // Next window: both thresholds crossed by one record → both, once.
      yield* TestClock.adjust("1 day")
      yield* budgets.record("k1", 2)
      expect((yield* drain).map((e) => e["kind"])).toEqual(["warning", "exceeded"])
      yield* budgets.record("k1", 2)
      expect(yield* drain).toEqual([])
      // No budget, no key, or nothing spent: nothing published.
      yield* budgets.record(null, 5)
      yield* budgets.record("other", 5)
      expect(yield* drain).toEqual([])
    }).pipe(Effect.provide(budgetsAt(tempDir())))
  )
})

describe("budget spend reload", () => {
  it.effect("a fresh layer on the same database loads each window's spend from usage rows", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* TestClock.setTime(t("2025-03-12T12:00:00Z"))
      yield* Effect.gen(function* () {
        yield* addKey("k1")
        yield* addKey("k2")
        const budgets = yield* Budgets
        yield* budgets.set({ apiKeyId: "k1", dailyLimitUsd: 1, weeklyLimitUsd: 5, monthlyLimitUsd: 10, resetTime: "06:00" })
        yield* addUsage("k1", t("2025-03-12T07:00:00Z"), 0.4) // today's daily window (from 06:00)
        yield* addUsage("k1", t("2025-03-12T11:59:59Z"), 0.7) // today's daily window
        yield* addUsage("k1", t("2025-03-12T05:00:00Z"), 0.2) // yesterday's daily window, this week
        yield* addUsage("k1", t("2025-03-05T12:00:00Z"), 1) // last week, this month
        yield* addUsage("k1", t("2025-02-28T12:00:00Z"), 3) // last month
        yield* addUsage("k1", t("2025-03-01T05:59:00Z"), 3) // before the monthly reset time: February's window
        yield* addUsage("k2", t("2025-03-12T08:00:00Z"), 9) // another key
      }).pipe(Effect.provide(budgetsAt(dir)))

      yield* Effect.gen(function* () {
        const budgets = yield* Budgets
        const s = yield* statusOf("k1")
        expect(s.windows.daily?.spentUsd).toBeCloseTo(1.1, 12)
        expect(s.windows.weekly?.spentUsd).toBeCloseTo(1.3, 12)
        expect(s.windows.monthly?.spentUsd).toBeCloseTo(2.3, 12)
        expect(s.windows.daily?.exceeded).toBe(true)
        expect(budgets.check("k1", yield* Clock.currentTimeMillis)).toMatchObject({
          ok: false,
          window: "daily",
          retryAfterMs: 18 * 3_600_000
        })
        // Already over at load: no event for thresholds crossed before this process started.
        const events = yield* Effect.scoped(
          Effect.gen(function* () {
            const q = yield* (yield* EventBus).subscribe
            yield* budgets.record("k1", 0.01)
            return yield* Queue.takeAll(q)
          })
        )
        expect([...events]).toEqual([])
      }).pipe(Effect.provide(budgetsAt(dir)))
    })
  )

  it.effect("refresh picks up a budget another process wrote (StoreVersion)", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* TestClock.setTime(t("2025-03-12T12:00:00Z"))
      yield* Effect.gen(function* () {
        yield* addKey("k1")
        yield* addUsage("k1", t("2025-03-12T10:00:00Z"), 0.5)
        const server = yield* Budgets
        expect(yield* server.status()).toEqual([])
        // Another process (the CLI) sets a budget on the same file.
        yield* Effect.flatMap(Budgets, (cli) => cli.set({ apiKeyId: "k1", dailyLimitUsd: 0.5 })).pipe(Effect.provide(budgetsAt(dir)))
        expect(server.check("k1", yield* Clock.currentTimeMillis)).toEqual({ ok: true })
        yield* server.refresh
        expect(server.check("k1", yield* Clock.currentTimeMillis)).toMatchObject({ ok: false, window: "daily", spentUsd: 0.5 })
        yield* Effect.flatMap(Budgets, (cli) => cli.remove("k1")).pipe(Effect.provide(budgetsAt(dir)))
        yield* server.refresh
        expect(yield* server.status()).toEqual([])
      }).pipe(Effect.provide(budgetsAt(dir)))
    })
  )
})
