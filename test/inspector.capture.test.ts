import { execFile } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { fileURLToPath } from "node:url"
import * as zlib from "node:zlib"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { WebSocket, WebSocketServer } from "ws"
import { caKeyPath, caPemPath, type LocalCa, loadOrCreateCa } from "../src/services/inspector/capture/ca.js"
import type { ConnectionEnd } from "../src/services/inspector/capture/forward.js"
import {
  BLOCK_BEGIN,
  BLOCK_END,
  HostsFileError,
  readBlockHosts,
  removeBlock,
  setBlockHosts
} from "../src/services/inspector/capture/hostsFile.js"
import { startMitmServer } from "../src/services/inspector/capture/mitm.js"
import { type HttpProxyOptions, type RunningProxy, startHttpProxy } from "../src/services/inspector/capture/proxy.js"
import type { CaptureEnd, CaptureSource, CaptureStart, InspectorSink } from "../src/services/inspector/types.js"
import { until } from "./support/until.js"

/**
 * The inspector's capture listeners (src/services/inspector/capture/): the local CA, the hosts
 * file block, the HTTP proxy (plain, CONNECT tunnels, TLS interception) and the custom-host MITM
 * server, with real sockets on 127.0.0.1 only: a fake LLM upstream over HTTP and over TLS (its own
 * CA, not the inspector's), curl and node child processes as clients, and an in-memory sink.
 */

// ------------------------------------------------------------------ a recording sink

interface Recorded {
  readonly id: string
  readonly start: CaptureStart
  end?: CaptureEnd
  error?: string
}

const recordingSink = (options: { wantsBodies?: boolean; maxBodyBytes?: number } = {}) => {
  const entries: Array<Recorded> = []
  const sink: InspectorSink = {
    begin: (start) => {
      const id = `e${entries.length + 1}`
      entries.push({ id, start })
      return id
    },
    end: (id, end) => {
      const e = entries.find((x) => x.id === id)!
      e.end = end
    },
    fail: (id, error) => {
      const e = entries.find((x) => x.id === id)!
      e.error = error
    },
    wantsBodies: () => options.wantsBodies ?? true,
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024
  }
  /** The n-th entry (1-based) once it has ended or failed. */
  const settled = (n: number) =>
    until(`entry ${n} settled`, () => (entries[n - 1]?.end !== undefined || entries[n - 1]?.error !== undefined) && entries[n - 1])
  return { sink, entries, settled }
}

// ------------------------------------------------------------------ the fake LLM upstream

const COMPLETION = {
  id: "chatcmpl-1",
  object: "chat.completion",
  model: "gpt-4o",
  choices: [{ index: 0, message: { role: "assistant", content: "Hello there" } }]
}
const SSE_PARTS = ["Hel", "lo ", "there"]
const SSE_DELAY_MS = 300

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
}

const seen: Array<Seen> = []
let sseFinishedAt = 0

const readAll = (req: http.IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const parts: Array<Buffer> = []
    req.on("data", (c: Buffer) => parts.push(c))
    req.on("end", () => resolve(Buffer.concat(parts)))
    req.on("error", reject)
  })

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const upstreamHandler = async (req: http.IncomingMessage, res: http.ServerResponse) => {
  const body = await readAll(req)
  seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body })
  const url = new URL(req.url ?? "/", "http://upstream")
  if (url.pathname === "/v1/chat/completions") {
    const parsed = body.length > 0 ? (JSON.parse(body.toString()) as { stream?: boolean }) : {}
    if (parsed.stream === true) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      for (const part of SSE_PARTS) {
        res.write(`data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: part } }] })}\n\n`)
        await sleep(SSE_DELAY_MS)
      }
      res.end("data: [DONE]\n\n")
      sseFinishedAt = Date.now()
      return
    }
    res.writeHead(200, { "content-type": "application/json", "x-upstream": "fake" })
    return void res.end(JSON.stringify(COMPLETION))
  }
  if (url.pathname === "/big") {
    const size = Number(url.searchParams.get("size"))
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": size })
    return void res.end(Buffer.alloc(size, 0x61))
  }
  if (url.pathname === "/echo") {
    res.writeHead(200, { "content-type": "application/json" })
    return void res.end(JSON.stringify({ received: body.length, sha256: crypto.createHash("sha256").update(body).digest("hex") }))
  }
  if (url.pathname === "/gzip") {
    const gz = zlib.gzipSync(JSON.stringify({ hello: "world" }))
    res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip", "content-length": gz.length })
    return void res.end(gz)
  }
  res.writeHead(404, { "content-type": "application/json" })
  res.end("{}")
}

const listen = (server: net.Server): Promise<number> =>
  new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))

const closeServer = (server: net.Server | undefined) =>
  new Promise<void>((resolve) => {
    if (server === undefined) return resolve()
    ;(server as http.Server).closeAllConnections?.()
    server.close(() => resolve())
  })

// ------------------------------------------------------------------ clients

interface CurlResult {
  readonly code: number
  readonly status: number
  readonly body: string
  readonly stderr: string
}

/** curl in a child process; no proxy from the environment, no config file. */
const curl = (args: ReadonlyArray<string>): Promise<CurlResult> =>
  new Promise((resolve) => {
    execFile(
      "curl",
      ["-sS", "--max-time", "20", "-w", "\n@@%{http_code}", ...args],
      { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const at = stdout.lastIndexOf("\n@@")
        resolve({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : 1,
          status: at >= 0 ? Number(stdout.slice(at + 3)) : 0,
          body: at >= 0 ? stdout.slice(0, at) : stdout,
          stderr
        })
      }
    )
  })

