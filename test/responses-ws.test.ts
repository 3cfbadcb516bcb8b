import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ServerActivity } from "../src/platform/system/IdleMemory.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { connectWs } from "./support/wsClient.js"

const ADMIN = "gwk_ws_admin_key_0123456789abcdefghij"
const KEY = "gwk_ws_client_key_0123456789abcdefghi"
let gw: TestGateway
let up: FakeUpstream

/** A WebSocket client with this file's key by default (test/support/wsClient.ts). */
const connect = (url: string, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }) => connectWs(url, headers)

const wsUrl = (path = "/v1/responses") => gw.url.replace(/^http/, "ws") + path

const developer = { type: "message", role: "developer", content: [{ type: "input_text", text: "You are Codex." }] }
const user = (text: string) => ({ type: "message", role: "user", content: [{ type: "input_text", text }] })

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const admin = { authorization: `Bearer ${ADMIN}` }
  expect(
    (
      await call(`${gw.url}/api/providers`, {
        body: {
          provider: "openai-compatible",
          name: "resp",
          upstreamFormat: "openai-responses",
          baseUrl: up.baseUrl("openai-responses"),
          models: ["gpt-5"]
        },
        headers: admin
      })
    ).status
  ).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/providers`, {
        body: { provider: "anthropic", name: "anth", apiKey: "sk-ant", baseUrl: up.baseUrl("anthropic") },
        headers: admin
      })
    ).status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})
beforeEach(async () => {
  up.requests.length = 0
  up.violations.length = 0
  up.always({})
  await gw.resetResilience()
})

describe("Responses over WebSocket", () => {
  it("an upgrade and a request each count as received (the young collection at rest waits for fewer: src/platform/system/IdleMemory.ts)", async () => {
    const received = () => gw.run(Effect.map(ServerActivity, (a) => a.received()))
    const before = await received()
    expect((await fetch(`${gw.url}/api/health/ping`)).status).toBe(200)
    expect(await received()).toBe(before + 1)
    const c = await connect(wsUrl())
    expect(await received()).toBe(before + 2)
    const closed = new Promise((r) => c.ws.once("close", r))
    c.ws.close()
    await closed
    expect(await received()).toBe(before + 2)
  })
  it("counts as in flight while its socket is open (a forced collection waits: src/platform/system/IdleMemory.ts)", async () => {
    const inFlight = () => gw.run(Effect.map(ServerActivity, (a) => a.inFlight()))
    expect(await inFlight()).toBe(0)
    const c = await connect(wsUrl())
    expect(await inFlight()).toBe(1)
    const closed = new Promise((r) => c.ws.once("close", r))
    c.ws.close()
    await closed
    const end = Date.now() + 5_000
    while ((await inFlight()) !== 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20))
    expect(await inFlight()).toBe(0)
  })

  it("answers Codex's prewarm without calling upstream, then continues from previous_response_id with only the new input", async () => {
    const c = await connect(wsUrl())
    c.send({
      type: "response.create",
      model: "gpt-5",
      stream: true,
      input: [developer],
      tools: [],
      store: false,
      generate: false,
      client_metadata: { thread_id: "t" }
    })
    const prewarm = await c.until("response.completed")
    expect(prewarm.response.output).toEqual([])
    expect(up.requests).toHaveLength(0)

    up.next({ content: "Hello over WebSocket", chunks: 3 })
    c.send({
      type: "response.create",
      model: "gpt-5",
      stream: true,
      previous_response_id: prewarm.response.id,
      input: [user("say hi")],
      store: false,
      client_metadata: { thread_id: "t" }
    })
    const done = await c.until("response.completed", 2)
    expect(done.response.output[0].content[0].text).toBe("Hello over WebSocket")
    const deltas = c.frames
      .filter((f) => f.type === "response.output_text.delta")
      .map((f) => f.delta)
      .join("")
    expect(deltas).toBe("Hello over WebSocket")
    // The upstream got the whole conversation and no previous_response_id (it stores nothing).
    expect(up.violations).toEqual([])
    expect(up.requests[0]!.body.input).toEqual([developer, user("say hi")])
    expect(up.requests[0]!.body).not.toHaveProperty("previous_response_id")
    c.ws.close()
  })

  it("carries a tool round trip: the call's output comes back with previous_response_id", async () => {
    const c = await connect(wsUrl("/responses"))
    up.next({ toolCalls: [{ name: "exec_command", arguments: '{"cmd":"echo TOOL_OK"}' }] }, { content: "The command printed TOOL_OK" })
    const tools = [
      { type: "function", name: "exec_command", parameters: { type: "object", properties: { cmd: { type: "string" } } }, strict: false }
    ]
    c.send({ type: "response.create", model: "gpt-5", input: [developer, user("run echo")], tools })
    const first = await c.until("response.completed")
    const fc = first.response.output.find((o: any) => o.type === "function_call")
    expect(fc).toMatchObject({ name: "exec_command", arguments: '{"cmd":"echo TOOL_OK"}' })
    c.send({
      type: "response.create",
      model: "gpt-5",
      previous_response_id: first.response.id,
      input: [{ type: "function_call_output", call_id: fc.call_id, output: "TOOL_OK\n" }],
      tools
    })
    const second = await c.until("response.completed", 2)
    expect(second.response.output[0].content[0].text).toBe("The command printed TOOL_OK")
    expect(up.violations).toEqual([])
    expect(up.requests[1]!.body.input.map((i: any) => i.type)).toEqual(["message", "message", "function_call", "function_call_output"])
    c.ws.close()
  })

  it("also takes a full resend without previous_response_id (Codex with openai_base_url)", async () => {
    const c = await connect(wsUrl("/api/v1/responses"))
    up.next({ content: "full" })
    c.send({ type: "response.create", model: "gpt-5", input: [developer, user("hi")] })
    expect((await c.until("response.completed")).response.output[0].content[0].text).toBe("full")
    c.ws.close()
  })

  it("serves a model of another family by translation: events, a tool round trip with previous_response_id from the socket's store", async () => {
    const c = await connect(wsUrl())
    up.next({ content: "Hello from Claude", chunks: 3 })
    c.send({ type: "response.create", model: "anth/claude-sonnet-4-5", instructions: "be brief", input: [user("hi")] })
    const done = await c.until("response.completed")
    expect(done.response.output[0].content[0].text).toBe("Hello from Claude")
    expect(done.response.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 })
    expect(done.response.instructions).toBe("be brief")
    const types = c.frames.map((f) => f.type)
    expect(types[0]).toBe("response.created")
    expect(types).toContain("response.output_text.delta")
    expect(
      c.frames
        .filter((f) => f.type === "response.output_text.delta")
        .map((f) => f.delta)
        .join("")
    ).toBe("Hello from Claude")
    expect(up.requests.map((r) => [r.family, r.body.model])).toEqual([["anthropic", "claude-sonnet-4-5"]])

    up.next({ toolCalls: [{ name: "exec_command", arguments: '{"cmd":"ls"}' }] }, { content: "two files" })
    const tools = [
      { type: "function", name: "exec_command", parameters: { type: "object", properties: { cmd: { type: "string" } } }, strict: false }
    ]
    c.send({
      type: "response.create",
      model: "anth/claude-sonnet-4-5",
      previous_response_id: done.response.id,
      input: [user("list files")],
      tools
    })
    const called = await c.until("response.completed", 2)
    const fc = called.response.output.find((o: any) => o.type === "function_call")
    expect(fc).toMatchObject({ name: "exec_command", arguments: '{"cmd":"ls"}' })
    c.send({
      type: "response.create",
      model: "anth/claude-sonnet-4-5",
      previous_response_id: called.response.id,
      input: [{ type: "function_call_output", call_id: fc.call_id, output: "a b" }],
      tools
    })
    const answered = await c.until("response.completed", 3)
    expect(answered.response.output[0].content[0].text).toBe("two files")
    // The upstream got the whole conversation each time, valid for its own API.
    expect(up.violations).toEqual([])
    expect(up.requests[2]!.body.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user"])
    c.ws.close()
  })

  it("still refuses an unknown previous id, an unknown frame, and a model that cannot answer a response (upstream_ws_provider_required)", async () => {
    const c = await connect(wsUrl())
    c.send({ type: "response.create", model: "gpt-5", previous_response_id: "resp_unknown", input: [user("hi")] })
    expect((await c.until("error")).error.code).toBe("previous_response_not_found")
    c.send({ type: "response.nonsense" })
    expect((await c.until("error", 2)).error.code).toBe("unsupported_frame")
    // A speech model: no family can make it answer a response.
    const voice = await call(`${gw.url}/api/providers`, {
      body: { provider: "elevenlabs", name: "voice", apiKey: "xi-key", baseUrl: up.url },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(voice.status).toBe(201)
    try {
      c.send({ type: "response.create", model: "voice/eleven_flash_v2_5", input: [user("hi")] })
      const refused = await c.until("error", 3)
      expect(refused.error.code).toBe("upstream_ws_provider_required")
      expect(refused.error.message).toContain("is a speech model of voice: it cannot answer a response")
    } finally {
      await call(`${gw.url}/api/providers/${voice.body.id}`, { method: "DELETE", headers: { authorization: `Bearer ${ADMIN}` } })
    }
    expect(up.requests).toHaveLength(0)
    c.ws.close()
  })

  it("refuses mcp tools with an error naming the tool and HTTP, and sends nothing upstream", async () => {
    const c = await connect(wsUrl())
    c.send({
      type: "response.create",
      model: "gpt-5",
      input: [user("hi")],
      tools: [
        { type: "function", name: "f", parameters: { type: "object" } },
        { type: "mcp", server_label: "ev", require_approval: "never" }
      ]
    })
    const refused = await c.until("error")
    expect(refused.error).toMatchObject({ code: "mcp_tools_http_only", param: "tools[1]" })
    expect(refused.error.message).toContain("POST /v1/responses")
    expect(up.requests).toHaveLength(0)
    c.ws.close()
  })

  it("cancels the response in progress on response.cancel, and survives a socket dropped without a close frame", async () => {
    const c = await connect(wsUrl())
    up.next({ content: "never finished", chunks: 4, stallAfterChunks: 5 })
    c.send({ type: "response.create", model: "gpt-5", input: [user("hi")] })
    await c.until("response.output_text.delta")
    c.send({ type: "response.cancel" })
    await expect.poll(() => up.aborted, { timeout: 3000 }).toBeGreaterThan(0)
    c.ws.terminate() // like Codex exiting: close code 1006
    up.next({ content: "still serving" })
    const d = await connect(wsUrl())
    d.send({ type: "response.create", model: "gpt-5", input: [user("hi")] })
    expect((await d.until("response.completed")).response.output[0].content[0].text).toBe("still serving")
    d.ws.close()
  })

  it("authenticates the upgrade: Bearer or api_key query; 401 without a key when keys are required", async () => {
    const viaQuery = await connect(wsUrl(`/v1/responses?api_key=${KEY}`), {})
    viaQuery.ws.close()
    await expect(connect(wsUrl(), {})).rejects.toMatchObject({ status: 401 })
    await expect(connect(wsUrl(), { authorization: "Bearer gwk_wrong" })).rejects.toMatchObject({ status: 401 })
  })

  it("answers 426 when the transport is switched off, so clients fall back to HTTP", async () => {
    const set = (value?: string) =>
      call(`${gw.url}/api/settings/feature-flags`, {
        method: "PUT",
        body: { key: "GATEWAY_UPSTREAM_WS_ENABLED", value },
        headers: { authorization: `Bearer ${ADMIN}` }
      })
    await set("false")
    try {
      await expect(connect(wsUrl())).rejects.toMatchObject({ status: 426 })
    } finally {
      await set(undefined)
    }
  })

  it("accepts the upgrade when no connection speaks the Responses API, and answers through the others", async () => {
    const other = await startGateway()
    try {
      await other.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      expect(
        (
          await call(`${other.url}/api/providers`, {
            body: { provider: "openai-compatible", name: "chat", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] },
            headers: { authorization: `Bearer ${ADMIN}` }
          })
        ).status
      ).toBe(201)
      up.next({ content: "from a chat upstream" })
      const c = await connect(other.url.replace(/^http/, "ws") + "/v1/responses")
      c.send({ type: "response.create", model: "chat/m1", input: [user("hi")] })
      expect((await c.until("response.completed")).response.output[0].content[0].text).toBe("from a chat upstream")
      expect(up.requests.map((r) => r.family)).toEqual(["openai-chat"])
      c.ws.close()
    } finally {
      await other.close()
    }
  })
})

describe("usage rows on the WebSocket transport", () => {
  it("a response whose last message went out is not cancelled by the close that follows it: its row says 200, never 499", async () => {
    up.always({ content: "done", chunks: 1 })
    const ids: Array<string> = []
    for (let i = 0; i < 20; i++) {
      const c = await connect(wsUrl())
      // Closed in the same tick as response.completed arrives, as clients do.
      c.ws.on("message", (data) => {
        if (JSON.parse(String(data)).type === "response.completed") c.ws.close()
      })
      c.send({ type: "response.create", model: "gpt-5", input: [user(`close at once ${i}`)] })
      ids.push((await c.until("response.completed")).response.id)
      await new Promise((r) => c.ws.once("close", r))
    }
    const rows = await eventuallyRows(20)
    expect(rows.map((r) => r["status"])).toEqual(Array(20).fill(200))
  })

  it("a response that fails upstream still writes its row, with the status the client got (an upstream 500 is a 502)", async () => {
    up.always({ status: 500, errorMessage: "boom" })
    const c = await connect(wsUrl())
    c.send({ type: "response.create", model: "gpt-5", input: [user("hi")] })
    await c.until("error")
    c.ws.close()
    await gw.usageWritten()
    const rows = queryDb(gw.dataDir, "SELECT status, error FROM usage WHERE endpoint = 'responses.ws' ORDER BY id DESC LIMIT 1")
    expect(rows[0]).toMatchObject({ status: 502 })
    expect(String(rows[0]!["error"])).toContain("boom")
  })
})

describe("a connection's own silence limit on the WebSocket transport", () => {
  it("replaces the gateway's, as it does over HTTP", async () => {
    // The gateway leaves a silent stream after 300 ms; this connection allows 5 s.
    const own = await startGateway({ timeouts: { firstContentMs: 300, idleMs: 300 } })
    try {
      await own.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const body = {
        provider: "openai-compatible",
        name: "patient",
        upstreamFormat: "openai-responses",
        baseUrl: up.baseUrl("openai-responses"),
        models: ["gpt-5"],
        timeouts: { idleMs: 5000 }
      }
      expect((await call(`${own.url}/api/providers`, { body, headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(201)
      up.next({ content: "slow but steady", chunks: 2, chunkDelayMs: 450 })
      const c = await connect(own.url.replace(/^http/, "ws") + "/v1/responses", { authorization: `Bearer ${ADMIN}` })
      c.send({ type: "response.create", model: "gpt-5", input: [user("hi")] })
      const done = await new Promise<any>((resolve, reject) => {
        const t = setInterval(() => {
          const end = c.frames.find((f) => f.type === "response.completed" || f.type === "response.failed" || f.type === "error")
          if (end) {
            clearInterval(t)
            resolve(end)
          }
        }, 50)
        setTimeout(() => (clearInterval(t), reject(new Error(`no end; got ${c.frames.map((f) => f.type).join(", ")}`))), 10_000).unref()
      })
      expect(done.type, JSON.stringify(done).slice(0, 300)).toBe("response.completed")
      expect(done.response.output[0].content[0].text).toBe("slow but steady")
      c.ws.close()
    } finally {
      await own.close()
    }
  })
})

/** The newest `n` usage rows of the WebSocket transport, once every response has written its own. */
const eventuallyRows = async (n: number) => {
  await gw.usageWritten()
  return queryDb(gw.dataDir, "SELECT status FROM usage WHERE endpoint = 'responses.ws' ORDER BY id DESC LIMIT ?", n)
}
