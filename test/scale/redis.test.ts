import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import * as net from "node:net"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { EventBus } from "../../src/platform/events/EventBus.js"
import * as Db from "../../src/platform/store/Db.js"
import { CircuitBreakers } from "../../src/services/resilience/CircuitBreakers.js"
import { classify } from "../../src/services/resilience/classify.js"
import { Cooldowns } from "../../src/services/resilience/Cooldowns.js"
import { type LockoutRef, Lockouts } from "../../src/services/resilience/Lockouts.js"
import { ResilienceConfig } from "../../src/services/resilience/ResilienceConfig.js"
import type { ConnectionRef, FailureInfo, ProviderRef } from "../../src/services/resilience/types.js"
import { RoutingMemory } from "../../src/services/routing/RoutingMemory.js"
import { AppConfig } from "../../src/platform/config/AppConfig.js"
import { layerRedis } from "../../src/platform/state/redis.js"
import { SharedState, type SharedStateShape } from "../../src/platform/state/SharedState.js"
import { queryDb } from "../support/db.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { Receiver } from "../support/webhookReceiver.js"
import { call, startGateway, tempDir, type TestGateway } from "../support/gateway.js"

/**
 * SharedState on a real Redis (docs/scale-out.md, "Redis"): the transport itself, then two whole
 * gateways on one SQLite file linked by Redis. Each run uses its own key and channel prefix (and
 * database 3 when the URL names none), so runs and other users of the server do not meet.
 */

const REDIS = process.env.GATEWAY_TEST_REDIS_URL
if (!REDIS)
  throw new Error("GATEWAY_TEST_REDIS_URL is not set: the Redis scale-out tests need a Redis server (e.g. redis://127.0.0.1:56379)")