/** A CONNECT tunnel through the proxy, as a client makes it. */
const connectTunnel = (proxyPort: number, authority: string): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: proxyPort, method: "CONNECT", path: authority, agent: false })
    req.on("connect", (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT answered ${res.statusCode}`))))
    req.on("error", reject)
    req.end()
  })

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  readonly firstChunkAt: number
}

/** One HTTPS request over `socket` (a tunnel), trusting `ca`. */
const httpsOver = (
  socket: net.Socket,
  host: string,
  ca: string,
  request: { method?: string; path: string; body?: string }
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = https.request(
      {
        host,
        method: request.method ?? "GET",
        path: request.path,
        headers: request.body !== undefined ? { "content-type": "application/json" } : {},
        // No agent: node then uses `createConnection` (with `agent: false` it would make its own connection).
        createConnection: () => tls.connect({ socket, servername: host, ca })
      },
      (res) => {
        let body = ""
        let firstChunkAt = 0
        res.on("data", (c: Buffer) => {
          if (firstChunkAt === 0) firstChunkAt = Date.now()
          body += c.toString()
        })
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, firstChunkAt }))
      }
    )
    req.on("error", reject)
    req.end(request.body)
  })

const chatBody = (stream: boolean) => JSON.stringify({ model: "gpt-4o", stream, messages: [{ role: "user", content: "Hi" }] })

// ------------------------------------------------------------------ fixtures

let dir: string
let inspectorCa: LocalCa
let upstreamCa: LocalCa
let inspectorCaFile: string
let upstreamCaFile: string
let plainUpstream: http.Server
let tlsUpstream: https.Server
let plainPort: number
let tlsPort: number

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-capture-"))
  inspectorCa = await loadOrCreateCa(path.join(dir, "inspector"))
  upstreamCa = await loadOrCreateCa(path.join(dir, "upstream-ca"))
  inspectorCaFile = caPemPath(inspectorCa.dir)
  upstreamCaFile = caPemPath(upstreamCa.dir)
  plainUpstream = http.createServer((req, res) => void upstreamHandler(req, res))
  plainPort = await listen(plainUpstream)
  // The fake LLM over TLS: a leaf for "localhost" by default, and one for whatever name the client asks for (SNI).
  const defaultLeaf = await upstreamCa.leafFor("localhost")
  tlsUpstream = https.createServer(
    {
      key: defaultLeaf.keyPem,
      cert: defaultLeaf.certPem,
      SNICallback: (name, done) =>
        upstreamCa.secureContextFor(name).then(
          (c) => done(null, c),
          (e: Error) => done(e)
        )
    },
    (req, res) => void upstreamHandler(req, res)
  )
  tlsPort = await listen(tlsUpstream)
  // A WebSocket echo on the TLS upstream.
  new WebSocketServer({ server: tlsUpstream, path: "/ws" }).on("connection", (ws) =>
    ws.on("message", (m) => ws.send(`echo:${m.toString()}`))
  )
}, 60_000)

afterAll(async () => {
  await closeServer(plainUpstream)
  await closeServer(tlsUpstream)
  fs.rmSync(dir, { recursive: true, force: true })
})

const proxies: Array<RunningProxy> = []
afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()))
})

const proxyWith = async (overrides: Partial<HttpProxyOptions> & { sink: InspectorSink }): Promise<RunningProxy> => {
  const p = await startHttpProxy({
    port: 0,
    source: () => "http-proxy",
    intercept: () => false,
    ca: () => Promise.resolve(inspectorCa),
    upstreamCa: [upstreamCa.certPem],
    verifyUpstream: true,
    idleTimeoutMs: 30_000,
    ...overrides
  })
  proxies.push(p)
  return p
}

const openssl = (args: ReadonlyArray<string>): Promise<{ code: number; out: string }> =>
  new Promise((resolve) =>
    execFile("openssl", [...args], (error, stdout, stderr) => resolve({ code: error === null ? 0 : 1, out: stdout + stderr }))
  )

const DAY_MS = 24 * 60 * 60 * 1000

// ------------------------------------------------------------------ (a) the CA

describe("the local CA", () => {
  it("is created once (concurrent callers share it), with its key 0600 in a 0700 directory, and reloads identical", async () => {
    const caDir = path.join(dir, "ca-a")
    const [a, b] = await Promise.all([loadOrCreateCa(caDir), loadOrCreateCa(caDir)])
    expect(a).toBe(b)
    expect(fs.statSync(caDir).mode & 0o777).toBe(0o700)
    expect(fs.statSync(caKeyPath(caDir)).mode & 0o777).toBe(0o600)
    expect(fs.statSync(caPemPath(caDir)).mode & 0o777).toBe(0o644)
    expect(fs.readFileSync(caPemPath(caDir), "utf8")).toBe(a.certPem)

    // Another process (here: another directory with the same files) loads the same CA, it does not make a new one.
    const copy = path.join(dir, "ca-a-copy")
    fs.mkdirSync(copy)
    fs.copyFileSync(caPemPath(caDir), caPemPath(copy))
    fs.copyFileSync(caKeyPath(caDir), caKeyPath(copy))
    const reloaded = await loadOrCreateCa(copy)
    expect(reloaded.certPem).toBe(a.certPem)
    expect(reloaded.fingerprint256).toBe(a.fingerprint256)

    const printed = await openssl(["x509", "-in", caPemPath(caDir), "-noout", "-fingerprint", "-sha256"])
    expect(printed.out).toContain(`=${a.fingerprint256}`)
    expect(a.fingerprint256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/)

    const text = (await openssl(["x509", "-in", caPemPath(caDir), "-noout", "-text"])).out
    expect(text).toContain("Subject: CN = Gateway Inspector Local CA, O = ")
    expect(text).toMatch(/Basic Constraints: critical\s+CA:TRUE/)
    expect(text).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign/)
    expect(text).toContain("Public-Key: (2048 bit)")
    expect(text).toContain("Signature Algorithm: sha256WithRSAEncryption")
    const x = new crypto.X509Certificate(a.certPem)
    const days = (Date.parse(x.validTo) - Date.parse(x.validFrom)) / DAY_MS
    expect(days).toBeGreaterThan(3640)
    expect(days).toBeLessThan(3660)
  })

  it("issues leaves that openssl verifies against the CA: SAN = the host, 1 year, RSA 2048, SHA-256, serverAuth; cached per host", async () => {
    const leaf = await inspectorCa.leafFor("api.openai.test")
    expect(await inspectorCa.leafFor("API.openai.test.")).toBe(leaf)
    const leafFile = path.join(dir, "leaf.pem")
    fs.writeFileSync(leafFile, leaf.certPem)
    const verified = await openssl(["verify", "-x509_strict", "-purpose", "sslserver", "-CAfile", inspectorCaFile, leafFile])
    expect(verified.out.trim()).toBe(`${leafFile}: OK`)
    const text = (await openssl(["x509", "-in", leafFile, "-noout", "-text"])).out
    expect(text).toContain("DNS:api.openai.test")
    expect(text).toContain("Issuer: CN = Gateway Inspector Local CA")
    expect(text).toContain("Public-Key: (2048 bit)")
    expect(text).toContain("Signature Algorithm: sha256WithRSAEncryption")
    expect(text).toContain("TLS Web Server Authentication")
    expect(text).toContain("CA:FALSE")
    const x = new crypto.X509Certificate(leaf.certPem)
    expect(x.checkPrivateKey(crypto.createPrivateKey(leaf.keyPem))).toBe(true)
    expect(x.checkIssued(new crypto.X509Certificate(inspectorCa.certPem))).toBe(true)
    const days = (Date.parse(x.validTo) - Date.parse(x.validFrom)) / DAY_MS
    expect(days).toBeGreaterThan(360)
    expect(days).toBeLessThan(370)
    // Random serials: two leaves never share one.
    const other = new crypto.X509Certificate((await inspectorCa.leafFor("other.test")).certPem)
    expect(other.serialNumber).not.toBe(x.serialNumber)
  })

  it("puts an IP literal in an IP SAN", async () => {
    const leafFile = path.join(dir, "leaf-ip.pem")
    fs.writeFileSync(leafFile, (await inspectorCa.leafFor("127.0.0.1")).certPem)
    expect((await openssl(["verify", "-CAfile", inspectorCaFile, leafFile])).out.trim()).toBe(`${leafFile}: OK`)
    expect((await openssl(["x509", "-in", leafFile, "-noout", "-ext", "subjectAltName"])).out).toContain("IP Address:127.0.0.1")
  })
})

// ------------------------------------------------------------------ (b) plain HTTP

describe("the HTTP proxy, plain HTTP", () => {
  it("forwards absolute-form requests from curl and records them in full, without hop-by-hop headers", async () => {
    const rec = recordingSink()
    let source: CaptureSource = "http-proxy"
    const proxy = await proxyWith({ sink: rec.sink, source: () => source })
    const out = await curl([
      "-x",
      `http://127.0.0.1:${proxy.port}`,
      "-H",
      "content-type: application/json",
      "-H",
      "authorization: Bearer sk-test",
      "-d",
      chatBody(false),
      `http://127.0.0.1:${plainPort}/v1/chat/completions`
    ])
    expect(out.stderr).toBe("")
    expect(out.status).toBe(200)
    expect(JSON.parse(out.body)).toEqual(COMPLETION)
    const e = await rec.settled(1)
    expect(e.error).toBeUndefined()
    expect(e.start).toMatchObject({
      source: "http-proxy",
      method: "POST",
      url: `http://127.0.0.1:${plainPort}/v1/chat/completions`,
      httpVersion: "1.1"
    })
    expect(e.start.headers["authorization"]).toBe("Bearer sk-test")
    expect(e.start.body?.toString()).toBe(chatBody(false))
    expect(e.start.clientPort).toBeGreaterThan(0)
    expect(e.end?.status).toBe(200)
    expect(e.end?.headers["x-upstream"]).toBe("fake")
    expect(JSON.parse(e.end!.body!.toString())).toEqual(COMPLETION)
    expect(e.end?.bodySize).toBe(JSON.stringify(COMPLETION).length)
    expect(e.end?.ttfbMs).toBeGreaterThanOrEqual(0)
    const upstreamSaw = seen.at(-1)!
    expect(upstreamSaw.headers["proxy-connection"]).toBeUndefined()
    expect(upstreamSaw.headers["authorization"]).toBe("Bearer sk-test")
    expect(upstreamSaw.body.toString()).toBe(chatBody(false))

    // The source is read per request: while the system proxy points here, entries say so.
    source = "system-proxy"
    const gz = await curl(["-x", `http://127.0.0.1:${proxy.port}`, `http://127.0.0.1:${plainPort}/gzip`, "-o", "/dev/null"])
    expect(gz.status).toBe(200)
    const g = await rec.settled(2)
    expect(g.start.source).toBe("system-proxy")
    // Bodies are recorded as received: still gzip.
    expect(g.end?.headers["content-encoding"]).toBe("gzip")
    expect(JSON.parse(zlib.gunzipSync(g.end!.body!).toString())).toEqual({ hello: "world" })
  })

  it("answers 400 JSON to requests that are neither absolute-form nor CONNECT, and to requests for itself", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink })
    const direct = await curl([`http://127.0.0.1:${proxy.port}/v1/models`])
    expect(direct.status).toBe(400)
    expect(JSON.parse(direct.body).error.code).toBe("not_a_proxy_request")
    const loop = await curl(["-x", `http://127.0.0.1:${proxy.port}`, `http://127.0.0.1:${proxy.port}/x`])
    expect(loop.status).toBe(400)
    expect(JSON.parse(loop.body).error.code).toBe("proxy_loop")
    expect(rec.entries).toHaveLength(0)
  })
})

