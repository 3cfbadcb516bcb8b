import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * Waiting out a quota (docs/resilience.md): a request whose every target answered 429 with a known
 * reset is parked until the reset when its combo or key allows a wait, then sent again; through
 * the official OpenAI SDK (maxRetries 0: the waiting is the gateway's), against a fake upstream on
 * 127.0.0.1 that answers 429 with `retry-after: 2` and then recovers.
 */
const ADMIN = "gwk_queue_admin_key_0123456789abcdef"
const USER = "gwk_queue_user_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let upstream: FakeUpstream
let userKeyId: string

const QUOTA = { status: 429, headers: { "retry-after": "2" }, errorMessage: "Rate limit reached for requests" }
const queueView = async () => (await call(`${gw.url}/api/resilience`, { headers: admin })).body.queue
const sdk = (key = ADMIN, fetchImpl?: typeof fetch) =>
  new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0, timeout: 30_000, ...(fetchImpl ? { fetch: fetchImpl } : {}) })
const ask = (model: string, text: string, options: { key?: string; signal?: AbortSignal } = {}) =>
  sdk(options.key).chat.completions.create(
    { model, messages: [{ role: "user", content: text }] },
    options.signal ? { signal: options.signal } : undefined
  )
const textsSeen = () => upstream.requests.map((r) => r.body?.messages?.[0]?.content as string)
const pipelineTaken = async (reason: string): Promise<number> => {
  const line = (await call(`${gw.url}/metrics`, { headers: admin })).text
    .split("\n")
    .find((l) => l.startsWith("gateway_requests_path_total{") && l.includes('path="pipeline"') && l.includes(`reason="${reason}"`))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}
const parked = (n: number) => until(`${n} parked`, async () => (await queueView()).parked === n)
/**
 * Sends until the request was not `cold` (as test/common-path.test.ts does): after a change to the
 * database the caches read it again within a second, and the first request then goes through the
 * pipeline under `cold` before any other reason is looked at.
 */
const notCold = async <A>(send: () => Promise<A>): Promise<A> => {
  for (let attempt = 1; ; attempt++) {
    const cold = await pipelineTaken("cold")
    const res = await send()
    if (attempt === 5 || (await pipelineTaken("cold")) === cold) return res
  }
}

beforeAll(async () => {
  upstream = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  userKeyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user" }, { secret: USER })))).id
  const created = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "quota", baseUrl: upstream.baseUrl("openai-chat"), defaultModel: "m1" },
    headers: admin
  })
  expect(created.status).toBe(201)
  const combo = async (name: string, config: Record<string, unknown>) =>
    expect(
      (
        await call(`${gw.url}/api/combos`, {
          body: { name, strategy: "priority", targets: [{ model: "quota/m1" }], config },
          headers: admin
        })
      ).status
    ).toBe(201)
  await combo("waits", { maxQueueWaitSeconds: 30 })
  await combo("short", { maxQueueWaitSeconds: 1 })
  await combo("plain", {})
})
afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  upstream.always({ content: "after the reset" })
  upstream.requests.length = 0
})

