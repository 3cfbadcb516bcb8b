import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { OtlpReceiver, type ReceivedSpan } from "./support/otlpReceiver.js"
import { until } from "./support/until.js"

/**
 * OpenTelemetry traces and metrics of real requests, exported by the gateway over OTLP/HTTP to
 * a receiver on 127.0.0.1: the request span and one span per upstream attempt (a fallback from a
 * failing provider to a working one), the GenAI attributes, the client's traceparent, the log
 * lines' trace id, the metrics pushed, and the default protocol (http/protobuf).
 */
const ADMIN = "gwk_otel_admin_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let bad: FakeUpstream
let good: FakeUpstream
let receiver: OtlpReceiver

beforeAll(async () => {
  bad = await FakeUpstream.start()
  good = await FakeUpstream.start()
  receiver = await OtlpReceiver.start()
  bad.always({ status: 503, body: { error: { message: "overloaded", type: "server_error" } } })
  good.always({ content: "fine answer" })
  gw = await startGateway({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: "x-otlp-token=s3cret%20value",
      OTEL_SERVICE_NAME: "gw-under-test",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_METRIC_EXPORT_INTERVAL: "200"
    }
  })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (
      await add({
        provider: "groq",
        name: "bad",
        apiKey: "sk-bad",
        baseUrl: bad.baseUrl("openai-chat"),
        defaultModel: "llama-3.3-70b-versatile"
      })
    ).status
  ).toBe(201)
  expect(
    (await add({ provider: "openai", name: "good", apiKey: "sk-good", baseUrl: good.baseUrl("openai-chat"), defaultModel: "gpt-4o" }))
      .status
  ).toBe(201)
  const combo = await call(`${gw.url}/api/combos`, {
    body: { name: "team", strategy: "priority", targets: [{ model: "bad/llama-3.3-70b-versatile" }, { model: "good/gpt-4o" }] },
    headers: admin
  })
  expect(combo.status).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await bad?.close()
  await good?.close()
  await receiver?.close()
})

const chat = (model: string, headers: Record<string, string> = {}) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }] }, headers })

/** The request's server span and the spans below it, once all have arrived. */
const spansOf = (requestId: string, attempts: number) =>
  until(`the spans of ${requestId}`, () => {
    const server = receiver.spans.find((s) => s.kind === 2 && s.attributes["gateway.request.id"] === requestId)
    if (!server) return undefined
    const children = receiver.spans
      .filter((s) => s.parentSpanId === server.spanId)
      .sort((a, b) => Number(a.attributes["gateway.attempt"]) - Number(b.attributes["gateway.attempt"]))
    return children.length === attempts ? { server, children } : undefined
  })

