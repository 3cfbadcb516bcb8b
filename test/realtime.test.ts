import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import OpenAI from "openai"
import { OpenAIRealtimeWS } from "openai/realtime/ws"
import { Agent, fetch as undiciFetch } from "undici"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { DEFAULT_USAGE, type FakeRealtime, startFakeRealtime } from "./support/fakeRealtime.js"
import { call, startGateway, type TestGateway, tempDir } from "./support/gateway.js"
import { type TestCa, testCa } from "./support/testCerts.js"
import { until } from "./support/until.js"
import { Receiver } from "./support/webhookReceiver.js"

const ADMIN = "gwk_rt_admin_key_0123456789abcdefghijk"
const KEY = "gwk_rt_client_key_0123456789abcdefghij"
const POOR = "gwk_rt_poor_key_0123456789abcdefghijkl"
let poorId = ""
let gw: TestGateway
let ca: TestCa
let agent: Agent
let up: FakeRealtime
let down: FakeRealtime
let betaUp: FakeRealtime
let receiver: Receiver

/** The gateway's management and inference API over HTTPS (trusting the test CA). */
const api = async (p: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
  const res = await undiciFetch(`${gw.url}${p}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: {
      authorization: `Bearer ${ADMIN}`,
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
      ...init.headers
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    dispatcher: agent
  })
  const text = await res.text()
  let body: any
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, body, text, headers: res.headers }
}

interface Session {
  readonly rt: OpenAIRealtimeWS
  readonly events: Array<any>
  readonly errors: Array<any>
  readonly closed: Promise<{ code: number; reason: string }>
  readonly until: (type: string, count?: number) => Promise<any>
}

/** A session through the official SDK's realtime client (wss: only), trusting the test CA. */
const openSdk = async (model: string, key = KEY): Promise<Session> => {
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1` })
  const rt = new OpenAIRealtimeWS({ model, options: { ca: ca.certPem } }, client)
  const events: Array<any> = []
  const errors: Array<any> = []
  const waiters = new Set<() => void>()
  rt.on("event", (e) => {
    events.push(e)
    for (const w of [...waiters]) w()
  })
  rt.on("error", (e) => errors.push(e))
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    rt.socket.on("close", (code, reason) => {
      resolve({ code, reason: reason.toString() })
      for (const w of [...waiters]) w()
    })
  )
  await new Promise<void>((resolve, reject) => {
    rt.socket.once("open", () => resolve())
    rt.socket.once("unexpected-response", (_req, res) =>
      reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode }))
    )
    rt.socket.once("error", reject)
  })
  const untilEvent = (type: string, count = 1) =>
    new Promise<any>((resolve, reject) => {
      const check = () => {
        const hits = events.filter((e) => e.type === type)
        if (hits.length >= count) {
          waiters.delete(check)
          resolve(hits[count - 1])
        }
      }
      const t = setTimeout(() => {
        waiters.delete(check)
        reject(new Error(`no ${type}; got ${events.map((e) => e.type).join(", ")}`))
      }, 30_000)
      t.unref()
      waiters.add(check)
      check()
    })
  return { rt, events, errors, closed, until: untilEvent }
}