const url = (() => {
  const u = new URL(REDIS)
  if (u.pathname === "" || u.pathname === "/") u.pathname = "/3"
  return u.toString()
})()
const RUN = `gwtest:${randomUUID().slice(0, 8)}:`
const prefixes: Array<string> = []
const prefix = (name: string) => {
  const p = `${RUN}${name}:`
  prefixes.push(p)
  return p
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** Polls `probe` until it holds; answers how long that took. */
const within = async (ms: number, probe: () => boolean | Promise<boolean>) => {
  const start = Date.now()
  while (!(await probe())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`)
    await sleep(10)
  }
  return Date.now() - start
}

/** A node of `layerRedis` in its own scope (one "process"), with its log lines. */
const node = async (p: string, target = url) => {
  const logs: Array<string> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ message }) => logs.push(Array.isArray(message) ? message.join(" ") : String(message)))
  )
  const scope = Effect.runSync(Scope.make())
  const ctx = await Effect.runPromise(
    Layer.buildWithScope(layerRedis(target, { prefix: p, connectWaitMs: 1500 }).pipe(Layer.provide(logger)), scope)
  )
  const shared: SharedStateShape = Context.get(ctx, SharedState)
  return { shared, logs, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

let cleanup: Redis

beforeAll(() => {
  cleanup = new Redis(url)
})
afterAll(async () => {
  // Only this run's keys.
  for (const p of prefixes) {
    const found = await cleanup.keys(`${p}*`)
    if (found.length > 0) await cleanup.del(...found)
  }
  cleanup.disconnect()
})

describe("SharedState on Redis", () => {
  it("delivers a change to the other node within 1 s, never back to its sender; an apply that throws is logged", async () => {
    const p = prefix("channel")
    const a = await node(p)
    const b = await node(p)
    try {
      const gotA: Array<unknown> = []
      const gotB: Array<unknown> = []
      const ca = a.shared.channel<{ n: number }>("t", (c) => gotA.push(c))
      b.shared.channel<{ n: number }>("t", (c) => gotB.push(c))
      b.shared.channel<{ n: number }>("t", () => {
        throw new Error("bad change")
      })
      expect(ca.shared).toBe(true)
      ca.publish({ n: 1 })
      const took = await within(1000, () => gotB.length === 1)
      expect(took).toBeLessThan(1000)
      expect(gotB).toEqual([{ n: 1 }])
      await within(1000, () => b.logs.some((l) => l.includes("'t' change from another process could not be applied: bad change")))
      await sleep(50)
      expect(gotA).toEqual([])
    } finally {
      await a.close()
      await b.close()
    }
  })

  it("counters, totals and claims are exact when two nodes race", async () => {
    const p = prefix("exact")
    const a = await node(p)
    const b = await node(p)
    try {
      const now = Date.now()
      // 200 concurrent increments from two nodes: every one counted, each answer distinct.
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, i) => Effect.runPromise((i % 2 ? a : b).shared.counters.add("k", 1, 60_000, now)))
      )
      expect(new Set(answers).size).toBe(200)
      expect(await Effect.runPromise(a.shared.counters.get("k", 60_000, now))).toBe(200)
      // A limit of 10 claimed by 60 concurrent claims of 1 from two nodes: exactly 10 pass.
      const entry = { key: "budget", limit: 10, init: 0, expireAt: now + 60_000 }
      const claims = await Promise.all(
        Array.from({ length: 60 }, (_, i) => Effect.runPromise((i % 2 ? a : b).shared.totals.claim([entry], 1)))
      )
      expect(claims.filter((c) => c?.ok).length).toBe(10)
      // add: an existing total moves by `by`; a missing one starts at its init.
      a.shared.totals.add([entry], -2.5)
      a.shared.totals.add([{ ...entry, key: "fresh", init: 4 }], 1)
      await within(1000, async () => (await Effect.runPromise(b.shared.totals.claim([entry], 0)))?.values[0] === 7.5)
      expect((await Effect.runPromise(b.shared.totals.claim([{ ...entry, key: "fresh" }], 0)))?.values[0]).toBe(4)
      // A claim is held by one node only, until its owner lets go.
      const [ca, cb] = await Promise.all([
        Effect.runPromise(a.shared.keys.claim("idem", "p:a", 5000)),
        Effect.runPromise(b.shared.keys.claim("idem", "p:b", 5000))
      ])
      expect([ca, cb].filter(Boolean).length).toBe(1)
      const [owner, other] = ca ? [a, b] : [b, a]
      const value = ca ? "p:a" : "p:b"
      await Effect.runPromise(other.shared.keys.release("idem", value === "p:a" ? "p:b" : "p:a"))
      expect(await Effect.runPromise(other.shared.keys.get("idem"))).toBe(value)
      await Effect.runPromise(owner.shared.keys.replace("idem", value, "a:done", 5000))
      expect(await Effect.runPromise(other.shared.keys.get("idem"))).toBe("a:done")
    } finally {
      await a.close()
      await b.close()
    }
  })

  it("with Redis unreachable the node starts anyway, says so once with the password masked, and counts locally", async () => {
    const n = await node(prefix("down"), "redis://user:s3cret@127.0.0.1:1/0")
    try {
      const warnings = n.logs.filter((l) => l.includes("is unreachable"))
      expect(warnings.length).toBe(1)
      expect(warnings[0]).toContain("redis://user:***@127.0.0.1:1/0")
      expect(n.logs.join("\n")).not.toContain("s3cret")
      const c = n.shared.channel<number>("t", () => {})
      expect(() => c.publish(1)).not.toThrow()
      const now = Date.now()
      expect(await Effect.runPromise(n.shared.counters.add("k", 2, 60_000, now))).toBe(2)
      expect(await Effect.runPromise(n.shared.totals.claim([{ key: "x", limit: 1, init: 0, expireAt: now + 1000 }], 1))).toBeUndefined()
      expect(await Effect.runPromise(n.shared.keys.claim("x", "p", 1000))).toBeUndefined()
      // Retries do not log again.
      await sleep(500)
      expect(n.logs.filter((l) => l.includes("is unreachable")).length).toBe(1)
    } finally {
      await n.close()
    }
  })

  it("an outage: the node says so once, counts locally, and after Redis is back says so and is linked again", async () => {
    // A TCP proxy in front of Redis that the test cuts and restores.
    const target = new URL(url)
    const sockets = new Set<net.Socket>()
    let server: net.Server | undefined
    const open = (port: number) =>
      new Promise<number>((resolve) => {
        server = net.createServer((client) => {
          const upstream = net.connect(Number(target.port || 6379), target.hostname)
          for (const s of [client, upstream]) {
            sockets.add(s)
            s.on("error", () => {})
            s.on("close", () => sockets.delete(s))
          }
          client.pipe(upstream).pipe(client)
        })
        server.listen(port, "127.0.0.1", () => resolve((server!.address() as net.AddressInfo).port))
      })
    const cut = () =>
      new Promise<void>((resolve) => {
        server!.close(() => resolve())
        for (const s of sockets) s.destroy()
      })
    const port = await open(0)
    const proxied = new URL(url)
    proxied.host = `127.0.0.1:${port}`
    const p = prefix("outage")
    const n = await node(p, proxied.toString())
    const m = await node(p)
    try {
      const got: Array<number> = []
      const cn = n.shared.channel<number>("t", (x) => got.push(x))
      const cm = m.shared.channel<number>("t", () => {})
      cm.publish(1)
      await within(1000, () => got.length === 1)
      await cut()
      await within(2000, () => n.logs.some((l) => l.includes("is unreachable")))
      expect(() => cn.publish(2)).not.toThrow()
      expect(await Effect.runPromise(n.shared.counters.add("k", 3, 60_000, Date.now()))).toBe(3)
      await sleep(700)
      expect(n.logs.filter((l) => l.includes("is unreachable")).length).toBe(1)
      await open(port)
      await within(5000, () => n.logs.some((l) => l.includes("is reachable again")))
      // Subscribed again: changes flow both ways.
      await within(2000, async () => {
        cm.publish(3)
        await sleep(50)
        return got.includes(3)
      })
    } finally {
      await n.close()
      await m.close()
      await cut()
    }
  })

  it("REDIS_URL must be redis:// or rediss://; the error does not repeat the URL", async () => {
    const read = (value: string) =>
      Effect.runPromise(
        Effect.flip(Effect.map(Layer.build(AppConfig.layer({ dataDir: "/tmp" })), Context.get(AppConfig))).pipe(
          Effect.scoped,
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["REDIS_URL", value]])))
        )
      )
    const bad = String(await read("http://user:hunter2@127.0.0.1:6379"))
    expect(bad).toContain("REDIS_URL must start with redis:// or rediss://")
    expect(bad).not.toContain("hunter2")
    expect(String(await read("redis://127.0.0.1:6379/abc"))).toContain("database must be a number")
    const good = await Effect.runPromise(
      Effect.map(Layer.build(AppConfig.layer({ dataDir: "/tmp" })), Context.get(AppConfig)).pipe(
        Effect.scoped,
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["REDIS_URL", "rediss://:pw@127.0.0.1:6380/2"]])))
      )
    )
    expect(good.redisUrl).toBe("rediss://:pw@127.0.0.1:6380/2")
  })
})

describe("services on two Redis nodes: a change reaches the other within 1 s", () => {
  const OPENAI: ProviderRef = { id: "openai", authClass: "apikey", origin: "https://api.openai.com" }
  const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
  /** Two nodes on one prefix, each with `make` built over it (one "process" each). */
  const pair = async <S>(name: string, make: (shared: Layer.Layer<SharedState>) => Effect.Effect<S, never, Scope.Scope>) => {
    const p = prefix(name)
    const scope = Effect.runSync(Scope.make())
    const build = (n: Layer.Layer<SharedState>) => Effect.runPromise(Scope.extend(make(n), scope).pipe(Effect.provide(quiet)))
    const a = await build(layerRedis(url, { prefix: p }))
    const b = await build(layerRedis(url, { prefix: p }))
    return { a, b, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
  }

  it("a breaker opened by one node is open in the other; a reset closes both", async () => {
    const { a, b, close } = await pair("breakers", (n) =>
      Effect.map(
        Layer.build(
          CircuitBreakers.layer.pipe(
            Layer.provide(
              Layer.mergeAll(
                ResilienceConfig.layerTest({ providerBreaker: { apikey: { degradationThreshold: 2, failureThreshold: 3 } } }),
                EventBus.layer,
                n
              )
            )
          )
        ),
        Context.get(CircuitBreakers)
      )
    )
    try {
      for (let i = 0; i < 3; i++) await Effect.runPromise(a.onFailure(OPENAI, 503))
      expect(await within(1000, () => b.stateAt(OPENAI, Date.now()) === "OPEN")).toBeLessThan(1000)
      await Effect.runPromise(b.reset("openai"))
      await within(1000, () => a.stateAt(OPENAI, Date.now()) === "CLOSED")
    } finally {
      await close()
    }
  })

  it("a model lockout seen by one node holds in the other; a clear in either lifts it", async () => {
    const { a, b, close } = await pair("lockouts", (n) =>
      Effect.map(
        Layer.build(Lockouts.layer.pipe(Layer.provide(Layer.merge(ResilienceConfig.layerTest({ modelLockout: { enabled: true } }), n)))),
        Context.get(Lockouts)
      )
    )
    try {
      const GPT: LockoutRef = { provider: "openai", connectionId: "c1", connectionName: "openai-main", model: "gpt-4o" }
      await Effect.runPromise(a.onFailure(GPT, 404, "not_found"))
      await within(1000, () => b.lockedAt("openai", "c1", "gpt-4o", Date.now()).locked)
      expect(await Effect.runPromise(b.clear({ provider: "openai", model: "gpt-4o" }))).toBe(1)
      await within(1000, () => !a.lockedAt("openai", "c1", "gpt-4o", Date.now()).locked)
    } finally {
      await close()
    }
  })

  it("a cooldown started by one node holds the connection in the other (separate databases: only Redis carries it)", async () => {
    const { a, b, close } = await pair("cooldowns", (n) =>
      Effect.map(
        Layer.build(
          Cooldowns.layer.pipe(
            Layer.provide(
              Layer.mergeAll(ResilienceConfig.layerTest(), Db.layer.pipe(Layer.provide(AppConfig.layerTest({ dataDir: tempDir() }))), n)
            )
          )
        ),
        Context.get(Cooldowns)
      )
    )
    try {
      const KEY: ConnectionRef = { id: "c-key", name: "openai-main", provider: { id: "openai", authClass: "apikey" } }
      const f429: FailureInfo = {
        status: 429,
        kind: "http",
        message: "rate limited",
        code: "rate_limit_error",
        headers: { "retry-after": "30" }
      }
      const now = Date.now()
      await Effect.runPromise(a.onFailure(KEY, classify(f429, now), f429))
      await within(1000, () => b.availability(KEY.id, Date.now()).ok === false)
      b.unsafeOnSuccess(KEY.id)
      await within(1000, () => a.availability(KEY.id, Date.now()).ok)
    } finally {
      await close()
    }
  })

  it("a sticky session set by one node sticks in the other", async () => {
    const { a, b, close } = await pair("sessions", (n) =>
      Effect.map(Layer.build(RoutingMemory.layer.pipe(Layer.provide(n))), Context.get(RoutingMemory))
    )
    try {
      a.setSticky("team", "s1", "openai/gpt-4o", Date.now())
      await within(1000, () => b.sticky("team", "s1", Date.now()) === "openai/gpt-4o")
    } finally {
      await close()
    }
  })
})

/** 11 input × $2.50/M + 7 output × $10/M: one fake gpt-4o answer at the catalog price. */
const GPT4O_COST = 0.0000975

describe("two whole gateways on one database, linked by Redis", () => {
  const ADMIN = "gwk_redis_scale_admin_0123456789abcdef"
  const admin = { authorization: `Bearer ${ADMIN}` }
  const BUDGET_SECRET = "gwk_redis_scale_budget_0123456789abcdef"
  const TOKENS_SECRET = "gwk_redis_scale_tokens_0123456789abcdef"
  const RPM_SECRET = "gwk_redis_scale_rpm_0123456789abcdefghi"
  const p = prefix("gateways")
  const env = { GATEWAY_EMERGENCY_FALLBACK: "false" }
  let up: FakeUpstream
  let a: TestGateway
  let b: TestGateway
  let budgetKeyId: string

  beforeAll(async () => {
    up = await FakeUpstream.start()
    a = await startGateway({ env, sharedState: layerRedis(url, { prefix: p }) })
    await a.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    const added = await call(`${a.url}/api/providers`, {
      body: { provider: "openai", name: "oai", apiKey: "sk-x", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" },
      headers: admin
    })
    expect(added.status).toBe(201)
    const compatible = await call(`${a.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "ca", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
      headers: admin
    })
    expect(compatible.status).toBe(201)
    const budgetKey = await a.run(
      Effect.flatMap(ApiKeys, (k) => k.create({ name: "budget", scopes: ["inference"] }, { secret: BUDGET_SECRET }))
    )
    budgetKeyId = budgetKey.id
    expect(
      (await call(`${a.url}/api/usage/budget`, { body: { apiKeyId: budgetKeyId, dailyLimitUsd: GPT4O_COST * 6.5 }, headers: admin })).status
    ).toBe(200)
    await a.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "rpm", scopes: ["inference"], rpm: 5 }, { secret: RPM_SECRET })))
    const tokensKey = await a.run(
      Effect.flatMap(ApiKeys, (k) => k.create({ name: "tokens", scopes: ["inference"] }, { secret: TOKENS_SECRET }))
    )
    // 18 tokens per fake answer (11 in, 7 out): room for 6.5 answers.
    const limit = await call(`${a.url}/api/usage/token-limits`, {
      body: { apiKeyId: tokensKey.id, scope: "model", model: "oai/gpt-4o", maxTokens: 117 },
      headers: admin
    })
    expect(limit.status, limit.text).toBeLessThan(300)
    // The second process starts on the same database file, as a second replica would on PostgreSQL.
    b = await startGateway({ env, dataDir: a.dataDir, sharedState: layerRedis(url, { prefix: p }) })
  })
  afterAll(async () => {
    await b?.close()
    await a?.close()
    await up?.close()
  })

  const chat = (gw: TestGateway, headers: Record<string, string> = {}, content = "hi") =>
    call(`${gw.url}/v1/chat/completions`, { body: { model: "oai/gpt-4o", messages: [{ role: "user", content }] }, headers })

  it("a rate limit met through one gateway cools the connection down in the other within 1 s; the reset reaches it too", async () => {
    up.requests.length = 0
    up.always({ status: 429, headers: { "retry-after": "30" } })
    try {
      expect((await chat(a)).status).toBe(429)
      const sent = up.requests.length
      expect(sent).toBeGreaterThan(0)
      await within(
        1000,
        async () =>
          (await call(`${b.url}/api/resilience`, { headers: admin })).body.connections.find((c: any) => c.name === "oai")?.state ===
          "cooldown"
      )
      expect((await chat(b)).status).toBe(429)
      expect(up.requests.length).toBe(sent)
    } finally {
      await a.resetResilience()
      up.always({ content: "ok" })
    }
    await within(
      1000,
      async () =>
        (await call(`${b.url}/api/resilience`, { headers: admin })).body.connections.find((c: any) => c.name === "oai")?.state !==
        "cooldown"
    )
    expect((await chat(b)).status).toBe(200)
  })

  it("an idempotent burst split across both gateways makes one upstream call; every answer is the first one", async () => {
    up.requests.length = 0
    up.always({ content: "the one answer", delayMs: 300 })
    try {
      const key = { "idempotency-key": `burst-${randomUUID()}` }
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => chat(i % 2 ? a : b, key)))
      expect(answers.map((r) => r.status)).toEqual(Array(10).fill(200))
      expect(new Set(answers.map((r) => r.body.id)).size).toBe(1)
      expect(answers.filter((r) => r.headers.get("x-gateway-idempotent") === "true").length).toBe(9)
      expect(up.requests.length).toBe(1)
    } finally {
      up.always({ content: "ok" })
    }
  })

  it("a budget raced by a burst split across both gateways is not overspent by more than one request", async () => {
    const auth = { authorization: `Bearer ${BUDGET_SECRET}` }
    up.always({ content: "ok" })
    // Each gateway learns the key's cost per request (its hold estimate).
    expect((await chat(a, auth)).status).toBe(200)
    expect((await chat(b, auth)).status).toBe(200)
    up.requests.length = 0
    up.always({ content: "slow", delayMs: 300 })
    try {
      const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(i % 2 ? a : b, auth)))
      const ok = burst.filter((r) => r.status === 200).length
      // 2 spent of 6.5: the holds admit 5 more at most (each process alone would admit 5: 10).
      expect(ok).toBeLessThanOrEqual(5)
      expect(ok).toBeGreaterThanOrEqual(3)
      expect(burst.filter((r) => r.status !== 200).every((r) => r.status === 429 && r.body.error.code === "budget_exhausted")).toBe(true)
      expect(up.requests.length).toBe(ok)
      // Spent through both: at most one request past the limit, and both gateways refuse now.
      const spent = (2 + ok) * GPT4O_COST
      expect(spent).toBeLessThanOrEqual(GPT4O_COST * 7.5)
      expect((await chat(a, auth)).status).toBe(429)
      expect((await chat(b, auth)).status).toBe(429)
      await within(1000, async () => {
        const status = (await call(`${b.url}/api/usage/budget?apiKeyId=${budgetKeyId}`, { headers: admin })).body.budgets[0]
        return Math.abs(status.spentUsd - spent) < 1e-9
      })
    } finally {
      up.always({ content: "ok" })
    }
  })

  it("a token limit raced by a burst split across both gateways is not overrun by more than one request", async () => {
    const auth = { authorization: `Bearer ${TOKENS_SECRET}` }
    up.always({ content: "ok" })
    expect((await chat(a, auth)).status).toBe(200)
    expect((await chat(b, auth)).status).toBe(200)
    up.requests.length = 0
    up.always({ content: "slow", delayMs: 300 })
    try {
      const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(i % 2 ? a : b, auth)))
      const ok = burst.filter((r) => r.status === 200).length
      expect(ok).toBeLessThanOrEqual(5)
      expect(ok).toBeGreaterThanOrEqual(3)
      expect(burst.filter((r) => r.status !== 200).every((r) => r.status === 429 && r.body.error.code === "token_limit_exceeded")).toBe(
        true
      )
      expect(up.requests.length).toBe(ok)
    } finally {
      up.always({ content: "ok" })
    }
  })

  it("requests per minute are exact across both gateways", async () => {
    // A fresh minute window, so the burst is not split across two.
    const left = 60_000 - (Date.now() % 60_000)
    if (left < 5000) await sleep(left + 50)
    up.always({ content: "ok" })
    const auth = { authorization: `Bearer ${RPM_SECRET}` }
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => chat(i % 2 ? a : b, auth)))
    expect(burst.filter((r) => r.status === 200).length).toBe(5)
    expect(burst.filter((r) => r.status === 429).every((r) => r.body.error.code === "rate_limit_exceeded")).toBe(true)
  })

  it("previous_response_id of a response one gateway answered (store: false) is resolved by the other", async () => {
    up.requests.length = 0
    up.always({ content: "Nice to meet you, Ada." })
    const first = await call(`${a.url}/v1/responses`, { body: { model: "ca/m1", input: "My name is Ada.", store: false } })
    expect(first.status).toBe(200)
    up.always({ content: "Your name is Ada." })
    // Within 1 s of the answer.
    await sleep(200)
    const next = await call(`${b.url}/v1/responses`, {
      body: { model: "ca/m1", previous_response_id: first.body.id, input: "What is my name?", store: false }
    })
    expect(next.status).toBe(200)
    const messages = up.requests[1]!.body.messages.map((m: any) => [
      m.role,
      typeof m.content === "string" ? m.content : m.content.map((x: any) => x.text).join("")
    ])
    expect(messages).toEqual([
      ["user", "My name is Ada."],
      ["assistant", "Nice to meet you, Ada."],
      ["user", "What is my name?"]
    ])
  })
})