describe("waiting out a quota", () => {
  it("parks an SDK request on a 429 with retry-after and serves it after the reset", async () => {
    upstream.next(QUOTA)
    const before = await queueView()
    const answer = ask("waits", "one")
    const view = await until("the request parked", async () => {
      const q = await queueView()
      return q.parked === 1 ? q : undefined
    })
    expect(view.groups).toEqual([expect.objectContaining({ scope: "waits", combo: "waits", apiKeyId: expect.any(String), parked: 1 })])
    expect(view.nextResetAt).not.toBeNull()
    const done = await answer
    expect(done.choices[0]!.message.content).toBe("after the reset")
    expect(textsSeen()).toEqual(["one", "one"])
    const after = await queueView()
    expect(after.parked).toBe(0)
    expect(after.served).toBe(before.served + 1)
    const metrics = (await call(`${gw.url}/metrics`, { headers: admin })).text
    expect(metrics).toMatch(/gateway_quota_queue_parked(_requests)?(\{[^}]*\})? 0/)
    expect(metrics).toMatch(new RegExp(`gateway_quota_queue_served(_requests)?_total(\\{[^}]*\\})? ${after.served}`))
  })

  it("keeps a streamed client alive with SSE comments while it waits; the SDK still parses the answer", async () => {
    upstream.next(QUOTA)
    let raw = ""
    // The SDK reads one branch of the body, the test the other: the comments are on the wire, the SDK skips them.
    const tee: typeof fetch = async (input, init) => {
      const res = await fetch(input, init)
      const [mine, theirs] = res.body!.tee()
      void (async () => {
        const decoder = new TextDecoder()
        for await (const chunk of mine as unknown as AsyncIterable<Uint8Array>) raw += decoder.decode(chunk, { stream: true })
      })()
      return new Response(theirs, { status: res.status, headers: res.headers })
    }
    const stream = await sdk(ADMIN, tee).chat.completions.create({
      model: "waits",
      stream: true,
      messages: [{ role: "user", content: "streamed" }]
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("after the reset")
    expect(raw).toMatch(/^: waiting for quota reset in [12] s\n\n/)
    expect(raw).toContain("data: [DONE]")
  })

  it("serves two parked requests in the order they arrived", async () => {
    // A reset far enough off for the steps below to happen while the first request waits, on a loaded machine too.
    upstream.next({ ...QUOTA, headers: { "retry-after": "5" } })
    const first = ask("waits", "first")
    const asked: Array<Promise<unknown>> = [first]
    try {
      await parked(1)
      // While requests are parked, any request leaves the common path (one field read) for the
      // pipeline: one of a combo without a wait is counted under `queue`.
      const probes = await pipelineTaken("queue")
      await notCold(() =>
        call(`${gw.url}/v1/chat/completions`, { body: { model: "plain", messages: [{ role: "user", content: "probe" }] }, headers: admin })
      )
      expect(await pipelineTaken("queue")).toBe(probes + 1)
      // One that may wait is queued behind the parked one: never sent before its turn.
      const before = (await pipelineTaken("queue")) + (await pipelineTaken("cold"))
      const second = ask("waits", "second")
      asked.push(second)
      await parked(2)
      expect((await pipelineTaken("queue")) + (await pipelineTaken("cold"))).toBe(before + 1)
      const answers = await Promise.all([first, second])
      expect(answers.map((a) => a.choices[0]!.message.content)).toEqual(["after the reset", "after the reset"])
      // (The probe, answered its 429 at once or, were the reset past, sent: never between these.)
      expect(textsSeen().filter((t) => t !== "probe")).toEqual(["first", "first", "second"])
    } finally {
      // A failure above leaves no request parked for the next test.
      await Promise.allSettled(asked)
    }
  })

  it("drops a client that goes away: the queue count falls and the upstream never sees it", async () => {
    upstream.next(QUOTA)
    const before = await queueView()
    const abort = new AbortController()
    const gone = ask("waits", "leaving", { signal: abort.signal }).catch((e: unknown) => e)
    await parked(1)
    abort.abort()
    expect(await gone).toBeInstanceOf(OpenAI.APIUserAbortError)
    await parked(0)
    expect((await queueView()).dropped).toBe(before.dropped + 1)
    // After the reset, a later request is served; the one that left was never sent again.
    const later = await until("the reset", async () => {
      const r = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "plain", messages: [{ role: "user", content: "later" }] },
        headers: admin
      })
      return r.status === 200 ? r : undefined
    })
    expect(later.body.choices[0].message.content).toBe("after the reset")
    expect(textsSeen()).toEqual(["leaving", "later"])
  })

  it("refuses at once, with today's 429, when the queue is full", async () => {
    await call(`${gw.url}/api/resilience`, { method: "PATCH", body: { quotaQueue: { maxParked: 1 } }, headers: admin })
    try {
      upstream.next(QUOTA)
      const before = await queueView()
      const first = ask("waits", "first")
      await parked(1)
      const refused = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "waits", messages: [{ role: "user", content: "second" }] },
        headers: admin
      })
      expect(refused.status).toBe(429)
      expect(refused.body.error.message).toContain("the queue of requests waiting for a quota to reset is full (1 parked)")
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect((await queueView()).refused).toBe(before.refused + 1)
      expect((await first).choices[0]!.message.content).toBe("after the reset")
    } finally {
      await call(`${gw.url}/api/resilience`, { method: "PATCH", body: { quotaQueue: { maxParked: 100 } }, headers: admin })
    }
  })

  it("answers today's 429 at once when the reset is further off than maxQueueWaitSeconds", async () => {
    upstream.next(QUOTA)
    const started = Date.now()
    const r = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "short", messages: [{ role: "user", content: "hurry" }] },
      headers: admin
    })
    expect(r.status).toBe(429)
    expect(Date.now() - started).toBeLessThan(1_000)
    expect(r.headers.get("retry-after")).toBe("2")
    expect(r.body.error.message).toContain("longer than this request may wait (1 s)")
    expect((await queueView()).parked).toBe(0)
  })

  it("is off by default: a combo and key without a wait get today's 429", async () => {
    upstream.next(QUOTA)
    const r = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "plain", messages: [{ role: "user", content: "now" }] },
      headers: admin
    })
    expect(r.status).toBe(429)
    expect(r.headers.get("retry-after")).toBe("2")
    expect((await queueView()).parked).toBe(0)
    expect(textsSeen()).toEqual(["now"])
  })

  it("takes a key's maxQueueWaitSeconds (PATCH /api/keys/{id}); with a combo's too, the smaller applies", async () => {
    const set = (v: number | null) =>
      call(`${gw.url}/api/keys/${userKeyId}`, { method: "PATCH", body: { maxQueueWaitSeconds: v }, headers: admin })
    const patched = await set(20)
    expect(patched.status).toBe(200)
    expect(patched.body.maxQueueWaitSeconds).toBe(20)
    expect((await set(-1)).status).toBe(400)
    try {
      // A direct model: the key's wait alone.
      upstream.next(QUOTA)
      const answer = await ask("quota/m1", "direct", { key: USER })
      expect(answer.choices[0]!.message.content).toBe("after the reset")
      expect(textsSeen()).toEqual(["direct", "direct"])
      await gw.resetResilience()
      // The combo allows 1 s, the key 20 s: 1 s applies, shorter than the 2 s reset.
      upstream.next(QUOTA)
      const r = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "short", messages: [{ role: "user", content: "both" }] },
        headers: { authorization: `Bearer ${USER}` }
      })
      expect(r.status).toBe(429)
      expect(r.body.error.message).toContain("(1 s)")
    } finally {
      expect((await set(null)).body.maxQueueWaitSeconds).toBeNull()
    }
  })
})
