import * as Effect from "effect/Effect"
import * as dns from "node:dns"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import type { Resolve } from "../src/upstream/client/egressGuard.js"
import { queryDb } from "./support/db.js"
import { type DnsAnswer, type FakeDns, startFakeDns } from "./support/fakeDns.js"
import { FakeUpstream, type Reply } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { testCa } from "./support/testCerts.js"

/**
 * Upstream faults below HTTP, each with the real thing on loopback: a name that does not resolve
 * (a DNS server on 127.0.0.1 answering NXDOMAIN, SERVFAIL or nothing), a TLS handshake that fails
 * (a real TLS server whose certificate the gateway does not trust; a certificate for another
 * name and an expired one are in resilience.upstream-tls.test.ts, with a trusted CA), a TCP reset
 * before the answer and in the middle of a stream, an upstream that goes silent without closing
 * (streamed, collected and whole answers, and a socket that never answers at all), and a 200
 * whose body is not the format it promised. For each: what the client gets (never a hang, never
 * a 500), whether a combo falls back to "steady", and what the breaker and the connection's
 * cooldown say (docs/resilience.md, "Classification" and "What a client sees").
 */
const ADMIN = "gwk_upstream_faults_admin_key_0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }
const TIMEOUTS = { headersMs: 400, streamHeadersMs: 400, firstContentMs: 400, idleMs: 400, bodyIdleMs: 400 }
/** Every fault here ends within the 400 ms limits above, or at once: well within this. */
const BOUNDED_MS = 3_000
/** The key of the TLS connection: never in what the client or the usage row get. */
const TLS_KEY = "sk-tls-upstream-secret-0123456789abcdef"
const NO_SUCH_HOST = "api.upstream-faults.invalid"

let gw: TestGateway
let flaky: FakeUpstream
let steady: FakeUpstream
let dnsServer: FakeDns
const dnsAnswers = new Map<string, DnsAnswer>()
let untrusted: https.Server
const untrustedSeen = { requests: 0, handshakeErrors: 0 }
let silent: net.Server
const silentSockets = new Set<net.Socket>()

/**
 * The gateway's resolver in this file: a DNS client (c-ares) that asks only the DNS server on
 * 127.0.0.1, so a name fails through the DNS protocol itself and no query leaves the machine
 * (the system resolver, which the gateway uses by default, is tested in test/netns/dns.netns.ts).
 * The resolver's own error goes to the gateway as the system resolver's would. It gives up on a
 * silent DNS server after 150 ms; the connection that names the missing host has a 2 s headers
 * timeout (which counts the lookup), since with the file's 400 ms a loaded machine let the headers
 * timeout fire first (504, not the 502 asked for).
 */
const loopbackResolve = (server: FakeDns): Resolve => {
  const resolver = new dns.promises.Resolver({ timeout: 150, tries: 1 })
  resolver.setServers([`${server.host}:${server.port}`])
  return async (hostname) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)])
    const found = [
      ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
      ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 as const })) : [])
    ]
    if (found.length === 0) throw v4.status === "rejected" ? v4.reason : new Error(`no address for ${hostname}`)
    return found
  }
}

type ClientFormat = "chat" | "anthropic" | "responses"

const PATHS: Record<ClientFormat, string> = { chat: "/v1/chat/completions", anthropic: "/v1/messages", responses: "/v1/responses" }

/** One request in a client format, streamed or not. */
const ask = (model: string, stream = false, format: ClientFormat = "chat") =>
  call(`${gw.url}${PATHS[format]}`, {
    body:
      format === "chat"
        ? { model, stream, messages: [{ role: "user", content: "hi" }] }
        : format === "anthropic"
          ? { model, stream, max_tokens: 64, messages: [{ role: "user", content: "hi" }] }
          : { model, stream, input: "hi" }
  })

const status = () => call(`${gw.url}/api/resilience`, { headers: admin }).then((r) => r.body)
const breakerOf = async (provider: string, origin: string) =>
  (await status()).breakers.find((b: any) => b.provider === provider && b.origin === origin)
