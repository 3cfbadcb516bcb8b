import * as Effect from "effect/Effect"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import {
  addMetadata,
  blockRequest,
  type ErrorEvent,
  modifyBody,
  type ProviderErrorEvent,
  type RequestHook,
  type ResponseEvent
} from "../src/kernel/hooks.js"
import { RequestHooks } from "../src/kernel/RequestHooks.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * The request lifecycle (docs/ARCHITECTURE.md, "Seam 2"): hooks registered on the running
 * gateway, observed through HTTP against real fake upstreams on 127.0.0.1.
 */
const ADMIN = "gwk_hooks_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let main: FakeUpstream
let flaky: FakeUpstream
const registered: Array<() => void> = []

const register = async (hook: RequestHook): Promise<() => void> => {
  const off = await gw.run(Effect.map(RequestHooks, (hooks) => hooks.register(hook)))
  registered.push(off)
  return off
}

beforeAll(async () => {
  main = await FakeUpstream.start()
  flaky = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (await add({ provider: "openai-compatible", name: "main", baseUrl: main.baseUrl("openai-chat"), defaultModel: "m1" })).status
  ).toBe(201)
  expect(
    (await add({ provider: "openai-compatible", name: "flaky", baseUrl: flaky.baseUrl("openai-chat"), defaultModel: "m1" })).status
  ).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "duo", strategy: "priority", targets: [{ model: "main/m1" }, { model: "flaky/m1" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await main?.close()
  await flaky?.close()
})

beforeEach(() => {
  main.always({})
  flaky.always({})
  main.requests.length = 0
  flaky.requests.length = 0
})

afterEach(async () => {
  for (const off of registered.splice(0)) off()
  await gw.resetResilience()
})

const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  call(`${gw.url}/v1/chat/completions`, { body: { messages: [{ role: "user", content: "hi" }], ...body }, headers })

const messages = (body: Record<string, unknown>) =>
  call(`${gw.url}/v1/messages`, { body: { max_tokens: 64, messages: [{ role: "user", content: "hi" }], ...body } })

/** The text a chat completions stream carried. */
const contentOf = (sse: string): string =>
  sse
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)).choices?.[0]?.delta?.content ?? "")
    .join("")