/** A raw `ws` client (subprotocols, headers), trusting the test CA; resolves once open or with the refusal's status. */
const openRaw = (model: string, init: { headers?: Record<string, string>; protocols?: Array<string> } = {}) =>
  new Promise<{ ws: WebSocket; events: Array<any>; closed: Promise<{ code: number; reason: string }> } | { status: number; body: string }>(
    (resolve, reject) => {
      const ws = new WebSocket(`${gw.url.replace(/^https/, "wss")}/v1/realtime?model=${encodeURIComponent(model)}`, init.protocols ?? [], {
        headers: init.headers ?? {},
        ca: ca.certPem
      })
      const events: Array<any> = []
      ws.on("message", (d) => events.push(JSON.parse(String(d))))
      const closed = new Promise<{ code: number; reason: string }>((r) =>
        ws.on("close", (code, reason) => r({ code, reason: reason.toString() }))
      )
      ws.once("open", () => resolve({ ws, events, closed }))
      ws.once("unexpected-response", (_req, res) => {
        let body = ""
        res.on("data", (c) => (body += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      ws.once("error", reject)
    }
  )

const usageRows = (model: string) =>
  queryDb(
    gw.dataDir,
    "SELECT endpoint, tokens_in, tokens_out, cost_usd, api_key_id, status FROM usage WHERE requested_model = ? ORDER BY rowid",
    model
  )

beforeAll(async () => {
  ca = testCa()
  const leaf = ca.issue(["127.0.0.1", "localhost"])
  const dir = tempDir("gw-rt-tls-")
  fs.writeFileSync(path.join(dir, "cert.pem"), leaf.certPem)
  fs.writeFileSync(path.join(dir, "key.pem"), leaf.keyPem)
  agent = new Agent({ connect: { ca: ca.certPem } })
  up = await startFakeRealtime()
  down = await startFakeRealtime({ refuse: 503 })
  betaUp = await startFakeRealtime({ beta: true })
  gw = await startGateway({
    env: {
      REQUIRE_API_KEY: "true",
      INSPECTOR_CAPTURE_BODIES: "true",
      GATEWAY_TLS_CERT: path.join(dir, "cert.pem"),
      GATEWAY_TLS_KEY: path.join(dir, "key.pem")
    }
  })
  expect(gw.url).toMatch(/^https:/)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const poor = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "poor" }, { secret: POOR })))
  poorId = (poor as { id: string }).id
  for (const [name, base] of [
    ["oa", up.baseUrl],
    ["down", down.baseUrl],
    ["beta", betaUp.baseUrl]
  ] as const) {
    const r = await api("/api/providers", { body: { provider: "openai", name, apiKey: `sk-upstream-${name}`, baseUrl: base } })
    expect(r.status, r.text).toBe(201)
  }
  const combo = await api("/api/combos", {
    body: { name: "voice", strategy: "priority", targets: [{ model: "down/gpt-realtime" }, { model: "oa/gpt-realtime" }] }
  })
  expect(combo.status, combo.text).toBe(201)
  receiver = await Receiver.start()
  const hook = await api("/api/webhooks", { body: { url: receiver.url, events: ["realtime.session.started", "realtime.session.ended"] } })
  expect(hook.status, hook.text).toBe(201)
  const budget = await api("/api/usage/budget", { body: { apiKeyId: poorId, dailyLimitUsd: 0.005 } })
  expect([200, 201]).toContain(budget.status)
}, 120_000)

afterAll(async () => {
  await gw?.close()
  await up?.close()
  await down?.close()
  await betaUp?.close()
  await agent?.close()
  await receiver?.close()
})

beforeEach(async () => {
  await gw.resetResilience()
})

