/**
 * Answers that disagreed with each other or with the docs (docs/errors.md): fallbacks of the
 * inference plane, bodiless management requests, count_tokens, WebSocket frame validation,
 * fusion's and the cache's telemetry headers, and the headers of WebSocket upgrade answers.
 */
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, rawCall, startGateway, type TestGateway } from "./support/gateway.js"

const ADMIN = "gwk_answers_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
let gw: TestGateway
let up: FakeUpstream

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) =>
    expect((await call(`${gw.url}/api/providers`, { body, headers: admin })).status).toBe(201)
  await add({ provider: "openai", name: "oai", apiKey: "sk-oai", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" })
  await add({ provider: "openai", name: "oai2", apiKey: "sk-oai2", baseUrl: up.baseUrl("openai-chat"), defaultModel: "gpt-4o" })
  await add({ provider: "anthropic", name: "anth", apiKey: "sk-ant", baseUrl: up.baseUrl("anthropic") })
  await add({
    provider: "openai-compatible",
    name: "resp",
    upstreamFormat: "openai-responses",
    baseUrl: up.baseUrl("openai-responses"),
    models: ["gpt-5"]
  })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.requests.length = 0
  up.always({})
  await gw.resetResilience()
})

describe("a request no inference route takes", () => {
  it("a known path with another method: 405 with Allow, in the OpenAI error shape", async () => {
    for (const [method, path, allow] of [
      ["GET", "/v1/completions", "POST"],
      ["DELETE", "/v1/chat/completions", "POST"],
      ["POST", "/v1/models", "GET"],
      ["GET", "/api/chat", "POST"]
    ] as const) {
      const res = await call(`${gw.url}${path}`, { method })
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(405)
      expect(res.headers.get("allow")).toBe(allow)
      expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "method_not_allowed" })
      expect(res.body.error.message).toContain(path)
      expect(res.headers.get("x-gateway-version")).toBeTruthy()
    }
    const model = await call(`${gw.url}/v1/models/gpt-4o`, { method: "DELETE" })
    expect(model.status).toBe(405)
    expect(model.headers.get("allow")).toBe("GET")
  })

  it("an unknown path: 404 in the OpenAI error shape; unknown /api/ paths keep the management shape, the tunnel routes answer", async () => {
    for (const path of ["/v1/nothing", "/no/such/route", "/"]) {
      const res = await call(`${gw.url}${path}`)
      expect(res.status, path).toBe(404)
      expect(res.body.error, `${path}: ${res.text}`).toMatchObject({ type: "invalid_request_error", code: "not_found" })
      expect(res.headers.get("x-gateway-version")).toBeTruthy()
      expect(res.headers.get("x-gateway-request-id")).toMatch(/^req_/)
    }
    const management = await call(`${gw.url}/api/no-such-thing`, { headers: admin })
    expect(management.status).toBe(404)
    expect(management.body._tag).toBe("NotFound")
    const tunnel = await call(`${gw.url}/api/tunnels/token`, { headers: admin })
    expect(tunnel.status).toBe(200)
    expect(tunnel.body).toMatchObject({ phase: expect.any(String), running: false })
  })
})

describe("POST /api/resilience/reset", () => {
  it("resets every breaker with no body at all, as with {}", async () => {
    const none = await rawCall(gw.url, "POST", "/api/resilience/reset", admin)
    expect(none.status, none.text).toBe(200)
    expect(none.body).toMatchObject({ breakersReset: expect.any(Number), connectionsReset: 0 })
    const typed = await rawCall(gw.url, "POST", "/api/resilience/reset", {
      ...admin,
      "content-type": "application/json",
      "content-length": "0"
    })
    expect(typed.status, typed.text).toBe(200)
    expect((await call(`${gw.url}/api/resilience/reset`, { body: {}, headers: admin })).status).toBe(200)
    const bad = await call(`${gw.url}/api/resilience/reset`, { body: { connections: "yes" }, headers: admin })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain("connections")
  })
})