const connectionOf = async (name: string) => (await status()).connections.find((c: any) => c.name === name)

/** The request's usage rows, once every request has written its own. */
const usageRows = async (res: { headers: Headers }) => {
  await gw.usageWritten()
  return queryDb(gw.dataDir, "SELECT status, connection_id, error FROM usage WHERE request_id = ?", res.headers.get("x-gateway-request-id"))
}

/** Times a request: a fault must end it, never leave it hanging. */
const timed = async <A>(f: () => Promise<A>): Promise<A & { ms: number }> => {
  const started = Date.now()
  const out = await f()
  return Object.assign(out as object, { ms: Date.now() - started }) as A & { ms: number }
}

/** The JSON error of an answer in its client format: `{code, message}` (Anthropic's has its type as code). */
const errorOf = (format: ClientFormat, body: any): { code: string | null; message: string; type: string } =>
  format === "anthropic"
    ? { code: null, message: body?.error?.message, type: body?.error?.type }
    : { code: body?.error?.code, message: body?.error?.message, type: body?.error?.type }

/** The answer came from "steady" after one fallback, with one usage row (the one of steady). */
const expectFellBack = async (res: { status: number; text: string; headers: Headers }) => {
  expect(res.status, res.text.slice(0, 500)).toBe(200)
  expect(res.text).toContain("from steady")
  expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
  const rows = await usageRows(res)
  expect(rows).toHaveLength(1)
  expect(rows[0]!["status"]).toBe(200)
}

/** The failed connection: one breaker failure for its provider at its origin, and an error cooldown naming `reason`. */
const expectCounted = async (provider: string, origin: string, connection: string, reason: string) => {
  const breaker = await breakerOf(provider, origin)
  expect(breaker?.consecutiveFailures, `breaker of ${provider}@${origin}`).toBe(1)
  const conn = await connectionOf(connection)
  expect(conn).toMatchObject({ state: "cooldown", testStatus: "unavailable", lastErrorType: reason })
}