describe("realtime sessions through the gateway", () => {
  it("relays a text round trip with the SDK's client, on the target's own key, with the realtime subprotocol's events", async () => {
    const s = await openSdk("oa/gpt-realtime")
    const created = await s.until("session.created")
    expect(created.session.type).toBe("realtime")
    s.rt.send({ type: "session.update", session: { type: "realtime", output_modalities: ["text"], instructions: "Be brief." } })
    await s.until("session.updated")
    s.rt.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "hello there" }] }
    })
    s.rt.send({ type: "response.create" })
    const done = await s.until("response.output_text.done")
    expect(done.text).toBe("You said: hello there")
    const deltas = s.events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta)
    expect(deltas.join("")).toBe("You said: hello there")
    await s.until("response.done")
    const hs = up.handshakes[up.handshakes.length - 1]!
    expect(hs.url).toBe("/v1/realtime?model=gpt-realtime")
    expect(hs.headers.authorization).toBe("Bearer sk-upstream-oa")
    s.rt.close()
    expect((await s.closed).code).toBe(1000)
  }, 60_000)

  it("relays an audio round trip: base64 audio appended in, audio deltas out", async () => {
    const s = await openSdk("oa/gpt-realtime")
    await s.until("session.created")
    s.rt.send({ type: "session.update", session: { type: "realtime", output_modalities: ["audio"] } })
    await s.until("session.updated")
    const pcm = Buffer.alloc(9600, 3).toString("base64")
    s.rt.send({ type: "input_audio_buffer.append", audio: pcm })
    s.rt.send({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_audio", audio: pcm }] } })
    s.rt.send({ type: "response.create" })
    await s.until("response.done")
    const audio = s.events.filter((e) => e.type === "response.output_audio.delta")
    expect(audio).toHaveLength(3)
    expect(Buffer.from(audio[0].delta, "base64")).toEqual(Buffer.alloc(4800, 7))
    expect(up.received.some((e) => e.type === "input_audio_buffer.append" && e.audio === pcm)).toBe(true)
    s.rt.close()
    await s.closed
  }, 60_000)

  it("relays function calling: the call's arguments, the client's output, the answer that uses it", async () => {
    const s = await openSdk("oa/gpt-realtime")
    await s.until("session.created")
    s.rt.send({
      type: "session.update",
      session: {
        type: "realtime",
        tools: [
          {
            type: "function",
            name: "get_weather",
            description: "weather",
            parameters: { type: "object", properties: { city: { type: "string" } } }
          }
        ]
      }
    })
    await s.until("session.updated")
    s.rt.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "weather in Paris?" }] }
    })
    s.rt.send({ type: "response.create" })
    const args = await s.until("response.function_call_arguments.done")
    expect(args.name).toBe("get_weather")
    expect(JSON.parse(args.arguments)).toEqual({ city: "Paris" })
    await s.until("response.done")
    s.rt.send({ type: "conversation.item.create", item: { type: "function_call_output", call_id: args.call_id, output: "sunny" } })
    s.rt.send({ type: "response.create" })
    const text = await s.until("response.output_text.done")
    expect(text.text).toBe("The weather: sunny")
    s.rt.close()
    await s.closed
  }, 60_000)

  it("writes one usage row per response.done, priced with the realtime model's text and audio prices", async () => {
    const model = "oa/gpt-realtime"
    const before = usageRows(model).length
    const s = await openSdk(model)
    await s.until("session.created")
    for (let i = 1; i <= 2; i++) {
      s.rt.send({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text: `n${i}` }] }
      })
      s.rt.send({ type: "response.create" })
      await s.until("response.done", i)
    }
    s.rt.close()
    await s.closed
    const rows = await until("two usage rows", async () => {
      await gw.usageWritten()
      const r = usageRows(model)
      return r.length >= before + 2 ? r.slice(before) : undefined
    })
    // 80 uncached text in × $4 + 40 cached × $0.40 + 50 text out × $16 + 80 audio in × $32 + 100 audio out × $64 (per 1M).
    const expected = (80 * 4 + 40 * 0.4 + 50 * 16 + 80 * 32 + 100 * 64) / 1e6
    for (const row of rows) {
      expect(row).toMatchObject({ endpoint: "realtime", tokens_in: DEFAULT_USAGE.input_tokens, tokens_out: DEFAULT_USAGE.output_tokens })
      expect(row.cost_usd).toBeCloseTo(expected, 9)
    }
  }, 60_000)

  it("ends a session whose key's budget is spent: an error event budget_exhausted, then 1008", async () => {
    const s = await openSdk("oa/gpt-realtime", POOR)
    await s.until("session.created")
    s.rt.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "spend" }] }
    })
    s.rt.send({ type: "response.create" })
    const closed = await s.closed
    expect(closed.code).toBe(1008)
    const error = s.events.find((e) => e.type === "error")
    expect(error?.error.code).toBe("budget_exhausted")
    expect(error?.error.message).toMatch(/daily budget/)
    // Spent: the next session is refused at the handshake.
    const again = await openRaw("oa/gpt-realtime", { headers: { authorization: `Bearer ${POOR}` } })
    expect(again).toMatchObject({ status: 429 })
  }, 60_000)

  it("skips a target that refuses the handshake: the combo's second target serves the session", async () => {
    const downBefore = down.handshakes.length
    const s = await openSdk("voice")
    await s.until("session.created")
    expect(down.handshakes.length).toBe(downBefore + 1)
    s.rt.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "fallback" }] }
    })
    s.rt.send({ type: "response.create" })
    expect((await s.until("response.output_text.done")).text).toBe("You said: fallback")
    s.rt.close()
    await s.closed
  }, 60_000)

  it("sends upstream_closed and closes with 1011 when the upstream drops the session", async () => {
    const s = await openSdk("oa/gpt-realtime")
    await s.until("session.created")
    for (const sock of up.sockets) sock.terminate()
    const closed = await s.closed
    expect(closed.code).toBe(1011)
    expect(s.events.find((e) => e.type === "error")?.error.code).toBe("upstream_closed")
  }, 60_000)

  it("takes the key in the browser's subprotocol and answers selecting `realtime`; refuses a bad key and a model that is not realtime", async () => {
    const ok = await openRaw("oa/gpt-realtime", { protocols: ["realtime", `openai-insecure-api-key.${KEY}`] })
    if (!("ws" in ok)) throw new Error(`refused: ${ok.status} ${ok.body}`)
    expect(ok.ws.protocol).toBe("realtime")
    await until("session.created", async () => ok.events.find((e) => e.type === "session.created"))
    ok.ws.close()
    await ok.closed

    const bad = await openRaw("oa/gpt-realtime", { protocols: ["realtime", "openai-insecure-api-key.gwk_wrong"] })
    expect(bad).toMatchObject({ status: 401 })
    expect((bad as { body: string }).body).toContain("invalid_api_key")
    const none = await openRaw("oa/gpt-realtime")
    expect(none).toMatchObject({ status: 401 })
    const chat = await openRaw("oa/gpt-4o", { headers: { authorization: `Bearer ${KEY}` } })
    expect(chat).toMatchObject({ status: 400 })
    expect((chat as { body: string }).body).toContain("realtime_model_required")
  }, 60_000)

  it("serves a model the operator marks realtime-capable on an OpenAI-compatible connection, and lists the capability in the catalog", async () => {
    const conn = await api("/api/providers", {
      body: { provider: "openai-compatible", name: "voicebox", apiKey: "sk-voicebox", baseUrl: up.baseUrl, models: ["my-voice"] }
    })
    expect(conn.status, conn.text).toBe(201)
    const refused = await openRaw("voicebox/my-voice", { headers: { authorization: `Bearer ${KEY}` } })
    expect(refused).toMatchObject({ status: 400 })
    const marked = await api("/api/provider-models", {
      body: { provider: "voicebox", model: "my-voice", capabilities: ["realtime", "audio"] }
    })
    expect([200, 201], marked.text).toContain(marked.status)
    const s = await openSdk("voicebox/my-voice")
    await s.until("session.created")
    expect(up.handshakes[up.handshakes.length - 1]!.url).toBe("/v1/realtime?model=my-voice")
    s.rt.close()
    await s.closed
    const catalog = await api("/api/models/catalog?provider=openai")
    const entry = catalog.body.models.find((m: { model: string }) => m.model === "gpt-realtime")
    expect(entry.capabilities.realtime).toBe(true)
    expect(catalog.body.models.find((m: { model: string }) => m.model === "gpt-4o").capabilities.realtime).toBe(false)
  }, 60_000)

  it("counts a session against its key's requests-per-minute limit: past it the handshake is a 429", async () => {
    const SLOW = "gwk_rt_slow_key_0123456789abcdefghijkl"
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "slow", rpm: 1 }, { secret: SLOW })))
    const first = await openRaw("oa/gpt-realtime", { headers: { authorization: `Bearer ${SLOW}` } })
    if (!("ws" in first)) throw new Error(`refused: ${first.status} ${first.body}`)
    first.ws.close()
    await first.closed
    // The new key's limit reaches the limiter with the key cache's next check (within a second): until
    // then a session may still open; past it, the handshake is refused.
    const refused = await until("a handshake past the key's rpm refused", async () => {
      const next = await openRaw("oa/gpt-realtime", { headers: { authorization: `Bearer ${SLOW}` } })
      if (!("ws" in next)) return next
      next.ws.close()
      await next.closed
      return undefined
    })
    expect(refused).toMatchObject({ status: 429 })
  }, 60_000)

  it("refuses a browser page on a foreign origin without a key, as inference does", async () => {
    const foreign = await openRaw("oa/gpt-realtime", { headers: { origin: "https://evil.example" } })
    expect(foreign).toMatchObject({ status: 403 })
    expect((foreign as { body: string }).body).toContain("origin_not_allowed")
    const withKey = await openRaw("oa/gpt-realtime", {
      headers: { origin: "https://evil.example" },
      protocols: ["realtime", `openai-insecure-api-key.${KEY}`]
    })
    if (!("ws" in withKey)) throw new Error(`refused: ${withKey.status} ${withKey.body}`)
    withKey.ws.close()
    await withKey.closed
  }, 60_000)

  it("relays OpenAI-Beta: realtime=v1 to an upstream that takes it, and closes with 1003 where none does", async () => {
    const headers = { authorization: `Bearer ${KEY}`, "openai-beta": "realtime=v1" }
    const beta = await openRaw("beta/gpt-realtime", { headers })
    if (!("ws" in beta)) throw new Error(`refused: ${beta.status} ${beta.body}`)
    const created = await until("beta session.created", async () => beta.events.find((e) => e.type === "session.created"))
    expect(created.session.type).toBeUndefined()
    expect(betaUp.handshakes[betaUp.handshakes.length - 1]!.headers["openai-beta"]).toBe("realtime=v1")
    beta.ws.close()
    await beta.closed

    const ga = await openRaw("oa/gpt-realtime", { headers })
    if (!("ws" in ga)) throw new Error(`refused: ${ga.status} ${ga.body}`)
    const closed = await ga.closed
    expect(closed.code).toBe(1003)
    expect(closed.reason).toMatch(/beta/)
  }, 60_000)

  it("mints an ephemeral client secret bound to the calling key, accepted in place of the key until it expires", async () => {
    const minted = await api("/v1/realtime/client_secrets", {
      body: { expires_after: { anchor: "created_at", seconds: 30 }, session: { type: "realtime", model: "gpt-realtime" } },
      headers: { authorization: `Bearer ${KEY}` }
    })
    expect(minted.status, minted.text).toBe(200)
    expect(minted.body.value).toMatch(/^ek_/)
    expect(minted.body.expires_at).toBeGreaterThan(Date.now() / 1000 + 20)
    expect(minted.body.expires_at).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 30)
    // The browser's way: the secret in the subprotocol.
    const ok = await openRaw("oa/gpt-realtime", { protocols: ["realtime", `openai-insecure-api-key.${minted.body.value}`] })
    if (!("ws" in ok)) throw new Error(`refused: ${ok.status} ${ok.body}`)
    await until("session.created", async () => ok.events.find((e) => e.type === "session.created"))
    ok.ws.close()
    await ok.closed
    // The SDK's way, with the secret as its key.
    const s = await openSdk("oa/gpt-realtime", minted.body.value)
    await s.until("session.created")
    s.rt.close()
    await s.closed

    const tooLong = await api("/v1/realtime/client_secrets", {
      body: { expires_after: { seconds: 601 } },
      headers: { authorization: `Bearer ${KEY}` }
    })
    expect(tooLong.status).toBe(400)
    expect(tooLong.body.error.message).toMatch(/600/)
    const noKey = await api("/v1/realtime/client_secrets", { body: {}, headers: { authorization: "Bearer gwk_nope" } })
    expect(noKey.status).toBe(401)
    // A secret dies with its key: minted, then the key disabled.
    const TEMP = "gwk_rt_temp_key_0123456789abcdefghijkl"
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "temp" }, { secret: TEMP })))
    const orphan = await api("/v1/realtime/client_secrets", { body: {}, headers: { authorization: `Bearer ${TEMP}` } })
    expect(orphan.status, orphan.text).toBe(200)
    expect((await api("/api/keys/temp", { method: "PATCH", body: { enabled: false } })).status).toBe(200)
    const dead = await until("the disabled key's secret refused", async () => {
      const r = await openRaw("oa/gpt-realtime", { protocols: ["realtime", `openai-insecure-api-key.${orphan.body.value}`] })
      if (!("ws" in r)) return r
      r.ws.close()
      await r.closed
      return undefined
    })
    expect(dead).toMatchObject({ status: 401 })
    const forged = await openRaw("oa/gpt-realtime", { protocols: ["realtime", "openai-insecure-api-key.ek_forged"] })
    expect(forged).toMatchObject({ status: 401 })
    expect((forged as { body: string }).body).toContain("invalid_client_secret")
  }, 60_000)

  it("shows a session in the inspector as one entry with its events (audio elided to its size) and fires started and ended webhooks", async () => {
    const s = await openSdk("oa/gpt-realtime")
    const created = await s.until("session.created")
    s.rt.send({ type: "session.update", session: { type: "realtime", output_modalities: ["audio"] } })
    await s.until("session.updated")
    const pcm = Buffer.alloc(9600, 5).toString("base64")
    s.rt.send({ type: "input_audio_buffer.append", audio: pcm })
    s.rt.send({
      type: "conversation.item.create",
      item: { type: "message", role: "user", content: [{ type: "input_text", text: "inspect me" }] }
    })
    s.rt.send({ type: "response.create" })
    await s.until("response.done")
    s.rt.close()
    await s.closed

    const entry = await until("the inspector's realtime entry", async () => {
      const r = await api("/api/tools/traffic-inspector/requests?source=realtime")
      const list = r.body?.items ?? r.body?.requests ?? r.body?.entries ?? r.body
      const mine = Array.isArray(list) ? list.filter((e: { path: string }) => e.path.includes("/v1/realtime")) : []
      // The newest session is this test's.
      return mine.length > 0 ? mine.reduce((a: { seq: number }, b: { seq: number }) => (b.seq > a.seq ? b : a)) : undefined
    })
    expect(entry).toMatchObject({ source: "realtime" })
    const detail = await api(`/api/tools/traffic-inspector/requests/${entry.id}`)
    expect(detail.status).toBe(200)
    expect(detail.text).toContain("inspect me")
    expect(detail.text).toContain(created.session.id)
    expect(detail.text).toContain("<audio: 9600 bytes>")
    expect(detail.text).toContain("<audio: 4800 bytes>")
    expect(detail.text).not.toContain(pcm.slice(0, 200))

    const ended = await receiver.waitFor(1, (d) => d.body?.type === "realtime.session.ended" || d.body?.event === "realtime.session.ended")
    expect(JSON.stringify(ended.at(-1)?.body)).toContain("gpt-realtime")
    expect(receiver.deliveries.some((d) => JSON.stringify(d.body).includes("realtime.session.started"))).toBe(true)
  }, 60_000)

  it("pauses the upstream while a client does not read, instead of buffering its events without bound", async () => {
    const raw = await openRaw("oa/gpt-realtime", { headers: { authorization: `Bearer ${KEY}` } })
    if (!("ws" in raw)) throw new Error(`refused: ${raw.status} ${raw.body}`)
    await until("session.created", async () => raw.events.find((e) => e.type === "session.created"))
    const count = 48
    raw.ws.pause()
    raw.ws.send(JSON.stringify({ type: "test.flood", count, bytes: 1024 * 1024 }))
    // The gateway stopped reading: the upstream's own socket holds what the client has not taken.
    await until("the upstream held back", async () => [...up.sockets].some((sock) => sock.bufferedAmount > 12 * 1024 * 1024), 60_000)
    raw.ws.resume()
    await until("every flooded event", async () => raw.events.filter((e) => e.type === "test.flooded").length === count, 60_000)
    expect(raw.events.filter((e) => e.type === "test.flooded").map((e) => e.n)).toEqual([...Array(count).keys()])
    raw.ws.close()
    await raw.closed
  }, 120_000)
})

