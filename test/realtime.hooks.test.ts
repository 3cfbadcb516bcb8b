import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { type FakeRealtime, startFakeRealtime } from "./support/fakeRealtime.js"
import { call, startGateway, type TestGateway, tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * A realtime session as the gateway's other observers see it (docs/realtime.md, "Webhooks,
 * plugins, inspector"): a plugin installed from a folder hears its begin (onRequest, which may
 * refuse it) and its end (onResponse / onError); the traffic inspector shows it as one entry,
 * with its events while it still runs.
 */

const ADMIN = "gwk_rth_admin_key_0123456789abcdefghijk"
const KEY = "gwk_rth_client_key_0123456789abcdefghij"
let gw: TestGateway
let up: FakeRealtime
let recorder: http.Server
const heard: Array<{ hook: string; requestId: string; [k: string]: unknown }> = []

const api = (p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: { authorization: `Bearer ${ADMIN}` } })

/** Reports what it hears of realtime requests; refuses a session for `oa/gpt-realtime-mini`. */
const WATCHER = (url: string) => `import { definePlugin, blockRequest } from "gateway/plugin-sdk"
const report = (ctx, extra = {}) => ctx.path.includes("realtime")
  ? fetch(${JSON.stringify(url)}, { method: "POST", body: JSON.stringify({ hook: ctx.hook, requestId: ctx.requestId, model: ctx.model, endpoint: ctx.endpoint, apiKeyId: ctx.apiKeyId, ...extra }) })
  : undefined
export default definePlugin({
  name: "rtwatch",
  async onRequest(ctx) {
    await report(ctx)
    if (ctx.model === "oa/gpt-realtime-mini") return blockRequest({ status: 403, message: "no mini sessions here", code: "mini_refused" })
  },
  async onResponse(ctx) { await report(ctx, { status: ctx.status }) },
  async onError(ctx) { await report(ctx, { status: ctx.status, blockedBy: ctx.blockedBy, code: ctx.error?.code ?? null }) }
})
`

/** A raw client with the gateway key; resolves once open (with the handshake's request id) or with the refusal. */
const open = (model: string) =>
  new Promise<
    | { ws: WebSocket; requestId: string; events: Array<any>; closed: Promise<{ code: number; reason: string }> }
    | { status: number; body: string; requestId: string }
  >((resolve, reject) => {
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime?model=${encodeURIComponent(model)}`, {
      headers: { authorization: `Bearer ${KEY}` }
    })
    const events: Array<any> = []
    let requestId = ""
    ws.on("upgrade", (res) => (requestId = String(res.headers["x-gateway-request-id"] ?? "")))
    ws.on("message", (d) => events.push(JSON.parse(String(d))))
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on("close", (code, reason) => r({ code, reason: String(reason) }))
    )
    ws.once("open", () => resolve({ ws, requestId, events, closed }))
    ws.once("unexpected-response", (_req, res) => {
      let body = ""
      res.on("data", (c) => (body += c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, requestId: String(res.headers["x-gateway-request-id"] ?? "") }))
    })
    ws.once("error", reject)
  })

/** The inspector's entries of one gateway request id (any source). */
const entriesOf = async (requestId: string): Promise<Array<any>> => {
  const r = await api("/api/tools/traffic-inspector/requests?limit=500")
  const list: Array<any> = r.body?.items ?? r.body?.requests ?? r.body?.entries ?? r.body ?? []
  return list.filter((e) => e.requestId === requestId)
}

beforeAll(async () => {
  recorder = http.createServer((req, res) => {
    let body = ""
    req.on("data", (c) => (body += c))
    req.on("end", () => {
      heard.push(JSON.parse(body))
      res.end("{}")
    })
  })
  await new Promise<void>((r) => recorder.listen(0, "127.0.0.1", r))
  const recorderUrl = `http://127.0.0.1:${(recorder.address() as net.AddressInfo).port}`
  up = await startFakeRealtime()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true", INSPECTOR_CAPTURE_BODIES: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const conn = await api("/api/providers", { body: { provider: "openai", name: "oa", apiKey: "sk-up", baseUrl: up.baseUrl } })
  expect(conn.status, conn.text).toBe(201)
  const dir = path.join(tempDir("gw-rt-plugin-"), "rtwatch")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(
    path.join(dir, "plugin.json"),
    JSON.stringify({ name: "rtwatch", version: "1.0.0", main: "index.mjs", requires: { permissions: ["network"] }, enabledByDefault: true })
  )
  fs.writeFileSync(path.join(dir, "index.mjs"), WATCHER(recorderUrl))
  const installed = await api("/api/plugins", { body: { path: dir } })
  expect(installed.status, installed.text).toBe(201)
  await until("the plugin running", async () => ((await api("/api/plugins/rtwatch")).body?.state === "running" ? true : undefined))
}, 120_000)