// ------------------------------------------------------------------ (c) CONNECT tunnels

describe("CONNECT without interception", () => {
  it("relays the TLS bytes untouched (curl verifies the upstream's own CA) and records one tunnel entry with bytes both ways", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink })
    const out = await curl([
      "-x",
      `http://127.0.0.1:${proxy.port}`,
      "--cacert",
      upstreamCaFile,
      "-d",
      chatBody(false),
      `https://localhost:${tlsPort}/v1/chat/completions`
    ])
    expect(out.stderr).toBe("")
    expect(out.status).toBe(200)
    expect(JSON.parse(out.body)).toEqual(COMPLETION)
    const e = await rec.settled(1)
    expect(e.start).toMatchObject({ source: "http-proxy", method: "CONNECT", url: `https://localhost:${tlsPort}`, tunnelOnly: true })
    expect(e.start.clientPort).toBeGreaterThan(0)
    expect(e.error).toBeUndefined()
    const end = e.end as ConnectionEnd
    expect(end.status).toBe(200)
    expect(end.bodySize).toBeGreaterThan(JSON.stringify(COMPLETION).length)
    expect(end.requestBodySize).toBeGreaterThan(chatBody(false).length)
    expect(end.ttfbMs).toBeGreaterThanOrEqual(0)
    expect(rec.entries).toHaveLength(1)
  })

  it("answers 502 JSON and records a failure when the target is unreachable", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink })
    const closed = net.createServer()
    const deadPort = await listen(closed)
    await closeServer(closed)
    const out = await curl(["-x", `http://127.0.0.1:${proxy.port}`, `https://127.0.0.1:${deadPort}/`])
    expect(out.code).not.toBe(0)
    expect(out.stderr).toMatch(/502/)
    const e = await rec.settled(1)
    expect(e.start.tunnelOnly).toBe(true)
    expect(e.error).toMatch(/unreachable/)
  })
})

