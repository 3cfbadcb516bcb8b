import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as TestClock from "effect/TestClock"
import { AccountingConfig } from "../src/services/accounting/AccountingConfig.js"
import { Budgets } from "../src/services/accounting/Budgets.js"
import { Idempotency } from "../src/services/accounting/Idempotency.js"
import { ResponseCache } from "../src/services/accounting/ResponseCache.js"
import { TokenLimits } from "../src/services/accounting/TokenLimits.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FREE_FAILURES, type LoginThrottle, makeLoginThrottle, type ThrottleChange } from "../src/services/auth/loginThrottle.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { EventBus } from "../src/platform/events/EventBus.js"
import { openAiResponses } from "../src/upstream/formats/openai-responses.js"
import { ResponseStore } from "../src/inference/ResponseStore.js"
import { CircuitBreakers } from "../src/services/resilience/CircuitBreakers.js"
import { classify } from "../src/services/resilience/classify.js"
import { Cooldowns } from "../src/services/resilience/Cooldowns.js"
import { type LockoutRef, Lockouts } from "../src/services/resilience/Lockouts.js"
import { ResilienceConfig } from "../src/services/resilience/ResilienceConfig.js"
import type { ConnectionRef, FailureInfo, ProviderRef } from "../src/services/resilience/types.js"
import { RoutingMemory } from "../src/services/routing/RoutingMemory.js"
import { makeMemoryCluster, type MemoryCluster, SharedState } from "../src/platform/state/SharedState.js"
import { BatchWriter } from "../src/platform/store/BatchWriter.js"
import * as Db from "../src/platform/store/Db.js"
import { StoreVersion } from "../src/platform/store/StoreVersion.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * The shared-state seam (docs/ARCHITECTURE.md, "Seam 4"): two instances of each service, each
 * built over its own node of one in-memory cluster (the stand-in for Redis), see each other's
 * changes; a node never receives its own; with the one-process layer nothing crosses.
 */

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const dbAt = (dataDir: string) => Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir })), Layer.provide(quiet))

/** Builds `layer` (in the test's scope) and answers the service it holds: one more "process". */
const instance = <I, S, E, R>(tag: Context.Tag<I, S>, layer: Layer.Layer<I, E, R>) => Effect.map(Layer.build(layer), Context.get(tag))

const node = (cluster: MemoryCluster) => SharedState.layerCluster(cluster)

const expectHealthy = (cluster: MemoryCluster) => expect(cluster.errors).toEqual([])

describe("SharedState", () => {
  it("the one-process layer's channels are not shared and never deliver", () =>
    Effect.runSync(
      Effect.gen(function* () {
        const shared = yield* SharedState
        const got: Array<unknown> = []
        const a = shared.channel<string>("t", (c) => got.push(c))
        const b = shared.channel<string>("t", (c) => got.push(c))
        expect(a.shared).toBe(false)
        a.publish("x")
        b.publish("y")
        expect(got).toEqual([])
      }).pipe(Effect.provide(SharedState.layer))
    ))

  it("a cluster delivers a change to every other node on the topic, encoded and decoded, never back to its sender", () => {
    const cluster = makeMemoryCluster()
    const [a, b, c] = [cluster.join(), cluster.join(), cluster.join()]
    const got: Array<string> = []
    const codec = { encode: (n: number) => `n${n}`, decode: (s: string) => Number(s.slice(1)) }
    const ca = a.channel<number>("t", (n) => got.push(`a:${n}`), codec)
    b.channel<number>("t", (n) => got.push(`b:${n}`), codec)
    c.channel<number>("other", (n) => got.push(`c:${n}`), codec)
    expect(ca.shared).toBe(true)
    ca.publish(7)
    expect(got).toEqual(["b:7"])
    expect(cluster.published.get("t")).toBe(1)
    expectHealthy(cluster)
  })
})

