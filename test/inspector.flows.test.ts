/**
 * Two traffic-inspector flows end to end through the real gateway (docs/inspector.md):
 *
 * 1. A Responses-format stream from the official `openai` SDK, recorded by the agent-bridge source
 *    with bodies kept (INSPECTOR_CAPTURE_BODIES): the list and the detail say responses, the model,
 *    streamed, the tokens, and the answer merged from the SSE deltas (text and a tool call); the
 *    upstream exchange shows what was sent after translation, to a Responses upstream and to a
 *    chat-completions one.
 * 2. A custom host added through the API: the hosts file gains the marked block (the other lines
 *    untouched), a client trusting the gateway's CA reaches the MITM server by the host's name and
 *    gets the fake upstream's answer (over TLS, signed by a CA of its own, trusted through
 *    INSPECTOR_UPSTREAM_CA_FILE), the entry is `custom-host` with model and tokens; removing the
 *    host, and stopping the gateway, give the hosts file back byte for byte.
 *
 * Nothing leaves the machine. The gateway is given its own resolver (startGateway's `dns`, the
 * gateway's DnsResolver), which the MITM server then uses for a custom host's real address instead
 * of DNS: it answers only the test's host, with 127.0.0.1. The client names the fake upstream's
 * port in its Host header (`host:port`), and the MITM server forwards to the port the client named.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import type * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import * as path from "node:path"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { caPemPath, type LocalCa, loadOrCreateCa } from "../src/services/inspector/capture/ca.js"
import { BLOCK_BEGIN, BLOCK_END } from "../src/services/inspector/capture/hostsFile.js"
import { gatewayForFile } from "./support/families.js"
import { call, startGateway, type TestGateway, tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"

const ADMIN = "gwk_inspector_flows_admin_0123456789"
const KEY = "gwk_inspector_flows_client_0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }
const inspector = (gw: TestGateway) => `${gw.url}/api/tools/traffic-inspector`
const list = async (gw: TestGateway, query = "") => {
  const res = await call(`${inspector(gw)}/requests${query}`, { headers: admin })
  expect(res.status, res.text).toBe(200)
  return res.body as { requests: Array<Record<string, any>>; total: number }
}
const detail = async (gw: TestGateway, id: string) => {
  const res = await call(`${inspector(gw)}/requests/${id}`, { headers: admin })
  expect(res.status, res.text).toBe(200)
  return res.body as Record<string, any>
}

// ------------------------------------------------------------------ 1. Responses streams, agent-bridge

const ctx = gatewayForFile({ admin: ADMIN, keys: [KEY], env: { INSPECTOR_CAPTURE_BODIES: "true" } })

const WEATHER = {
  name: "get_weather",
  description: "Get the weather for a city",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] }
}
const ANSWER = "Paris is sunny today, with a light breeze from the west."
const ARGS = '{"location":"Paris"}'
const INSTRUCTIONS = "Answer in one sentence."
const QUESTION = "What is the weather in Paris?"

/** A streamed Responses request through the official SDK: the text deltas the client saw and the final response. */
const streamResponses = async (model: string) => {
  const client = new OpenAI({ baseURL: `${ctx.gw.url}/v1`, apiKey: KEY, maxRetries: 0 })
  const stream = await client.responses.create({
    model,
    stream: true,
    instructions: INSTRUCTIONS,
    input: [{ role: "user", content: QUESTION }],
    tools: [{ type: "function", ...WEATHER, strict: false }]
  })
  const deltas: Array<string> = []
  let final: OpenAI.Responses.Response | undefined
  for await (const event of stream) {
    if (event.type === "response.output_text.delta") deltas.push(event.delta)
    if (event.type === "response.completed") final = event.response
  }
  expect(final, "the stream ended with response.completed").toBeDefined()
  const text = final!.output
    .flatMap((o) => (o.type === "message" ? o.content.flatMap((c) => (c.type === "output_text" ? [c.text] : [])) : []))
    .join("")
  return { deltas, final: final!, text }
}

/** The one agent-bridge entry of `POST /v1/responses`, once it has ended with its usage row. */
const responsesEntry = async () => {
  await ctx.gw.usageWritten()
  const summary = await until("the /v1/responses entry ended with its tokens", async () =>
    (await list(ctx.gw, "?profile=llm")).requests.find((r) => r.path === "/v1/responses" && r.status === 200 && r.llm?.tokensIn !== null)
  )
  return { summary, entry: await detail(ctx.gw, summary.id) }
}