beforeAll(async () => {
  flaky = await FakeUpstream.start()
  steady = await FakeUpstream.start()
  dnsServer = await startFakeDns({ answer: (name) => dnsAnswers.get(name) ?? "nxdomain" })

  // A TLS server whose certificate comes from a CA nobody trusts.
  const leaf = testCa("untrusted test CA").issue(["127.0.0.1"])
  untrusted = https.createServer({ key: leaf.keyPem, cert: leaf.certPem }, (_req, res) => {
    untrustedSeen.requests++
    res.writeHead(500).end()
  })
  untrusted.on("tlsClientError", () => untrustedSeen.handshakeErrors++)
  await new Promise<void>((r) => untrusted.listen(0, "127.0.0.1", r))

  // A socket that is accepted, read, and never answered (nor closed): half-open from the first byte.
  silent = net.createServer((socket) => {
    silentSockets.add(socket)
    socket.on("data", () => undefined)
    socket.on("error", () => undefined)
    socket.on("close", () => silentSockets.delete(socket))
  })
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r))

  gw = await startGateway({ timeouts: TIMEOUTS, dns: loopbackResolve(dnsServer) })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body: { defaultModel: "m1", ...body }, headers: admin })
    expect(res.status, res.text).toBe(201)
  }
  const openai = flaky.baseUrl("openai-chat")
  await add({ provider: "openai-compatible", name: "flaky", baseUrl: openai })
  await add({ provider: "openai-compatible", name: "flaky-whole", baseUrl: openai, timeouts: { nonStreamed: "whole" } })
  await add({ provider: "openai-compatible", name: "flaky-resp", baseUrl: openai, upstreamFormat: "openai-responses" })
  await add({ provider: "anthropic", name: "flaky-anth", apiKey: "sk-ant-flaky", baseUrl: flaky.baseUrl("anthropic") })
  await add({ provider: "anthropic", name: "steady", apiKey: "sk-ant-steady", baseUrl: steady.baseUrl("anthropic") })
  // Its own headers timeout (which counts the lookup) is far above the resolver's 150 ms, so a
  // silent DNS server is always reported as such (502), however late a loaded machine runs timers.
  await add({ provider: "openai-compatible", name: "nodns", baseUrl: `http://${NO_SUCH_HOST}:8080/v1`, timeouts: { headersMs: 2_000 } })
  await add({
    provider: "openai-compatible",
    name: "tls-untrusted",
    apiKey: TLS_KEY,
    baseUrl: `https://127.0.0.1:${(untrusted.address() as AddressInfo).port}/v1`
  })
  await add({ provider: "openai-compatible", name: "silent", baseUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1` })
  for (const first of ["flaky", "flaky-whole", "flaky-resp", "flaky-anth", "nodns", "tls-untrusted", "silent"]) {
    const res = await call(`${gw.url}/api/combos`, {
      body: { name: `${first}-first`, strategy: "priority", targets: [{ model: `${first}/m1` }, { model: "steady/m1" }] },
      headers: admin
    })
    expect(res.status, res.text).toBe(201)
  }
})

afterAll(async () => {
  await gw?.close()
  await flaky?.close()
  await steady?.close()
  await dnsServer?.close()
  untrusted?.closeAllConnections()
  await new Promise((r) => untrusted?.close(r))
  for (const s of silentSockets) s.destroy()
  await new Promise((r) => silent?.close(r))
})

beforeEach(async () => {
  await gw.resetResilience()
  flaky.always({ content: "from flaky" })
  // One piece: "from steady" arrives whole in every streamed format.
  steady.always({ content: "from steady", chunks: 1 })
  flaky.requests.length = 0
  steady.requests.length = 0
  dnsAnswers.clear()
})

describe("a name that does not resolve", () => {
  const origin = `http://${NO_SUCH_HOST}:8080`

  it("is a 502 upstream_unreachable naming the name, asked of the loopback DNS server only; a provider failure with an error cooldown", async () => {
    const before = dnsServer.queries.length
    for (const stream of [false, true]) {
      await gw.resetResilience()
      const res = await timed(() => ask("nodns/m1", stream))
      expect(res.status, res.text).toBe(502)
      expect(res.headers.get("content-type")).toContain("application/json")
      expect(res.body.error).toMatchObject({ type: "upstream_error", code: "upstream_unreachable" })
      expect(res.body.error.message).toContain(`ENOTFOUND: the name ${NO_SUCH_HOST} does not resolve`)
      expect(res.ms).toBeLessThan(BOUNDED_MS)
      await expectCounted("openai-compatible", origin, "nodns", "unreachable")
    }
    // The query reached the DNS server on 127.0.0.1 (and nothing else was asked).
    const asked = dnsServer.queries.slice(before)
    expect(asked.length).toBeGreaterThan(0)
    expect(asked.every((q) => q.name === NO_SUCH_HOST)).toBe(true)
    // Cooling down after a transport failure: the next direct request is refused at once with a 503 (not a rate-limit 429).
    const again = await ask("nodns/m1")
    expect(again.status).toBe(503)
    expect(again.body.error.code).toBe("no_available_target")
    expect(again.body.error.message).toContain("error cooldown")
  })

  it("falls back to the next target of a combo, streamed or not", async () => {
    for (const stream of [false, true]) {
      await gw.resetResilience()
      await expectFellBack(await ask("nodns-first", stream))
    }
  })

  it("a DNS server that fails (SERVFAIL) or does not answer: the same, a 502 when alone and a fallback in a combo", async () => {
    for (const answer of ["servfail", "silent"] as const) {
      dnsAnswers.set(NO_SUCH_HOST, answer)
      await gw.resetResilience()
      const res = await timed(() => ask("nodns/m1"))
      expect(res.status, `${answer}: ${res.text}`).toBe(502)
      expect(res.body.error.code).toBe("upstream_unreachable")
      expect(res.body.error.message).toMatch(new RegExp(`the name ${NO_SUCH_HOST.replace(/\./g, "\\.")} could not be resolved`))
      expect(res.ms).toBeLessThan(BOUNDED_MS)
      await gw.resetResilience()
      await expectFellBack(await ask("nodns-first"))
    }
  })
})

