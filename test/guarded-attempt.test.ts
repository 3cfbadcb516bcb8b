import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { type Family, FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * One guarded attempt for every upstream call (docs/ARCHITECTURE.md, "Seam 1"): embeddings,
 * count_tokens, the WebSocket Responses relay and fusion panel members get the admission,
 * breakers, cooldowns and fallback chat has. Each path has two connections serving the same
 * model (or a combo of them): "a" on the `flaky` fake upstream, "b" on `steady`. When `flaky`
 * fails, the request falls back to `steady`; the failure cools "a" down (or opens its breaker),
 * so the next request does not reach `flaky` at all (counted on the fake upstream).
 */
const ADMIN = "gwk_guarded_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const TIMEOUTS = { headersMs: 400, streamHeadersMs: 400, firstContentMs: 400, idleMs: 400 }

let gw: TestGateway
let flaky: FakeUpstream
let steady: FakeUpstream

const resilience = () => call(`${gw.url}/api/resilience`, { headers: admin }).then((r) => r.body)
const connectionOf = async (name: string) => (await resilience()).connections.find((c: any) => c.name === name)
const breakersOf = async (provider: string) => (await resilience()).breakers.filter((b: any) => b.provider === provider)
/** Cooldowns of 1 ms: a failing connection is asked again at once, so its breaker counts every failure. */
const shortCooldowns = (on: boolean) =>
  call(`${gw.url}/api/resilience`, {
    method: "PATCH",
    body: { connectionCooldown: on ? { apiKeyBaseMs: 1, maxCooldownMs: 1 } : { apiKeyBaseMs: 3000, maxCooldownMs: 300_000 } },
    headers: admin
  })

const usageRows = async (requestId: string | null) => {
  await gw.usageWritten()
  return queryDb(
    gw.dataDir,
    "SELECT endpoint, status, connection_id, fallback_attempts FROM usage WHERE request_id = ? ORDER BY id",
    requestId
  )
}
const connectionId = async (name: string): Promise<string> => (await call(`${gw.url}/api/providers/${name}`, { headers: admin })).body.id

/** Requests the fake upstream got on one route since the test began. */
const hits = (up: FakeUpstream, path: RegExp) => up.requests.filter((r) => path.test(r.path)).length

beforeAll(async () => {
  flaky = await FakeUpstream.start()
  steady = await FakeUpstream.start()
  gw = await startGateway({ timeouts: TIMEOUTS })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  /** "<name>-a" on flaky (tried first), "<name>-b" on steady, both serving `models`. */
  const pair = async (name: string, family: Family, connection: Record<string, unknown>, models: Array<string>) => {
    await add({ ...connection, name: `${name}-a`, priority: 1, baseUrl: flaky.baseUrl(family), models })
    await add({ ...connection, name: `${name}-b`, priority: 2, baseUrl: steady.baseUrl(family), models })
  }
  const combo = async (name: string, body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/combos`, { body: { name, ...body }, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  // Embeddings: one model id served by two connections (the router orders them by priority).
  await pair("emb", "openai-chat", { provider: "openai-compatible" }, ["emb-1"])
  await pair("oll", "ollama", { provider: "ollama" }, ["nomic-embed"])
  // count_tokens: combos over two Anthropic and two Gemini connections.
  await pair("ct", "anthropic", { provider: "anthropic", apiKey: "sk-ant-upstream" }, ["claude-x"])
  await combo("counting", { strategy: "priority", targets: [{ model: "ct-a/claude-x" }, { model: "ct-b/claude-x" }] })
  await pair("gc", "gemini", { provider: "gemini", apiKey: "gemini-upstream-key" }, ["gem-x"])
  await combo("gem-counting", { strategy: "priority", targets: [{ model: "gc-a/gem-x" }, { model: "gc-b/gem-x" }] })
  // The WebSocket relay: two Responses-API connections serving one model.
  await pair("ws", "openai-responses", { provider: "openai-compatible", upstreamFormat: "openai-responses" }, ["gpt-ws"])
  // Fusion: the first panel member's model is served by two connections; the second member is also the judge.
  await pair("pm", "openai-chat", { provider: "openai-compatible" }, ["pm-1"])
  await add({ provider: "openai-compatible", name: "pm-c", baseUrl: steady.baseUrl("openai-chat"), models: ["pm-2"] })
  await combo("council", {
    strategy: "fusion",
    targets: [{ model: "pm-1" }, { model: "pm-c/pm-2" }],
    config: { judgeModel: "pm-c/pm-2", fusionTuning: { minPanel: 2, stragglerGraceMs: 500, panelHardTimeoutMs: 5000 } }
  })
})
afterAll(async () => {
  await gw?.close()
  await flaky?.close()
  await steady?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  for (const up of [flaky, steady]) {
    up.always({ content: "from upstream" })
    up.requests.length = 0
  }
  flaky.always({ status: 503 })
})

describe("embeddings go through the guarded attempt", () => {
  it("POST /v1/embeddings falls back to the next connection on a 503, which cools the first down: the next request does not reach it", async () => {
    const first = await call(`${gw.url}/v1/embeddings`, { body: { model: "emb-1", input: ["hello", "world"] } })
    expect(first.status, first.text).toBe(200)
    expect(first.body.data).toHaveLength(2)
    expect(first.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(hits(flaky, /embeddings/)).toBe(1)
    expect(hits(steady, /embeddings/)).toBe(1)
    expect(await connectionOf("emb-a")).toMatchObject({ state: "cooldown" })
    // One usage row for the request: the connection that answered, after one fallback.
    expect(await usageRows(first.headers.get("x-gateway-request-id"))).toEqual([
      { endpoint: "embeddings", status: 200, connection_id: await connectionId("emb-b"), fallback_attempts: 1 }
    ])

    const second = await call(`${gw.url}/v1/embeddings`, { body: { model: "emb-1", input: "again" } })
    expect(second.status).toBe(200)
    expect(second.headers.get("x-gateway-fallback-attempts")).toBeNull()
    expect(hits(flaky, /embeddings/)).toBe(1)
    expect(hits(steady, /embeddings/)).toBe(2)
  })

  for (const [name, path, body, answered] of [
    [
      "Gemini embedContent",
      "/v1beta/models/emb-1:embedContent",
      { content: { parts: [{ text: "hi" }] } },
      (b: any) => b.embedding.values.length > 0
    ],
    [
      "Gemini batchEmbedContents",
      "/v1beta/models/emb-1:batchEmbedContents",
      { requests: [{ content: { parts: [{ text: "hi" }] } }] },
      (b: any) => b.embeddings.length === 1
    ],
    ["Ollama /api/embed", "/api/embed", { model: "emb-1", input: ["hi"] }, (b: any) => b.embeddings.length === 1],
    ["Ollama /api/embeddings", "/api/embeddings", { model: "emb-1", prompt: "hi" }, (b: any) => b.embedding.length > 0]
  ] as const) {
    it(`${name} falls back too, and skips the cooling connection next time`, async () => {
      const first = await call(`${gw.url}${path}`, { body })
      expect(first.status, first.text).toBe(200)
      expect(answered(first.body)).toBe(true)
      expect(first.headers.get("x-gateway-fallback-attempts")).toBe("1")
      expect(await call(`${gw.url}${path}`, { body }).then((r) => r.status)).toBe(200)
      expect(hits(flaky, /embeddings/)).toBe(1)
      expect(hits(steady, /embeddings/)).toBe(2)
    })
  }

  it("failures count for the provider breaker: a local provider's breaker opens after 2, and its connection is not asked again", async () => {
    expect((await shortCooldowns(true)).status).toBe(200)
    try {
      for (let i = 0; i < 2; i++) {
        const res = await call(`${gw.url}/api/embed`, { body: { model: "nomic-embed", input: ["hi"] } })
        expect(res.status, res.text).toBe(200)
      }
      expect(hits(flaky, /\/api\/embed/)).toBe(2)
      const breakers = await breakersOf("ollama")
      // One breaker per upstream origin: flaky's is open, steady's never failed.
      expect(breakers).toHaveLength(1)
      expect(breakers[0]).toMatchObject({ state: "OPEN", consecutiveFailures: 2 })
      expect(breakers[0].origin).toBe(new URL(flaky.url).origin)
      const third = await call(`${gw.url}/api/embed`, { body: { model: "nomic-embed", input: ["hi"] } })
      expect(third.status).toBe(200)
      expect(third.headers.get("x-gateway-fallback-attempts")).toBeNull()
      expect(hits(flaky, /\/api\/embed/)).toBe(2)
      expect(hits(steady, /\/api\/embed/)).toBe(3)
    } finally {
      await shortCooldowns(false)
    }
  })

  it("when every connection fails, the client gets the last failure, and the row says so", async () => {
    steady.always({ status: 500, errorMessage: "steady is down too" })
    const res = await call(`${gw.url}/v1/embeddings`, { body: { model: "emb-1", input: "hi" } })
    // The upstream's 500 reaches the client as 502 (the gateway answers 500 only for its own defects).
    expect(res.status).toBe(502)
    expect(res.headers.get("x-gateway-upstream-status")).toBe("500")
    expect(res.body.error.message).toContain("steady is down too")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(await usageRows(res.headers.get("x-gateway-request-id"))).toEqual([
      { endpoint: "embeddings", status: 502, connection_id: await connectionId("emb-b"), fallback_attempts: 1 }
    ])
    // Both cool down: the next request is refused without reaching either.
    const again = await call(`${gw.url}/v1/embeddings`, { body: { model: "emb-1", input: "hi" } })
    expect(again.status).toBe(503)
    expect(again.body.error.code).toBe("no_available_target")
    expect(hits(flaky, /embeddings/) + hits(steady, /embeddings/)).toBe(2)
  })
})

describe("count_tokens goes through the guarded attempt", () => {
  const anthropicCount = () =>
    call(`${gw.url}/v1/messages/count_tokens`, { body: { model: "counting", messages: [{ role: "user", content: "count me" }] } })
  const geminiCount = () =>
    call(`${gw.url}/v1beta/models/gem-counting:countTokens`, { body: { contents: [{ role: "user", parts: [{ text: "count me" }] }] } })

  it("Anthropic: a 503 falls back to the combo's next target, which counts; the failing connection cools down and is not asked next time", async () => {
    steady.always({ body: { input_tokens: 4242 } })
    const first = await anthropicCount()
    expect(first.status, first.text).toBe(200)
    // The upstream's count, not the gateway's own estimate.
    expect(first.body).toEqual({ input_tokens: 4242 })
    expect(first.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(await connectionOf("ct-a")).toMatchObject({ state: "cooldown" })
    expect((await anthropicCount()).body).toEqual({ input_tokens: 4242 })
    expect(hits(flaky, /count_tokens/)).toBe(1)
    expect(hits(steady, /count_tokens/)).toBe(2)
  })

  it("Gemini: a 500 falls back to the combo's next target, which counts; the failing connection cools down and is not asked next time", async () => {
    flaky.always({ status: 500 })
    steady.always({ body: { totalTokens: 4343 } })
    const first = await geminiCount()
    expect(first.status, first.text).toBe(200)
    expect(first.body).toEqual({ totalTokens: 4343 })
    expect(first.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(await connectionOf("gc-a")).toMatchObject({ state: "cooldown" })
    expect((await geminiCount()).body).toEqual({ totalTokens: 4343 })
    expect(hits(flaky, /countTokens/)).toBe(1)
    expect(hits(steady, /countTokens/)).toBe(2)
  })

  it("when no target can count, the gateway counts itself (200, never the upstream's error)", async () => {
    steady.always({ status: 503 })
    const res = await anthropicCount()
    expect(res.status).toBe(200)
    expect(res.body.input_tokens).toBeGreaterThan(0)
    expect(res.body.input_tokens).not.toBe(4242)
    expect(hits(flaky, /count_tokens/) + hits(steady, /count_tokens/)).toBe(2)
  })

  it("an upstream that does not count (404) is passed over without being held against it", async () => {
    flaky.always({ status: 404, errorMessage: "no such endpoint" })
    steady.always({ body: { input_tokens: 4242 } })
    expect((await anthropicCount()).body).toEqual({ input_tokens: 4242 })
    expect(await connectionOf("ct-a")).toMatchObject({ state: "available" })
    expect((await anthropicCount()).body).toEqual({ input_tokens: 4242 })
    // Still asked first, since nothing counted against it.
    expect(hits(flaky, /count_tokens/)).toBe(2)
  })
})

/** A WebSocket client on the gateway that collects frames. */
const connectWs = () =>
  new Promise<{ ws: WebSocket; frames: Array<any>; until: (type: string, count?: number) => Promise<any> }>((resolve, reject) => {
    const ws = new WebSocket(gw.url.replace(/^http/, "ws") + "/v1/responses", { headers: admin })
    const frames: Array<any> = []
    const waiters: Array<() => void> = []
    ws.on("message", (data) => {
      frames.push(JSON.parse(String(data)))
      for (const w of waiters.splice(0)) w()
    })
    ws.once("error", reject)
    ws.once("open", () =>
      resolve({
        ws,
        frames,
        until: (type, count = 1) =>
          new Promise((done, fail) => {
            const check = () => {
              const found = frames.filter((f) => f.type === type)
              if (found.length >= count) return done(found[count - 1])
              waiters.push(check)
            }
            setTimeout(() => fail(new Error(`no ${type} frame; got ${frames.map((f) => f.type).join(", ")}`)), 5000).unref()
            check()
          })
      })
    )
  })

describe("the WebSocket relay goes through the guarded attempt", () => {
  const create = (input: string) =>
    JSON.stringify({
      type: "response.create",
      model: "gpt-ws",
      input: [{ type: "message", role: "user", content: [{ type: "input_text", text: input }] }]
    })

  it("response.create falls back to another Responses connection on a 503 before anything was sent, and the failing one cools down", async () => {
    steady.always({ content: "from steady", chunks: 3 })
    const c = await connectWs()
    c.ws.send(create("hi"))
    const done = await c.until("response.completed")
    expect(done.response.output[0].content[0].text).toBe("from steady")
    // Nothing of the failed attempt reached the socket.
    expect(c.frames.filter((f) => f.type === "error")).toEqual([])
    expect(c.frames[0].type).toBe("response.created")
    expect(await connectionOf("ws-a")).toMatchObject({ state: "cooldown" })
    c.ws.send(create("again"))
    await c.until("response.completed", 2)
    expect(hits(flaky, /responses/)).toBe(1)
    expect(hits(steady, /responses/)).toBe(2)
    c.ws.close()
    // One row per response: the first after one fallback.
    await gw.usageWritten()
    const rows = queryDb(
      gw.dataDir,
      "SELECT status, connection_id, fallback_attempts FROM usage WHERE endpoint = 'responses.ws' ORDER BY id DESC LIMIT 2"
    )
    const b = await connectionId("ws-b")
    expect(rows).toEqual([
      { status: 200, connection_id: b, fallback_attempts: 0 },
      { status: 200, connection_id: b, fallback_attempts: 1 }
    ])
  })

  it("a stream that stalls before its first content is left by the HTTP watchdog and the response goes to the next connection", async () => {
    flaky.always({ content: "never", stallAfterChunks: 0 })
    steady.always({ content: "from steady" })
    const c = await connectWs()
    c.ws.send(create("hi"))
    const done = await c.until("response.completed")
    expect(done.response.output[0].content[0].text).toBe("from steady")
    expect(c.frames.filter((f) => f.type === "error")).toEqual([])
    expect(await connectionOf("ws-a")).toMatchObject({ state: "cooldown" })
    c.ws.close()
  })

  it("a stream cut after it began reaches the socket as an error frame, with no fallback", async () => {
    flaky.always({ content: "one two three four", chunks: 4, cutAfterChunks: 5 })
    const c = await connectWs()
    c.ws.send(create("hi"))
    const error = await c.until("error")
    expect(error.error.code).toBe("stream_interrupted")
    expect(c.frames.some((f) => f.type === "response.output_text.delta")).toBe(true)
    expect(hits(steady, /responses/)).toBe(0)
    c.ws.close()
  })
})

describe("fusion panel members go through the guarded attempt", () => {
  const chat = () => call(`${gw.url}/v1/chat/completions`, { body: { model: "council", messages: [{ role: "user", content: "hi" }] } })

  it("a member whose first connection fails falls back to the next one serving its model; the failing one cools down and is not asked next time", async () => {
    steady.script((r) =>
      JSON.stringify(r.body).includes("<source 1>")
        ? { content: "the synthesis" }
        : { content: r.body.model === "pm-1" ? "answer one" : "answer two" }
    )
    const first = await chat()
    expect(first.status, first.text).toBe(200)
    expect(first.body.choices[0].message.content).toBe("the synthesis")
    // Both members answered: the judge saw both answers.
    const judged = JSON.stringify(steady.requests.find((r) => JSON.stringify(r.body).includes("<source 1>"))!.body)
    expect(judged).toContain("answer one")
    expect(judged).toContain("answer two")
    // The member's fallback is its own: the reply does not say it fell back.
    expect(first.headers.get("x-gateway-fallback-attempts")).toBeNull()
    expect(hits(flaky, /chat/)).toBe(1)
    expect(await connectionOf("pm-a")).toMatchObject({ state: "cooldown" })
    // The panel's rows: one per member, the first from pm-b after one fallback.
    const rows = (await usageRows(first.headers.get("x-gateway-request-id"))).filter(
      (r: any) => r.endpoint === "chat.completions:fusion-panel"
    )
    expect(rows).toHaveLength(2)
    expect(rows).toContainEqual({
      endpoint: "chat.completions:fusion-panel",
      status: 200,
      connection_id: await connectionId("pm-b"),
      fallback_attempts: 1
    })
    expect(rows).toContainEqual({
      endpoint: "chat.completions:fusion-panel",
      status: 200,
      connection_id: await connectionId("pm-c"),
      fallback_attempts: 0
    })

    const second = await chat()
    expect(second.body.choices[0].message.content).toBe("the synthesis")
    expect(hits(flaky, /chat/)).toBe(1)
  })
})