describe("traffic inspector: a Responses stream through the gateway (agent-bridge)", () => {
  it("Responses client → Responses upstream: the entry says responses, model, streamed, tokens, and the answer merged from the SSE deltas", async () => {
    await call(`${inspector(ctx.gw)}/requests`, { method: "DELETE", headers: admin })
    ctx.up.next({ content: ANSWER, chunks: 6, toolCalls: [{ name: "get_weather", arguments: ARGS }], usage: { input: 23, output: 9 } })
    const { deltas, final, text } = await streamResponses("up-resp/m1")
    // The client really got the answer in pieces.
    expect(deltas.length).toBeGreaterThan(1)
    expect(deltas.join("")).toBe(ANSWER)
    expect(text).toBe(ANSWER)

    const { summary, entry } = await responsesEntry()
    expect(ctx.up.requestsOf("openai-responses")).toHaveLength(1)
    expect(summary).toMatchObject({
      source: "agent-bridge",
      detectedKind: "llm",
      method: "POST",
      status: 200,
      hasBodies: true,
      agent: "openai-sdk"
    })
    expect(entry.llm).toMatchObject({
      apiKind: "responses",
      model: "up-resp/m1",
      mappedTo: "m1",
      streamed: true,
      tokensIn: 23,
      tokensOut: 9,
      messages: 1
    })
    // The list shows the same metadata as the detail.
    expect(summary.llm).toEqual(entry.llm)

    // The client's body as sent, and the answer as written: the SSE events.
    expect(JSON.parse(entry.requestBody.text)).toMatchObject({ model: "up-resp/m1", stream: true, instructions: INSTRUCTIONS })
    expect(entry.responseHeaders["content-type"]).toContain("text/event-stream")
    expect(entry.responseBody.text).toContain("response.output_text.delta")

    // The conversation: the request's turns, and the answer put back together from the deltas.
    expect(entry.conversation.request).toEqual([
      { role: "system", blocks: [{ type: "text", text: INSTRUCTIONS }] },
      { role: "user", blocks: [{ type: "text", text: QUESTION }] }
    ])
    const call0 = final.output.find((o) => o.type === "function_call")
    expect(call0).toMatchObject({ name: "get_weather", arguments: ARGS })
    expect(entry.conversation.response).toEqual([
      {
        role: "assistant",
        blocks: [
          { type: "text", text: ANSWER },
          { type: "tool_use", id: (call0 as { call_id: string }).call_id, name: "get_weather", input: { location: "Paris" } }
        ]
      }
    ])
    expect(entry.contextKey).toMatch(/^[0-9a-f]{12}$/)
    expect(entry.conversation.contextKey).toBe(entry.contextKey)
    expect(entry.conversation.rawEvents).toBeUndefined()

    // The upstream exchange: the same format, the model as the upstream knows it, its own stream.
    expect(entry.upstream).toHaveLength(1)
    const up = entry.upstream[0]
    expect(up).toMatchObject({ attempt: 1, provider: "openai-compatible", connection: "up-resp", model: "m1", status: 200, error: null })
    // `url` is the endpoint called, not the connection's base URL.
    expect(up.url).toBe(`${ctx.up.baseUrl("openai-responses")}/responses`)
    // The body sent, exactly as the upstream received it: the client's own (pass-through) with the upstream's model.
    const sent = JSON.parse(up.requestBody.text)
    const received = ctx.up.requestsOf("openai-responses")[0]!.body
    expect(received).toMatchObject({ model: "m1", stream: true, instructions: INSTRUCTIONS, input: [{ role: "user", content: QUESTION }] })
    expect(sent.messages).toBeUndefined()
    expect(sent).toEqual(received)
    expect(up.responseBody.text).toContain("response.output_text.delta")
    expect(up.responseBody.text).toContain("response.function_call_arguments.delta")
  })

  it("Responses client → chat-completions upstream: the entry keeps the client's Responses view, the upstream exchange shows the translated chat request and its chunks", async () => {
    await call(`${inspector(ctx.gw)}/requests`, { method: "DELETE", headers: admin })
    ctx.up.next({ content: ANSWER, chunks: 5, toolCalls: [{ name: "get_weather", arguments: ARGS }], usage: { input: 31, output: 12 } })
    const { deltas, final, text } = await streamResponses("up-chat/m1")
    expect(deltas.join("")).toBe(ANSWER)
    expect(text).toBe(ANSWER)

    const { summary, entry } = await responsesEntry()
    expect(ctx.up.requestsOf("openai-chat")).toHaveLength(1)
    expect(summary).toMatchObject({ source: "agent-bridge", detectedKind: "llm", status: 200, hasBodies: true })
    expect(entry.llm).toMatchObject({
      apiKind: "responses",
      model: "up-chat/m1",
      mappedTo: "m1",
      streamed: true,
      tokensIn: 31,
      tokensOut: 12
    })

    // What the client saw: a Responses stream, merged as such.
    expect(entry.responseBody.text).toContain("response.output_text.delta")
    expect(entry.responseBody.text).not.toContain("chat.completion.chunk")
    const call0 = final.output.find((o) => o.type === "function_call") as { call_id: string; name: string; arguments: string } | undefined
    expect(call0).toMatchObject({ name: "get_weather" })
    expect(JSON.parse(call0!.arguments)).toEqual({ location: "Paris" })
    expect(entry.conversation.request.map((t: { role: string }) => t.role)).toEqual(["system", "user"])
    expect(entry.conversation.response).toEqual([
      {
        role: "assistant",
        blocks: [
          { type: "text", text: ANSWER },
          { type: "tool_use", id: call0!.call_id, name: "get_weather", input: { location: "Paris" } }
        ]
      }
    ])

    // What went upstream after translation: a chat-completions request, and the chunks that came back.
    expect(entry.upstream).toHaveLength(1)
    const up = entry.upstream[0]
    expect(up).toMatchObject({ attempt: 1, provider: "openai-compatible", connection: "up-chat", model: "m1", status: 200, error: null })
    expect(up.url).toBe(`${ctx.up.baseUrl("openai-chat")}/chat/completions`)
    const sent = JSON.parse(up.requestBody.text)
    expect(sent).toMatchObject({ model: "m1", stream: true })
    expect(sent.input).toBeUndefined()
    expect(sent.instructions).toBeUndefined()
    expect(sent.messages).toEqual([
      { role: "system", content: INSTRUCTIONS },
      { role: "user", content: QUESTION }
    ])
    expect(sent.tools).toEqual([{ type: "function", function: expect.objectContaining({ name: "get_weather" }) }])
    // The body the inspector shows is the one the upstream received.
    expect(sent).toEqual(ctx.up.requestsOf("openai-chat")[0]!.body)
    expect(up.responseBody.text).toContain("chat.completion.chunk")
    expect(up.responseBody.text).not.toContain("response.output_text.delta")
  })
})