describe("a gateway whose Redis is unreachable", () => {
  it("starts, serves with its own state, and says once that Redis is unreachable", async () => {
    const up = await FakeUpstream.start()
    const gw = await startGateway({
      sharedState: layerRedis("redis://:pw@127.0.0.1:1", { prefix: prefix("unreachable"), connectWaitMs: 300 })
    })
    try {
      const ADMIN = "gwk_redis_down_admin_0123456789abcdef"
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const added = await call(`${gw.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "c", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" },
        headers: { authorization: `Bearer ${ADMIN}` }
      })
      expect(added.status).toBe(201)
      up.always({ content: "still here" })
      const res = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "c/m1", messages: [{ role: "user", content: "hi" }] },
        headers: { "idempotency-key": "k1" }
      })
      expect(res.status).toBe(200)
      expect(res.body.choices[0].message.content).toBe("still here")
      const again = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "c/m1", messages: [{ role: "user", content: "hi" }] },
        headers: { "idempotency-key": "k1" }
      })
      expect(again.headers.get("x-gateway-idempotent")).toBe("true")
      expect(gw.logs.filter((l) => l.message.includes("is unreachable")).length).toBe(1)
      expect(gw.logs.some((l) => l.message.includes(":pw@"))).toBe(false)
    } finally {
      await gw.close()
      await up.close()
    }
  })
})

describe("webhook deliveries of two gateways on one database, with Redis", () => {
  it("a delivery queued by a live gateway is not resumed by one starting meanwhile; a graceful stop gives it back to the next start", async () => {
    const receiver = await Receiver.start()
    receiver.answer = () => "hang"
    const p = prefix("webhooks")
    const ADMIN = "gwk_redis_hooks_admin_0123456789abcdef"
    const a = await startGateway({ sharedState: layerRedis(url, { prefix: p }) })
    const dataDir = a.dataDir
    let b: TestGateway | undefined
    let c: TestGateway | undefined
    let aOpen = true
    try {
      await a.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const created = await call(`${a.url}/api/webhooks`, {
        body: { url: receiver.url, events: ["provider.error"] },
        headers: { authorization: `Bearer ${ADMIN}` }
      })
      expect(created.status).toBe(201)
      await a.run(
        Effect.map(EventBus, (bus) =>
          bus.publish("provider.error", { provider: "p", status: 503, consecutive_failures: 1, circuit_state: "CLOSED" })
        )
      )
      const [first] = await receiver.waitFor(1)
      await within(2000, () => queryDb(dataDir, "SELECT count(*) AS n FROM webhook_deliveries")[0]?.n === 1)
      // A second process on the same database: the row is pending, but the first one holds it.
      b = await startGateway({ dataDir, sharedState: layerRedis(url, { prefix: p }) })
      expect(b.logs.some((l) => l.message.includes("webhooks: 1 pending deliveries left to the processes that queued them"))).toBe(true)
      await sleep(300)
      expect(receiver.deliveries.length).toBe(1)
      // The first stops gracefully: its claim is given back, and the next process to start sends it.
      receiver.answer = () => 200
      await a.close()
      aOpen = false
      c = await startGateway({ dataDir, sharedState: layerRedis(url, { prefix: p }) })
      const again = await receiver.waitFor(2)
      expect(again[1]!.headers["webhook-id"]).toBe(first!.headers["webhook-id"])
    } finally {
      await c?.close()
      await b?.close()
      if (aOpen) await a.close()
      await receiver.close()
    }
  })
})