afterAll(async () => {
  await gw?.close()
  await up?.close()
  recorder?.close()
})

describe("a realtime session on a provider node", () => {
  it("reaches a node shaped as Azure OpenAI: its base URL's /realtime, its own key in its default header, its model marked realtime", async () => {
    const node = await api("/api/provider-nodes", {
      body: {
        id: "azure-voice",
        prefix: "azv",
        family: "openai-responses",
        baseUrl: `http://127.0.0.1:${up.port}/openai/v1`,
        authStyle: "none",
        headers: { "api-key": "azure-key-0123456789" },
        models: [{ id: "my-realtime-deployment", capabilities: ["realtime", "audio"] }]
      }
    })
    expect(node.status, node.text).toBe(201)
    const conn = await api("/api/providers", { body: { provider: "azure-voice", name: "azv-east" } })
    expect(conn.status, conn.text).toBe(201)
    const s = await open("azv/my-realtime-deployment")
    if (!("ws" in s)) throw new Error(`refused: ${s.status} ${s.body}`)
    await until("session.created", async () => s.events.find((e) => e.type === "session.created"))
    const hs = up.handshakes.at(-1)!
    expect(hs.url).toBe("/openai/v1/realtime?model=my-realtime-deployment")
    expect(hs.headers["api-key"]).toBe("azure-key-0123456789")
    expect(hs.headers.authorization).toBeUndefined()
    s.ws.close()
    await s.closed
  }, 60_000)
})

describe("a beta client in a browser", () => {
  /** A browser's beta client: no headers, the key and the beta in its subprotocols. */
  const openBrowserBeta = (model: string) =>
    new Promise<{ events: Array<any>; closed: Promise<{ code: number; reason: string }>; ws: WebSocket }>((resolve, reject) => {
      const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime?model=${encodeURIComponent(model)}`, [
        "realtime",
        `openai-insecure-api-key.${KEY}`,
        "openai-beta.realtime-v1"
      ])
      const events: Array<any> = []
      ws.on("message", (d) => events.push(JSON.parse(String(d))))
      const closed = new Promise<{ code: number; reason: string }>((r) =>
        ws.on("close", (code, reason) => r({ code, reason: String(reason) }))
      )
      ws.once("open", () => resolve({ events, closed, ws }))
      ws.once("unexpected-response", (_q, res) => reject(new Error(`refused ${res.statusCode}`)))
      ws.once("error", reject)
    })

  it("asks for the beta with the openai-beta.realtime-v1 subprotocol: relayed to a beta upstream, closed with 1003 by a GA one", async () => {
    const betaUp = await startFakeRealtime({ beta: true })
    try {
      const conn = await api("/api/providers", { body: { provider: "openai", name: "oabeta", apiKey: "sk-beta", baseUrl: betaUp.baseUrl } })
      expect(conn.status, conn.text).toBe(201)
      const beta = await openBrowserBeta("oabeta/gpt-realtime")
      const created = await until("beta session.created", async () => beta.events.find((e) => e.type === "session.created"))
      expect(created.session.type).toBeUndefined()
      expect(betaUp.handshakes.at(-1)!.headers["openai-beta"]).toBe("realtime=v1")
      beta.ws.close()
      await beta.closed
      const ga = await openBrowserBeta("oa/gpt-realtime")
      const closed = await ga.closed
      expect(closed.code).toBe(1003)
      expect(closed.reason).toMatch(/beta/)
    } finally {
      await betaUp.close()
    }
  }, 60_000)
})

describe("a client secret minted with a session configuration", () => {
  it("opens sessions on the secret's model when the page names none, configured as the secret says", async () => {
    const minted = await call(`${gw.url}/v1/realtime/client_secrets`, {
      body: { session: { type: "realtime", model: "oa/gpt-realtime", instructions: "Answer like a pirate.", output_modalities: ["text"] } },
      headers: { authorization: `Bearer ${KEY}` }
    })
    expect(minted.status, minted.text).toBe(200)
    const receivedBefore = up.received.length
    // The page knows the secret only: no key, no model.
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime`, ["realtime", `openai-insecure-api-key.${minted.body.value}`])
    const events: Array<any> = []
    ws.on("message", (d) => events.push(JSON.parse(String(d))))
    const closed = new Promise((r) => ws.on("close", r))
    await new Promise((resolve, reject) => {
      ws.once("open", resolve)
      ws.once("unexpected-response", (_q, res) => reject(new Error(`refused ${res.statusCode}`)))
      ws.once("error", reject)
    })
    const updated = await until("the secret's configuration applied", async () => events.find((e) => e.type === "session.updated"))
    expect(updated.session.instructions).toBe("Answer like a pirate.")
    expect(up.handshakes.at(-1)!.url).toBe("/v1/realtime?model=gpt-realtime")
    const sent = up.received.slice(receivedBefore).find((e) => e.type === "session.update")
    expect(sent.session).toEqual({ type: "realtime", instructions: "Answer like a pirate.", output_modalities: ["text"] })
    ws.close()
    await closed
  }, 60_000)
})