// ------------------------------------------------------------------ (d) interception

describe("CONNECT with TLS interception", () => {
  it("decrypts for curl trusting the inspector CA: the upstream's answer comes back and the sink gets the whole exchange (SSE complete)", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink, intercept: () => true })
    const url = `https://localhost:${tlsPort}/v1/chat/completions`
    const whole = await curl([
      "-x",
      `http://127.0.0.1:${proxy.port}`,
      "--cacert",
      inspectorCaFile,
      "-H",
      "content-type: application/json",
      "-d",
      chatBody(false),
      url
    ])
    expect(whole.stderr).toBe("")
    expect(JSON.parse(whole.body)).toEqual(COMPLETION)
    const streamed = await curl([
      "-x",
      `http://127.0.0.1:${proxy.port}`,
      "--cacert",
      inspectorCaFile,
      "-N",
      "-H",
      "content-type: application/json",
      "-d",
      chatBody(true),
      url
    ])
    expect(streamed.stderr).toBe("")
    expect(streamed.body).toContain('"content":"Hel"')
    expect(streamed.body.trim().endsWith("data: [DONE]")).toBe(true)

    const a = await rec.settled(1)
    expect(a.error).toBeUndefined()
    expect(a.start).toMatchObject({ source: "http-proxy", method: "POST", url })
    expect(a.start.tunnelOnly).toBeUndefined()
    expect(a.start.headers["content-type"]).toBe("application/json")
    expect(a.start.body?.toString()).toBe(chatBody(false))
    expect(a.start.clientPort).toBeGreaterThan(0)
    expect(a.end?.status).toBe(200)
    expect(JSON.parse(a.end!.body!.toString())).toEqual(COMPLETION)
    const s = await rec.settled(2)
    expect(s.start.body?.toString()).toBe(chatBody(true))
    expect(s.end?.headers["content-type"]).toBe("text/event-stream")
    expect(s.end!.body!.toString()).toBe(streamed.body)
    expect(rec.entries).toHaveLength(2)
  })

  it("streams an SSE answer chunk by chunk: the client has the first event before the upstream has finished", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink, intercept: () => true })
    const socket = await connectTunnel(proxy.port, `localhost:${tlsPort}`)
    const answer = await httpsOver(socket, "localhost", inspectorCa.certPem, {
      method: "POST",
      path: "/v1/chat/completions",
      body: chatBody(true)
    })
    expect(answer.status).toBe(200)
    expect(answer.body).toContain("[DONE]")
    expect(answer.firstChunkAt).toBeGreaterThan(0)
    expect(sseFinishedAt - answer.firstChunkAt).toBeGreaterThan(SSE_DELAY_MS)
    const e = await rec.settled(1)
    expect(e.end?.body?.toString()).toBe(answer.body)
  })

  it("relays a tunnel whose client does not speak TLS raw, even with interception on", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink, intercept: () => true })
    const socket = await connectTunnel(proxy.port, `127.0.0.1:${plainPort}`)
    const reply = await new Promise<string>((resolve) => {
      let text = ""
      socket.on("data", (c: Buffer) => (text += c.toString()))
      socket.on("end", () => resolve(text))
      socket.write("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    })
    expect(reply).toMatch(/^HTTP\/1\.1 200/)
    const e = await rec.settled(1)
    expect(e.start.tunnelOnly).toBe(true)
    expect((e.end as ConnectionEnd).requestBodySize).toBeGreaterThan(0)
  })
})