describe("traces over OTLP", () => {
  it("a fallback from a failing provider is one request span with two attempt spans, error.type on the first", async () => {
    const res = await chat("team")
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    const requestId = res.headers.get("x-gateway-request-id")!
    const { server, children } = await spansOf(requestId, 2)

    expect(server.name).toBe("POST /v1/chat/completions")
    expect(server.status).not.toBe(2)
    expect(server.resource["service.name"]).toBe("gw-under-test")
    expect(server.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/v1/chat/completions",
      "http.response.status_code": 200,
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "team",
      "gen_ai.response.model": "gpt-4o",
      "gen_ai.usage.input_tokens": 11,
      "gen_ai.usage.output_tokens": 7,
      "gateway.route.kind": "combo",
      "gateway.combo": "team",
      "gateway.strategy": "priority",
      "gateway.fallback.attempts": 1,
      "gateway.cache.hit": false
    })
    expect(Number(server.attributes["gateway.cost.usd"])).toBeGreaterThan(0)

    const [first, second] = children as [ReceivedSpan, ReceivedSpan]
    for (const s of children) {
      expect(s.traceId).toBe(server.traceId)
      expect(s.kind).toBe(3)
      expect(s.attributes["gen_ai.operation.name"]).toBe("chat")
    }
    expect(first.name).toBe("chat llama-3.3-70b-versatile")
    expect(first.attributes).toMatchObject({
      "gateway.attempt": 1,
      "gen_ai.provider.name": "groq",
      "gen_ai.request.model": "llama-3.3-70b-versatile",
      "gateway.connection": "bad",
      "error.type": "503"
    })
    expect(first.status).toBe(2)
    expect(second.name).toBe("chat gpt-4o")
    expect(second.attributes).toMatchObject({
      "gateway.attempt": 2,
      "gen_ai.provider.name": "openai",
      "gen_ai.response.model": "gpt-4o",
      "gateway.connection": "good",
      "gen_ai.usage.input_tokens": 11,
      "gen_ai.usage.output_tokens": 7
    })
    expect(second.attributes["error.type"]).toBeUndefined()
    expect(second.status).not.toBe(2)

    // The exporter sent the configured headers, percent-decoded.
    expect(receiver.posts.find((p) => p.path === "/v1/traces")?.headers["x-otlp-token"]).toBe("s3cret value")
  })

  it("a failed request's span carries error.type and an error status", async () => {
    await gw.resetResilience()
    const res = await chat("bad/llama-3.3-70b-versatile")
    expect(res.status).toBeGreaterThanOrEqual(500)
    const { server, children } = await spansOf(res.headers.get("x-gateway-request-id")!, 1)
    expect(server.status).toBe(2)
    expect(server.attributes["http.response.status_code"]).toBe(res.status)
    expect(server.attributes["error.type"]).toBeTypeOf("string")
    expect(children[0]!.attributes["error.type"]).toBe("503")
  })

  it("continues the client's traceparent, and the request's log lines carry its request and trace ids", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    const parent = "00f067aa0ba902b7"
    const res = await chat("good/gpt-4o", { traceparent: `00-${traceId}-${parent}-01` })
    expect(res.status).toBe(200)
    const requestId = res.headers.get("x-gateway-request-id")!
    const { server, children } = await spansOf(requestId, 1)
    expect(server.traceId).toBe(traceId)
    expect(server.parentSpanId).toBe(parent)
    expect(children[0]!.traceId).toBe(traceId)
    const lines = gw.logs.filter((l) => l.annotations["requestId"] === requestId)
    expect(lines.length).toBeGreaterThan(0)
    for (const l of lines) expect(l.annotations["traceId"]).toBe(traceId)
  })

  it("without a traceparent the trace id of the log lines is the request span's own", async () => {
    const res = await chat("good/gpt-4o")
    const requestId = res.headers.get("x-gateway-request-id")!
    const { server } = await spansOf(requestId, 1)
    expect(server.parentSpanId).toBeUndefined()
    const lines = gw.logs.filter((l) => l.annotations["requestId"] === requestId)
    expect(lines.length).toBeGreaterThan(0)
    for (const l of lines) expect(l.annotations["traceId"]).toBe(server.traceId)
  })

  it("pushes the GenAI metrics over OTLP", async () => {
    await chat("good/gpt-4o")
    const points = await until("gen_ai.client.token.usage over OTLP", () => {
      const p = receiver
        .metric("gen_ai.client.token.usage")
        .filter((x) => x.attributes["gen_ai.provider.name"] === "openai" && x.attributes["gen_ai.token.type"] === "input")
      return p.length > 0 ? p : undefined
    })
    expect(Number(points.at(-1)!.point.count)).toBeGreaterThan(0)
    expect(points.at(-1)!.attributes["gen_ai.request.model"]).toBe("gpt-4o")
    const durations = receiver.metric("gen_ai.client.operation.duration")
    expect(durations.some((d) => d.attributes["error.type"] === "503" && d.attributes["gen_ai.provider.name"] === "groq")).toBe(true)
  })
})

describe("OTLP settings", () => {
  it("a traces-only endpoint gets http/protobuf (the default protocol) at its own path, and no metrics", async () => {
    const own = await OtlpReceiver.start()
    const other = await startGateway({
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${own.url}/custom/traces`,
        OTEL_BSP_SCHEDULE_DELAY: "50",
        OTEL_METRIC_EXPORT_INTERVAL: "100"
      }
    })
    try {
      const res = await call(`${other.url}/v1/models`)
      expect(res.status).toBe(200)
      const post = await until("a protobuf post", () => own.posts.find((p) => p.path === "/custom/traces"))
      expect(post.contentType).toBe("application/x-protobuf")
      expect(post.bytes).toBeGreaterThan(0)
      // A second request's spans arrive too; metrics (every 100 ms if they were pushed) never did.
      await call(`${other.url}/v1/models`)
      await until("a second protobuf post", () => own.posts.filter((p) => p.path === "/custom/traces").length >= 2)
      expect(own.posts.every((p) => p.path === "/custom/traces")).toBe(true)
    } finally {
      await other.close()
      await own.close()
    }
  })
})