describe("count_tokens", () => {
  it("refuses an unknown model with the 404 /v1/messages gives", async () => {
    const body = { model: "claude-opus-5-5", messages: [{ role: "user", content: "hello" }] }
    const messages = await call(`${gw.url}/v1/messages`, { body: { ...body, max_tokens: 10 } })
    const counted = await call(`${gw.url}/v1/messages/count_tokens`, { body })
    expect(messages.status).toBe(404)
    expect(counted.status, counted.text).toBe(404)
    expect(counted.body).toEqual(messages.body)
    expect(counted.body).toMatchObject({ type: "error", error: { type: "not_found_error" } })
    expect(up.requests).toHaveLength(0)
    const known = await call(`${gw.url}/v1/messages/count_tokens`, { body: { ...body, model: "oai/gpt-4o" } })
    expect(known.status).toBe(200)
    expect(known.body.input_tokens).toBeGreaterThan(0)
  })
})

describe("WebSocket response.create", () => {
  it("is refused as POST /v1/responses refuses it, with the same message", async () => {
    const request = { model: "resp/gpt-5", stream: true }
    const http = await call(`${gw.url}/v1/responses`, { body: request })
    expect(http.status).toBe(400)
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/responses`)
    try {
      await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject))
      const frame = new Promise<any>((resolve) => ws.once("message", (data) => resolve(JSON.parse(String(data)))))
      ws.send(JSON.stringify({ type: "response.create", ...request }))
      const error = await frame
      expect(error).toMatchObject({
        type: "error",
        status: 400,
        error: { type: "invalid_request_error", message: http.body.error.message }
      })
      expect(up.requests).toHaveLength(0)
    } finally {
      ws.close()
    }
  })
})

describe("telemetry headers", () => {
  it("fusion's token headers count the panel, as its cost does", async () => {
    await call(`${gw.url}/api/combos`, {
      body: {
        name: "panel",
        strategy: "fusion",
        targets: [{ model: "oai/gpt-4o" }, { model: "oai2/gpt-4o" }],
        config: { judgeModel: "oai/gpt-4o" }
      },
      headers: admin
    })
    try {
      up.always({ usage: { input: 11, output: 7 } })
      const res = await call(`${gw.url}/v1/chat/completions`, { body: { model: "panel", messages: [{ role: "user", content: "hi" }] } })
      expect(res.status).toBe(200)
      // Two panel members and the judge, 11 + 7 tokens each; the cost covers the same three calls.
      expect(res.headers.get("x-gateway-response-cost")).toBe("0.0002925000")
      expect(res.headers.get("x-gateway-tokens-in")).toBe("33")
      expect(res.headers.get("x-gateway-tokens-out")).toBe("21")
    } finally {
      await call(`${gw.url}/api/combos/panel`, { method: "DELETE", headers: admin })
    }
  })

  it("X-Gateway-Model is the model that served the answer, on a cache miss and on the hit after it", async () => {
    const body = { model: "oai/gpt-4o", temperature: 0, messages: [{ role: "user", content: "what is 3+3" }] }
    const miss = await call(`${gw.url}/v1/chat/completions`, { body })
    expect(miss.headers.get("x-gateway-cache")).toBe("MISS")
    await gw.usageWritten()
    const hit = await call(`${gw.url}/v1/chat/completions`, { body })
    expect(hit.headers.get("x-gateway-cache")).toBe("HIT")
    expect(miss.headers.get("x-gateway-model")).toBe("gpt-4o")
    expect(hit.headers.get("x-gateway-model")).toBe(miss.headers.get("x-gateway-model"))
  })
})

describe("WebSocket upgrade answers", () => {
  const upgrade = () =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
      const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/responses`)
      ws.once("upgrade", (res) => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers })
        ws.once("open", () => ws.close())
      })
      ws.once("unexpected-response", (_req, res) => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers })
        res.resume()
      })
      ws.once("error", reject)
    })

  it("carry X-Gateway-Version and a request id, accepted (101) or refused (426)", async () => {
    const accepted = await upgrade()
    expect(accepted.status).toBe(101)
    expect(accepted.headers["x-gateway-version"]).toBeTruthy()
    expect(accepted.headers["x-gateway-request-id"]).toMatch(/^req_/)
    const set = (value?: string) =>
      call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "GATEWAY_UPSTREAM_WS_ENABLED", value }, headers: admin })
    await set("false")
    try {
      const refused = await upgrade()
      expect(refused.status).toBe(426)
      expect(refused.headers["x-gateway-version"]).toBeTruthy()
      expect(refused.headers["x-gateway-request-id"]).toMatch(/^req_/)
    } finally {
      await set(undefined)
    }
  })
})