describe("two gateway processes over one cluster", () => {
  const OPENAI: ProviderRef = { id: "openai", authClass: "apikey", origin: "https://api.openai.com" }

  it.scoped("a breaker opened by one process is open in the other; a reset in either closes both", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const breakers = (c: MemoryCluster) =>
        CircuitBreakers.layer.pipe(
          Layer.provide(
            Layer.mergeAll(
              ResilienceConfig.layerTest({ providerBreaker: { apikey: { degradationThreshold: 2, failureThreshold: 3 } } }),
              EventBus.layer,
              node(c)
            )
          )
        )
      const a = yield* instance(CircuitBreakers, breakers(cluster))
      const b = yield* instance(CircuitBreakers, breakers(cluster))
      const now = yield* Clock.currentTimeMillis
      yield* a.onFailure(OPENAI, 503)
      yield* a.onFailure(OPENAI, 503)
      expect(b.stateAt(OPENAI, now)).toBe("DEGRADED")
      yield* a.onFailure(OPENAI, 503)
      expect(b.stateAt(OPENAI, now)).toBe("OPEN")
      expect(b.unsafeAcquire(OPENAI, now)).toMatchObject({ allowed: false })
      // Each process counted each failure once (its own are not delivered back to it).
      expect((yield* a.list)[0]).toMatchObject({ consecutiveFailures: 3, state: "OPEN" })
      expect((yield* b.list)[0]).toMatchObject({ consecutiveFailures: 3, state: "OPEN" })
      expect(yield* b.reset("openai")).toBe(1)
      expect(a.stateAt(OPENAI, now)).toBe("CLOSED")
      expect(yield* a.list).toEqual([])
      expectHealthy(cluster)
    })
  )

  it.scoped("failures seen by two processes add up to one count", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const breakers = CircuitBreakers.layer.pipe(
        Layer.provide(
          Layer.mergeAll(
            ResilienceConfig.layerTest({ providerBreaker: { apikey: { degradationThreshold: 2, failureThreshold: 4 } } }),
            EventBus.layer,
            node(cluster)
          )
        )
      )
      const a = yield* instance(CircuitBreakers, breakers)
      const b = yield* instance(CircuitBreakers, breakers)
      const now = yield* Clock.currentTimeMillis
      yield* a.onFailure(OPENAI, 500)
      yield* b.onFailure(OPENAI, 500)
      yield* a.onFailure(OPENAI, 500)
      expect(a.stateAt(OPENAI, now)).toBe("DEGRADED")
      yield* b.onFailure(OPENAI, 500)
      expect(a.stateAt(OPENAI, now)).toBe("OPEN")
      expect(b.stateAt(OPENAI, now)).toBe("OPEN")
      // Once HALF_OPEN, the probe's success in one process closes the breaker in both.
      yield* TestClock.adjust("2 minutes")
      const later = yield* Clock.currentTimeMillis
      expect(a.stateAt(OPENAI, later)).toBe("HALF_OPEN")
      expect(b.unsafeAcquire(OPENAI, later)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
      b.unsafeOnSuccess(OPENAI, later)
      expect(a.stateAt(OPENAI, later)).toBe("CLOSED")
      expectHealthy(cluster)
    })
  )

  it.scoped("the half-open probe slot is one for all processes: taken in one, the others wait; freed or decided, they may go", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const breakers = CircuitBreakers.layer.pipe(
        Layer.provide(
          Layer.mergeAll(
            ResilienceConfig.layerTest({
              providerBreaker: { apikey: { degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 60_000 } }
            }),
            EventBus.layer,
            node(cluster)
          )
        )
      )
      const a = yield* instance(CircuitBreakers, breakers)
      const b = yield* instance(CircuitBreakers, breakers)
      yield* a.onFailure(OPENAI, 503)
      yield* a.onFailure(OPENAI, 503)
      yield* TestClock.adjust("2 minutes")
      const later = yield* Clock.currentTimeMillis
      expect(a.unsafeAcquire(OPENAI, later)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
      // b was told: it sends no probe of its own while a's is out.
      expect(b.unsafeAcquire(OPENAI, later)).toEqual({ allowed: false, probe: false, retryAfterMs: null })
      expect((yield* b.list)[0]).toMatchObject({ state: "HALF_OPEN", probing: true })
      // a's client left: the slot is free again, in b too.
      a.unsafeReleaseProbe(OPENAI)
      expect((yield* b.list)[0]).toMatchObject({ state: "HALF_OPEN", probing: false })
      expect(b.unsafeAcquire(OPENAI, later)).toEqual({ allowed: true, probe: true, retryAfterMs: null })
      expect(a.unsafeAcquire(OPENAI, later)).toEqual({ allowed: false, probe: false, retryAfterMs: null })
      // b's probe fails: open again for a full reset timeout, in both.
      yield* b.onFailure(OPENAI, 503)
      expect(a.unsafeAcquire(OPENAI, later)).toMatchObject({ allowed: false, retryAfterMs: 60_000 })
      expectHealthy(cluster)
    })
  )

  it("failed logins counted by one process hold in the other; a success in either forgets them", () => {
    const cluster = makeMemoryCluster()
    const throttles = [cluster.join(), cluster.join()].map((shared) => {
      const holder: { t?: LoginThrottle } = {}
      const channel = shared.channel<ThrottleChange>("login-throttle", (c) => holder.t!.apply(c))
      holder.t = makeLoginThrottle({ onChange: (c) => channel.publish(c) })
      return holder.t
    })
    const [a, b] = throttles as [LoginThrottle, LoginThrottle]
    const now = 1_000_000
    // Guesses spread over both processes: the free ones are shared, not given twice.
    for (let i = 0; i < FREE_FAILURES; i++) expect((i % 2 === 0 ? a : b).admit("203.0.113.9", "admin", now + i)).toBeUndefined()
    expect(a.admit("203.0.113.9", "admin", now + 10)).toBe(2)
    expect(b.admit("203.0.113.9", "admin", now + 10)).toBe(2)
    // Another address is not slowed down.
    expect(b.admit("198.51.100.1", "admin", now + 10)).toBeUndefined()
    b.succeeded("203.0.113.9", "admin")
    expect(a.tracks("203.0.113.9", "admin")).toBe(false)
    expect(a.admit("203.0.113.9", "admin", now + 20)).toBeUndefined()
    expectHealthy(cluster)
  })

  const KEY: ConnectionRef = { id: "c-key", name: "openai-main", provider: { id: "openai", authClass: "apikey" } }
  const f429: FailureInfo = {
    status: 429,
    kind: "http",
    message: "rate limited",
    code: "rate_limit_error",
    headers: { "retry-after": "30" }
  }

  it.scoped("a cooldown started by one process holds the connection in the other; a success in either ends it", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      // Separate databases: what the second process knows came over the channel, not from a row.
      const cooldowns = (c: MemoryCluster) =>
        Cooldowns.layer.pipe(Layer.provide(Layer.mergeAll(ResilienceConfig.layerTest(), dbAt(tempDir()), node(c), quiet)))
      const a = yield* instance(Cooldowns, cooldowns(cluster))
      const b = yield* instance(Cooldowns, cooldowns(cluster))
      const now = yield* Clock.currentTimeMillis
      yield* a.onFailure(KEY, classify(f429, now), f429)
      expect(b.availability(KEY.id, now)).toEqual({ ok: false, state: "cooldown", until: now + 30_000 })
      expect(b.healthAt(KEY.id, now)).toMatchObject({ lastErrorType: "rate_limited", backoffLevel: 1 })
      b.unsafeOnSuccess(KEY.id)
      expect(a.availability(KEY.id, now)).toEqual({ ok: true, state: "available", until: null })
      // A terminal state and an operator's reset of everything travel too.
      const f401: FailureInfo = { status: 401, kind: "http", message: "invalid api key" }
      yield* a.onFailure(KEY, classify(f401, now), f401)
      expect(b.availability(KEY.id, now)).toMatchObject({ ok: false, state: "expired" })
      expect(yield* b.reset()).toBe(1)
      expect(a.availability(KEY.id, now).ok).toBe(true)
      expectHealthy(cluster)
    })
  )

  it.scoped("a model locked out by one process is locked in the other, with the same escalation; a clear in either lifts it", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const GPT: LockoutRef = { provider: "openai", connectionId: "c1", connectionName: "openai-main", model: "gpt-4o" }
      const lockouts = (c: MemoryCluster) =>
        Lockouts.layer.pipe(Layer.provide(Layer.merge(ResilienceConfig.layerTest({ modelLockout: { enabled: true } }), node(c))))
      const a = yield* instance(Lockouts, lockouts(cluster))
      const b = yield* instance(Lockouts, lockouts(cluster))
      const now = yield* Clock.currentTimeMillis
      yield* a.onFailure(GPT, 404, "not_found")
      expect(b.lockedAt("openai", "c1", "gpt-4o", now)).toEqual({ locked: true, until: now + 120_000 })
      // The second failure, seen by the other process, escalates from the first.
      const second = yield* b.onFailure(GPT, 404, "not_found")
      expect(second).toMatchObject({ failures: 2, remainingMs: 240_000 })
      expect((yield* a.list)[0]).toMatchObject({ failures: 2, remainingMs: 240_000 })
      // A success halves the count everywhere.
      a.unsafeOnSuccess(GPT)
      expect((yield* b.list)[0]).toMatchObject({ failures: 1 })
      expect(yield* b.clear({ provider: "openai", model: "gpt-4o" })).toBe(1)
      expect(a.lockedAt("openai", "c1", "gpt-4o", now).locked).toBe(false)
      expectHealthy(cluster)
    })
  )

  const addKey = (id: string) =>
    Effect.flatMap(
      SqlClient.SqlClient,
      (sql) =>
        sql`INSERT INTO api_keys (id, name, key_hash, masked, scopes, created_at) VALUES (${id}, ${id}, ${"hash-" + id}, 'gwk_…', '["inference"]', 0)`
    ).pipe(Effect.orDie)

  it.scoped("spend recorded by one process counts against the budget in the other (one database, as in a scale-out)", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const dir = tempDir()
      const budgets = (c: MemoryCluster) =>
        Budgets.layer.pipe(
          Layer.provideMerge(Layer.mergeAll(EventBus.layer, StoreVersion.layer(0), node(c))),
          Layer.provideMerge(dbAt(dir)),
          Layer.provide(quiet)
        )
      const aCtx = yield* Layer.build(budgets(cluster))
      const a = Context.get(aCtx, Budgets)
      yield* addKey("k1").pipe(Effect.provide(aCtx))
      yield* a.set({ apiKeyId: "k1", dailyLimitUsd: 1 })
      const b = Context.get(yield* Layer.build(budgets(cluster)), Budgets)
      const now = yield* Clock.currentTimeMillis
      expect(b.check("k1", now)).toEqual({ ok: true })
      a.unsafeRecord("k1", 0.6, now)
      expect((yield* b.status("k1"))[0]!.spentUsd).toBeCloseTo(0.6)
      expect(b.check("k1", now)).toEqual({ ok: true })
      b.unsafeRecord("k1", 0.5, now)
      expect(a.check("k1", now)).toMatchObject({ ok: false, window: "daily", limitUsd: 1 })
      expect(b.check("k1", now)).toMatchObject({ ok: false, window: "daily", limitUsd: 1 })
      expect((yield* a.status("k1"))[0]!.spentUsd).toBeCloseTo(1.1)
      expectHealthy(cluster)
    })
  )

  it.scoped("tokens used through one process count against a token limit in the other", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const dir = tempDir()
      const limits = (c: MemoryCluster) =>
        TokenLimits.layer.pipe(
          Layer.provideMerge(Layer.mergeAll(EventBus.layer, StoreVersion.layer(0), node(c))),
          Layer.provideMerge(dbAt(dir)),
          Layer.provide(quiet)
        )
      const aCtx = yield* Layer.build(limits(cluster))
      const a = Context.get(aCtx, TokenLimits)
      yield* addKey("k1").pipe(Effect.provide(aCtx))
      yield* a.create({ apiKeyId: "k1", scope: "model", model: "openai/gpt-4o", maxTokens: 100, window: "day" })
      const b = Context.get(yield* Layer.build(limits(cluster)), TokenLimits)
      const target = { provider: "openai", model: "gpt-4o", requestedModel: "openai/gpt-4o" }
      const now = yield* Clock.currentTimeMillis
      expect(b.check("k1", target, now)).toEqual({ ok: true })
      a.unsafeRecord("k1", target, 60, now)
      expect((yield* b.list("k1"))[0]!.usedTokens).toBe(60)
      b.unsafeRecord("k1", target, 40, now)
      expect(a.check("k1", target, now)).toMatchObject({ ok: false, limit: { usedTokens: 100 } })
      expectHealthy(cluster)
    })
  )

  it.scoped("an answer produced by one process is the idempotent answer in the other, for the window", () =>
    Effect.gen(function* () {
      const cluster = makeMemoryCluster()
      const a = yield* instance(Idempotency, Idempotency.layer.pipe(Layer.provide(node(cluster))))
      const b = yield* instance(Idempotency, Idempotency.layer.pipe(Layer.provide(node(cluster))))
      let runs = 0
      const produce = (text: string) =>
        Effect.sync(() => {
          runs++
          return { status: 200, headers: { "content-type": "application/json" }, body: Buffer.from(text) }
        })
      const first = yield* a.run("key-1", produce("first"))
      expect(first.duplicate).toBe(false)
      const second = yield* b.run("key-1", produce("second"))
      expect(second.duplicate).toBe(true)
      expect(second.response.body.toString()).toBe("first")
      expect(second.response.headers).toEqual({ "content-type": "application/json" })
      expect(runs).toBe(1)
      expect((yield* b.stats).activeKeys).toBe(1)
      // After the window the key is free in both.
      yield* TestClock.adjust("5 seconds")
      expect((yield* b.run("key-1", produce("third"))).duplicate).toBe(false)
      expect((yield* a.run("key-1", produce("fourth"))).response.body.toString()).toBe("third")
      expect(runs).toBe(2)
      // An operator's clear in one process clears the other.
      expect(yield* a.clear).toBe(1)
      expect((yield* b.stats).activeKeys).toBe(0)
      expectHealthy(cluster)
    })
  )

  it("a response remembered by one process resolves previous_response_id in the other; a WebSocket's own store stays its own", async () => {
    const cluster = makeMemoryCluster()
    const a = ResponseStore.make({}, cluster.join())
    const b = ResponseStore.make({}, cluster.join())
    const socket = ResponseStore.make({ maxEntries: 100 })
    const input = [{ type: "message", role: "user", content: "hi" }]
    const output = [{ type: "message", role: "assistant", content: [{ type: "output_text", text: "hello" }] }]
    a.remember("resp_1", input, output, { connectionId: "c1", stored: false })
    socket.remember("resp_ws", input, output)
    const expanded = await Effect.runPromise(
      b.expand({ model: "m", previous_response_id: "resp_1", input: "and then?" }, openAiResponses, true)
    )
    expect(expanded.expanded).toBe(true)
    expect(expanded.body).toEqual({ model: "m", input: [...input, ...output, { type: "message", role: "user", content: "and then?" }] })
    expect(b.get("resp_1")?.origin).toEqual({ connectionId: "c1", stored: false })
    expect(a.get("resp_ws")).toBeUndefined()
    expect(b.get("resp_ws")).toBeUndefined()
    expectHealthy(cluster)
  })

  it("a session stuck to a target in one process sticks there in the other; traffic counts stay per process", () => {
    const cluster = makeMemoryCluster()
    const a = RoutingMemory.make(cluster.join())
    const b = RoutingMemory.make(cluster.join())
    const now = Date.now()
    a.setSticky("team", "s1", "openai/gpt-4o", now)
    a.setRelayLeg("relay", "s1", "anthropic/claude")
    expect(b.sticky("team", "s1", now)).toBe("openai/gpt-4o")
    expect(b.relayLeg("relay", "s1")).toBe("anthropic/claude")
    b.setSticky("team", "s1", "groq/llama", now + 1)
    expect(a.sticky("team", "s1", now + 1)).toBe("groq/llama")
    a.observe("openai/gpt-4o", 120, true, now)
    expect(b.stats("openai/gpt-4o", now).samples).toBe(0)
    expectHealthy(cluster)
  })

  it.scopedLive(
    "an answer cached by one process is a hit in the other (exact and by similarity); a clear in either empties both memories",
    () =>
      Effect.gen(function* () {
        const cluster = makeMemoryCluster()
        // Separate databases: the other process's hit can only come from the channel.
        const cache = (c: MemoryCluster) =>
          ResponseCache.layer.pipe(
            Layer.provide(Layer.mergeAll(AccountingConfig.layerTest({ cacheSimilarity: 0.9 }), BatchWriter.layer, node(c))),
            Layer.provide(dbAt(tempDir())),
            Layer.provide(quiet)
          )
        const a = yield* instance(ResponseCache, cache(cluster))
        const b = yield* instance(ResponseCache, cache(cluster))
        const embedding = Float32Array.from([1, 0, 0.5])
        yield* a.put({
          key: "k1",
          model: "m",
          format: "openai-chat",
          body: '{"answer":1}',
          usage: { inputTokens: 3 },
          costUsd: 0.01,
          provider: "openai",
          params: "p",
          embedding
        })
        const exact = yield* b.get("k1")
        expect(exact).toMatchObject({ key: "k1", body: '{"answer":1}', match: "exact", costUsd: 0.01 })
        const similar = yield* b.get("other", {
          format: "openai-chat",
          model: "m",
          params: "p",
          embedding: Float32Array.from([1, 0, 0.45])
        })
        expect(similar).toMatchObject({ key: "k1", match: "similar" })
        expect(similar!.embedding).toBeInstanceOf(Float32Array)
        yield* a.clear
        expect((yield* b.stats).memorySize).toBe(0)
        expect(yield* b.get("k1")).toBeUndefined()
        expectHealthy(cluster)
      })
  )
})

