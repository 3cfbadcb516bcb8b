import * as fs from "node:fs"
import * as https from "node:https"
import * as path from "node:path"
import { fetch as undiciFetch } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type ClientHello, isGrease, type TlsRecorder, tlsRecorder } from "./support/clientHello.js"
import { tempDir } from "./support/gateway.js"
import { type GatewayChild, startGatewayChild } from "./support/gatewayChild.js"
import { httpProxy, type TestProxy } from "./support/proxies.js"
import { testCa } from "./support/testCerts.js"
import { until } from "./support/until.js"

/**
 * ENABLE_TLS_FINGERPRINT (docs/egress.md, "TLS fingerprint"): an OpenAI-compatible upstream on
 * 127.0.0.1 behind a server that reads every ClientHello off the wire and computes its JA3 and
 * JA4. Two gateways, each a process of its own trusting the test CA through NODE_EXTRA_CA_CERTS:
 * one with the flag off (Node's handshake), one with it on (the browser's), each making a chat
 * call, a streamed call and a provider check. The upstream closes every connection after its
 * answer, so each call opens a connection and shows its handshake.
 */
const ADMIN = "gwk_tls_fingerprint_admin_key_0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }

let off: GatewayChild
let on: GatewayChild
let upstream: TlsRecorder
let stranger: TlsRecorder
let proxy: TestProxy
/** Streams the upstream was still writing when its client went away. */
const cut: Array<string> = []
/** The request headers of the last chat completion the upstream answered. */
let lastHeaders: Record<string, string | Array<string> | undefined> = {}

