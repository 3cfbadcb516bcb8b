import { describe, expect, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as TestClock from "effect/TestClock"
import { afterAll, beforeAll, it as vit } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { EventBus } from "../src/platform/events/EventBus.js"
import { UpstreamHttp } from "../src/upstream/client/UpstreamHttp.js"
import { type AttemptOutcome, deliver } from "../src/services/webhooks/delivery.js"
import { Webhooks } from "../src/services/webhooks/Webhooks.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway } from "./support/gateway.js"
import { queryDb } from "./support/db.js"
import { Receiver, verifySpec, verifyStandardByHand, verifyWithLibrary } from "./support/webhookReceiver.js"
import { refusedPort } from "./support/refusedPort.js"

/**
 * Delivery (docs/webhooks.md, "Delivery"): the retry Schedule under Effect's TestClock (the
 * receiver is a real server on 127.0.0.1; the clock only drives the waits and timestamps), then
 * the real gateway: a dead receiver disabling its webhook, a slow one delaying nobody, and
 * pending deliveries surviving a restart.
 */
const SECRET = "whsec_00112233445566778899aabbccddeeff0011223344556677"
const message = {
  id: "msg_test",
  event: "request.completed",
  body: JSON.stringify({ event: "request.completed", timestamp: "2020-01-01T00:00:00.000Z", data: {} })
}

/**
 * Waits (in real time, on the event loop: the receiver is a real server) until the delivery has
 * registered its next retry wait with the test clock, and answers how long that wait is. Each
 * attempt also registers its own 10 s limit (at its start + 10 s): that one is not a retry wait.
 */
const makeWaits = () => {
  const known: Array<number> = []
  return Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    for (let i = 0; i < 10_000; i++) {
      const all = Chunk.toReadonlyArray(yield* TestClock.sleeps())
      const fresh = all.filter((at) => !known.includes(at))
      const waits = fresh.filter((at) => at !== now + 10_000)
      if (waits.length > 0) {
        expect(waits.length).toBe(1)
        known.push(...fresh)
        return waits[0]! - now
      }
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 1)))
    }
    throw new Error("no retry wait was scheduled")
  })
}

const withReceiver = Effect.acquireRelease(
  Effect.promise(() => Receiver.start()),
  (r) => Effect.promise(() => r.close())
)

describe("the retry schedule (TestClock)", () => {
  it.scoped("a receiver answering 500 sees exactly 4 attempts, spaced 1, 2 and 4 s", () =>
    Effect.gen(function* () {
      const receiver = yield* withReceiver
      receiver.answer = () => 500
      const http = yield* UpstreamHttp
      const outcomes: Array<AttemptOutcome> = []
      const fiber = yield* Effect.fork(
        deliver(http, () => ({ url: receiver.url, secret: SECRET }), message, {
          retryBase: "1 second",
          onAttempt: (o) => Effect.sync(() => outcomes.push(o))
        })
      )
      const nextWait = makeWaits()
      for (const wait of [1000, 2000, 4000]) {
        expect(yield* nextWait).toBe(wait)
        yield* TestClock.adjust(wait)
      }
      const last = yield* Fiber.join(fiber)
      expect(last).toEqual({ ok: false, status: 500, retryable: true, error: "receiver answered HTTP 500" })
      expect(receiver.deliveries.length).toBe(4)
      expect(outcomes.map((o) => o.status)).toEqual([500, 500, 500, 500])
      // The attempts' own timestamps (the test clock's), 1, 2 and 4 s apart.
      expect(receiver.deliveries.map((d) => Date.parse(String(d.headers["x-webhook-timestamp"])))).toEqual([0, 1000, 3000, 7000])
      expect(receiver.deliveries.map((d) => d.headers["webhook-timestamp"])).toEqual(["0", "1", "3", "7"])
      // The same message id on every attempt (the receiver's de-duplication key), each signed.
      expect(new Set(receiver.deliveries.map((d) => d.headers["webhook-id"]))).toEqual(new Set(["msg_test"]))
      for (const d of receiver.deliveries) {
        expect(verifySpec(SECRET, d)).toBe(true)
        expect(verifyStandardByHand(SECRET, d)).toBe(true)
      }
    }).pipe(Effect.provide(UpstreamHttp.layer))
  )

  it.scoped("a 4xx and a 3xx are final: one attempt each, nothing scheduled", () =>
    Effect.gen(function* () {
      const receiver = yield* withReceiver
      const http = yield* UpstreamHttp
      for (const status of [404, 302]) {
        receiver.answer = () => status
        const before = receiver.deliveries.length
        const out = yield* deliver(http, () => ({ url: receiver.url, secret: SECRET }), message, {
          retryBase: "1 second",
          onAttempt: () => Effect.void
        })
        expect(out).toMatchObject({ ok: false, status, retryable: false })
        expect(receiver.deliveries.length - before).toBe(1)
        // Only the attempts' own 10 s limits, no retry wait.
        expect(Chunk.toReadonlyArray(yield* TestClock.sleeps()).every((at) => at === 10_000)).toBe(true)
      }
    }).pipe(Effect.provide(UpstreamHttp.layer))
  )

  it.scoped("a network failure is retried 3 times too, recorded as status 0", () =>
    Effect.gen(function* () {
      // A port nobody listens on.
      const url = `http://127.0.0.1:${yield* Effect.promise(() => refusedPort())}/hook`
      const http = yield* UpstreamHttp
      const outcomes: Array<AttemptOutcome> = []
      const fiber = yield* Effect.fork(
        deliver(http, () => ({ url, secret: SECRET }), message, {
          retryBase: "1 second",
          onAttempt: (o) => Effect.sync(() => outcomes.push(o))
        })
      )
      const nextWait = makeWaits()
      for (const wait of [1000, 2000, 4000]) {
        expect(yield* nextWait).toBe(wait)
        yield* TestClock.adjust(wait)
      }
      const last = yield* Fiber.join(fiber)
      expect(outcomes.length).toBe(4)
      expect(last).toMatchObject({ ok: false, status: 0, retryable: true })
    }).pipe(Effect.provide(UpstreamHttp.layer))
  )
})