describe("WebSockets through an intercepted tunnel", () => {
  it("relays the upgrade and the frames both ways, recorded as one 101 entry with bytes", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink, intercept: () => true })
    const secure = tls.connect({
      socket: await connectTunnel(proxy.port, `localhost:${tlsPort}`),
      servername: "localhost",
      ca: inspectorCa.certPem
    })
    const ws = new WebSocket(`wss://localhost:${tlsPort}/ws`, { createConnection: () => secure })
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject))
    const reply = new Promise<string>((resolve) => ws.once("message", (m) => resolve(m.toString())))
    ws.send("ping")
    expect(await reply).toBe("echo:ping")
    ws.close()
    const e = await rec.settled(1)
    expect(e.start).toMatchObject({ method: "GET", url: `https://localhost:${tlsPort}/ws` })
    expect(e.start.headers["upgrade"]).toBe("websocket")
    const end = e.end as ConnectionEnd
    expect(end.status).toBe(101)
    expect(end.bodySize).toBeGreaterThan(0)
    expect(end.requestBodySize).toBeGreaterThan(0)
  })
})

// ------------------------------------------------------------------ (e) node trusting the CA through NODE_EXTRA_CA_CERTS

describe("a node client trusting the inspector CA through NODE_EXTRA_CA_CERTS", () => {
  it("gets the answer through an intercepted tunnel", async () => {
    const rec = recordingSink()
    const proxy = await proxyWith({ sink: rec.sink, intercept: () => true })
    const script = `
      const http = require("node:http"), https = require("node:https"), tls = require("node:tls")
      const [proxyPort, port, body] = process.argv.slice(1)
      http.request({ host: "127.0.0.1", port: Number(proxyPort), method: "CONNECT", path: "localhost:" + port, agent: false })
        .on("connect", (res, socket) => {
          const req = https.request({ host: "localhost", port: Number(port), method: "POST", path: "/v1/chat/completions",
            headers: { "content-type": "application/json" }, createConnection: () => tls.connect({ socket, servername: "localhost" }) }, (r) => {
            let text = ""
            r.on("data", (c) => (text += c))
            r.on("end", () => { process.stdout.write(r.statusCode + " " + text); process.exit(0) })
          })
          req.on("error", (e) => { process.stderr.write(String(e)); process.exit(1) })
          req.end(body)
        })
        .on("error", (e) => { process.stderr.write(String(e)); process.exit(1) })
        .end()`
    const run = (env: NodeJS.ProcessEnv) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
        execFile(process.execPath, ["-e", script, String(proxy.port), String(tlsPort), chatBody(false)], { env }, (error, stdout, stderr) =>
          resolve({ code: error === null ? 0 : 1, stdout, stderr })
        )
      )
    const trusting = await run({ PATH: process.env["PATH"] ?? "", NODE_EXTRA_CA_CERTS: inspectorCaFile })
    expect(trusting.stderr).toBe("")
    expect(trusting.stdout).toBe(`200 ${JSON.stringify(COMPLETION)}`)
    const e = await rec.settled(1)
    expect(e.start).toMatchObject({ method: "POST", url: `https://localhost:${tlsPort}/v1/chat/completions` })
    // Without the CA the client refuses the leaf, and the refused handshake is recorded.
    const untrusting = await run({ PATH: process.env["PATH"] ?? "" })
    expect(untrusting.code).toBe(1)
    expect(untrusting.stderr).toMatch(/self[- ]signed|unable to (get|verify)/i)
    const refused = await rec.settled(2)
    expect(refused.start.method).toBe("CONNECT")
    expect(refused.error).toMatch(/refused the certificate.*must trust the inspector CA/)
  })
})

// ------------------------------------------------------------------ (f) upstream verification