/** Waits until `check` holds (log lines of detached work arrive a moment later). */
const eventually = async (check: () => boolean, ms = 2000): Promise<void> => {
  const until = Date.now() + ms
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not met in time")
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe("order", () => {
  it("runs handlers by ascending priority (default 100), ties in registration order", async () => {
    const ran: Array<string> = []
    const hook = (name: string, priority?: number): RequestHook => ({
      name,
      ...(priority === undefined ? {} : { priority }),
      onRequest: () => void ran.push(name)
    })
    await register(hook("late", 200))
    await register(hook("early-1", 50))
    await register(hook("default"))
    await register(hook("early-2", 50))
    await register(hook("first", -5))
    expect((await chat({ model: "main/m1" })).status).toBe(200)
    expect(ran).toEqual(["first", "early-1", "early-2", "default", "late"])
    // The gateway's own (context.compression, priority 60) are registered too.
    const names = await gw.run(
      Effect.map(RequestHooks, (h) =>
        h
          .registered()
          .map((r) => r.name)
          .filter((n) => !n.startsWith("context."))
      )
    )
    expect(names).toEqual(["first", "early-1", "early-2", "default", "late"])
  })

  it("an unregistered hook runs no more", async () => {
    let calls = 0
    const off = await register({ name: "counter", onRequest: () => void calls++ })
    await chat({ model: "main/m1" })
    off()
    await chat({ model: "main/m1" })
    expect(calls).toBe(1)
  })

  it("a request meets the events in order: request, combo, model, attempt, stream, response", async () => {
    const seen: Array<string> = []
    const all: RequestHook = {
      name: "tracer",
      onRequest: () => void seen.push("onRequest"),
      onComboResolve: () => void seen.push("onComboResolve"),
      onModelSelect: () => void seen.push("onModelSelect"),
      onAttemptStart: () => void seen.push("onAttemptStart"),
      onStreamStart: () => void seen.push("onStreamStart"),
      onFrame: () => void (seen.at(-1) === "onFrame" || seen.push("onFrame")),
      onStreamEnd: () => void seen.push("onStreamEnd"),
      onResponse: () => void seen.push("onResponse"),
      onError: () => void seen.push("onError")
    }
    await register(all)
    const res = await chat({ model: "duo", stream: true })
    expect(res.status).toBe(200)
    expect(seen).toEqual([
      "onRequest",
      "onComboResolve",
      "onModelSelect",
      "onAttemptStart",
      "onStreamStart",
      "onFrame",
      "onStreamEnd",
      "onResponse"
    ])
  })
})

describe("changing the body", () => {
  it("an onRequest hook that rewrites the messages changes what the upstream receives (passed through)", async () => {
    await register({
      name: "rewriter",
      onRequest: (event) => modifyBody({ ...event.body, messages: [{ role: "user", content: "rewritten by a hook" }] })
    })
    const res = await chat({ model: "main/m1" })
    expect(res.status).toBe(200)
    expect(main.requests).toHaveLength(1)
    expect(main.requests[0]!.body.messages).toEqual([{ role: "user", content: "rewritten by a hook" }])
  })

  it("an Effect handler's rewrite reaches a translated request too (messages → chat completions)", async () => {
    await register({
      name: "async-rewriter",
      onRequest: (event) =>
        Effect.as(Effect.sleep("5 millis"), modifyBody({ ...event.body, messages: [{ role: "user", content: "rewritten later" }] }))
    })
    const res = await messages({ model: "main/m1" })
    expect(res.status).toBe(200)
    expect(res.body.type).toBe("message")
    expect(main.requests).toHaveLength(1)
    expect(main.requests[0]!.body.messages).toEqual([{ role: "user", content: "rewritten later" }])
  })

  it("each handler sees the body as the earlier ones left it; onModelSelect may change it again", async () => {
    const bodies: Array<unknown> = []
    await register({ name: "a", priority: 1, onRequest: (e) => modifyBody({ ...e.body, messages: [{ role: "user", content: "a" }] }) })
    await register({
      name: "b",
      priority: 2,
      onRequest: (e) => {
        bodies.push(e.body["messages"])
        return undefined
      },
      onModelSelect: (e) => {
        bodies.push(e.body["messages"])
        return modifyBody({ ...e.body, messages: [{ role: "user", content: `${e.target?.key}` }] })
      }
    })
    expect((await chat({ model: "main/m1" })).status).toBe(200)
    expect(bodies).toEqual([[{ role: "user", content: "a" }], [{ role: "user", content: "a" }]])
    expect(main.requests[0]!.body.messages).toEqual([{ role: "user", content: "main/m1" }])
  })
})

describe("blocking", () => {
  it("a hook that blocks answers its own status and body; the upstream receives nothing", async () => {
    const ends: Array<ErrorEvent> = []
    await register({ name: "guard", onRequest: () => blockRequest({ status: 451, body: { blocked: true, why: "policy" } }) })
    await register({ name: "never", priority: 500, onRequest: () => void ends.push(undefined as never) })
    await register({ name: "watcher", onError: (e) => void ends.push(e) })
    const res = await chat({ model: "main/m1" })
    expect(res.status).toBe(451)
    expect(res.body).toEqual({ blocked: true, why: "policy" })
    expect(res.headers.get("x-gateway-request-id")).toMatch(/^req_/)
    expect(main.requests).toHaveLength(0)
    // Later handlers of the event do not run; the request ends through onError, naming the hook.
    expect(ends).toHaveLength(1)
    expect(ends[0]!.status).toBe(451)
    expect(ends[0]!.blockedBy).toBe("guard")
    // The usage row says so (the built-in usage hook runs before every registered one).
    expect(ends[0]!.usage).toMatchObject({ status: 451, requestedModel: "main/m1", error: "the request was blocked by guard" })
  })

  it("a block without a body is an error in the client's own format", async () => {
    await register({ name: "anthropic-guard", onRequest: () => blockRequest({ status: 429, message: "too many words today" }) })
    const res = await messages({ model: "main/m1" })
    expect(res.status).toBe(429)
    expect(res.body).toEqual({ type: "error", error: { type: "rate_limit_error", message: "too many words today" } })
    expect(main.requests).toHaveLength(0)
  })

  it("onAttemptStart can block before anything goes upstream; onComboResolve can block a combo", async () => {
    await register({
      name: "no-main",
      onAttemptStart: (e) => (e.target.connection === "main" ? blockRequest({ status: 403, message: `not to ${e.target.key}` }) : undefined)
    })
    const res = await chat({ model: "main/m1" })
    expect(res.status).toBe(403)
    expect(res.body.error.message).toBe("not to main/m1")
    expect(main.requests).toHaveLength(0)

    await register({ name: "no-combos", onComboResolve: (e) => blockRequest({ status: 400, message: `combo ${e.scope} is closed` }) })
    const combo = await chat({ model: "duo" })
    expect(combo.status).toBe(400)
    expect(combo.body.error.message).toBe("combo duo is closed")
    expect(flaky.requests).toHaveLength(0)
  })
})

describe("metadata", () => {
  it("metadata attached early is visible to later hooks, to the request's end", async () => {
    const seen: Array<unknown> = []
    await register({ name: "tagger", onRequest: (_e, request) => addMetadata({ tenant: "t1", requestId: request.requestId }) })
    await register({
      name: "reader",
      priority: 200,
      onAttemptStart: (_e, request) => {
        seen.push(request.metadata["tenant"])
        request.metadata["attempted"] = true
      },
      onResponse: (_e, request) => void seen.push({ ...request.metadata })
    })
    const res = await chat({ model: "main/m1" })
    expect(res.status).toBe(200)
    expect(seen).toEqual(["t1", { tenant: "t1", requestId: res.headers.get("x-gateway-request-id"), attempted: true }])
  })
})

describe("streams", () => {
  it("stream started, frame and stream ended fire for a streamed answer, with the frames the client got", async () => {
    main.always({ content: "one two three four five", chunks: 5 })
    const starts: Array<number> = []
    const frames: Array<string> = []
    const ends: Array<{ text: string; error: string | null }> = []
    const responses: Array<ResponseEvent> = []
    await register({
      name: "inspector",
      onStreamStart: (e) => void starts.push(e.status),
      onFrame: (e) => void frames.push(e.text),
      onStreamEnd: (e) => void ends.push(e),
      onResponse: (e) => void responses.push(e)
    })
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "main/m1", stream: true, messages: [{ role: "user", content: "count" }] })
    })
    const text = await res.text()
    const events = (t: string) => t.split("\n\n").filter((e) => e.startsWith("data: ")).length
    expect(res.status).toBe(200)
    expect(starts).toEqual([200])
    expect(ends).toHaveLength(1)
    expect(ends[0]!.error).toBeNull()
    // What the hooks saw is what the client got, event for event.
    expect(frames.join("") + ends[0]!.text).toBe(text)
    expect(events(frames.join("") + ends[0]!.text)).toBe(events(text))
    expect(events(text)).toBeGreaterThanOrEqual(7)
    for (const f of frames) expect(f.endsWith("\n\n")).toBe(true)
    expect(responses).toHaveLength(1)
    expect(responses[0]).toMatchObject({ status: 200, streamed: true, body: undefined })
    expect(responses[0]!.usage).toMatchObject({ status: 200, stream: true, provider: "openai-compatible" })
  })

  it("a whole answer reaches onResponse with its bytes and headers; no stream events fire", async () => {
    main.always({ content: "whole" })
    const streamed: Array<string> = []
    const responses: Array<ResponseEvent> = []
    await register({
      name: "whole",
      onStreamStart: () => void streamed.push("start"),
      onFrame: () => void streamed.push("frame"),
      onResponse: (e) => void responses.push(e)
    })
    const res = await chat({ model: "main/m1" })
    expect(res.status).toBe(200)
    expect(streamed).toEqual([])
    expect(responses).toHaveLength(1)
    expect(String(responses[0]!.body)).toBe(res.text)
    expect(responses[0]!.headers?.["x-gateway-request-id"]).toBe(res.headers.get("x-gateway-request-id"))
    expect(responses[0]!.streamed).toBe(false)
  })
})