describe("a TLS handshake that fails", () => {
  const origin = () => `https://127.0.0.1:${(untrusted.address() as AddressInfo).port}`

  it("an untrusted certificate: 502 upstream_tls_error saying so, nothing sent, no key in the answer; a provider failure", async () => {
    const seen = { ...untrustedSeen }
    for (const [stream, format] of [
      [false, "chat"],
      [true, "chat"],
      [false, "anthropic"]
    ] as const) {
      await gw.resetResilience()
      const res = await timed(() => ask("tls-untrusted/m1", stream, format))
      expect(res.status, res.text).toBe(502)
      expect(res.headers.get("content-type")).toContain("application/json")
      const error = errorOf(format, res.body)
      if (format === "chat") expect(error).toMatchObject({ type: "upstream_error", code: "upstream_tls_error" })
      else expect(res.body).toMatchObject({ type: "error", error: { type: "api_error" } })
      expect(error.message).toContain("the TLS handshake with the upstream failed")
      expect(error.message).toContain("UNABLE_TO_VERIFY_LEAF_SIGNATURE")
      expect(res.text).not.toContain(TLS_KEY)
      expect(res.ms).toBeLessThan(BOUNDED_MS)
      await expectCounted("openai-compatible", origin(), "tls-untrusted", "tls")
      const rows = await usageRows(res)
      expect(rows).toHaveLength(1)
      expect(rows[0]!["status"]).toBe(502)
      expect(String(rows[0]!["error"])).toContain("TLS handshake")
    }
    // The handshakes were refused, and no request ever reached the server.
    expect(untrustedSeen.requests).toBe(seen.requests)
    expect(untrustedSeen.handshakeErrors).toBeGreaterThan(seen.handshakeErrors)
    // Cooling down after it: 503 with the reason, not a rate-limit 429.
    const again = await ask("tls-untrusted/m1")
    expect(again.status).toBe(503)
    expect(again.body.error.message).toContain("error cooldown")
  })

  it("falls back to the next target of a combo, streamed or not", async () => {
    for (const stream of [false, true]) {
      await gw.resetResilience()
      await expectFellBack(await ask("tls-untrusted-first", stream))
    }
  })
})

/** The last SSE data line of a stream, parsed. */
const lastData = (text: string): any =>
  JSON.parse(
    text
      .split("\n")
      .filter((l) => l.startsWith("data: ") && l !== "data: [DONE]")
      .at(-1)!
      .slice(6)
  )

/** The stream ended with its client format's error event for `code` (Anthropic: its `api_error`), and without its normal end. */
const expectErrorEvent = (format: ClientFormat, text: string, code: string) => {
  const last = lastData(text)
  switch (format) {
    case "chat":
      expect(last.error).toMatchObject({ code })
      expect(text).not.toContain("[DONE]")
      expect(text).not.toContain('"finish_reason":"stop"')
      return
    case "anthropic":
      expect(text).toMatch(/event: error\ndata: /)
      expect(last).toMatchObject({ type: "error", error: { type: code === "upstream_stalled" ? "timeout_error" : "api_error" } })
      expect(text).not.toContain("message_stop")
      return
    case "responses":
      expect(last).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code } } })
      expect(text).not.toContain("response.completed")
      return
  }
}

/**
 * How many events the fake upstream sends for `first`'s format before its answer has two pieces
 * of text out (the events before the first text are the stream's preamble, held back: a failure
 * there still falls back).
 */
const afterTwoPieces = (first: string): number => (first === "flaky-anth" ? 5 : first === "flaky-resp" ? 6 : 3)

