import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { refusedPort } from "./support/refusedPort.js"

const ADMIN = "gwk_test_admin_key_0123456789abcdef"

let upstream: FakeOpenAI
let gw: TestGateway
let client: OpenAI

const usageRows = (dataDir: string) => queryDb(dataDir, "SELECT * FROM usage ORDER BY id")

const flushWrites = () => gw.usageWritten()

beforeAll(async () => {
  upstream = await FakeOpenAI.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const created = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", baseUrl: upstream.baseUrl, apiKey: "sk-up", defaultModel: "m1" },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(created.status).toBe(201)
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "sk-anything", maxRetries: 0 })
})

afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

beforeEach(async () => {
  upstream.always({})
  upstream.requests.length = 0
  await gw.resetResilience()
})

describe("POST /v1/chat/completions through the openai SDK", () => {
  it("returns the upstream's answer for <provider>/<model>, with the prefix stripped upstream", async () => {
    upstream.next({ content: "the upstream says hi" })
    const { data, response } = await client.chat.completions
      .create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "say hi" }] })
      .withResponse()
    expect(data.choices[0]?.message.content).toBe("the upstream says hi")
    expect(response.headers.get("x-gateway-version")).toMatch(/^\d+\.\d+\.\d+/)
    expect(response.headers.get("x-gateway-request-id")).toMatch(/^req_[0-9a-f]{32}$/)
    const sent = upstream.chatRequests[0]!
    expect(sent.body.model).toBe("m1")
    expect(sent.body.messages).toEqual([{ role: "user", content: "say hi" }])
    expect(sent.headers.authorization).toBe("Bearer sk-up")
  })

  it("streams the upstream's chunks to the SDK", async () => {
    upstream.next({ content: "one two three four", chunks: 4 })
    const stream = await client.chat.completions.create({
      model: "openai-compatible/m1",
      messages: [{ role: "user", content: "count" }],
      stream: true
    })
    const pieces: Array<string> = []
    for await (const chunk of stream) pieces.push(chunk.choices[0]?.delta?.content ?? "")
    expect(pieces.join("")).toBe("one two three four")
    expect(pieces.filter((p) => p.length > 0).length).toBe(4)
    expect(upstream.chatRequests[0]!.body.stream).toBe(true)
  })

  it("works with the SDK's stream helper (role in the first delta)", async () => {
    upstream.next({ content: "helper text", chunks: 2 })
    const runner = client.chat.completions.stream({ model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] })
    const final = await runner.finalChatCompletion()
    expect(final.choices[0]?.message.content).toBe("helper text")
    expect(final.choices[0]?.message.role).toBe("assistant")
  })

  it("delivers the first chunk before the upstream has finished (no buffering)", async () => {
    upstream.next({ content: "abcdef", chunks: 3, chunkDelayMs: 300 })
    const started = Date.now()
    const stream = await client.chat.completions.create({
      model: "openai-compatible/m1",
      messages: [{ role: "user", content: "x" }],
      stream: true
    })
    let firstAt = 0
    for await (const chunk of stream) {
      if (!firstAt && chunk.choices[0]?.delta?.content) firstAt = Date.now() - started
    }
    const total = Date.now() - started
    // Chunks are 300 ms apart upstream: the first content must arrive well before the end.
    expect(total - firstAt).toBeGreaterThanOrEqual(500)
  })

  it("passes streamed tool calls through intact: one id per call, arguments in pieces, finish_reason tool_calls", async () => {
    upstream.next({
      toolCalls: [
        { name: "get_weather", arguments: '{"location":"Paris"}' },
        { name: "get_time", arguments: '{"tz":"Europe/Paris"}' }
      ]
    })
    const runner = client.chat.completions.stream({
      model: "openai-compatible/m1",
      messages: [{ role: "user", content: "weather and time?" }],
      tools: [
        {
          type: "function",
          function: { name: "get_weather", parameters: { type: "object", properties: { location: { type: "string" } } } }
        },
        { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { tz: { type: "string" } } } } }
      ]
    })
    const final = await runner.finalChatCompletion()
    const calls = final.choices[0]?.message.tool_calls ?? []
    expect(calls.map((c) => c.type === "function" && [c.id, c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ["call_0_fake", "get_weather", { location: "Paris" }],
      ["call_1_fake", "get_time", { tz: "Europe/Paris" }]
    ])
    expect(final.choices[0]?.finish_reason).toBe("tool_calls")
    expect(upstream.chatRequests[0]!.body.tools).toHaveLength(2)
  })

  it("keeps the upstream status and Retry-After on errors", async () => {
    upstream.next({
      status: 429,
      headers: { "retry-after": "7" },
      body: { error: { message: "slow down", type: "rate_limit_error", code: "rate_limited" } }
    })
    const err = await client.chat.completions
      .create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.APIError)
    const apiErr = err as InstanceType<typeof OpenAI.APIError>
    expect(apiErr.status).toBe(429)
    expect(apiErr.message).toContain("slow down")
    expect(apiErr.headers?.get("retry-after")).toBe("7")
    expect(apiErr.headers?.get("x-gateway-request-id")).toMatch(/^req_/)
  })

  it("wraps a non-JSON upstream error in the OpenAI error shape, keeping the status", async () => {
    upstream.next({ status: 503, body: "<html>maintenance</html>" })
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] }
    })
    expect(res.status).toBe(503)
    expect(res.body.error.type).toBe("server_error")
    expect(res.body.error.message).toContain("HTTP 503")
    expect(res.body.error.message).toContain("maintenance")
  })

  it("answers 502 in the OpenAI shape when the upstream refuses connections", async () => {
    const deadUrl = `http://127.0.0.1:${await refusedPort()}/v1`
    const created = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "dead", baseUrl: deadUrl, defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(created.status).toBe(201)
    const res = await call(`${gw.url}/v1/chat/completions`, { body: { model: "dead/m1", messages: [{ role: "user", content: "x" }] } })
    expect(res.status).toBe(502)
    expect(res.body.error.code).toBe("upstream_unreachable")
    expect(res.body.error.message).toContain("ECONNREFUSED")
  })

  it("ends the stream with an error event when the upstream cuts off mid-stream", async () => {
    upstream.next({ content: "partial answer here", chunks: 4, cutAfterChunks: 2 })
    const stream = await client.chat.completions.create({
      model: "openai-compatible/m1",
      messages: [{ role: "user", content: "x" }],
      stream: true
    })
    const seen: Array<string> = []
    const err = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta?.content ?? "")
    })().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.APIError)
    expect((err as Error).message).toContain("upstream stream ended unexpectedly")
    expect(seen.join("")).toBe("parti")
  })

  it("aborts the upstream request when the client goes away mid-stream", async () => {
    upstream.next({ content: "a long answer that takes its time", chunks: 20, chunkDelayMs: 50 })
    const before = upstream.aborted
    const controller = new AbortController()
    const stream = await client.chat.completions.create(
      { model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }], stream: true },
      { signal: controller.signal }
    )
    let n = 0
    await (async () => {
      for await (const _ of stream) if (++n === 2) controller.abort()
    })().catch(() => undefined)
    await expect.poll(() => upstream.aborted, { timeout: 3000 }).toBe(before + 1)
  })

  it("aborts a non-streaming request's upstream stream when the client goes away while its answer is being collected", async () => {
    upstream.next({ content: "a slow answer in many pieces", chunks: 10, chunkDelayMs: 400 })
    const before = upstream.aborted
    // The previous test's request may still be ending: its row is counted before this one starts.
    await flushWrites()
    const rowsBefore = usageRows(gw.dataDir).length
    const controller = new AbortController()
    const pending = client.chat.completions
      .create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] }, { signal: controller.signal })
      .catch(() => undefined)
    await expect.poll(() => upstream.chatRequests.length, { timeout: 2000 }).toBe(1)
    await new Promise((r) => setTimeout(r, 100))
    controller.abort()
    await pending
    await expect.poll(() => upstream.aborted, { timeout: 1500 }).toBe(before + 1)
    // Its usage row says the client closed the request (and is written before the next test counts rows).
    await expect
      .poll(
        async () => {
          await flushWrites()
          return usageRows(gw.dataDir)
            .slice(rowsBefore)
            .map((r) => r.status)
        },
        { timeout: 3000 }
      )
      .toEqual([499])
  })

  it("records a usage row with tokens for streamed and non-streamed requests", async () => {
    upstream.always({ usage: { prompt_tokens: 21, completion_tokens: 13 } })
    await flushWrites()
    const before = usageRows(gw.dataDir).length
    await client.chat.completions.create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }] })
    const stream = await client.chat.completions.create({
      model: "openai-compatible/m1",
      messages: [{ role: "user", content: "x" }],
      stream: true,
      stream_options: { include_usage: true }
    })
    for await (const _ of stream) {
      // drain
    }
    await flushWrites()
    const rows = usageRows(gw.dataDir).slice(before)
    expect(rows.map((r) => [r.endpoint, r.stream, r.status, r.tokens_in, r.tokens_out, r.provider, r.model])).toEqual([
      ["chat.completions", 0, 200, 21, 13, "openai-compatible", "m1"],
      ["chat.completions", 1, 200, 21, 13, "openai-compatible", "m1"]
    ])
    expect(rows[1]!.ttft_ms).toBeTypeOf("number")
  })
})

