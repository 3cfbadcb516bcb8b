import { describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Queue from "effect/Queue"
import * as TestClock from "effect/TestClock"
import { limitApplies, type LimitTarget, TokenLimits } from "../src/services/accounting/TokenLimits.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { EventBus } from "../src/platform/events/EventBus.js"
import * as Db from "../src/platform/store/Db.js"
import { StoreVersion } from "../src/platform/store/StoreVersion.js"
import { tempDir } from "./support/gateway.js"

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const dbAt = (dataDir: string) => Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))
const limitsAt = (dataDir: string) =>
  TokenLimits.layer.pipe(Layer.provideMerge(EventBus.layer), Layer.provideMerge(dbAt(dataDir)), Layer.provide(quiet))

const t = (iso: string) => Date.parse(iso)

const addKey = (id: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO api_keys (id, name, key_hash, masked, scopes, created_at) VALUES (${id}, ${id}, ${"hash-" + id}, 'gwk_…', '["inference"]', 0)`
  ).pipe(Effect.orDie)

const addUsage = (row: {
  key: string
  ts: number
  provider: string
  model: string
  requested: string | null
  tin: number | null
  tout: number | null
}) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql`INSERT INTO usage (ts, request_id, api_key_id, provider, model, requested_model, endpoint, status, tokens_in, tokens_out)
          VALUES (${row.ts}, ${"r" + row.ts}, ${row.key}, ${row.provider}, ${row.model}, ${row.requested}, '/v1/chat/completions', 200, ${row.tin}, ${row.tout})`
  ).pipe(Effect.orDie)

const OPENAI_VIA_ALIAS: LimitTarget = { provider: "openai", model: "gpt-4o", requestedModel: "fast" }
const OPENAI_DIRECT: LimitTarget = { provider: "openai", model: "gpt-4o-mini", requestedModel: "openai/gpt-4o-mini" }
const ANTHROPIC: LimitTarget = { provider: "anthropic", model: "claude-haiku-4-5", requestedModel: "claude-haiku-4-5" }

const failure = (input: unknown) =>
  Effect.flatMap(TokenLimits, (l) => Effect.map(Effect.flip(l.create(input)), (e) => `${e._tag}: ${e.message}`))

describe("token limits: scope matching", () => {
  it("global always; provider by provider id; model by requested id, <provider>/<model> of the target, or bare id", () => {
    const global = { scope: "global" as const, provider: null, model: null }
    expect(limitApplies(global, ANTHROPIC)).toBe(true)
    const provider = { scope: "provider" as const, provider: "openai", model: null }
    expect(limitApplies(provider, OPENAI_VIA_ALIAS)).toBe(true)
    expect(limitApplies(provider, { ...ANTHROPIC, provider: "OpenAI" })).toBe(true)
    expect(limitApplies(provider, ANTHROPIC)).toBe(false)
    const model = (m: string) => ({ scope: "model" as const, provider: null, model: m })
    expect(limitApplies(model("fast"), OPENAI_VIA_ALIAS)).toBe(true)
    expect(limitApplies(model("openai/gpt-4o"), OPENAI_VIA_ALIAS)).toBe(true)
    expect(limitApplies(model("gpt-4o"), OPENAI_VIA_ALIAS)).toBe(true)
    expect(limitApplies(model("gpt-4o"), OPENAI_DIRECT)).toBe(false)
    expect(limitApplies(model("openai/gpt-4o-mini"), OPENAI_DIRECT)).toBe(true)
    expect(limitApplies(model("GPT-4o"), OPENAI_VIA_ALIAS)).toBe(false)
  })

  it.effect("check and record apply each limit to matching requests only", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(t("2025-03-12T10:30:00Z"))
      for (const k of ["kg", "kp", "km"]) yield* addKey(k)
      const limits = yield* TokenLimits
      const now = () => Clock.currentTimeMillis
      yield* limits.create({ apiKeyId: "kg", scope: "global", maxTokens: 100 })
      yield* limits.create({ apiKeyId: "kp", scope: "provider", provider: "Anthropic", maxTokens: 100 })
      const byRequested = yield* limits.create({ apiKeyId: "km", scope: "model", model: "fast", maxTokens: 100 })
      yield* limits.create({ apiKeyId: "km", scope: "model", model: "openai/gpt-4o-mini", maxTokens: 50 })

      // global: tokens to any provider count together
      yield* limits.record("kg", OPENAI_VIA_ALIAS, 60)
      expect(limits.check("kg", ANTHROPIC, yield* now())).toEqual({ ok: true })
      yield* limits.record("kg", ANTHROPIC, 40)
      const g = limits.check("kg", OPENAI_DIRECT, yield* now())
      expect(g).toMatchObject({ ok: false, limit: { apiKeyId: "kg", scope: "global", usedTokens: 100, maxTokens: 100, window: "day" } })

      // provider: only anthropic requests count and are refused
      yield* limits.record("kp", OPENAI_VIA_ALIAS, 500)
      expect(limits.check("kp", ANTHROPIC, yield* now())).toEqual({ ok: true })
      yield* limits.record("kp", ANTHROPIC, 100)
      expect(limits.check("kp", ANTHROPIC, yield* now())).toMatchObject({ ok: false, limit: { provider: "anthropic", usedTokens: 100 } })
      expect(limits.check("kp", OPENAI_VIA_ALIAS, yield* now())).toEqual({ ok: true })

      // model: by requested id ("fast") and by target id (openai/gpt-4o-mini)
      yield* limits.record("km", OPENAI_DIRECT, 50)
      expect(limits.check("km", OPENAI_DIRECT, yield* now())).toMatchObject({ ok: false, limit: { model: "openai/gpt-4o-mini" } })
      expect(limits.check("km", OPENAI_VIA_ALIAS, yield* now())).toEqual({ ok: true })
      yield* limits.record("km", OPENAI_VIA_ALIAS, 99)
      expect(limits.check("km", OPENAI_VIA_ALIAS, yield* now())).toEqual({ ok: true })
      yield* limits.record("km", OPENAI_VIA_ALIAS, 1)
      expect(limits.check("km", OPENAI_VIA_ALIAS, yield* now())).toMatchObject({
        ok: false,
        limit: { id: byRequested.id, usedTokens: 100 }
      })
      expect(limits.check("km", ANTHROPIC, yield* now())).toEqual({ ok: true })

      // no key, or a key without limits
      expect(limits.check(null, ANTHROPIC, yield* now())).toEqual({ ok: true })
      expect(limits.check("nobody", ANTHROPIC, yield* now())).toEqual({ ok: true })

      expect((yield* limits.list("km")).map((l) => [l.model, l.usedTokens])).toEqual([
        ["fast", 100],
        ["openai/gpt-4o-mini", 50]
      ])
      expect(yield* limits.list()).toHaveLength(4)
    }).pipe(Effect.provide(limitsAt(tempDir())))
  )
})

describe("token limits: windows", () => {
  it.effect("used tokens reset when the window rolls; retryAfterMs is the time to the window end", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(t("2025-03-12T10:30:00Z"))
      yield* addKey("k1")
      const limits = yield* TokenLimits
      const hourly = yield* limits.create({ apiKeyId: "k1", scope: "global", maxTokens: 1000, window: "hour" })
      expect(hourly).toMatchObject({
        usedTokens: 0,
        windowStart: "2025-03-12T10:00:00.000Z",
        resetsAt: "2025-03-12T11:00:00.000Z",
        provider: null,
        model: null,
        createdAt: "2025-03-12T10:30:00.000Z"
      })
      expect(hourly.id).toMatch(/^tl_[0-9a-f]{12}$/)
      const weekly = yield* limits.create({ apiKeyId: "k1", scope: "provider", provider: "openai", maxTokens: 5000, window: "week" })
      expect(weekly).toMatchObject({ windowStart: "2025-03-10T00:00:00.000Z", resetsAt: "2025-03-17T00:00:00.000Z" })

      yield* limits.record("k1", OPENAI_DIRECT, 999)
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toEqual({ ok: true })
      yield* limits.record("k1", OPENAI_DIRECT, 1)
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toMatchObject({
        ok: false,
        limit: { id: hourly.id },
        retryAfterMs: 30 * 60_000
      })
      yield* TestClock.adjust("29 minutes")
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toMatchObject({ ok: false, retryAfterMs: 60_000 })
      yield* TestClock.adjust("1 minute")
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toEqual({ ok: true })
      const [h, w] = yield* limits.list("k1")
      expect(h).toMatchObject({ usedTokens: 0, windowStart: "2025-03-12T11:00:00.000Z", resetsAt: "2025-03-12T12:00:00.000Z" })
      expect(w).toMatchObject({ usedTokens: 1000 })

      // The weekly limit fills up: refused until Monday 00:00 even after the hourly window rolls again.
      yield* limits.record("k1", OPENAI_DIRECT, 4000)
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toMatchObject({
        ok: false,
        limit: { id: weekly.id, usedTokens: 5000 },
        retryAfterMs: t("2025-03-17T00:00:00Z") - t("2025-03-12T11:00:00Z")
      })
      // Both exceeded: the one that resets last is reported.
      yield* limits.record("k1", OPENAI_DIRECT, 1000)
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toMatchObject({ ok: false, limit: { id: weekly.id } })
      yield* TestClock.setTime(t("2025-03-17T00:00:00Z"))
      expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toEqual({ ok: true })

      const removed = yield* limits.remove(hourly.id)
      expect(removed.id).toBe(hourly.id)
      expect(yield* limits.list("k1")).toHaveLength(1)
      expect(yield* Effect.flip(limits.remove(hourly.id))).toMatchObject({
        _tag: "NotFound",
        message: `no token limit with id '${hourly.id}'`
      })
    }).pipe(Effect.provide(limitsAt(tempDir())))
  )

  it.scoped("reaching a limit publishes quota.exceeded once per window", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(t("2025-03-12T10:30:00Z"))
      yield* addKey("k1")
      const limits = yield* TokenLimits
      const q = yield* (yield* EventBus).subscribe
      const l = yield* limits.create({ apiKeyId: "k1", scope: "model", model: "fast", maxTokens: 10, window: "minute" })
      yield* limits.record("k1", OPENAI_VIA_ALIAS, 10)
      yield* limits.record("k1", OPENAI_VIA_ALIAS, 10)
      expect([...(yield* Queue.takeAll(q))].map((e) => ({ event: e.event, ...e.data }))).toEqual([
        {
          event: "quota.exceeded",
          source: "token_limit",
          api_key_id: "k1",
          kind: "exceeded",
          limit_id: l.id,
          scope: "model",
          provider: null,
          model: "fast",
          window: "minute",
          used_tokens: 10,
          max_tokens: 10,
          window_start: "2025-03-12T10:30:00.000Z",
          resets_at: "2025-03-12T10:31:00.000Z"
        }
      ])
      yield* TestClock.adjust("1 minute")
      yield* limits.record("k1", OPENAI_VIA_ALIAS, 10)
      expect((yield* Queue.takeAll(q)).length).toBe(1)
    }).pipe(Effect.provide(limitsAt(tempDir())))
  )
})

describe("token limits: validation", () => {
  it.effect("messages", () =>
    Effect.gen(function* () {
      yield* addKey("k1")
      expect(yield* failure({ apiKeyId: "k1", scope: "provider", maxTokens: 100 })).toBe(
        "BadRequest: scope provider needs provider (a provider id)"
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "provider", provider: "openai", model: "gpt-4o", maxTokens: 100 })).toBe(
        "BadRequest: scope provider takes provider only, not model (use scope model)"
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "global", provider: "openai", maxTokens: 100 })).toBe(
        "BadRequest: scope global takes neither provider nor model"
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "model", maxTokens: 100 })).toBe(
        "BadRequest: scope model needs model (the requested model id, <provider>/<model>, or a bare model id)"
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "model", model: "gpt-4o", provider: "openai", maxTokens: 100 })).toBe(
        "BadRequest: scope model takes model only, not provider (write the model as <provider>/<model>)"
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "team", maxTokens: 100 })).toBe(
        'BadRequest: scope: scope must be one of: global, provider, model (got "team")'
      )
      for (const maxTokens of [0, -5, 1.5]) {
        expect(yield* failure({ apiKeyId: "k1", scope: "global", maxTokens })).toBe(
          "BadRequest: maxTokens: maxTokens must be a positive integer"
        )
      }
      expect(yield* failure({ apiKeyId: "k1", scope: "global", maxTokens: "100" })).toMatch(/^BadRequest: maxTokens: expected number/)
      expect(yield* failure({ apiKeyId: "k1", scope: "global" })).toBe("BadRequest: maxTokens: is missing")
      expect(yield* failure({ apiKeyId: "k1", scope: "global", maxTokens: 1, window: "year" })).toBe(
        'BadRequest: window: window must be one of: minute, hour, day, week, month (got "year")'
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "provider", provider: "nope", maxTokens: 1 })).toMatch(
        /^BadRequest: provider: provider 'nope' is not a known provider id; known: openai, /
      )
      expect(yield* failure({ apiKeyId: "k1", scope: "global", maxTokens: 1, limit: 2 })).toMatch(/^BadRequest: limit: is unexpected/)
      expect(yield* failure({ apiKeyId: "nope", scope: "global", maxTokens: 1 })).toBe("NotFound: no API key with id 'nope'")
      expect(yield* Effect.flatMap(TokenLimits, (l) => l.list())).toEqual([])
    }).pipe(Effect.provide(limitsAt(tempDir())))
  )
})

describe("token limits: reload", () => {
  it.effect("a fresh layer loads used tokens per limit from usage rows since the window start", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* TestClock.setTime(t("2025-03-12T10:30:00Z"))
      const ids = yield* Effect.gen(function* () {
        yield* addKey("k1")
        yield* addKey("k2")
        const limits = yield* TokenLimits
        const global = yield* limits.create({ apiKeyId: "k1", scope: "global", maxTokens: 1_000_000 })
        const provider = yield* limits.create({ apiKeyId: "k1", scope: "provider", provider: "anthropic", maxTokens: 1_000_000 })
        const requested = yield* limits.create({ apiKeyId: "k1", scope: "model", model: "fast", maxTokens: 1_000_000 })
        const full = yield* limits.create({ apiKeyId: "k1", scope: "model", model: "openai/gpt-4o", maxTokens: 1_000_000 })
        const bare = yield* limits.create({ apiKeyId: "k1", scope: "model", model: "gpt-4o", maxTokens: 1_000_000 })
        const hourly = yield* limits.create({ apiKeyId: "k1", scope: "global", maxTokens: 150, window: "hour" })
        const today = (h: number) => t(`2025-03-12T${String(h).padStart(2, "0")}:00:00Z`)
        yield* addUsage({ key: "k1", ts: today(1), provider: "openai", model: "gpt-4o", requested: "fast", tin: 100, tout: 10 })
        yield* addUsage({ key: "k1", ts: today(2), provider: "openai", model: "gpt-4o", requested: "openai/gpt-4o", tin: 200, tout: 20 })
        yield* addUsage({
          key: "k1",
          ts: today(3),
          provider: "anthropic",
          model: "claude-haiku-4-5",
          requested: "claude-haiku-4-5",
          tin: 300,
          tout: null
        })
        yield* addUsage({
          key: "k1",
          ts: today(10),
          provider: "openrouter",
          model: "openai/gpt-4o",
          requested: "openrouter/openai/gpt-4o",
          tin: 40,
          tout: 4
        })
        yield* addUsage({ key: "k1", ts: today(10) + 60_000, provider: "openai", model: "gpt-4o", requested: null, tin: null, tout: null })
        yield* addUsage({
          key: "k1",
          ts: t("2025-03-11T23:59:59Z"),
          provider: "openai",
          model: "gpt-4o",
          requested: "fast",
          tin: 5000,
          tout: 0
        }) // yesterday
        yield* addUsage({ key: "k2", ts: today(4), provider: "openai", model: "gpt-4o", requested: "fast", tin: 7000, tout: 0 }) // another key
        return { global: global.id, provider: provider.id, requested: requested.id, full: full.id, bare: bare.id, hourly: hourly.id }
      }).pipe(Effect.provide(limitsAt(dir)))

      yield* Effect.gen(function* () {
        const limits = yield* TokenLimits
        const used = new Map((yield* limits.list("k1")).map((l) => [l.id, l.usedTokens]))
        expect(used.get(ids.global)).toBe(110 + 220 + 300 + 44)
        expect(used.get(ids.provider)).toBe(300)
        expect(used.get(ids.requested)).toBe(110)
        // "openai/gpt-4o": requested as written, <provider>/<model> of a target, or the bare id at an aggregator
        expect(used.get(ids.full)).toBe(220 + 110 + 44)
        expect(used.get(ids.bare)).toBe(110 + 220)
        expect(used.get(ids.hourly)).toBe(44)
        expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toEqual({ ok: true })
        yield* limits.record("k1", OPENAI_DIRECT, 106)
        expect(limits.check("k1", OPENAI_DIRECT, yield* Clock.currentTimeMillis)).toMatchObject({
          ok: false,
          limit: { id: ids.hourly, usedTokens: 150 },
          retryAfterMs: 30 * 60_000
        })
      }).pipe(Effect.provide(limitsAt(dir)))
    })
  )
})

describe("token limits: refresh", () => {
  it.effect("picks up limits another process created or removed (StoreVersion)", () =>
    Effect.gen(function* () {
      const dir = tempDir()
      yield* TestClock.setTime(t("2025-03-12T10:30:00Z"))
      const withVersion = TokenLimits.layer.pipe(
        Layer.provideMerge(StoreVersion.layer(0)),
        Layer.provideMerge(dbAt(dir)),
        Layer.provide(quiet)
      )
      yield* Effect.gen(function* () {
        yield* addKey("k1")
        yield* addUsage({
          key: "k1",
          ts: t("2025-03-12T10:00:00Z"),
          provider: "openai",
          model: "gpt-4o",
          requested: "fast",
          tin: 60,
          tout: 40
        })
        const server = yield* TokenLimits
        const cli = Effect.provide(limitsAt(dir))
        const created = yield* Effect.flatMap(TokenLimits, (l) => l.create({ apiKeyId: "k1", scope: "global", maxTokens: 100 })).pipe(cli)
        expect(server.check("k1", ANTHROPIC, yield* Clock.currentTimeMillis)).toEqual({ ok: true })
        yield* server.refresh
        expect(server.check("k1", ANTHROPIC, yield* Clock.currentTimeMillis)).toMatchObject({
          ok: false,
          limit: { id: created.id, usedTokens: 100 }
        })
        yield* Effect.flatMap(TokenLimits, (l) => l.remove(created.id)).pipe(cli)
        yield* server.refresh
        expect(yield* server.list()).toEqual([])
      }).pipe(Effect.provide(withVersion))
    })
  )
})