describe("the request's end", () => {
  it("every request of the inference plane ends with onResponse or onError, routes outside the pipeline too", async () => {
    const ends: Array<{ event: string; status: number; path: string; usage: unknown; error?: unknown }> = []
    await register({
      name: "ends",
      onResponse: (e, request) => void ends.push({ event: "onResponse", status: e.status, path: request.path, usage: e.usage }),
      onError: (e, request) => void ends.push({ event: "onError", status: e.status, path: request.path, usage: e.usage, error: e.error })
    })
    const models = await call(`${gw.url}/v1/models`)
    expect(models.status).toBe(200)
    const missing = await call(`${gw.url}/v1/nothing-here`, { body: {} })
    expect(missing.status).toBe(404)
    expect(ends).toEqual([
      { event: "onResponse", status: 200, path: "/v1/models", usage: undefined },
      {
        event: "onError",
        status: 404,
        path: "/v1/nothing-here",
        usage: undefined,
        error: { status: 404, code: "not_found", message: expect.stringContaining("no route") }
      }
    ])
  })
})

describe("upstream errors", () => {
  it("onProviderError fires when the upstream answers 500; onRateLimit too when it answers 429", async () => {
    const errors: Array<ProviderErrorEvent> = []
    const limits: Array<ProviderErrorEvent> = []
    const failed: Array<ErrorEvent> = []
    await register({
      name: "watch",
      onProviderError: (e) => void errors.push(e),
      onRateLimit: (e) => void limits.push(e),
      onError: (e) => void failed.push(e)
    })

    flaky.next({ status: 500 })
    const first = await chat({ model: "flaky/m1" })
    expect(first.status).toBeGreaterThanOrEqual(500)
    expect(errors).toHaveLength(1)
    expect(errors[0]).toMatchObject({
      attempt: 1,
      status: 500,
      kind: "http",
      reason: "server_error",
      answered: false,
      target: { key: "flaky/m1", connection: "flaky", provider: "openai-compatible", model: "m1" }
    })
    expect(limits).toHaveLength(0)
    expect(failed).toHaveLength(1)
    expect(failed[0]!.error?.status).toBe(first.status)

    await gw.resetResilience()
    flaky.next({ status: 429, headers: { "retry-after": "1" } })
    const second = await chat({ model: "flaky/m1" })
    expect(second.status).toBe(429)
    expect(errors).toHaveLength(2)
    expect(errors[1]).toMatchObject({ status: 429, reason: "rate_limited" })
    expect(limits).toHaveLength(1)
    expect(limits[0]).toEqual(errors[1])
  })

  it("a combo whose first target fails fires onProviderError for it and onAttemptStart for each target", async () => {
    flaky.always({ status: 503 })
    await call(`${gw.url}/api/combos`, {
      body: { name: "flaky-first", strategy: "priority", targets: [{ model: "flaky/m1" }, { model: "main/m1" }] },
      headers: admin
    })
    try {
      const attempts: Array<string> = []
      const errors: Array<string> = []
      await register({
        name: "watch",
        onAttemptStart: (e) => void attempts.push(`${e.attempt}:${e.target.key}`),
        onProviderError: (e) => void errors.push(`${e.target.key}:${e.status}:${e.retryable}`)
      })
      const res = await chat({ model: "flaky-first" })
      expect(res.status).toBe(200)
      expect(attempts).toEqual(["1:flaky/m1", "2:main/m1"])
      expect(errors).toEqual(["flaky/m1:503:true"])
    } finally {
      await call(`${gw.url}/api/combos/flaky-first`, { method: "DELETE", headers: admin })
    }
  })
})