describe("a realtime session and the models its key may use", () => {
  it("is refused with 403 model_not_allowed for a key whose allowed models do not include it, as inference is", async () => {
    const NARROW = "gwk_rth_narrow_key_0123456789abcdefghij"
    const created = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "narrow" }, { secret: NARROW })))) as { id: string }
    const set = await api("/api/usage/limits", { body: { apiKeyId: created.id, models: ["gpt-4o-mini"] } })
    expect([200, 201], set.text).toContain(set.status)
    const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime?model=oa/gpt-realtime`, {
        headers: { authorization: `Bearer ${NARROW}` }
      })
      ws.once("unexpected-response", (_q, res) => {
        let body = ""
        res.on("data", (c) => (body += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      ws.once("open", () => {
        ws.close()
        resolve({ status: 101, body: "" })
      })
      ws.once("error", reject)
    })
    expect(refused.status).toBe(403)
    expect(refused.body).toContain("model_not_allowed")
  }, 60_000)
})

describe("a realtime session past its key's token limit", () => {
  it("is ended with an error event token_limit_exceeded naming the limit, then 1008; the next handshake is refused", async () => {
    const LIMITED = "gwk_rth_limited_key_0123456789abcdefghi"
    const created = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "limited" }, { secret: LIMITED })))
    const limit = await api("/api/usage/token-limits", {
      body: { apiKeyId: (created as { id: string }).id, scope: "global", maxTokens: 300, window: "day" }
    })
    expect([200, 201], limit.text).toContain(limit.status)
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime?model=oa/gpt-realtime`, {
      headers: { authorization: `Bearer ${LIMITED}` }
    })
    const events: Array<any> = []
    ws.on("message", (d) => events.push(JSON.parse(String(d))))
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.on("close", (code, reason) => r({ code, reason: String(reason) }))
    )
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject))
    // Each response uses 350 tokens (the fake's usage): the first one goes past the 300 of the limit.
    ws.send(
      JSON.stringify({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text: "a" }] }
      })
    )
    ws.send(JSON.stringify({ type: "response.create" }))
    const end = await closed
    expect(end.code).toBe(1008)
    const error = events.find((e) => e.type === "error")
    expect(error?.error.code).toBe("token_limit_exceeded")
    expect(error?.error.message).toMatch(/300 tokens per day/)
    const next = await new Promise<number>((resolve, reject) => {
      const again = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime?model=oa/gpt-realtime`, {
        headers: { authorization: `Bearer ${LIMITED}` }
      })
      again.once("unexpected-response", (_q, res) => resolve(res.statusCode ?? 0))
      again.once("open", () => {
        again.close()
        resolve(101)
      })
      again.once("error", reject)
    })
    expect(next).toBe(429)
  }, 60_000)
})

describe("a realtime session seen by plugins and the inspector", () => {
  it("a plugin hears the session's begin (onRequest) and its end (onResponse)", async () => {
    const s = await open("oa/gpt-realtime")
    if (!("ws" in s)) throw new Error(`refused: ${s.status} ${s.body}`)
    await until("session.created", async () => s.events.find((e) => e.type === "session.created"))
    s.ws.send(
      JSON.stringify({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] }
      })
    )
    s.ws.send(JSON.stringify({ type: "response.create" }))
    await until("response.done", async () => s.events.find((e) => e.type === "response.done"))
    s.ws.close()
    await s.closed
    const mine = await until("the session's end heard", async () => {
      const m = heard.filter((e) => e.requestId === s.requestId)
      return m.some((e) => e.hook === "onResponse") ? m : undefined
    })
    expect(mine.map((e) => e.hook)).toEqual(["onRequest", "onResponse"])
    expect(mine[0]).toMatchObject({ model: "oa/gpt-realtime", endpoint: "realtime" })
    expect(mine[0]!.apiKeyId).toBeTruthy()
    expect(mine[1]).toMatchObject({ status: 200 })
  }, 60_000)

  it("a plugin's block at onRequest refuses the handshake with its status, and its onError hears it", async () => {
    const before = up.handshakes.length
    const refused = await open("oa/gpt-realtime-mini")
    expect(refused).toMatchObject({ status: 403 })
    expect((refused as { body: string }).body).toContain("no mini sessions here")
    expect(up.handshakes.length).toBe(before)
    const { requestId } = refused as { requestId: string }
    expect(requestId).toBeTruthy()
    const error = await until("the block's onError", async () => heard.find((e) => e.hook === "onError" && e.requestId === requestId))
    expect(heard.find((e) => e.hook === "onRequest" && e.requestId === requestId)).toMatchObject({ model: "oa/gpt-realtime-mini" })
    expect(error).toMatchObject({ status: 403, blockedBy: "rtwatch" })
  }, 60_000)

  it("the inspector shows a running session as one entry with its events so far, then its close", async () => {
    const s = await open("oa/gpt-realtime")
    if (!("ws" in s)) throw new Error(`refused: ${s.status} ${s.body}`)
    await until("session.created", async () => s.events.find((e) => e.type === "session.created"))
    s.ws.send(
      JSON.stringify({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text: "watch me live" }] }
      })
    )
    s.ws.send(JSON.stringify({ type: "response.create" }))
    await until("response.done", async () => s.events.find((e) => e.type === "response.done"))
    // Still open: the entry is there with the events so far.
    const live = await until("the running session's events in the inspector", async () => {
      const [entry] = await entriesOf(s.requestId)
      if (entry === undefined) return undefined
      const detail = await api(`/api/tools/traffic-inspector/requests/${entry.id}`)
      return detail.text.includes("You said: watch me live") ? { entry, detail } : undefined
    })
    expect(live.entry.source).toBe("realtime")
    expect(live.detail.text).toContain("x-gateway-realtime-state")
    expect(await entriesOf(s.requestId)).toHaveLength(1)
    s.ws.close()
    await s.closed
    const closed = await until("the closed session's entry", async () => {
      const detail = await api(`/api/tools/traffic-inspector/requests/${live.entry.id}`)
      return detail.text.includes("x-gateway-realtime-close") ? detail : undefined
    })
    expect(closed.text).toContain("closed by the client")
    // One session, one entry (not also the agent-bridge's record of the handshake).
    expect(await entriesOf(s.requestId)).toHaveLength(1)
  }, 60_000)
})