describe("realtime session durations", () => {
  let short: TestGateway
  beforeAll(async () => {
    short = await startGateway({ env: { GATEWAY_REALTIME_IDLE_SECONDS: "3", GATEWAY_REALTIME_MAX_SECONDS: "5" } })
    await short.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    const r = await call(`${short.url}/api/providers`, {
      body: { provider: "openai", name: "oa", apiKey: "sk-up", baseUrl: up.baseUrl },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(r.status, r.text).toBe(201)
  }, 120_000)
  afterAll(async () => {
    await short?.close()
  })
  const openPlain = () =>
    new Promise<{ ws: WebSocket; events: Array<any>; closed: Promise<{ code: number; reason: string }>; opened: number }>(
      (resolve, reject) => {
        const ws = new WebSocket(`${short.url.replace(/^http/, "ws")}/v1/realtime?model=oa/gpt-realtime`)
        const events: Array<any> = []
        ws.on("message", (d) => events.push(JSON.parse(String(d))))
        const closed = new Promise<{ code: number; reason: string }>((r) =>
          ws.on("close", (code, reason) => r({ code, reason: reason.toString() }))
        )
        ws.once("open", () => resolve({ ws, events, closed, opened: Date.now() }))
        ws.once("unexpected-response", (_q, res) => reject(new Error(`refused ${res.statusCode}`)))
        ws.once("error", reject)
      }
    )

  it("ends a session idle for GATEWAY_REALTIME_IDLE_SECONDS with an error event session_idle", async () => {
    const s = await openPlain()
    const closed = await s.closed
    expect(closed.code).toBe(1000)
    expect(s.events.find((e) => e.type === "error")?.error.code).toBe("session_idle")
    expect(Date.now() - s.opened).toBeGreaterThanOrEqual(2500)
  }, 60_000)

  it("ends a busy session at GATEWAY_REALTIME_MAX_SECONDS with an error event session_expired", async () => {
    const s = await openPlain()
    let open = true
    void s.closed.then(() => (open = false))
    // Busy: an event every 300 ms keeps it from idling (3 s: ten times that, for a loaded machine).
    const busy = setInterval(() => open && s.ws.send(JSON.stringify({ type: "session.update", session: { type: "realtime" } })), 300)
    try {
      const closed = await s.closed
      expect(closed.code).toBe(1000)
      expect(s.events.find((e) => e.type === "error")?.error.code).toBe("session_expired")
      expect(Date.now() - s.opened).toBeGreaterThanOrEqual(4500)
    } finally {
      clearInterval(busy)
    }
  }, 60_000)
})
