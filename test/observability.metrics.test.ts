import * as v8 from "node:v8"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, rawCall, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * `GET /metrics` of a real gateway (no OpenTelemetry configured): who may read it, and what it
 * counts after real requests through fake upstreams (the text parsed as Prometheus reads it);
 * with tracing off, a request's log lines carry the trace id of the client's traceparent.
 */
const ADMIN = "gwk_metrics_admin_key_0123456789abcdef"
const USER = "gwk_metrics_user_key_0123456789abcdefgh"
const METRICS_TOKEN = "metrics-scrape-token-0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }
const user = { authorization: `Bearer ${USER}` }

let gw: TestGateway
let bad: FakeUpstream
let good: FakeUpstream
let userKeyId: string

beforeAll(async () => {
  bad = await FakeUpstream.start()
  good = await FakeUpstream.start()
  gw = await startGateway({ env: { GATEWAY_METRICS_TOKEN: METRICS_TOKEN } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  userKeyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "user", scopes: ["inference"] }, { secret: USER })))).id
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
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "team", strategy: "priority", targets: [{ model: "bad/llama-3.3-70b-versatile" }, { model: "good/gpt-4o" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await bad?.close()
  await good?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  bad.always({ status: 503, body: { error: { message: "overloaded", type: "server_error" } } })
  good.always({ content: "fine answer" })
})

interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

/** The Prometheus text format's samples (comments skipped; label values unescaped). */
const parse = (text: string): Array<Sample> => {
  const out: Array<Sample> = []
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\n/g, "\n").replace(/\\(.)/g, "$1")
    out.push({ name: m[1]!, labels, value: m[3] === "+Inf" ? Infinity : Number(m[3]) })
  }
  return out
}

const scrape = async (): Promise<Array<Sample>> => {
  const res = await call(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  expect(res.status).toBe(200)
  return parse(res.text)
}

/** The sum of the samples of `name` whose labels include `labels`. */
const total = (samples: ReadonlyArray<Sample>, name: string, labels: Record<string, string> = {}): number =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0)

const chat = (model: string, headers: Record<string, string> = {}, extra: Record<string, unknown> = {}) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }], ...extra }, headers })