// ------------------------------------------------------------------ 2. a custom host through the API

const HOST = "llm.inspector-flows.test"
const ORIGINAL_HOSTS =
  "127.0.0.1\tlocalhost\n# a comment the gateway must keep\n::1 localhost ip6-localhost\n\n10.0.0.5 nas.lan  # trailing comment\n"
const COMPLETION = {
  id: "chatcmpl-flows-1",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "gpt-4o-mini-2024-07-18",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello through the custom host" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 13, completion_tokens: 5, total_tokens: 18 }
}

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/** One HTTPS request to 127.0.0.1:`port` by the host's name (SNI and Host), trusting `ca` only. */
const httpsByName = (port: number, ca: string, body: string, hostHeader: string = HOST) =>
  new Promise<{ status: number; body: string; issuedByCa: boolean }>((resolve, reject) => {
    const req = https.request(
      {
        host: "127.0.0.1",
        port,
        servername: HOST,
        ca,
        agent: false,
        method: "POST",
        path: "/v1/chat/completions",
        headers: {
          host: hostHeader,
          "content-type": "application/json",
          authorization: "Bearer sk-flows-upstream-key-0123456789abcdef",
          "user-agent": "OpenAI/JS 5.0.0"
        }
      },
      (res) => {
        const peer = (res.socket as tls.TLSSocket).getPeerX509Certificate()
        const issuedByCa = peer !== undefined && peer.checkIssued(new crypto.X509Certificate(ca)) && peer.checkHost(HOST) === HOST
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, issuedByCa }))
      }
    )
    req.on("error", reject)
    req.end(body)
  })

/** Whether a TCP connection to 127.0.0.1:`port` is refused. */
const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port })
    s.on("connect", () => {
      s.destroy()
      resolve(false)
    })
    s.on("error", () => resolve(true))
  })

