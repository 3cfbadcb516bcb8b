import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Cooldowns } from "../src/services/resilience/Cooldowns.js"
import type { ResolvedAddress } from "../src/upstream/client/egressGuard.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { type Delivery, Receiver, verifySpec, verifyStandardByHand, verifyWithLibrary } from "./support/webhookReceiver.js"

/**
 * /api/webhooks (spec document 2, "Webhook API") and every event from its real source, through
 * the real gateway on 127.0.0.1 to a receiver on 127.0.0.1 that checks both signatures with
 * node:crypto and with the official Standard Webhooks verifier (`standardwebhooks`).
 */
const ADMIN = "gwk_webhooks_admin_key_0123456789abcdef"
const USER = "gwk_webhooks_user_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
let alt: FakeUpstream
let receiver: Receiver
let userKeyId: string
/** Host names the test's resolver answers (the rebinding case); others are not looked up. */
const names = new Map<string, ReadonlyArray<ResolvedAddress>>()

const hooks = (body?: unknown, method?: string, suffix = "") => call(`${gw.url}/api/webhooks${suffix}`, { body, method, headers: admin })
const chat = (model: string, key = USER) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model, messages: [{ role: "user", content: "hi" }] },
    headers: { authorization: `Bearer ${key}` }
  })
const clearHooks = async () => {
  for (const h of (await hooks()).body.webhooks) expect((await hooks(undefined, "DELETE", `/${h.id}`)).status).toBe(200)
}
/** Every delivery is checked both ways: node:crypto for the two headers, and the maintained verifier. */
const verified = (secret: string, d: Delivery) => {
  expect(d.headers["content-type"]).toBe("application/json")
  expect(d.headers["user-agent"]).toBe("Gateway-Webhook/1.0")
  expect(d.headers["x-webhook-event"]).toBe(d.body.event)
  expect(Number.isNaN(Date.parse(String(d.headers["x-webhook-timestamp"])))).toBe(false)
  expect(verifySpec(secret, d)).toBe(true)
  expect(verifyStandardByHand(secret, d)).toBe(true)
  expect(verifyWithLibrary(secret, d)).toEqual(d.body)
  expect(Object.keys(d.body)).toEqual(["event", "timestamp", "data"])
  return d.body
}

beforeAll(async () => {
  up = await FakeUpstream.start()
  alt = await FakeUpstream.start()
  receiver = await Receiver.start()
  gw = await startGateway({
    dns: async (host) => {
      const answer = names.get(host)
      if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" })
      return answer
    }
  })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  userKeyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))).id
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (await add({ provider: "openai", name: "oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" })).status
  ).toBe(201)
  expect((await add({ provider: "openai-compatible", name: "alt", baseUrl: alt.baseUrl("openai-chat"), defaultModel: "m1" })).status).toBe(
    201
  )
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  await alt?.close()
  await receiver?.close()
})
beforeEach(async () => {
  await clearHooks()
  await gw.resetResilience()
  up.always({})
  alt.always({})
  receiver.deliveries.length = 0
  receiver.answer = () => 200
})