describe("upstream certificate verification", () => {
  it("refuses an upstream whose CA is not trusted (502 JSON, sink.fail), and passes with verifyUpstream false", async () => {
    const rec = recordingSink()
    const strict = await proxyWith({ sink: rec.sink, intercept: () => true, upstreamCa: [] })
    const refused = await httpsOver(await connectTunnel(strict.port, `localhost:${tlsPort}`), "localhost", inspectorCa.certPem, {
      method: "POST",
      path: "/v1/chat/completions",
      body: chatBody(false)
    })
    expect(refused.status).toBe(502)
    expect(refused.headers["content-type"]).toBe("application/json")
    const error = JSON.parse(refused.body).error
    expect(error.code).toBe("upstream_tls_error")
    expect(error.message).toMatch(/INSPECTOR_UPSTREAM_CA_FILE/)
    const e = await rec.settled(1)
    expect(e.error).toMatch(/certificate of localhost/)
    expect(e.end).toBeUndefined()

    const lax = await proxyWith({ sink: rec.sink, intercept: () => true, upstreamCa: [], verifyUpstream: false })
    const passed = await httpsOver(await connectTunnel(lax.port, `localhost:${tlsPort}`), "localhost", inspectorCa.certPem, {
      method: "POST",
      path: "/v1/chat/completions",
      body: chatBody(false)
    })
    expect(passed.status).toBe(200)
    expect(JSON.parse(passed.body)).toEqual(COMPLETION)
  })
})

// ------------------------------------------------------------------ (g) a busy port

describe("a busy port", () => {
  it("rejects with code EADDRINUSE (proxy and MITM server alike)", async () => {
    const busy = net.createServer()
    const port = await listen(busy)
    try {
      const rec = recordingSink()
      await expect(proxyWith({ sink: rec.sink, port })).rejects.toMatchObject({ code: "EADDRINUSE", port })
      await expect(
        startMitmServer({
          port,
          sink: rec.sink,
          hosts: () => [],
          ca: () => Promise.resolve(inspectorCa),
          verifyUpstream: true,
          idleTimeoutMs: 1000
        })
      ).rejects.toMatchObject({ code: "EADDRINUSE", message: `port ${port} on 127.0.0.1 is already in use` })
      await expect(proxyWith({ sink: rec.sink, host: "0.0.0.0" })).rejects.toMatchObject({ code: "EINVAL" })
    } finally {
      await closeServer(busy)
    }
  })
})

// ------------------------------------------------------------------ (h) the hosts file

describe("the hosts file block", () => {
  const ORIGINAL = "127.0.0.1\tlocalhost\n# a comment\n::1 localhost ip6-localhost\n\n10.0.0.5 nas.lan  # trailing comment\n"

  for (const [name, original] of [
    ["with a final newline", ORIGINAL],
    ["without a final newline", ORIGINAL.trimEnd()],
    ["with CRLF line endings", ORIGINAL.replace(/\n/g, "\r\n")],
    ["empty", ""]
  ] as const) {
    it(`adds and removes hosts inside the block only; removing all gives the file back byte for byte (${name})`, async () => {
      const file = path.join(dir, `hosts-${name.replace(/\W+/g, "-")}`)
      fs.writeFileSync(file, original)
      await setBlockHosts(file, ["api.openai.test", "Api.Anthropic.test."])
      const two = fs.readFileSync(file, "utf8")
      expect(
        two.startsWith(original.endsWith("\n") || original === "" ? original : `${original}\n`) || two.startsWith(`${original}\r\n`)
      ).toBe(true)
      expect(two).toContain(BLOCK_BEGIN)
      expect(two).toContain(BLOCK_END)
      expect(two).toMatch(
        /127\.0\.0\.1 api\.openai\.test\r?\n::1 api\.openai\.test\r?\n127\.0\.0\.1 api\.anthropic\.test\r?\n::1 api\.anthropic\.test/
      )
      expect(two.endsWith("\n")).toBe(original === "" || original.endsWith("\n"))
      expect(await readBlockHosts(file)).toEqual(["api.openai.test", "api.anthropic.test"])

      await setBlockHosts(file, ["api.anthropic.test"])
      expect(await readBlockHosts(file)).toEqual(["api.anthropic.test"])
      expect(fs.readFileSync(file, "utf8")).not.toContain("openai")

      await setBlockHosts(file, [])
      expect(fs.readFileSync(file, "utf8")).toBe(original)
      await setBlockHosts(file, ["x.test"])
      await removeBlock(file)
      expect(fs.readFileSync(file, "utf8")).toBe(original)
    })
  }

  it("keeps the block where it is and the lines after it untouched", async () => {
    const file = path.join(dir, "hosts-middle")
    fs.writeFileSync(file, `a\n${BLOCK_BEGIN}\n127.0.0.1 old.test\n::1 old.test\n${BLOCK_END}\nb\n`)
    await setBlockHosts(file, ["new.test"])
    expect(fs.readFileSync(file, "utf8")).toBe(`a\n${BLOCK_BEGIN}\n127.0.0.1 new.test\n::1 new.test\n${BLOCK_END}\nb\n`)
    await removeBlock(file)
    expect(fs.readFileSync(file, "utf8")).toBe("a\nb\n")
  })

  it("refuses invalid names and IP literals before touching the file, and says when rights are missing", async () => {
    const file = path.join(dir, "hosts-invalid")
    fs.writeFileSync(file, ORIGINAL)
    for (const bad of ["bad host", "10.0.0.1", "::1", "[::1]", "a..b", "-a.test", "x".repeat(254), "évil.test", "a;rm.test"]) {
      await expect(setBlockHosts(file, ["ok.test", bad])).rejects.toMatchObject({ _tag: "HostsFileError", reason: "invalid-host" })
    }
    await expect(setBlockHosts(file, ["10.0.0.1"])).rejects.toThrow(/IP address/)
    expect(fs.readFileSync(file, "utf8")).toBe(ORIGINAL)

    // Concurrent edits land one after the other.
    await Promise.all([setBlockHosts(file, ["one.test"]), setBlockHosts(file, ["one.test", "two.test"])])
    expect(await readBlockHosts(file)).toEqual(["one.test", "two.test"])
    await removeBlock(file)
    expect(fs.readFileSync(file, "utf8")).toBe(ORIGINAL)
  })

  it("says that elevated rights are needed when the file may not be written (EACCES), and leaves it as it was", async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), "gw-hosts-perm-"))
    try {
      fs.chmodSync(base, 0o755)
      const file = path.join(base, "hosts")
      fs.writeFileSync(file, ORIGINAL)
      fs.chmodSync(file, 0o644)
      let outcome: { tag?: string; reason?: string; message?: string }
      if (process.getuid?.() === 0) {
        // Root may write anything: the edit runs in a child process as nobody (uid 65534), from a bundle of the module.
        const { buildSync } = await import("esbuild")
        const bundle = path.join(base, "hostsFile.mjs")
        buildSync({
          entryPoints: [fileURLToPath(new URL("../src/services/inspector/capture/hostsFile.ts", import.meta.url))],
          bundle: true,
          platform: "node",
          format: "esm",
          outfile: bundle,
          logLevel: "silent"
        })
        fs.chmodSync(bundle, 0o644)
        const script = `import(${JSON.stringify(bundle)}).then((m) => m.setBlockHosts(${JSON.stringify(file)}, ["a.test"])).then(() => console.log("{}"), (e) => console.log(JSON.stringify({ tag: e._tag, reason: e.reason, message: e.message })))`
        // This Node may live where nobody cannot reach it (a private temp dir): use the first binary nobody can run.
        const asNobody = (node: string, args: Array<string>) =>
          new Promise<{ stdout: string; stderr: string; error: string | undefined }>((resolve) =>
            execFile(node, args, { uid: 65534, gid: 65534, cwd: base }, (error, stdout, stderr) =>
              resolve({ stdout, stderr, error: error?.message })
            )
          )
        const candidates = [process.execPath, "/usr/bin/node", "/usr/local/bin/node"]
        let node: string | undefined
        for (const candidate of candidates) {
          if ((await asNobody(candidate, ["-e", "console.log(1)"])).stdout.trim() === "1") {
            node = candidate
            break
          }
        }
        if (node === undefined) throw new Error(`no Node binary that uid 65534 may run among ${candidates.join(", ")}`)
        const run = await asNobody(node, ["--input-type=module", "-e", script])
        if (run.stdout.trim() === "") throw new Error(`the child printed nothing: ${run.error ?? ""} ${run.stderr}`)
        outcome = JSON.parse(run.stdout)
      } else {
        fs.chmodSync(file, 0o444)
        fs.chmodSync(base, 0o555)
        const error = (await setBlockHosts(file, ["a.test"]).catch((e: unknown) => e)) as HostsFileError
        expect(error).toBeInstanceOf(HostsFileError)
        outcome = { tag: error._tag, reason: error.reason, message: error.message }
        fs.chmodSync(base, 0o755)
      }
      expect(outcome).toMatchObject({ tag: "HostsFileError", reason: "permission" })
      expect(outcome.message).toMatch(/EACCES.*elevated rights/)
      expect(fs.readFileSync(file, "utf8")).toBe(ORIGINAL)
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  })
})