describe("a connection reset", () => {
  it("before any answer (a TCP RST instead of headers): the next target answers, streamed or not, in every client format", async () => {
    flaky.always({ resetBeforeHeaders: true })
    for (const [first, format] of [
      ["flaky", "chat"],
      ["flaky-anth", "anthropic"],
      ["flaky", "anthropic"],
      ["flaky-resp", "responses"]
    ] as const) {
      for (const stream of [false, true]) {
        await gw.resetResilience()
        await expectFellBack(await ask(`${first}-first`, stream, format))
      }
    }
    // Alone: a 502 that says what happened.
    await gw.resetResilience()
    const direct = await ask("flaky/m1", true)
    expect(direct.status).toBe(502)
    expect(direct.body.error.code).toBe("upstream_unreachable")
    expect(direct.body.error.message).toContain("ECONNRESET: the upstream reset the connection before answering")
    await expectCounted("openai-compatible", flaky.url, "flaky", "unreachable")
  })

  it("after the headers, before any event: nothing reached the client, the next target answers", async () => {
    flaky.always({ resetAfterChunks: 0 })
    for (const [first, format] of [
      ["flaky", "chat"],
      ["flaky-anth", "anthropic"],
      ["flaky-resp", "responses"]
    ] as const) {
      await gw.resetResilience()
      await expectFellBack(await ask(`${first}-first`, true, format))
    }
  })

  it("in the middle of a whole answer's body: the next target answers", async () => {
    flaky.always({ partialBody: { bytes: 40, after: "reset" } })
    await expectFellBack(await ask("flaky-whole-first"))
  })

  it("mid-stream, once bytes reached the client: the client format's error event ends the stream, no fallback, a provider failure", async () => {
    for (const [first, format] of [
      // Passed through (the upstream speaks the client's format) and translated.
      ["flaky", "chat"],
      ["flaky-anth", "anthropic"],
      ["flaky-resp", "responses"],
      ["flaky", "anthropic"],
      ["flaky", "responses"],
      ["flaky-anth", "chat"]
    ] as const) {
      await gw.resetResilience()
      steady.requests.length = 0
      flaky.always({ content: "alpha beta gamma delta", chunks: 4, resetAfterChunks: afterTwoPieces(first) })
      const res = await timed(() => ask(`${first}-first`, true, format))
      const what = `${first} -> ${format}: ${res.text.slice(-400)}`
      expect(res.status, what).toBe(200)
      expect(res.headers.get("content-type"), what).toContain("text/event-stream")
      expect(res.text, what).toContain("alpha")
      expectErrorEvent(format, res.text, "stream_interrupted")
      expect(res.ms).toBeLessThan(BOUNDED_MS)
      expect(steady.requests, what).toHaveLength(0)
      const provider = first === "flaky-anth" ? "anthropic" : "openai-compatible"
      expect((await breakerOf(provider, flaky.url))?.consecutiveFailures, what).toBe(1)
      const rows = await usageRows(res)
      expect(rows).toHaveLength(1)
      expect(String(rows[0]!["error"])).toContain("ECONNRESET")
    }
  })
})