describe("GET /metrics: who may read it", () => {
  it("refuses a caller without credentials (requireLogin is on by default) with a JSON 401", async () => {
    const res = await call(`${gw.url}/metrics`)
    expect(res.status).toBe(401)
    expect(res.body).toMatchObject({ _tag: "Unauthorized" })
  })

  it("answers the metrics token, in the Prometheus text format", async () => {
    const res = await call(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    expect(res.text).toContain("# TYPE gateway_requests_in_flight gauge")
  })

  it("answers an admin key, refuses a wrong token and an inference-only key", async () => {
    expect((await call(`${gw.url}/metrics`, { headers: admin })).status).toBe(200)
    expect((await call(`${gw.url}/metrics`, { headers: { authorization: "Bearer not-the-metrics-token" } })).status).toBe(401)
    expect((await call(`${gw.url}/metrics`, { headers: user })).status).toBe(401)
  })

  it("with requireLogin off, a direct loopback scrape needs no token; a forwarded one still does", async () => {
    expect(
      (await call(`${gw.url}/api/settings/require-login`, { method: "PUT", body: { requireLogin: false }, headers: admin })).status
    ).toBe(200)
    try {
      expect((await rawCall(gw.url, "GET", "/metrics")).status).toBe(200)
      expect((await rawCall(gw.url, "GET", "/metrics", { "x-forwarded-for": "203.0.113.7" })).status).toBe(401)
    } finally {
      expect(
        (await call(`${gw.url}/api/settings/require-login`, { method: "PUT", body: { requireLogin: true }, headers: admin })).status
      ).toBe(200)
    }
    expect((await rawCall(gw.url, "GET", "/metrics")).status).toBe(401)
  })
})

describe("GET /metrics: the process's memory", () => {
  // The gateway here runs in the test's own process: its readings are this process's.
  it("reports its RSS, each V8 heap space's used, reserved and resident bytes, and the memory Buffers hold outside the heap", async () => {
    const samples = await scrape()
    const rss = total(samples, "process_memory_usage")
    const rssNow = process.memoryUsage.rss()
    expect(rss).toBeGreaterThan(0.5 * rssNow)
    expect(rss).toBeLessThan(1.5 * rssNow)
    const of = (name: string, space: string) => samples.find((s) => s.name === name && s.labels["v8js_heap_space_name"] === space)?.value
    for (const { space_name: space } of v8.getHeapSpaceStatistics()) {
      const used = of("v8js_memory_heap_used", space)
      const size = of("v8js_memory_heap_space_size", space)
      const physical = of("v8js_memory_heap_space_physical_size", space)
      expect(used, space).toBeDefined()
      expect(physical, space).toBeDefined()
      // One reading of the spaces serves the scrape's gauges: they agree with each other.
      expect(used!, space).toBeLessThanOrEqual(size!)
    }
    expect(of("v8js_memory_heap_used", "old_space")).toBeGreaterThan(1024 * 1024)
    const used = total(samples, "v8js_memory_heap_used")
    const usedNow = v8.getHeapStatistics().used_heap_size
    expect(used).toBeGreaterThan(0.5 * usedNow)
    expect(used).toBeLessThan(1.5 * usedNow)
    expect(total(samples, "gateway_memory_external")).toBeGreaterThan(0)
  })

  it("reads them when scraped: 64 MB held in a Buffer shows in the external memory, and goes when it is freed", async () => {
    const MB = 1024 * 1024
    const gc = (globalThis as { gc?: () => void }).gc ?? (await takeGc())
    // Garbage left by earlier work may be collected while the Buffer is made (64 MB outside the
    // heap can start a collection), and V8 frees the memory of collected Buffers on a helper
    // thread after the collection: collect first, and read once the external memory has stopped
    // falling, so the difference is the Buffer's.
    let settled = process.memoryUsage().external
    for (let i = 0; i < 50; i++) {
      gc()
      await new Promise((r) => setTimeout(r, 20))
      const now = process.memoryUsage().external
      if (Math.abs(now - settled) < 256 * 1024) break
      settled = now
    }
    const before = await scrape()
    let held: Buffer | undefined = Buffer.alloc(64 * MB, 1)
    const during = await scrape()
    expect(total(during, "gateway_memory_external") - total(before, "gateway_memory_external")).toBeGreaterThan(56 * MB)
    expect(held.length).toBe(64 * MB)
    held = undefined
    // The Buffer's memory goes back once a collection finds it unreachable (V8 may free it on a
    // helper thread after the collection: read again until it has).
    let freed = 0
    for (let i = 0; i < 50 && freed <= 56 * MB; i++) {
      gc()
      await new Promise((r) => setTimeout(r, 20))
      freed = total(during, "gateway_memory_external") - total(await scrape(), "gateway_memory_external")
    }
    expect(freed).toBeGreaterThan(56 * MB)
  })
})

/** V8's `gc` function, taken from a new context with the flag set for that moment only. */
const takeGc = async (): Promise<() => void> => {
  v8.setFlagsFromString("--expose-gc")
  try {
    return (await import("node:vm")).runInNewContext("gc") as () => void
  } finally {
    v8.setFlagsFromString("--no-expose-gc")
  }
}

describe("GET /metrics: what it counts", () => {
  it("counts requests by route, status, provider, model and key, with their tokens, cost and durations", async () => {
    const before = await scrape()
    const labels = { route: "/v1/chat/completions", status: "200", provider: "openai", model: "gpt-4o", key_id: userKeyId }
    for (let i = 0; i < 3; i++) expect((await chat("good/gpt-4o", user)).status).toBe(200)
    const after = await scrape()
    const delta = (name: string, l: Record<string, string> = {}) => total(after, name, l) - total(before, name, l)

    expect(delta("gateway_requests_total", labels)).toBe(3)
    expect(delta("gateway_tokens_total", { provider: "openai", model: "gpt-4o", key_id: userKeyId, type: "input" })).toBe(33)
    expect(delta("gateway_tokens_total", { provider: "openai", model: "gpt-4o", key_id: userKeyId, type: "output" })).toBe(21)
    expect(delta("gateway_cost_usd_total", { provider: "openai", model: "gpt-4o", key_id: userKeyId })).toBeGreaterThan(0)
    const genai = {
      gen_ai_operation_name: "chat",
      gen_ai_provider_name: "openai",
      gen_ai_request_model: "gpt-4o",
      gen_ai_response_model: "gpt-4o"
    }
    expect(delta("gen_ai_client_token_usage_count", { ...genai, gen_ai_token_type: "input" })).toBe(3)
    expect(delta("gen_ai_client_token_usage_sum", { ...genai, gen_ai_token_type: "output" })).toBe(21)
    expect(delta("gen_ai_client_operation_duration_count", { ...genai, error_type: "" })).toBe(3)
    expect(delta("gateway_request_duration_count", { route: "/v1/chat/completions", status: "200" })).toBe(3)
    expect(delta("gateway_overhead_duration_count", { route: "/v1/chat/completions" })).toBe(3)
    // Histogram buckets are cumulative: the +Inf bucket holds every observation.
    expect(delta("gateway_overhead_duration_bucket", { route: "/v1/chat/completions", le: "+Inf" })).toBe(3)
    expect(total(after, "gateway_requests_in_flight")).toBe(0)
  })

  it("counts a fallback, the failed attempt's error.type and the breaker of the failing provider", async () => {
    const before = await scrape()
    const res = await chat("team", user)
    expect(res.status).toBe(200)
    const after = await scrape()
    const delta = (name: string, l: Record<string, string> = {}) => total(after, name, l) - total(before, name, l)
    expect(delta("gateway_fallback_attempts_total", { requested_model: "team", provider: "openai", model: "gpt-4o" })).toBe(1)
    expect(delta("gen_ai_client_operation_duration_count", { gen_ai_provider_name: "groq", error_type: "503" })).toBe(1)
    expect(delta("gateway_requests_total", { route: "/v1/chat/completions", status: "200", provider: "openai", model: "gpt-4o" })).toBe(1)
    const breaker = after.find((s) => s.name === "gateway_circuit_breaker_state" && s.labels["provider"] === "groq")
    expect(breaker).toBeDefined()
    expect([0, 1, 2, 3]).toContain(breaker!.value)
  })

  it("counts time to first chunk for a stream, a request no route has, and a refused body under its route", async () => {
    const before = await scrape()
    const stream = await chat("good/gpt-4o", user, { stream: true })
    expect(stream.status).toBe(200)
    expect((await call(`${gw.url}/v1/no/such/route`)).status).toBe(404)
    const unknown = await chat("nope/some-client-made-up-model", user)
    expect(unknown.status).toBeGreaterThanOrEqual(400)
    expect(
      (await call(`${gw.url}/v1/chat/completions`, { body: { model: "good/gpt-4o", messages: "not a list" }, headers: user })).status
    ).toBe(400)
    const after = await scrape()
    const delta = (name: string, l: Record<string, string> = {}) => total(after, name, l) - total(before, name, l)
    expect(
      delta("gen_ai_client_operation_time_to_first_chunk_count", { gen_ai_provider_name: "openai", gen_ai_request_model: "gpt-4o" })
    ).toBe(1)
    expect(delta("gateway_requests_total", { route: "unmatched", status: "404" })).toBe(1)
    expect(delta("gateway_requests_total", { route: "/v1/chat/completions", status: "400", provider: "", key_id: userKeyId })).toBe(1)
    expect(
      delta("gateway_requests_total", { route: "/v1/chat/completions", status: String(unknown.status), provider: "", model: "" })
    ).toBe(1)
    // Neither the path's own text nor a model no configuration has is ever a label.
    expect(after.some((s) => Object.values(s.labels).some((v) => v.includes("/v1/no/such") || v.includes("made-up")))).toBe(false)
  })
})

describe("log lines without tracing", () => {
  it("carry the request id, and the trace id of the client's traceparent when it sent one", async () => {
    const traceId = "0af7651916cd43dd8448eb211c80319c"
    const traced = await chat("good/gpt-4o", { ...user, traceparent: `00-${traceId}-b7ad6b7169203331-01` })
    const plain = await chat("good/gpt-4o", user)
    const linesOf = (res: Awaited<ReturnType<typeof chat>>) =>
      gw.logs.filter((l) => l.annotations["requestId"] === res.headers.get("x-gateway-request-id"))
    expect(linesOf(traced).length).toBeGreaterThan(0)
    for (const l of linesOf(traced)) expect(l.annotations["traceId"]).toBe(traceId)
    expect(linesOf(plain).length).toBeGreaterThan(0)
    for (const l of linesOf(plain)) expect(l.annotations["traceId"]).toBeUndefined()
  })
})