// ------------------------------------------------------------------ (i) the custom-host MITM server

describe("the custom-host MITM server", () => {
  it("answers an enabled custom host with a leaf from the CA, forwards to the real host and records source custom-host; refuses unknown names", async () => {
    const rec = recordingSink()
    const resolved: Array<string> = []
    const mitm = await startMitmServer({
      port: 0,
      sink: rec.sink,
      hosts: () => [
        { host: "api.openai.test", enabled: true, kind: "llm" },
        { host: "disabled.test", enabled: false }
      ],
      ca: () => Promise.resolve(inspectorCa),
      upstreamCa: [upstreamCa.certPem],
      verifyUpstream: true,
      idleTimeoutMs: 30_000,
      resolve: async (host) => {
        resolved.push(host)
        return { address: "127.0.0.1", port: tlsPort }
      }
    })
    try {
      const url = `https://api.openai.test:${mitm.port}/v1/chat/completions`
      const resolve = ["--resolve", `api.openai.test:${mitm.port}:127.0.0.1`]
      const out = await curl([...resolve, "--cacert", inspectorCaFile, "-H", "content-type: application/json", "-d", chatBody(false), url])
      expect(out.stderr).toBe("")
      expect(JSON.parse(out.body)).toEqual(COMPLETION)
      const streamed = await curl([
        ...resolve,
        "--cacert",
        inspectorCaFile,
        "-N",
        "-H",
        "content-type: application/json",
        "-d",
        chatBody(true),
        url
      ])
      expect(streamed.body.trim().endsWith("data: [DONE]")).toBe(true)
      expect(resolved).toEqual(["api.openai.test", "api.openai.test"])
      // The upstream was reached by its real name (its certificate for api.openai.test was checked).
      expect(seen.at(-1)!.headers.host).toBe(`api.openai.test:${mitm.port}`)

      const e = await rec.settled(1)
      expect(e.start).toMatchObject({ source: "custom-host", kind: "llm", method: "POST", url })
      expect(e.start.body?.toString()).toBe(chatBody(false))
      expect(e.end?.status).toBe(200)
      expect(JSON.parse(e.end!.body!.toString())).toEqual(COMPLETION)
      expect((await rec.settled(2)).end?.body?.toString()).toBe(streamed.body)

      for (const name of ["unknown.test", "disabled.test"]) {
        const refused = await curl([
          "--resolve",
          `${name}:${mitm.port}:127.0.0.1`,
          "--cacert",
          inspectorCaFile,
          `https://${name}:${mitm.port}/`
        ])
        expect(refused.code).toBe(35) // curl: SSL connect error
      }
      expect(rec.entries).toHaveLength(2)
    } finally {
      await mitm.close()
    }
  })
})