describe("an upstream that stops sending without closing (half-open)", () => {
  it("a stream silent before its first content: ended by the first-content watchdog, the next target answers", async () => {
    flaky.always({ stallAfterChunks: 0 })
    const direct = await timed(() => ask("flaky/m1", true))
    expect(direct.status).toBe(504)
    expect(direct.body.error.code).toBe("upstream_stalled")
    expect(direct.ms).toBeLessThan(BOUNDED_MS)
    await expectCounted("openai-compatible", flaky.url, "flaky", "stalled")
    await gw.resetResilience()
    await expectFellBack(await timed(() => ask("flaky-first", true)))
  })

  it("a stream silent after content reached the client: its format's error event (upstream_stalled) ends it within the idle limit", async () => {
    for (const [first, format] of [
      ["flaky", "chat"],
      ["flaky-anth", "anthropic"],
      ["flaky-resp", "responses"]
    ] as const) {
      await gw.resetResilience()
      flaky.always({ content: "alpha beta gamma delta", chunks: 4, stallAfterChunks: afterTwoPieces(first) })
      const res = await timed(() => ask(`${first}-first`, true, format))
      expect(res.status).toBe(200)
      expect(res.text).toContain("alpha")
      expectErrorEvent(format, res.text, "upstream_stalled")
      expect(res.ms).toBeLessThan(BOUNDED_MS)
      expect(steady.requests).toHaveLength(0)
    }
  })

  it("a collected answer (a non-streamed request asked as a stream) silent half-way: 504 upstream_stalled alone, the next target in a combo", async () => {
    for (const [first, format] of [
      ["flaky", "chat"],
      ["flaky-anth", "anthropic"],
      ["flaky-resp", "responses"]
    ] as const) {
      await gw.resetResilience()
      flaky.always({ content: "alpha beta gamma delta", chunks: 4, stallAfterChunks: afterTwoPieces(first) })
      const direct = await timed(() => ask(`${first}/m1`, false, format))
      expect(direct.status, direct.text).toBe(504)
      expect(direct.headers.get("content-type")).toContain("application/json")
      expect(direct.ms).toBeLessThan(BOUNDED_MS)
      await gw.resetResilience()
      await expectFellBack(await ask(`${first}-first`, false, format))
    }
  })

  it("a whole answer silent half-way through its body: 504 upstream_timeout alone, the next target in a combo", async () => {
    flaky.always({ partialBody: { bytes: 40, after: "stall" } })
    const direct = await timed(() => ask("flaky-whole/m1"))
    expect(direct.status).toBe(504)
    expect(direct.body.error.code).toBe("upstream_timeout")
    expect(direct.ms).toBeLessThan(BOUNDED_MS)
    await expectCounted("openai-compatible", flaky.url, "flaky-whole", "timeout")
    await gw.resetResilience()
    await expectFellBack(await ask("flaky-whole-first"))
  })

  it("a socket that takes the request and never answers: 504 upstream_timeout when alone, the next target in a combo", async () => {
    const origin = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`
    for (const stream of [false, true]) {
      await gw.resetResilience()
      const direct = await timed(() => ask("silent/m1", stream))
      expect(direct.status).toBe(504)
      expect(direct.body.error.code).toBe("upstream_timeout")
      expect(direct.ms).toBeLessThan(BOUNDED_MS)
      await expectCounted("openai-compatible", origin, "silent", "timeout")
      await gw.resetResilience()
      await expectFellBack(await ask("silent-first", stream))
    }
  })
})

describe("a 200 whose body is not the format it promised", () => {
  const html = { body: "<!doctype html><html><body><h1>502 Bad Gateway</h1></body></html>", headers: { "content-type": "text/html" } }
  const truncated = {
    body: '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assis',
    headers: { "content-type": "application/json" }
  }
  const empty = { body: "", headers: { "content-type": "application/json" } }
  const garbage = { body: 'data: this is not json\n\ndata: {"unexpected":true}\n\n', headers: { "content-type": "text/event-stream" } }
  const silentStream = { body: ": keep-alive\n\n", headers: { "content-type": "text/event-stream" } }

  /** The connection to reach with each body, and what its format's answer lacks. */
  const CASES: ReadonlyArray<{
    readonly name: string
    readonly first: string
    readonly reply: Reply
    readonly modes: ReadonlyArray<"stream" | "collect" | "whole">
  }> = [
    { name: "an HTML page", first: "flaky", reply: html, modes: ["stream", "collect"] },
    { name: "an HTML page (whole)", first: "flaky-whole", reply: html, modes: ["whole"] },
    { name: "truncated JSON", first: "flaky", reply: truncated, modes: ["stream", "collect"] },
    { name: "truncated JSON (whole)", first: "flaky-whole", reply: truncated, modes: ["whole"] },
    { name: "an empty body", first: "flaky-whole", reply: empty, modes: ["whole"] },
    {
      name: "chat JSON without choices",
      first: "flaky",
      reply: { body: { id: "chatcmpl-1", object: "chat.completion", model: "m1" } },
      modes: ["stream", "collect"]
    },
    {
      name: "chat JSON without choices (whole)",
      first: "flaky-whole",
      reply: { body: { id: "chatcmpl-1", object: "chat.completion", model: "m1" } },
      modes: ["whole"]
    },
    {
      name: "a Messages JSON without content",
      first: "flaky-anth",
      reply: { body: { id: "msg_1", type: "message", role: "assistant" } },
      modes: ["stream", "collect"]
    },
    {
      name: "a Responses JSON without output",
      first: "flaky-resp",
      reply: { body: { id: "resp_1", object: "response", status: "completed" } },
      modes: ["stream", "collect"]
    },
    { name: "an SSE stream of no chat chunk", first: "flaky", reply: garbage, modes: ["stream", "collect"] },
    { name: "an SSE stream of no Messages event", first: "flaky-anth", reply: garbage, modes: ["stream", "collect"] },
    { name: "an SSE stream of no Responses event", first: "flaky-resp", reply: garbage, modes: ["stream", "collect"] },
    { name: "an SSE stream of comments only", first: "flaky", reply: silentStream, modes: ["stream", "collect"] }
  ]

  for (const c of CASES) {
    for (const mode of c.modes) {
      it(`${c.name}, ${mode === "stream" ? "streamed" : mode === "collect" ? "not streamed (collected)" : "not streamed (whole)"}: 502 upstream_malformed, a provider failure; a combo falls back`, async () => {
        flaky.always(c.reply)
        const stream = mode === "stream"
        // Each client format, as its own: the upstream's own (pass-through) and OpenAI chat (translated).
        const format: ClientFormat = c.first === "flaky-anth" ? "anthropic" : c.first === "flaky-resp" ? "responses" : "chat"
        for (const client of format === "chat" ? (["chat"] as const) : ([format, "chat"] as const)) {
          await gw.resetResilience()
          const direct = await timed(() => ask(`${c.first}/m1`, stream, client))
          const what = `${client}: ${direct.text.slice(0, 400)}`
          expect(direct.status, what).toBe(502)
          expect(direct.headers.get("content-type"), what).toContain("application/json")
          const error = errorOf(client, direct.body)
          if (client === "anthropic") expect(direct.body, what).toMatchObject({ type: "error", error: { type: "api_error" } })
          else expect(error, what).toMatchObject({ type: "upstream_error", code: "upstream_malformed" })
          expect(error.message, what).toMatch(
            /upstream answered 200 with (a body that is not JSON|JSON that is not|a stream that carried no)/
          )
          expect(direct.ms).toBeLessThan(BOUNDED_MS)
          await expectCounted(c.first === "flaky-anth" ? "anthropic" : "openai-compatible", flaky.url, c.first, "malformed")
          const rows = await usageRows(direct)
          expect(rows).toHaveLength(1)
          expect(rows[0]!["status"]).toBe(502)
        }
        await gw.resetResilience()
        await expectFellBack(await ask(`${c.first}-first`, stream, format))
      })
    }
  }

  it("embeddings: an HTML page or JSON without the vectors is a 502 upstream_malformed too, a provider failure", async () => {
    for (const reply of [html, { body: { object: "list", model: "m1" } }]) {
      await gw.resetResilience()
      flaky.always(reply)
      const res = await call(`${gw.url}/v1/embeddings`, { body: { model: "flaky/m1", input: ["one", "two"] } })
      expect(res.status, res.text).toBe(502)
      expect(res.body.error).toMatchObject({ type: "upstream_error", code: "upstream_malformed" })
      await expectCounted("openai-compatible", flaky.url, "flaky", "malformed")
    }
  })

  it("an HTML page's start is quoted in the message, so an operator sees what answered", async () => {
    flaky.always(html)
    const res = await ask("flaky/m1", true)
    expect(res.body.error.message).toContain("<h1>502 Bad Gateway</h1>")
  })
})

describe("a healthy upstream after all this", () => {
  it("still answers: nothing above left state behind once reset", async () => {
    const res = await ask("flaky/m1")
    expect(res.status).toBe(200)
    expect(res.body.choices[0].message.content).toBe("from flaky")
    const stream = await ask("flaky-anth/m1", true, "anthropic")
    expect(stream.status).toBe(200)
    expect(stream.text).toContain("message_stop")
  })
})