describe("request validation on /v1/chat/completions", () => {
  it.each([
    ["invalid JSON", "{not json", "not valid JSON"],
    ["a JSON array", "[]", "must be a JSON object"],
    ["an empty body", "", "empty"],
    ["no model", { messages: [{ role: "user", content: "x" }] }, "model"],
    ["no messages", { model: "openai-compatible/m1" }, "messages"],
    ["empty messages", { model: "openai-compatible/m1", messages: [] }, "non-empty array"],
    ["an unknown role", { model: "openai-compatible/m1", messages: [{ role: "wizard", content: "x" }] }, "messages.0.role"],
    ["a non-boolean stream", { model: "openai-compatible/m1", messages: [{ role: "user", content: "x" }], stream: "yes" }, "stream"]
  ])("rejects %s with a 400 naming the problem", async (_name, body, fragment) => {
    const res = await call(`${gw.url}/v1/chat/completions`, { method: "POST", body, headers: { "content-type": "application/json" } })
    expect(res.status).toBe(400)
    expect(res.body.error.type).toBe("invalid_request_error")
    expect(res.body.error.message).toContain(fragment)
    expect(res.headers.get("x-gateway-version")).toBeTruthy()
    expect(upstream.chatRequests).toHaveLength(0)
  })

  it("answers 404 model_not_found for an unknown provider prefix, listing what is connected", async () => {
    const res = await call(`${gw.url}/v1/chat/completions`, { body: { model: "nobody/m1", messages: [{ role: "user", content: "x" }] } })
    expect(res.status).toBe(404)
    expect(res.body.error.code).toBe("model_not_found")
    expect(res.body.error.message).toContain("openai-compatible")
  })

  it("refuses a body over the size limit with 413", async () => {
    const big = "x".repeat(33 * 1024 * 1024)
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "openai-compatible/m1", messages: [{ role: "user", content: big }] }
    })
    expect(res.status).toBe(413)
    expect(res.body.error.code).toBe("request_too_large")
  })
})

describe("GET /v1/models", () => {
  it("lists the models of connected providers as <connection>/<model>", async () => {
    const list = await client.models.list()
    const ids = list.data.map((m) => m.id)
    expect(ids).toContain("openai-compatible/m1")
    expect(list.data.find((m) => m.id === "openai-compatible/m1")?.owned_by).toBe("openai-compatible")
  })
})

describe("routes of the specification", () => {
  it("are all built: the last area that answered 501 (tunnels) answers as a management route; an unknown path is a 404", async () => {
    const management = await call(`${gw.url}/api/tunnels/mesh`)
    expect(management.status).toBe(401)
    expect(management.body._tag).toBe("Unauthorized")
    const unknown = await call(`${gw.url}/no/such/route`)
    expect(unknown.status).toBe(404)
    expect(unknown.headers.get("x-gateway-version")).toBeTruthy()
  })
})