// ------------------------------------------------------------------ (j) body limits

describe("body limits", () => {
  it("keeps no body when wantsBodies() is false, and still records the sizes", async () => {
    const rec = recordingSink({ wantsBodies: false })
    const proxy = await proxyWith({ sink: rec.sink })
    // Not an LLM API path, not a provider's host: relayed without a copy.
    const out = await curl(["-x", `http://127.0.0.1:${proxy.port}`, "-d", chatBody(false), `http://127.0.0.1:${plainPort}/echo`])
    expect(out.code).toBe(0)
    const e = await rec.settled(1)
    expect(e.start.body).toBeUndefined()
    expect(e.start.bodySize).toBe(chatBody(false).length)
    expect(e.end?.body).toBeUndefined()
    expect(e.end?.bodySize).toBe(Buffer.byteLength(out.body))
    // What may be an LLM call (its path) is copied all the same: its model, tokens and cost are read from it.
    const llm = await curl([
      "-x",
      `http://127.0.0.1:${proxy.port}`,
      "-d",
      chatBody(false),
      `http://127.0.0.1:${plainPort}/v1/chat/completions`
    ])
    expect(JSON.parse(llm.body)).toEqual(COMPLETION)
    const l = await rec.settled(2)
    expect(l.start.body?.toString()).toBe(chatBody(false))
    expect(l.end?.body?.toString()).toBe(llm.body)
  })

  it("passes bodies over maxBodyBytes through whole and records them cut to maxBodyBytes + 1 bytes", async () => {
    const rec = recordingSink({ maxBodyBytes: 1000 })
    const proxy = await proxyWith({ sink: rec.sink, intercept: () => true })
    const big = await curl(["-x", `http://127.0.0.1:${proxy.port}`, `http://127.0.0.1:${plainPort}/big?size=300000`])
    expect(big.body.length).toBe(300_000)
    const e = await rec.settled(1)
    expect(e.end?.body?.length).toBe(1001)
    expect(e.end?.bodySize).toBe(300_000)

    // A big request body, through an intercepted tunnel: the upstream gets every byte.
    const upload = crypto.randomBytes(200_000).toString("base64")
    const up = await httpsOver(await connectTunnel(proxy.port, `localhost:${tlsPort}`), "localhost", inspectorCa.certPem, {
      method: "POST",
      path: "/echo",
      body: upload
    })
    expect(JSON.parse(up.body)).toEqual({ received: upload.length, sha256: crypto.createHash("sha256").update(upload).digest("hex") })
    const u = await rec.settled(2)
    expect(u.start.body?.length).toBe(1001)
    expect(u.start.bodySize).toBe(upload.length)
    expect(u.start.body?.toString()).toBe(upload.slice(0, 1001))
  })
})

// ------------------------------------------------------------------ (k) closing

describe("closing the proxy", () => {
  it("closes every socket (open keep-alive tunnels included) promptly, and refuses new connections afterwards", async () => {
    const rec = recordingSink()
    let intercept = false
    const proxy = await startHttpProxy({
      port: 0,
      sink: rec.sink,
      source: () => "http-proxy",
      intercept: () => intercept,
      ca: () => Promise.resolve(inspectorCa),
      upstreamCa: [upstreamCa.certPem],
      verifyUpstream: true,
      idleTimeoutMs: 60_000
    })
    // A raw tunnel with a keep-alive connection to the upstream inside, left open.
    const raw = await connectTunnel(proxy.port, `127.0.0.1:${plainPort}`)
    await new Promise<void>((resolve) => {
      raw.once("data", () => resolve())
      raw.write("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    })
    // An intercepted tunnel that served two requests on one TLS connection, left open.
    intercept = true
    const secure = tls.connect({
      socket: await connectTunnel(proxy.port, `localhost:${tlsPort}`),
      servername: "localhost",
      ca: inspectorCa.certPem
    })
    let text = ""
    secure.on("data", (c: Buffer) => (text += c.toString()))
    secure.write("GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await until("first answer", () => /"received":0/.test(text))
    secure.write("GET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await until("second answer", () => (text.match(/HTTP\/1\.1 200/g) ?? []).length === 2)
    expect(rec.entries.filter((e) => !e.start.tunnelOnly)).toHaveLength(2)

    const closedRaw = new Promise((r) => raw.once("close", r))
    const closedSecure = new Promise((r) => secure.once("close", r))
    const startedAt = Date.now()
    await proxy.close()
    expect(Date.now() - startedAt).toBeLessThan(1500)
    await Promise.all([closedRaw, closedSecure])
    const refused = await new Promise<string>((resolve) => {
      const s = net.connect({ host: "127.0.0.1", port: proxy.port })
      s.on("connect", () => resolve("connected"))
      s.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"))
    })
    expect(refused).toBe("ECONNREFUSED")
    // The raw tunnel's entry ended when its sockets were closed.
    await until("tunnel entry settled", () => rec.entries.find((e) => e.start.tunnelOnly)?.end !== undefined)
  })
})