describe("two whole gateways on one database, linked by one cluster", () => {
  const ADMIN = "gwk_shared_state_admin_0123456789abcdef"
  const admin = { authorization: `Bearer ${ADMIN}` }
  const cluster = makeMemoryCluster()
  let up: FakeUpstream
  let a: TestGateway
  let b: TestGateway

  beforeAll(async () => {
    up = await FakeUpstream.start()
    a = await startGateway({ sharedState: SharedState.layerCluster(cluster) })
    await a.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    const added = await call(`${a.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "ca", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
      headers: admin
    })
    expect(added.status).toBe(201)
    // The second process starts on the same database file, as a second replica would on PostgreSQL.
    b = await startGateway({ dataDir: a.dataDir, sharedState: SharedState.layerCluster(cluster) })
  })
  afterAll(async () => {
    await b?.close()
    await a?.close()
    await up?.close()
  })

  const chat = (gw: TestGateway, headers: Record<string, string> = {}, content = "hi") =>
    call(`${gw.url}/v1/chat/completions`, { body: { model: "ca/m1", messages: [{ role: "user", content }] }, headers })

  it("a rate limit met through one gateway cools the connection down in the other: it does not call the upstream", async () => {
    up.requests.length = 0
    up.always({ status: 429, headers: { "retry-after": "30" } })
    try {
      expect((await chat(a)).status).toBe(429)
      const sent = up.requests.length
      expect(sent).toBeGreaterThan(0)
      const refused = await chat(b)
      expect(refused.status).toBe(429)
      expect(up.requests.length).toBe(sent)
      const health = await call(`${b.url}/api/resilience`, { headers: admin })
      expect(health.body.connections.find((c: any) => c.name === "ca")).toMatchObject({ state: "cooldown" })
    } finally {
      await a.resetResilience()
      up.always({ content: "ok" })
    }
    // The reset made through the first gateway reached the second.
    expect((await chat(b)).status).toBe(200)
    expect(cluster.errors).toEqual([])
  })

  it("a request repeated with the same Idempotency-Key at the other gateway gets the first answer; the upstream is called once", async () => {
    up.requests.length = 0
    up.always({ content: "the one answer" })
    const first = await chat(a, { "idempotency-key": "same-1" })
    expect(first.status).toBe(200)
    const again = await chat(b, { "idempotency-key": "same-1" })
    expect(again.status).toBe(200)
    expect(again.headers.get("x-gateway-idempotent")).toBe("true")
    expect(again.body.choices[0].message.content).toBe("the one answer")
    expect(again.body.id).toBe(first.body.id)
    expect(up.requests.length).toBe(1)
  })

  it("previous_response_id of a response one gateway answered (store: false) is resolved by the other", async () => {
    up.requests.length = 0
    up.always({ content: "Nice to meet you, Ada." })
    const first = await call(`${a.url}/v1/responses`, { body: { model: "ca/m1", input: "My name is Ada.", store: false } })
    expect(first.status).toBe(200)
    up.always({ content: "Your name is Ada." })
    const next = await call(`${b.url}/v1/responses`, {
      body: { model: "ca/m1", previous_response_id: first.body.id, input: "What is my name?", store: false }
    })
    expect(next.status).toBe(200)
    // The upstream (which stores nothing) got the whole conversation from the second gateway.
    const messages = up.requests[1]!.body.messages.map((m: any) => [
      m.role,
      typeof m.content === "string" ? m.content : m.content.map((p: any) => p.text).join("")
    ])
    expect(messages).toEqual([
      ["user", "My name is Ada."],
      ["assistant", "Nice to meet you, Ada."],
      ["user", "What is my name?"]
    ])
  })
})