describe("failing hooks", () => {
  it("a hook that throws or fails is logged and skipped: the request is answered as usual", async () => {
    main.always({ content: "still fine", chunks: 3 })
    const ran: Array<string> = []
    await register({
      name: "thrower",
      onRequest: () => {
        throw new Error("boom in onRequest")
      }
    })
    await register({ name: "failer", onModelSelect: () => Effect.fail("no model for you") })
    await register({
      name: "dier",
      onFrame: () => {
        throw new Error("boom in onFrame")
      },
      onStreamStart: () => Effect.die("boom in onStreamStart")
    })
    await register({ name: "bad-verdict", onRequest: () => ({ body: "not an object" }) as never })
    await register({ name: "end-dier", onResponse: () => Effect.die("boom at the end") })
    await register({
      name: "survivor",
      priority: 1000,
      onRequest: () => void ran.push("onRequest"),
      onResponse: () => void ran.push("onResponse")
    })
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "main/m1", stream: true, messages: [{ role: "user", content: "hi" }] })
    })
    const text = await res.text()
    expect(res.status).toBe(200)
    expect(contentOf(text)).toBe("still fine")
    expect(text).toContain("data: [DONE]")
    expect(ran).toEqual(["onRequest", "onResponse"])
    const warned = (hook: string, event: string) =>
      gw.logs.some((l) => l.level === "WARN" && l.message.includes(`hook ${hook} failed in ${event}`))
    await eventually(
      () =>
        warned("thrower", "onRequest") &&
        warned("failer", "onModelSelect") &&
        warned("dier", "onFrame") &&
        warned("dier", "onStreamStart") &&
        warned("bad-verdict", "onRequest") &&
        warned("end-dier", "onResponse")
    )
    // The process is still serving.
    expect((await chat({ model: "main/m1" })).status).toBe(200)
  })

  it("a hook with no name or a handler that is not a function is refused at registration", async () => {
    await expect(register({ name: "" })).rejects.toThrow(/name/)
    await expect(register({ name: "odd", onFrame: "yes" as never })).rejects.toThrow(/onFrame must be a function/)
  })
})

describe("the built-in hooks", () => {
  it("an idempotent duplicate of a streamed answer replays the recorded bytes", async () => {
    main.always({ content: "recorded stream", chunks: 4 })
    const body = JSON.stringify({ model: "main/m1", stream: true, messages: [{ role: "user", content: "once" }] })
    const send = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": "hooks-stream-1" },
        body
      })
    const first = await send()
    const firstText = await first.text()
    const dup = await send()
    expect(dup.headers.get("x-gateway-idempotent")).toBe("true")
    expect(await dup.text()).toBe(firstText)
    expect(main.requests).toHaveLength(1)
  })
})