describe("/api/webhooks", () => {
  it("creates with a generated whsec_ secret and the spec's fields, lists it masked, shows it whole, updates and deletes it", async () => {
    const created = await hooks({ url: receiver.url, description: "ops" })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
      url: receiver.url,
      events: ["*"],
      secret: expect.stringMatching(/^whsec_[0-9a-f]{48}$/),
      enabled: 1,
      description: "ops",
      created_at: expect.any(String),
      last_triggered_at: null,
      last_status: null,
      failure_count: 0
    })
    const { id, secret } = created.body
    const list = await hooks()
    expect(list.status).toBe(200)
    expect(list.body.webhooks).toEqual([{ ...created.body, secret: `${secret.slice(0, 10)}…` }])
    expect((await hooks(undefined, "GET", `/${id}`)).body).toEqual(created.body)

    const put = await hooks(
      { events: ["request.completed", "quota.exceeded"], description: null, secret: "a-custom-secret-of-enough-length" },
      "PUT",
      `/${id}`
    )
    expect(put.status).toBe(200)
    expect(put.body).toMatchObject({
      id,
      events: ["request.completed", "quota.exceeded"],
      description: null,
      secret: "a-custom-secret-of-enough-length"
    })
    expect((await hooks({ enabled: false }, "PUT", `/${id}`)).body.enabled).toBe(0)
    expect((await hooks({ enabled: 1 }, "PUT", `/${id}`)).body.enabled).toBe(1)

    const removed = await hooks(undefined, "DELETE", `/${id}`)
    expect(removed.status).toBe(200)
    expect(removed.body.removed).toMatchObject({ id, secret: "a-custom-s…" })
    expect((await hooks(undefined, "GET", `/${id}`)).status).toBe(404)
    expect((await hooks({ enabled: true }, "PUT", `/${id}`)).status).toBe(404)
    expect((await hooks(undefined, "DELETE", `/${id}`)).status).toBe(404)
    expect((await hooks(undefined, "POST", `/${id}/test`)).status).toBe(404)
  })

  it("refuses bad input with a 400 naming the field", async () => {
    const cases: Array<[unknown, string]> = [
      [{}, "url"],
      [{ url: "not a url" }, "url"],
      [{ url: "ftp://127.0.0.1/x" }, "url"],
      [{ url: receiver.url, events: [] }, "events"],
      [{ url: receiver.url, events: "*" }, "events"],
      [{ url: receiver.url, events: ["has space"] }, "events"],
      [{ url: receiver.url, secret: "short" }, "secret"],
      [{ url: receiver.url, description: 5 }, "description"],
      [{ url: receiver.url, enabled: true }, "enabled"],
      [{ url: receiver.url, colour: "red" }, "colour"]
    ]
    for (const [body, field] of cases) {
      const res = await hooks(body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.message, JSON.stringify(body)).toContain(field)
    }
    const id = (await hooks({ url: receiver.url })).body.id
    for (const [body, field] of [
      [{ enabled: "yes" }, "enabled"],
      [{ url: "http://169.254.169.254/latest" }, "url"],
      [{ events: [] }, "events"]
    ] as const) {
      const res = await hooks(body, "PUT", `/${id}`)
      expect(res.status).toBe(400)
      expect(res.body.message).toContain(field)
    }
    const notJson = await call(`${gw.url}/api/webhooks`, { body: "{", headers: admin })
    expect(notJson.status).toBe(400)
  })

  it("needs management authentication", async () => {
    expect((await call(`${gw.url}/api/webhooks`)).status).toBe(401)
    const user = await call(`${gw.url}/api/webhooks`, { body: { url: receiver.url }, headers: { authorization: `Bearer ${USER}` } })
    expect([401, 403]).toContain(user.status)
    expect((await hooks()).body.webhooks).toEqual([])
  })

  it("refuses a metadata address at creation (SSRF policy), and an address a name comes to resolve to at delivery", async () => {
    for (const url of [
      "http://169.254.169.254/hook",
      "http://metadata.google.internal/x",
      "http://[fd00:ec2::254]/x",
      "http://[::ffff:169.254.169.254]/x"
    ]) {
      const res = await hooks({ url })
      expect(res.status, url).toBe(400)
      expect(res.body.message).toMatch(/^url: .*metadata/)
    }
    names.set("hooks.example", [{ address: "127.0.0.1", family: 4 }])
    const created = (await hooks({ url: `http://hooks.example:${receiver.port}/hook` })).body
    const ok = await hooks(undefined, "POST", `/${created.id}/test`)
    expect(ok.body).toEqual({ delivered: true, status: 200, error: null })
    names.set("hooks.example", [{ address: "169.254.169.254", family: 4 }])
    // A new connection (the keep-alive one to 127.0.0.1 would be reused for up to 30 s): another port's name.
    names.set("hooks2.example", [{ address: "169.254.169.254", family: 4 }])
    const moved = (await hooks({ url: `http://hooks2.example:${receiver.port}/hook` })).body
    const refused = await hooks(undefined, "POST", `/${moved.id}/test`)
    expect(refused.body).toMatchObject({ delivered: false, status: 0 })
    expect(refused.body.error).toContain("cloud metadata")
    expect(receiver.deliveries.length).toBe(1)
    expect((await hooks(undefined, "GET", `/${moved.id}`)).body).toMatchObject({ last_status: 0, last_triggered_at: expect.any(String) })
  })

  it("answers names in events that are no event as warnings, stores them, and never matches them", async () => {
    const res = await hooks({ url: receiver.url, events: ["request.completed", "request.complete", "guardrail.action"] })
    expect(res.status).toBe(201)
    expect(res.body.events).toEqual(["request.completed", "request.complete", "guardrail.action"])
    expect(res.body.warnings).toEqual([
      "events: 'request.complete' is not an event name; it is stored but never matches",
      "events: 'guardrail.action' is not an event name; it is stored but never matches"
    ])
    expect((await chat("oai/gpt-4o")).status).toBe(200)
    await receiver.waitFor(1)
    expect(receiver.deliveries.map((d) => d.body.event)).toEqual(["request.completed"])
  })
})