describe("delivery through the gateway", () => {
  const ADMIN = "gwk_webhooks_delivery_admin_0123456789ab"
  const admin = { authorization: `Bearer ${ADMIN}` }
  let upstream: FakeUpstream
  beforeAll(async () => {
    upstream = await FakeUpstream.start()
    upstream.always({})
  })
  afterAll(() => upstream?.close())

  const setup = async (env: Record<string, string> = {}, dataDir?: string) => {
    const gw = await startGateway({ env, ...(dataDir ? { dataDir } : {}) })
    if (!dataDir) {
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      expect(
        (
          await call(`${gw.url}/api/providers`, {
            body: { provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl("openai-chat"), defaultModel: "m1" },
            headers: admin
          })
        ).status
      ).toBe(201)
    }
    return gw
  }
  const hook = async (gwUrl: string, body: Record<string, unknown>) => {
    const res = await call(`${gwUrl}/api/webhooks`, { body, headers: admin })
    expect(res.status).toBe(201)
    return res.body
  }

  vit("a receiver that is down for 10 deliveries disables its webhook; PUT enabled re-enables it", async () => {
    const gw = await setup({ GATEWAY_WEBHOOK_RETRY_BASE_MS: "1" })
    const gone = await Receiver.start()
    const { url, port } = gone
    await gone.close()
    try {
      const created = await hook(gw.url, { url, events: ["request.failed"] })
      const publish = () => gw.run(Effect.map(EventBus, (b) => b.publish("request.failed", { trace_id: "t", status: 502 })))
      for (let i = 1; i <= 10; i++) {
        await publish()
        // Each delivery ends (4 attempts) before the next is counted.
        await waitUntil(async () => (await call(`${gw.url}/api/webhooks/${created.id}`, { headers: admin })).body.failure_count === i)
      }
      const disabled = (await call(`${gw.url}/api/webhooks/${created.id}`, { headers: admin })).body
      expect(disabled).toMatchObject({ enabled: 0, failure_count: 10, last_status: 0 })
      expect(disabled.last_triggered_at).toEqual(expect.any(String))
      // Disabled: a new event is not delivered (nothing pending).
      await publish()
      expect(await gw.run(Effect.flatMap(Webhooks, (w) => w.pending))).toBe(0)
      // Fixed receiver, PUT enabled: delivered again, count reset.
      const back = await Receiver.start(port)
      try {
        const put = await call(`${gw.url}/api/webhooks/${created.id}`, { method: "PUT", body: { enabled: true }, headers: admin })
        expect(put.body).toMatchObject({ enabled: 1, failure_count: 0 })
        await publish()
        const [d] = await back.waitFor(1)
        expect(verifyWithLibrary(created.secret, d!)).toMatchObject({ event: "request.failed" })
        await waitUntil(async () => (await call(`${gw.url}/api/webhooks/${created.id}`, { headers: admin })).body.last_status === 200)
      } finally {
        await back.close()
      }
    } finally {
      await gw.close()
    }
  })

  vit("a receiver that never answers delays neither another webhook nor the request", async () => {
    const gw = await setup()
    const slow = await Receiver.start()
    const fast = await Receiver.start()
    slow.answer = () => "hang"
    try {
      await hook(gw.url, { url: slow.url, events: ["request.completed"] })
      const quick = await hook(gw.url, { url: fast.url, events: ["request.completed"] })
      for (let i = 0; i < 3; i++) {
        const res = await call(`${gw.url}/v1/chat/completions`, { body: { model: "up/m1", messages: [{ role: "user", content: "hi" }] } })
        expect(res.status).toBe(200)
      }
      const got = await fast.waitFor(3)
      for (const d of got) expect(verifyWithLibrary(quick.secret, d)).toMatchObject({ event: "request.completed" })
      // The slow one holds its first delivery, unanswered; its other two wait behind it.
      await slow.waitFor(1)
      expect(slow.deliveries.length).toBe(1)
      await waitUntil(async () => (await gw.run(Effect.flatMap(Webhooks, (w) => w.pending))) === 3)
      expect(slow.deliveries.length).toBe(1)
    } finally {
      await gw.close()
      await slow.close()
      await fast.close()
    }
  })

  vit(
    "a full queue (GATEWAY_WEBHOOK_QUEUE_SIZE) drops new deliveries, keeps the queued ones in order, warns once, and takes new ones once drained",
    async () => {
      const gw = await setup({ GATEWAY_WEBHOOK_QUEUE_SIZE: "3" })
      const receiver = await Receiver.start()
      receiver.answer = () => "hang"
      try {
        const created = await hook(gw.url, { url: receiver.url, events: ["request.completed"] })
        const chat = async () => {
          const res = await call(`${gw.url}/v1/chat/completions`, { body: { model: "up/m1", messages: [{ role: "user", content: "hi" }] } })
          expect(res.status).toBe(200)
          return res.headers.get("x-gateway-request-id")!
        }
        const dropping = () =>
          gw.logs.filter((l) =>
            l.message.includes(`webhook ${created.id}: 3 deliveries pending, dropping new 'request.completed' deliveries`)
          )
        // The first delivery hangs in flight and two wait behind it: the queue is full.
        const traces = [await chat(), await chat(), await chat()]
        await receiver.waitFor(1)
        await waitUntil(() => queryDb(gw.dataDir, "SELECT count(*) AS n FROM webhook_deliveries")[0]?.n === 3)
        expect(dropping()).toHaveLength(0)
        // Three more requests: their deliveries are dropped, with one warning, and nothing is persisted for them.
        for (let i = 0; i < 3; i++) await chat()
        await waitUntil(() => dropping().length > 0)
        expect(queryDb(gw.dataDir, "SELECT count(*) AS n FROM webhook_deliveries")[0]).toEqual({ n: 3 })

        // The receiver answers again: the queued three arrive in order; once drained, a new one is taken.
        receiver.answer = () => 200
        receiver.release()
        await waitUntil(() => queryDb(gw.dataDir, "SELECT count(*) AS n FROM webhook_deliveries")[0]?.n === 0)
        const after = await chat()
        await receiver.waitFor(1, (d) => d.body.data.trace_id === after)
        const delivered = new Map(receiver.deliveries.map((d) => [String(d.headers["webhook-id"]), d.body.data.trace_id as string]))
        expect([...delivered.values()]).toEqual([...traces, after])
        for (const d of receiver.deliveries) expect(verifyWithLibrary(created.secret, d)).toMatchObject({ event: "request.completed" })
        expect(dropping()).toHaveLength(1)
      } finally {
        await gw.close()
        await receiver.close()
      }
    }
  )

  vit("pending deliveries survive a restart and are delivered again with the same webhook-id", async () => {
    const receiver = await Receiver.start()
    receiver.answer = () => "hang"
    const gw1 = await setup()
    const dir = gw1.dataDir
    try {
      const created = await hook(gw1.url, { url: receiver.url, events: ["provider.error"] })
      await gw1.run(
        Effect.map(EventBus, (b) =>
          b.publish("provider.error", { provider: "p", status: 503, consecutive_failures: 1, circuit_state: "CLOSED" })
        )
      )
      await gw1.run(
        Effect.map(EventBus, (b) =>
          b.publish("provider.error", { provider: "p", status: 503, consecutive_failures: 2, circuit_state: "CLOSED" })
        )
      )
      const [first] = await receiver.waitFor(1)
      await gw1.close()
      expect(queryDb(dir, "SELECT count(*) AS n FROM webhook_deliveries")[0]).toEqual({ n: 2 })
      receiver.answer = () => 200
      const gw2 = await setup({}, dir)
      try {
        const again = await receiver.waitFor(3)
        expect(again[1]!.headers["webhook-id"]).toBe(first!.headers["webhook-id"])
        expect(again.slice(1).map((d) => d.body.data.consecutive_failures)).toEqual([1, 2])
        for (const d of again) expect(verifyWithLibrary(created.secret, d)).toMatchObject({ event: "provider.error" })
        await waitUntil(async () => queryDb(dir, "SELECT count(*) AS n FROM webhook_deliveries")[0]?.n === 0)
      } finally {
        await gw2.close()
      }
    } finally {
      await receiver.close()
    }
  })
})

/** Polls an observable condition (no fixed sleep decides the outcome); fails after 15 s. */
const waitUntil = async (condition: () => Promise<boolean> | boolean, ms = 15_000) => {
  const until = Date.now() + ms
  for (;;) {
    if (await condition()) return
    if (Date.now() > until) throw new Error("condition not met in time")
    await new Promise((r) => setTimeout(r, 10))
  }
}