describe("traffic inspector: a custom host through the gateway's API", () => {
  const dir = tempDir("gw-inspector-flows-")
  const hostsFile = path.join(dir, "hosts")
  const seen: Array<Seen> = []
  let upstreamCa: LocalCa
  let upstream: https.Server | undefined
  let upstreamPort = 0

  beforeAll(async () => {
    upstreamCa = await loadOrCreateCa(path.join(dir, "upstream-ca"))
    const leaf = await upstreamCa.leafFor(HOST)
    upstream = https.createServer({ key: leaf.keyPem, cert: leaf.certPem }, (req, res) => {
      let body = ""
      req.setEncoding("utf8")
      req.on("data", (c: string) => (body += c))
      req.on("end", () => {
        seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body })
        if (req.method === "POST" && req.url === "/v1/chat/completions") {
          res.writeHead(200, { "content-type": "application/json", "x-request-id": "req_flows_1" })
          return void res.end(JSON.stringify(COMPLETION))
        }
        res.writeHead(404, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    await new Promise<void>((resolve) => upstream!.listen(0, "127.0.0.1", () => resolve()))
    upstreamPort = (upstream.address() as net.AddressInfo).port
  }, 60_000)

  afterAll(async () => {
    if (upstream) {
      upstream.closeAllConnections()
      await new Promise<void>((resolve) => upstream!.close(() => resolve()))
    }
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("adds the host (hosts-file block, MITM server), records a real client's call as custom-host with model and tokens, removes it byte for byte; stopping the gateway removes a block left in place", async () => {
    fs.writeFileSync(hostsFile, ORIGINAL_HOSTS)
    // The custom host's real address, answered by the gateway's own resolver: no DNS query leaves the machine.
    const lookups: Array<string> = []
    const dns = async (hostname: string) => {
      lookups.push(hostname)
      if (hostname === HOST) return [{ address: "127.0.0.1", family: 4 as const }]
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" })
    }
    let gw: TestGateway | undefined
    try {
      gw = await startGateway({
        dns,
        env: {
          GATEWAY_HOSTS_FILE: hostsFile,
          INSPECTOR_MITM_PORT: "0",
          INSPECTOR_HTTP_PROXY_PORT: "0",
          INSPECTOR_UPSTREAM_CA_FILE: caPemPath(upstreamCa.dir),
          INSPECTOR_CAPTURE_BODIES: "true"
        }
      })
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      // Nothing is written before a host is added, and no MITM server runs.
      expect(fs.readFileSync(hostsFile, "utf8")).toBe(ORIGINAL_HOSTS)
      const before = await call(`${inspector(gw)}/hosts`, { headers: admin })
      expect(before.body).toMatchObject({ hosts: [], hostsFile, mitm: { running: false } })

      // ---- add the host
      const added = await call(`${inspector(gw)}/hosts`, { body: { host: HOST, kind: "llm" }, headers: admin })
      expect(added.status, added.text).toBe(201)
      expect(added.body).toMatchObject({ host: HOST, kind: "llm", enabled: true, addedAt: expect.any(Number) })
      expect(fs.readFileSync(hostsFile, "utf8")).toBe(`${ORIGINAL_HOSTS}${BLOCK_BEGIN}\n127.0.0.1 ${HOST}\n::1 ${HOST}\n${BLOCK_END}\n`)
      const hosts = await call(`${inspector(gw)}/hosts`, { headers: admin })
      expect(hosts.body).toMatchObject({
        hosts: [{ host: HOST, kind: "llm", enabled: true }],
        hostsFile,
        mitm: { running: true, error: null }
      })
      const mitmPort = hosts.body.mitm.port as number
      expect(mitmPort).toBeGreaterThan(0)

      // ---- a real client, trusting only the gateway's CA (no admin key needed for it), reaches the host by its name through the MITM
      // server
      const caRes = await fetch(`${inspector(gw)}/ca.pem`)
      expect(caRes.status).toBe(200)
      const gatewayCa = await caRes.text()
      expect(gatewayCa).toMatch(/^-----BEGIN CERTIFICATE-----/)
      // The file served is the CA capture-modes names (made on first use, so asked for after ca.pem).
      const modes = await call(`${inspector(gw)}/capture-modes`, { headers: admin })
      expect(modes.body.customHosts).toMatchObject({ hosts: [{ host: HOST }], mitm: { running: true, port: mitmPort } })
      expect(new crypto.X509Certificate(gatewayCa).fingerprint256).toBe(modes.body.ca.fingerprint256)
      const request = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello through the custom host" }] })
      const res = await httpsByName(mitmPort, gatewayCa, request, `${HOST}:${upstreamPort}`)
      expect(res.status, res.body).toBe(200)
      expect(JSON.parse(res.body)).toEqual(COMPLETION)
      // The certificate the client checked was the gateway's, for the host's name.
      expect(res.issuedByCa).toBe(true)
      // The fake upstream got the request as sent, by the host's name; the address came from the (answered) lookup.
      expect(seen).toHaveLength(1)
      expect(seen[0]).toMatchObject({ method: "POST", url: "/v1/chat/completions", body: request })
      expect(seen[0]!.headers.host).toBe(`${HOST}:${upstreamPort}`)
      expect(seen[0]!.headers.authorization).toBe("Bearer sk-flows-upstream-key-0123456789abcdef")
      expect(lookups).toEqual([HOST])

      // ---- the entry
      const summary = await until("the custom-host entry ended", async () =>
        (await list(gw!, "?source=custom-host")).requests.find((r) => r.status === 200)
      )
      expect((await list(gw, "?profile=llm")).requests.map((r) => r.id)).toContain(summary.id)
      expect(summary).toMatchObject({
        source: "custom-host",
        detectedKind: "llm",
        method: "POST",
        host: HOST,
        port: upstreamPort,
        path: "/v1/chat/completions",
        tls: true,
        url: `https://${HOST}:${upstreamPort}/v1/chat/completions`,
        agent: "openai-sdk",
        hasBodies: true,
        error: null
      })
      const entry = await detail(gw, summary.id)
      expect(entry.llm).toMatchObject({
        apiKind: "chat.completions",
        model: "gpt-4o-mini",
        tokensIn: 13,
        tokensOut: 5,
        streamed: false,
        messages: 1
      })
      expect(entry.requestBody.text).toBe(request)
      expect(JSON.parse(entry.responseBody.text)).toEqual(COMPLETION)
      expect(entry.requestHeaders.authorization).toMatch(/^Bearer /)
      expect(entry.requestHeaders.authorization).not.toContain("sk-flows-upstream-key-0123456789abcdef")
      expect(entry.conversation.request).toEqual([{ role: "user", blocks: [{ type: "text", text: "Say hello through the custom host" }] }])
      expect(entry.conversation.response).toEqual([
        { role: "assistant", blocks: [{ type: "text", text: "Hello through the custom host" }] }
      ])
      expect(entry.upstream).toEqual([])

      // ---- remove the host: the block goes, the file is byte for byte what it was, the MITM server stops
      const removed = await call(`${inspector(gw)}/hosts/${HOST}`, { method: "DELETE", headers: admin })
      expect(removed.status, removed.text).toBe(200)
      expect(removed.body).toMatchObject({ removed: { host: HOST, kind: "llm" } })
      expect(fs.readFileSync(hostsFile, "utf8")).toBe(ORIGINAL_HOSTS)
      expect((await call(`${inspector(gw)}/hosts`, { headers: admin })).body).toMatchObject({ hosts: [], mitm: { running: false } })
      expect(await refused(mitmPort)).toBe(true)
      expect((await call(`${inspector(gw)}/hosts/${HOST}`, { method: "DELETE", headers: admin })).status).toBe(404)

      // ---- a block left in place when the gateway stops is removed
      const again = await call(`${inspector(gw)}/hosts`, { body: { host: HOST, kind: "llm" }, headers: admin })
      expect(again.status, again.text).toBe(201)
      expect(fs.readFileSync(hostsFile, "utf8")).toContain(`${BLOCK_BEGIN}\n127.0.0.1 ${HOST}\n`)
      const secondPort = ((await call(`${inspector(gw)}/hosts`, { headers: admin })).body.mitm as { port: number }).port
      expect(await refused(secondPort)).toBe(false)
      const stopping = gw
      gw = undefined
      await stopping.close()
      expect(fs.readFileSync(hostsFile, "utf8")).toBe(ORIGINAL_HOSTS)
      expect(await refused(secondPort)).toBe(true)
    } finally {
      await gw?.close()
    }
  })
})