describe("events from their sources", () => {
  it("test endpoint: one signed test.ping, verified by both; a 500 is one attempt, no retry", async () => {
    for (const secret of [undefined, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "plain-ascii-secret-1234"]) {
      receiver.deliveries.length = 0
      const created = (await hooks({ url: receiver.url, ...(secret ? { secret } : {}) })).body
      const res = await hooks(undefined, "POST", `/${created.id}/test`)
      expect(res.status).toBe(200)
      expect(res.body).toEqual({ delivered: true, status: 200, error: null })
      const [d] = await receiver.waitFor(1)
      const body = verified(created.secret, d!)
      expect(body).toMatchObject({ event: "test.ping", data: { webhookId: created.id, message: expect.any(String) } })
      expect((await hooks(undefined, "GET", `/${created.id}`)).body).toMatchObject({
        last_status: 200,
        last_triggered_at: expect.any(String)
      })
    }
    receiver.deliveries.length = 0
    receiver.answer = () => 500
    const one = (await hooks({ url: receiver.url })).body
    const failed = await hooks(undefined, "POST", `/${one.id}/test`)
    expect(failed.body).toEqual({ delivered: false, status: 500, error: "receiver answered HTTP 500" })
    expect(receiver.deliveries.length).toBe(1)
  })

  it("a chat completion fires request.completed with the spec's data fields", async () => {
    const created = (await hooks({ url: receiver.url, events: ["request.completed"] })).body
    const res = await chat("oai/gpt-4o")
    expect(res.status).toBe(200)
    const [d] = await receiver.waitFor(1)
    const body = verified(created.secret, d!)
    expect(body.data).toMatchObject({
      trace_id: res.headers.get("x-gateway-request-id"),
      api_key_id: userKeyId,
      provider: "openai",
      model: "gpt-4o",
      status: 200,
      tokens_in: 11,
      tokens_out: 7,
      cost_usd: expect.any(Number)
    })
    expect(body.data.cost_usd).toBeGreaterThan(0)
  })

  it("a failing upstream fires request.failed and provider.error, and its recovery provider.recovered", async () => {
    const created = (await hooks({ url: receiver.url, events: ["request.failed", "provider.error", "provider.recovered"] })).body
    alt.always({ status: 500, errorMessage: "upstream broke" })
    // The breaker degrades at the first failure (so a success after it is a recovery).
    const breaker = (degradationThreshold: number) =>
      call(`${gw.url}/api/resilience`, {
        method: "PATCH",
        body: { providerBreaker: { apikey: { degradationThreshold, failureThreshold: 12, resetTimeoutMs: 30_000 } } },
        headers: admin
      })
    expect((await breaker(1)).status).toBe(200)
    try {
      const res = await chat("alt/m1")
      expect(res.status).toBe(502)
      await receiver.waitFor(2)
      const error = verified(created.secret, receiver.of("provider.error")[0]!)
      expect(error.data).toMatchObject({ provider: "openai-compatible", status: 500, consecutive_failures: 1, circuit_state: "DEGRADED" })
      const failed = verified(created.secret, receiver.of("request.failed")[0]!)
      expect(failed.data).toMatchObject({
        trace_id: res.headers.get("x-gateway-request-id"),
        api_key_id: userKeyId,
        provider: "openai-compatible",
        model: "m1",
        status: 502
      })
      // The connection's own cooldown (not the breaker) would refuse the next request: forgotten.
      await gw.run(Effect.flatMap(Cooldowns, (c) => c.reset()))
      alt.always({})
      expect((await chat("alt/m1")).status).toBe(200)
    } finally {
      await breaker(7)
    }
    const [rec] = await receiver.waitFor(1, (d) => d.body.event === "provider.recovered")
    expect(verified(created.secret, rec!).data).toMatchObject({ provider: "openai-compatible" })
  })

  it("a spent budget fires quota.exceeded", async () => {
    const created = (await hooks({ url: receiver.url, events: ["quota.exceeded"] })).body
    // A key of its own: a budget counts what its key already spent today.
    const secret = "gwk_webhooks_budget_key_0123456789abcdef"
    const keyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "budgeted", scopes: ["inference"] }, { secret })))).id
    const set = await call(`${gw.url}/api/usage/budget`, {
      body: { apiKeyId: keyId, dailyLimitUsd: 0.00015, warningThreshold: 0.5 },
      headers: admin
    })
    expect(set.status).toBe(200)
    // 11 + 7 tokens of gpt-4o cost $0.0000975: the first crosses the warning, the second the limit.
    expect((await chat("oai/gpt-4o", secret)).status).toBe(200)
    expect((await chat("oai/gpt-4o", secret)).status).toBe(200)
    const got = await receiver.waitFor(2)
    const data = got.map((d) => verified(created.secret, d).data)
    expect(data.map((x) => x.kind)).toEqual(["warning", "exceeded"])
    expect(data[1]).toMatchObject({ source: "budget", api_key_id: keyId, window: "daily", limit_usd: 0.00015 })
  })

  it("a token limit crossed by real inference fires quota.exceeded once (source token_limit); the next request is refused", async () => {
    const created = (await hooks({ url: receiver.url, events: ["quota.exceeded"] })).body
    const secret = "gwk_webhooks_tokens_key_0123456789abcdef"
    const keyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "token-limited", scopes: ["inference"] }, { secret })))).id
    const limit = await call(`${gw.url}/api/usage/token-limits`, {
      body: { apiKeyId: keyId, scope: "model", model: "oai/gpt-4o", maxTokens: 30, window: "day" },
      headers: admin
    })
    expect(limit.status, limit.text).toBe(201)
    // 11 + 7 tokens a request: the first stays under 30, the second crosses it.
    expect((await chat("oai/gpt-4o", secret)).status).toBe(200)
    expect(receiver.deliveries.length).toBe(0)
    expect((await chat("oai/gpt-4o", secret)).status).toBe(200)
    const [d] = await receiver.waitFor(1)
    expect(verified(created.secret, d!).data).toMatchObject({
      source: "token_limit",
      kind: "exceeded",
      api_key_id: keyId,
      limit_id: limit.body.id,
      scope: "model",
      model: "oai/gpt-4o",
      window: "day",
      used_tokens: 36,
      max_tokens: 30
    })
    const refused = await chat("oai/gpt-4o", secret)
    expect(refused.status).toBe(429)
    // Announced once per window: a request refused by the spent limit publishes nothing more.
    expect((await hooks(undefined, "POST", `/${created.id}/test`)).body.delivered).toBe(true)
    await receiver.waitFor(2)
    expect(receiver.of("quota.exceeded").length).toBe(1)
  })

  it("a combo whose primary target fails over fires combo.switched", async () => {
    const created = (await hooks({ url: receiver.url, events: ["combo.switched"] })).body
    const combo = await call(`${gw.url}/api/combos`, {
      body: { name: "hookpair", strategy: "priority", targets: [{ model: "alt/m1" }, { model: "oai/gpt-4o" }] },
      headers: admin
    })
    expect(combo.status).toBe(201)
    try {
      expect((await chat("hookpair")).status).toBe(200)
      alt.always({ status: 503, errorMessage: "overloaded" })
      expect((await chat("hookpair")).status).toBe(200)
      const [d] = await receiver.waitFor(1)
      expect(verified(created.secret, d!)).toMatchObject({
        event: "combo.switched",
        data: { combo: "hookpair", from: expect.stringContaining("alt"), to: expect.stringContaining("oai") }
      })
    } finally {
      await call(`${gw.url}/api/combos/hookpair`, { method: "DELETE", headers: admin })
    }
  })
})
