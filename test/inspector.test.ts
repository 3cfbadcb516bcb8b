/**
 * The traffic inspector through the real gateway (docs/inspector.md): the agent-bridge source
 * records every request the gateway serves, bodies and merged streams while a feed client is
 * connected, the WebSocket feed (a real `ws` client), the list's filters, detail, annotation,
 * HAR export (validated against the HAR 1.2 schema), sessions, replay through the router, the
 * ingest route and the loopback-only rule.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import WebSocket from "ws"
import { gatewayForFile } from "./support/families.js"
import { call, rawCall, tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"

const ADMIN = "gwk_inspector_admin_0123456789"
const KEY = "gwk_inspector_client_0123456789"
const hostsFile = path.join(tempDir("gw-inspector-hosts-"), "hosts")
fs.writeFileSync(hostsFile, "127.0.0.1 localhost\n")
const INGEST = "ingest-token-0123456789"

const ctx = gatewayForFile({
  admin: ADMIN,
  keys: [KEY],
  env: { GATEWAY_HOSTS_FILE: hostsFile, INSPECTOR_INTERNAL_INGEST_TOKEN: INGEST, INSPECTOR_HTTP_PROXY_PORT: "0", INSPECTOR_MITM_PORT: "0" }
})
const admin = { authorization: `Bearer ${ADMIN}` }
const base = () => `${ctx.gw.url}/api/tools/traffic-inspector`

type Feed = {
  readonly ws: WebSocket
  readonly events: Array<{ type: string; entry?: { id: string; status: unknown }; entries?: Array<unknown> }>
  close: () => void
}

const openFeed = async (): Promise<Feed> => {
  const ws = new WebSocket(`${ctx.gw.url.replace("http", "ws")}/api/tools/traffic-inspector/ws`, { headers: admin })
  const events: Feed["events"] = []
  ws.on("message", (data) => events.push(JSON.parse(String(data))))
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve())
    ws.once("error", reject)
  })
  await until("inspector condition 1", () => events.length > 0)
  return { ws, events, close: () => ws.close() }
}

const chat = (body: Record<string, unknown>) =>
  call(`${ctx.gw.url}/v1/chat/completions`, { body, headers: { authorization: `Bearer ${KEY}`, "user-agent": "OpenAI/JS 5.0.0" } })

const list = async (query = "") =>
  (await call(`${base()}/requests${query}`, { headers: admin })).body as { requests: Array<Record<string, any>>; total: number }
const detail = async (id: string) => (await call(`${base()}/requests/${id}`, { headers: admin })).body as Record<string, any>

describe("traffic inspector: agent-bridge", () => {
  it("records every gateway request's metadata with nobody watching, but no bodies", async () => {
    await call(`${base()}/requests`, { method: "DELETE", headers: admin })
    const res = await chat({ model: "up-chat/m1", messages: [{ role: "user", content: "hi" }] })
    expect(res.status).toBe(200)
    await until("inspector condition 2", async () => (await list("?source=agent-bridge")).requests.some((r) => r.status === 200))
    const [entry] = (await list("?profile=llm")).requests
    expect(entry).toMatchObject({
      source: "agent-bridge",
      status: 200,
      detectedKind: "llm",
      hasBodies: false,
      method: "POST",
      agent: "openai-sdk"
    })
    expect(entry!.llm).toMatchObject({
      apiKind: "chat.completions",
      model: "up-chat/m1",
      tokensIn: expect.any(Number),
      tokensOut: expect.any(Number)
    })
    expect(entry!.requestId).toMatch(/^req_/)
    const d = await detail(entry!.id)
    expect(d.requestBody).toBeNull()
    expect(d.requestHeaders.authorization).not.toContain(KEY)
    expect(d.requestHeaders.authorization).toMatch(/^Bearer /)
  })

  it("keeps bodies, the upstream exchange and the merged stream while a feed client is connected; the feed sends snapshot, new, update", async () => {
    const feed = await openFeed()
    try {
      expect(feed.events[0]!.type).toBe("snapshot")
      ctx.up.next({ content: "streamed answer here", chunks: 4 })
      const res = await fetch(`${ctx.gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "up-anth/m1",
          stream: true,
          messages: [
            { role: "system", content: "be brief" },
            { role: "user", content: "stream please" }
          ]
        })
      })
      await res.text()
      await until("inspector condition 3", () => feed.events.some((e) => e.type === "update" && e.entry?.status === 200))
      expect(feed.events.some((e) => e.type === "new")).toBe(true)
      const id = feed.events.find((e) => e.type === "new")!.entry!.id
      const d = await detail(id)
      expect(JSON.parse(d.requestBody.text)).toMatchObject({ model: "up-anth/m1", stream: true })
      expect(d.conversation.request.map((t: { role: string }) => t.role)).toEqual(["system", "user"])
      expect(d.conversation.response).toEqual([{ role: "assistant", blocks: [{ type: "text", text: "streamed answer here" }] }])
      expect(d.contextKey).toMatch(/^[0-9a-f]{12}$/)
      expect(d.llm).toMatchObject({ streamed: true, provider: "anthropic" })
      // The upstream side: what went to the Anthropic upstream after translation, and its stream.
      expect(d.upstream).toHaveLength(1)
      expect(d.upstream[0]).toMatchObject({ attempt: 1, provider: "anthropic", connection: "up-anth", model: "m1", status: 200 })
      expect(JSON.parse(d.upstream[0].requestBody.text)).toMatchObject({ model: "m1", system: expect.anything() })
      expect(d.upstream[0].responseBody.text).toContain("content_block_delta")
    } finally {
      feed.close()
    }
  })

  it("merges streams of the messages and generate-content formats from their own clients", async () => {
    const feed = await openFeed()
    try {
      ctx.up.next({ content: "from anthropic" }, { content: "from gemini" })
      const m = await fetch(`${ctx.gw.url}/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": KEY, "content-type": "application/json", "anthropic-version": "2023-06-01" },
        body: JSON.stringify({
          model: "up-anth/m1",
          max_tokens: 50,
          stream: true,
          system: "sys A",
          messages: [{ role: "user", content: "hello" }]
        })
      })
      await m.text()
      const g = await fetch(`${ctx.gw.url}/v1beta/models/up-gem%2Fm1:streamGenerateContent?alt=sse`, {
        method: "POST",
        headers: { "x-goog-api-key": KEY, "content-type": "application/json" },
        body: JSON.stringify({
          systemInstruction: { parts: [{ text: "sys A" }] },
          contents: [{ role: "user", parts: [{ text: "hello" }] }]
        })
      })
      await g.text()
      await until(
        "inspector condition 4",
        async () => (await list("?profile=llm")).requests.filter((r) => r.status === 200 && r.hasBodies).length >= 2
      )
      const recent = (await list("?profile=llm")).requests.filter((r) => r.hasBodies).slice(-2)
      const [dm, dg] = await Promise.all(recent.map((r) => detail(r.id)))
      expect(dm!.conversation.response[0].blocks[0]).toEqual({ type: "text", text: "from anthropic" })
      expect(dg!.conversation.response[0].blocks[0]).toEqual({ type: "text", text: "from gemini" })
      // Same system prompt, whichever format carried it: the same context key.
      expect(dm!.contextKey).toBe(dg!.contextKey)
    } finally {
      feed.close()
    }
  })

  it("annotates, filters and exports HAR 1.2 that validates", async () => {
    const { requests } = await list()
    const id = requests[requests.length - 1]!.id
    const put = await call(`${base()}/requests/${id}/annotation`, { method: "PUT", body: { note: "look here" }, headers: admin })
    expect(put.status).toBe(200)
    expect(put.body.annotation).toBe("look here")
    expect((await list("?status=5xx")).requests).toHaveLength(0)
    expect((await list("?source=http-proxy")).requests).toHaveLength(0)
    const har = await call(`${base()}/export.har`, { headers: admin })
    expect(har.status).toBe(200)
    const validator = (await import("har-validator" as string)) as unknown as { har: (d: unknown) => Promise<unknown> }
    await expect(validator.har(har.body)).resolves.toBeTruthy()
    // The validator does refuse what is not HAR.
    await expect(validator.har({ log: { version: "1.2", entries: [{ request: {} }] } })).rejects.toBeTruthy()
    expect(har.body.log.entries.some((e: { comment?: string }) => e.comment === "look here")).toBe(true)
  })

  it("records a session, exports it as HAR and JSONL, renames, lists and deletes it", async () => {
    const started = await call(`${base()}/sessions`, { body: { name: "debug run" }, headers: admin })
    expect(started.status).toBe(201)
    const sid = started.body.id
    await chat({ model: "up-chat/m1", messages: [{ role: "user", content: "in the session" }] })
    await until("inspector condition 5", async () => (await list(`?sessionId=${sid}`)).requests.some((r) => r.status === 200))
    const stopped = await call(`${base()}/sessions/${sid}`, { method: "PATCH", body: { action: "stop" }, headers: admin })
    expect(stopped.body).toMatchObject({ state: "saved", count: 1 })
    const again = await call(`${base()}/sessions/${sid}`, { method: "PATCH", body: { action: "stop" }, headers: admin })
    expect(again.status).toBe(409)
    await call(`${base()}/sessions/${sid}`, { method: "PATCH", body: { action: "rename", name: "renamed" }, headers: admin })
    const snapshot = await call(`${base()}/sessions/${sid}`, { headers: admin })
    expect(snapshot.body.session.name).toBe("renamed")
    // Bodies were kept while recording, with nobody connected.
    expect(JSON.parse(snapshot.body.requests[0].requestBody.text).messages[0].content).toBe("in the session")
    const har = await call(`${base()}/sessions/${sid}/export.har`, { headers: admin })
    const validator = (await import("har-validator" as string)) as unknown as { har: (d: unknown) => Promise<unknown> }
    await expect(validator.har(har.body)).resolves.toBeTruthy()
    const jsonl = await fetch(`${base()}/sessions/${sid}/export?format=jsonl`, { headers: admin })
    const lines = (await jsonl.text()).trim().split("\n")
    expect(lines).toHaveLength(1)
    expect(JSON.parse(lines[0]!).source).toBe("agent-bridge")
    // The buffer cleared, the saved session stays.
    await call(`${base()}/requests`, { method: "DELETE", headers: admin })
    expect((await list(`?sessionId=${sid}`)).requests).toHaveLength(1)
    expect((await call(`${base()}/sessions`, { headers: admin })).body.sessions.some((s: { id: string }) => s.id === sid)).toBe(true)
    expect((await call(`${base()}/sessions/${sid}`, { method: "DELETE", headers: admin })).status).toBe(200)
    expect((await call(`${base()}/sessions/${sid}`, { headers: admin })).status).toBe(404)
  })

  it("replays a captured request through the router, as the gateway's internal caller, linked to the original", async () => {
    const feed = await openFeed()
    try {
      await chat({ model: "up-chat/m1", messages: [{ role: "user", content: "replay me" }] })
      await until("inspector condition 6", async () => (await list("?profile=llm")).requests.some((r) => r.hasBodies && r.status === 200))
      const original = (await list("?profile=llm")).requests.filter((r) => r.hasBodies).pop()!
      // A whole (non-streamed) answer is kept and read into the conversation too.
      const whole = await detail(original.id)
      expect(JSON.parse(whole.responseBody.text).choices[0].message.content).toBe("Hello from upstream")
      expect(whole.conversation.response).toEqual([{ role: "assistant", blocks: [{ type: "text", text: "Hello from upstream" }] }])
      ctx.up.requests.length = 0
      const replay = await call(`${base()}/requests/${original.id}/replay`, { method: "POST", headers: admin })
      expect(replay.status, JSON.stringify(replay.body)).toBe(200)
      expect(replay.body).toMatchObject({ original: original.id, status: 200, replay: expect.any(String) })
      // It went through the router to the upstream again, without the client's key.
      expect(ctx.up.requests).toHaveLength(1)
      expect(JSON.stringify(ctx.up.requests[0]!.headers)).not.toContain(KEY)
      await until("inspector condition 7", async () => (await detail(replay.body.replay)).status === 200)
      expect((await detail(replay.body.replay)).replayOf).toBe(original.id)
      expect((await detail(original.id)).replays).toContain(replay.body.replay)
    } finally {
      feed.close()
    }
    const missing = await call(`${base()}/requests/ti_nothing/replay`, { method: "POST", headers: admin })
    expect(missing.status).toBe(404)
  })

  it("ingest: refused without the token, recorded with it", async () => {
    const body = {
      source: "http-proxy",
      method: "POST",
      url: "https://api.openai.com/v1/chat/completions",
      requestBody: JSON.stringify({ model: "gpt-4o", messages: [] }),
      status: 200
    }
    expect((await call(`${base()}/internal/ingest`, { body })).status).toBe(403)
    expect((await call(`${base()}/internal/ingest`, { body, headers: { "x-inspector-ingest-token": "wrong" } })).status).toBe(403)
    const ok = await call(`${base()}/internal/ingest`, { body, headers: { "x-inspector-ingest-token": INGEST } })
    expect(ok.status).toBe(201)
    const d = await detail(ok.body.id)
    expect(d).toMatchObject({ source: "http-proxy", host: "api.openai.com", detectedKind: "llm", status: 200 })
    expect(d.llm).toMatchObject({ provider: "openai", model: "gpt-4o" })
  })

  it("is loopback-only before authentication: a forwarded request is refused even with the admin key", async () => {
    const refused = await rawCall(ctx.gw.url, "GET", "/api/tools/traffic-inspector/requests", {
      ...admin,
      "x-forwarded-for": "203.0.113.9"
    })
    expect(refused.status).toBe(403)
    expect(refused.body).toMatchObject({ _tag: "Forbidden", message: expect.stringContaining("loopback-only") })
    const tunnel = await rawCall(ctx.gw.url, "GET", "/api/tools/traffic-inspector/requests", { ...admin, host: "abc.trycloudflare.com" })
    expect(tunnel.status).toBe(403)
    // Without credentials on loopback: the admin's rules apply after the loopback check.
    expect((await call(`${base()}/requests`, { headers: { authorization: "Bearer nope" } })).status).toBe(401)
    // The transparent-capture route is under the same rule.
    const tproxy = await rawCall(ctx.gw.url, "GET", "/api/tools/agent-bridge/tproxy", { ...admin, "x-forwarded-for": "203.0.113.9" })
    expect(tproxy.status).toBe(403)
    expect((await call(`${ctx.gw.url}/api/tools/agent-bridge/tproxy`, { headers: admin })).status).toBe(200)
  })

  it("serves the CA certificate and the capture modes with its fingerprint", async () => {
    const pem = await fetch(`${base()}/ca.pem`)
    expect(pem.status).toBe(200)
    const text = await pem.text()
    expect(text).toMatch(/^-----BEGIN CERTIFICATE-----/)
    const modes = await call(`${base()}/capture-modes`, { headers: admin })
    expect(modes.body.ca.fingerprint256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/)
    expect(modes.body.agentBridge.enabled).toBe(true)
    expect(modes.body.httpProxy.running).toBe(false)
  })
})