const answer = (content: string) => ({
  id: "c1",
  object: "chat.completion",
  created: 1,
  model: "m1",
  choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }
})
const chunk = (content: string, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m1", choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`

/** The upstream: `/v1/models`, and chat completions whole or streamed (`long` in the prompt: 40 chunks, 100 ms apart). */
const upstreamServer = (cert: { certPem: string; keyPem: string }) =>
  https.createServer({ key: cert.keyPem, cert: cert.certPem }, (req, res) => {
    res.setHeader("connection", "close")
    let raw = ""
    req.on("data", (c: Buffer) => (raw += c.toString()))
    req.on("end", () => {
      if (req.method === "GET" && req.url === "/v1/models") {
        res.writeHead(200, { "content-type": "application/json" })
        return res.end(JSON.stringify({ object: "list", data: [{ id: "m1", object: "model", owned_by: "test" }] }))
      }
      lastHeaders = req.headers
      const body = JSON.parse(raw || "{}") as { stream?: boolean; messages?: Array<{ content: string }> }
      const prompt = body.messages?.[0]?.content ?? ""
      if (!body.stream) {
        res.writeHead(200, { "content-type": "application/json" })
        return res.end(JSON.stringify(answer("whole over TLS")))
      }
      res.writeHead(200, { "content-type": "text/event-stream" })
      const total = prompt === "long" ? 40 : 3
      let sent = 0
      const timer = setInterval(() => {
        if (sent < total) {
          res.write(chunk(`part${sent} `))
          sent++
          return
        }
        clearInterval(timer)
        res.write(chunk("", "stop"))
        res.end("data: [DONE]\n\n")
      }, 100)
      res.on("close", () => {
        clearInterval(timer)
        if (!res.writableFinished) cut.push(prompt)
      })
    })
  })

const chat = (gw: GatewayChild, model: string, stream = false, content = "hi") =>
  gw.call("/v1/chat/completions", { body: { model, stream, messages: [{ role: "user", content }] } })

/** The ClientHellos `action` made the upstream see (each call opens its own connection). */
const hellosOf = async (rec: TlsRecorder, action: () => Promise<unknown>): Promise<Array<ClientHello>> => {
  const before = rec.hellos.length
  await action()
  const got = rec.hellos.slice(before)

  return got
}

const onlyHello = async (action: () => Promise<unknown>): Promise<ClientHello> => {
  const hellos = await hellosOf(upstream, action)
  expect(hellos.length).toBeGreaterThanOrEqual(1)
  return hellos[0]!
}

/** A hello's fingerprint without session resumption's pre_shared_key extension. */
const withoutPsk = (h: ClientHello) => ({
  ciphers: h.ciphers,
  extensions: h.extensions.filter((e) => e !== 41),
  groups: h.groups,
  sigs: h.signatureAlgorithms
})

/** GREASE (RFC 8701) among the cipher suites and the groups, as Chrome sends them. */
const hasGrease = (h: ClientHello) => h.ciphers.some(isGrease) && h.groups.some(isGrease)

/** JA4's first two parts (version, SNI, counts, ALPN; the cipher suites' hash): the third moves with session resumption. */
const ja4ab = (h: ClientHello) => h.ja4.split("_").slice(0, 2).join("_")

beforeAll(async () => {
  const ca = testCa()
  const dir = tempDir("gw-tlsfp-")
  const caFile = path.join(dir, "ca.pem")
  fs.writeFileSync(caFile, ca.certPem)
  upstream = await tlsRecorder(upstreamServer(ca.issue(["127.0.0.1"])))
  // A certificate from a CA the gateways do not trust.
  stranger = await tlsRecorder(upstreamServer(testCa("stranger CA").issue(["127.0.0.1"])))
  proxy = await httpProxy("127.0.0.1")
  const env = { NODE_EXTRA_CA_CERTS: caFile }
  ;[off, on] = await Promise.all([
    startGatewayChild({ adminKey: ADMIN }, { env, startMs: 90_000 }),
    startGatewayChild({ adminKey: ADMIN, env: { ENABLE_TLS_FINGERPRINT: "true" } }, { env, startMs: 90_000 })
  ])
  for (const gw of [off, on]) {
    const created = await gw.call("/api/v1/management/proxies", {
      body: { name: "tunnel", type: "http", host: "127.0.0.1", port: proxy.port },
      headers: admin
    })
    expect(created.status, created.text).toBe(201)
    const add = async (body: Record<string, unknown>) => {
      // `whole`: a non-streamed call asks for a whole answer (a JSON body read whole), not a stream it collects.
      const res = await gw.call("/api/providers", {
        body: { provider: "openai-compatible", apiKey: "sk-fp-test", defaultModel: "m1", timeouts: { nonStreamed: "whole" }, ...body },
        headers: admin
      })
      expect(res.status, res.text).toBe(201)
      return res.body
    }
    await add({ name: "fp", baseUrl: `${upstream.origin}/v1` })
    await add({ name: "fp-firefox", baseUrl: `${upstream.origin}/v1`, tlsProfile: "firefox144" })
    await add({ name: "fp-proxied", baseUrl: `${upstream.origin}/v1`, proxyId: created.body.id })
    await add({ name: "fp-stranger", baseUrl: `${stranger.origin}/v1` })
  }
}, 180_000)

afterAll(async () => {
  await Promise.all([off?.stop(), on?.stop()])
  await upstream?.close()
  await stranger?.close()
  await proxy?.close()
})

describe("ENABLE_TLS_FINGERPRINT", () => {
  const seen: Record<string, ClientHello> = {}

  it("off: a chat call, a streamed call and a provider check make Node's handshake (no GREASE, ALPN http/1.1 only, the same hello each time)", async () => {
    const whole = await onlyHello(async () => {
      const res = await chat(off, "fp/m1")
      expect(res.status, res.text).toBe(200)
      expect(res.body.choices[0].message.content).toBe("whole over TLS")
    })
    const streamed = await onlyHello(async () => {
      const res = await chat(off, "fp/m1", true)
      expect(res.status, res.text).toBe(200)
      expect(res.text).toContain("part2")
    })
    const check = await onlyHello(async () => {
      const res = await off.call("/api/providers/fp/test", { method: "POST", headers: admin })
      expect(res.status, res.text).toBe(200)
      expect(res.body.ok, res.text).toBe(true)
    })
    for (const h of [whole, streamed, check]) {
      expect(h.ciphers.some(isGrease) || h.extensions.some(isGrease) || h.groups.some(isGrease)).toBe(false)
      expect(h.alpn).toEqual(["http/1.1"])
      // Node resumes its TLS session on the next connection (pre_shared_key, 41): the same hello besides it.
      expect(withoutPsk(h)).toEqual(withoutPsk(whole))
    }
    seen["node"] = whole
  })

  it("on: the same three calls make Chrome's handshake (chrome151, the default): GREASE, ALPN h2 then http/1.1, Chrome's JA4 on each, not Node's", async () => {
    const whole = await onlyHello(async () => {
      const res = await chat(on, "fp/m1")
      expect(res.status, res.text).toBe(200)
      expect(res.body.choices[0].message.content).toBe("whole over TLS")
    })
    // Only the handshake is the browser's: the request's headers are the gateway's, none of a browser's page load.
    expect(lastHeaders["user-agent"]).toMatch(/^gateway\//)
    expect(lastHeaders["authorization"]).toBe("Bearer sk-fp-test")
    for (const h of ["sec-ch-ua", "sec-fetch-mode", "upgrade-insecure-requests", "accept-language"]) expect(lastHeaders[h]).toBeUndefined()
    const arrivals: Array<number> = []
    const streamed = await onlyHello(async () => {
      const res = await undiciFetch(`${on.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "fp/m1", stream: true, messages: [{ role: "user", content: "hi" }] })
      })
      expect(res.status).toBe(200)
      let text = ""
      for await (const piece of res.body!) {
        const s = Buffer.from(piece).toString()
        if (s.includes("part")) arrivals.push(Date.now())
        text += s
      }
      expect(text).toContain("part0")
      expect(text).toContain("part2")
      expect(text).toContain("[DONE]")
    })
    // Streamed as it was made: the chunks came ~100 ms apart, not all at the end (on a loaded machine two of the three may
    // arrive in one read, which leaves one gap of ~100 ms).
    expect(arrivals.length).toBeGreaterThanOrEqual(2)
    expect(arrivals[arrivals.length - 1]! - arrivals[0]!).toBeGreaterThanOrEqual(80)
    const check = await onlyHello(async () => {
      const res = await on.call("/api/providers/fp/test", { method: "POST", headers: admin })
      expect(res.status, res.text).toBe(200)
      expect(res.body.ok, res.text).toBe(true)
    })
    for (const h of [whole, streamed, check]) {
      expect(hasGrease(h)).toBe(true)
      expect(h.alpn).toEqual(["h2", "http/1.1"])
      // Chrome's: TLS 1.3, 15 cipher suites besides GREASE, 15 extensions (no SNI to an address), h2 first;
      // 8daaf6152771 is the hash of Chrome's cipher suites; X25519MLKEM768 (0x11ec) is its first group.
      expect(ja4ab(h)).toBe("t13i1515h2_8daaf6152771")
      expect(h.groups.filter((g) => !isGrease(g))[0]).toBe(0x11ec)
      expect(ja4ab(h)).not.toBe(ja4ab(seen["node"]!))
    }
    // Chrome shuffles its extensions on every connection: JA3, which keeps their order, changes; JA4 sorts them.
    expect(new Set([whole, streamed, check].map((h) => h.ja3Hash)).size).toBeGreaterThan(1)
    seen["chrome"] = whole
  })

  it("on: a connection's tlsProfile chooses another browser (firefox144: Firefox's JA4, no GREASE, the finite-field groups Firefox offers); off, it changes nothing", async () => {
    const listed = await on.call("/api/providers/fp-firefox", { headers: admin })
    expect(listed.body.tlsProfile).toBe("firefox144")
    const h = await onlyHello(async () => {
      const res = await chat(on, "fp-firefox/m1")
      expect(res.status, res.text).toBe(200)
    })
    expect(hasGrease(h)).toBe(false)
    expect(h.alpn).toEqual(["h2", "http/1.1"])
    expect(h.groups).toContain(0x0100)
    // 5b57614c22b0: the hash of Firefox's cipher suites.
    expect(ja4ab(h)).toMatch(/^t13i17\d\dh2_5b57614c22b0$/)
    // The flag off, the profile changes nothing: Node's handshake.
    const plain = await onlyHello(() => chat(off, "fp-firefox/m1"))
    expect(withoutPsk(plain)).toEqual(withoutPsk(seen["node"]!))
  })

  it("on: a tlsProfile outside the list is a 400 naming the allowed ones", async () => {
    const res = await on.call("/api/providers", {
      body: { provider: "openai-compatible", name: "fp-bad", baseUrl: `${upstream.origin}/v1`, apiKey: "k", tlsProfile: "netscape4" },
      headers: admin
    })
    expect(res.status).toBe(400)
    expect(res.text).toContain("tlsProfile must be one of: chrome151")
  })

  it("on: through the connection's proxy, the tunnel carries the browser's handshake", async () => {
    const before = proxy.passed.length
    const h = await onlyHello(async () => {
      const res = await chat(on, "fp-proxied/m1", true)
      expect(res.status, res.text).toBe(200)
      expect(res.text).toContain("part2")
    })
    expect(ja4ab(h)).toBe(ja4ab(seen["chrome"]!))
    const port = new URL(upstream.origin).port
    expect(proxy.passed.slice(before).map((p) => p.target)).toContain(`CONNECT 127.0.0.1:${port}`)
  })

  it("on: the client going away mid-stream cancels the upstream call", async () => {
    const controller = new AbortController()
    const res = await undiciFetch(`${on.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fp/m1", stream: true, messages: [{ role: "user", content: "long" }] }),
      signal: controller.signal
    })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    let text = ""
    while (!text.includes("part1")) text += Buffer.from((await reader.read()).value!).toString()
    controller.abort()
    // 40 chunks would take 4 s; the upstream sees its client leave long before.
    const started = Date.now()
    await until("the upstream sees the stream cut", () => cut.includes("long") || undefined, 3_000)
    expect(Date.now() - started).toBeLessThan(3_000)
  })

  it("on: a certificate from a CA the gateway does not trust fails the handshake (502, nothing sent)", async () => {
    const res = await chat(on, "fp-stranger/m1")
    expect(res.status, res.text).toBe(502)
    expect(res.body.error.code).toBe("upstream_tls_error")
    expect(stranger.hellos.length).toBeGreaterThanOrEqual(1)
    expect(hasGrease(stranger.hellos[0]!)).toBe(true)
  })
})
