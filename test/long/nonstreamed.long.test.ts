import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { DEFAULT_STREAM_TIMEOUTS } from "../../src/inference/StreamTimeouts.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "../support/gateway.js"

/**
 * `npm run test:long`: generations that take minutes, against the gateway's default limits (60 s
 * for a whole answer's headers, 120 s of stream silence), in real time. test/nonstreamed.collect
 * .test.ts has the same cases with the limits scaled down, in npm test.
 */
const ADMIN = "gwk_long_admin_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }
const MINUTE = 60_000

let gw: TestGateway
let up: FakeUpstream
beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) =>
    expect((await call(`${gw.url}/api/providers`, { body, headers: admin })).status).toBe(201)
  await add({ provider: "anthropic", name: "thinker", apiKey: "sk-ant-long", baseUrl: up.baseUrl("anthropic"), defaultModel: "m1" })
  await add({ provider: "anthropic", name: "silent", apiKey: "sk-ant-long", baseUrl: up.baseUrl("anthropic"), defaultModel: "m1" })
  await add({
    provider: "anthropic",
    name: "whole",
    apiKey: "sk-ant-long",
    baseUrl: up.baseUrl("anthropic"),
    defaultModel: "m1",
    timeouts: { nonStreamed: "whole" }
  })
  await add({ provider: "openai-compatible", name: "steady", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" })
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "silent-then-steady", strategy: "priority", targets: [{ model: "silent/m1" }, { model: "steady/m1" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
  // The cases run at once; each one's request says what it wants of the upstream.
  up.script((r) => {
    const asked = JSON.stringify(r.body)
    if (asked.includes("think for a while")) return { content: LONG, chunks: 36, chunkDelayMs: 5000 }
    if (asked.includes("silent, please"))
      return r.family === "anthropic"
        ? { content: "one two three four", chunks: 4, chunkDelayMs: 100, stallAfterChunks: 5 }
        : { content: "from steady" }
    if (asked.includes("whole, please")) return { content: "too late", delayMs: 70_000 }
    return {}
  })
})

const LONG = Array.from({ length: 36 }, (_, i) => `piece${i} `).join("")
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

const chat = (model: string) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "think for a while" }] } })

describe("non-streamed generations of minutes, with the default limits", () => {
  it("the limits are the defaults this file is about", () => {
    expect(DEFAULT_STREAM_TIMEOUTS).toMatchObject({ headersMs: MINUTE, idleMs: 2 * MINUTE, firstContentMs: MINUTE })
  })

  // The three run at once: the file takes about as long as its longest case.
  it.concurrent("a 3-minute answer with a token every 5 seconds is served whole", { timeout: 5 * MINUTE }, async () => {
    const started = Date.now()
    const res = await chat("thinker/m1")
    expect(res.status, res.text).toBe(200)
    expect(res.body.choices[0].message.content).toBe(LONG)
    expect(Date.now() - started).toBeGreaterThan(3 * MINUTE)
  })

  it.concurrent("one that goes silent after its first tokens is cut by the 120 s idle limit and falls back", {
    timeout: 5 * MINUTE
  }, async () => {
    const started = Date.now()
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "silent-then-steady", messages: [{ role: "user", content: "silent, please" }] }
    })
    expect(res.status, res.text).toBe(200)
    expect(res.body.choices[0].message.content).toBe("from steady")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    // Left at the idle limit, not at the first-content one (it had begun).
    expect(Date.now() - started).toBeGreaterThan(2 * MINUTE)
  })

  it.concurrent("a connection set to whole answers still stops at the 60 s headers limit", { timeout: 5 * MINUTE }, async () => {
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "whole/m1", messages: [{ role: "user", content: "whole, please" }] }
    })
    expect(res.status, res.text).toBe(504)
    expect(res.body.error.code).toBe("upstream_timeout")
  })
})
