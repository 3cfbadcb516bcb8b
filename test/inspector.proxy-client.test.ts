import { execFile } from "node:child_process"
import * as crypto from "node:crypto"
import dns from "node:dns"
import * as fs from "node:fs"
import type * as http from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import * as path from "node:path"
import type * as tls from "node:tls"
import { pathToFileURL } from "node:url"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * docs/inspector.md's "In five minutes", end to end as a new user runs it: the HTTP proxy mode and
 * TLS interception turned on through the management API, the CA fetched from `ca.pem`, and the
 * official OpenAI SDK (`openai` from node_modules, unmodified) in a Node 22 child process configured
 * for the proxy only by `HTTPS_PROXY`, `NODE_USE_ENV_PROXY=1` and `NODE_EXTRA_CA_CERTS`. Its calls
 * (one whole answer, one stream) must come out of `requests?profile=llm` decrypted: model, tokens
 * and a cost estimate with nobody looking; the merged answer and the bodies too while a feed client
 * (the Inspector page, `gateway inspect`) is connected; the key masked.
 *
 * Nothing leaves the machine. The upstream is a fake OpenAI over TLS on 127.0.0.1 with a
 * certificate from a test CA (not the inspector's), trusted by the gateway through
 * INSPECTOR_UPSTREAM_CA_FILE. The SDK calls `api.openai.com` (a cost estimate needs a provider,
 * and the inspector knows one from the host only): in this process, where the gateway and its
 * proxy run, that one name resolves to 127.0.0.1; the child resolves no name at all (it may only
 * reach the proxy, by address). A third call goes to `https://localhost:<port>`.
 *
 * `NODE_USE_ENV_PROXY` needs Node 22 or newer (Node 20's fetch ignores proxy variables): the child
 * runs with this Node when it is one, else with the binary GATEWAY_NODE22 names. vitest.config.ts
 * leaves this file out of `npm test` on an older Node without that variable; CI runs it in its
 * Node 22 pass.
 */
const node = Number(process.versions.node.split(".")[0]) >= 22 ? process.execPath : process.env.GATEWAY_NODE22
const openaiEntry = path.resolve("node_modules/openai/index.mjs")

const ADMIN = "gwk_inspector_proxy_admin_0123456789"
/** What the SDK sends as its key: the upstream must get it whole, the inspector must never show it. */
const CLIENT_KEY = "sk-test-inspector-proxy-0123456789abcd"
const MODEL = "gpt-4o-mini"
const ANSWERED_BY = "gpt-4o-mini-2024-07-18"
/** USD per 1M tokens of gpt-4o-mini at OpenAI (src/domain/catalog/catalog.ts). */
const PRICE = { input: 0.15, output: 0.6 }
const STREAM_PARTS = ["Hello", " from", " the", " stream"]

// ------------------------------------------------------------------ a test CA and the fake OpenAI upstream

const openssl = (args: ReadonlyArray<string>, cwd: string): Promise<void> =>
  new Promise((resolve, reject) =>
    execFile("openssl", [...args], { cwd }, (error, _stdout, stderr) =>
      error ? reject(new Error(`openssl ${args[0]} failed: ${stderr}`)) : resolve()
    )
  )

/** A CA and a leaf signed by it for localhost (DNS and IP) and api.openai.com, with openssl: nothing of the gateway's own CA code. */
const makeUpstreamCerts = async (dir: string) => {
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
  await openssl(
    [
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-days",
      "2",
      "-subj",
      "/CN=Inspector proxy-client test upstream CA",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign"
    ],
    dir
  )
  await openssl(["req", ...ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=localhost"], dir)
  fs.writeFileSync(
    path.join(dir, "leaf.ext"),
    "subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:api.openai.com\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
  )
  await openssl(
    [
      "x509",
      "-req",
      "-in",
      "leaf.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "leaf.pem",
      "-days",
      "2",
      "-extfile",
      "leaf.ext"
    ],
    dir
  )
  return {
    caFile: path.join(dir, "ca.pem"),
    key: fs.readFileSync(path.join(dir, "leaf.key")),
    cert: fs.readFileSync(path.join(dir, "leaf.pem"))
  }
}

interface Seen {
  readonly servername: string | false | null
  readonly host: string | undefined
  readonly authorization: string | undefined
  readonly userAgent: string | undefined
  readonly body: { readonly stream?: boolean; readonly messages?: ReadonlyArray<{ readonly content: string }> }
}

/** Prompt and completion tokens the upstream reports, per call (the first user message says which call it is). */
const USAGE: Record<string, { readonly prompt: number; readonly completion: number }> = {
  plain: { prompt: 21, completion: 7 },
  stream: { prompt: 23, completion: 4 },
  local: { prompt: 19, completion: 3 }
}

const usageOf = (u: { readonly prompt: number; readonly completion: number }) => ({
  prompt_tokens: u.prompt,
  completion_tokens: u.completion,
  total_tokens: u.prompt + u.completion,
  prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 }
})

const openaiError = (res: http.ServerResponse, status: number, message: string, code: string) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code } }))
}

/** Chat completions in OpenAI's wire format: a whole answer, or SSE chunks of deltas (a usage chunk when `stream_options.include_usage`).
 * */
const startUpstream = async (key: Buffer, cert: Buffer, seen: Array<Seen>) => {
  const server = https.createServer({ key, cert }, (req, res) => {
    const parts: Array<Buffer> = []
    req.on("data", (c: Buffer) => parts.push(c))
    req.on("end", () => {
      let body: Record<string, any> = {}
      try {
        body = JSON.parse(Buffer.concat(parts).toString("utf8"))
      } catch {
        return openaiError(res, 400, "We could not parse the JSON body of your request.", "invalid_json")
      }
      seen.push({
        servername: (req.socket as tls.TLSSocket).servername,
        host: req.headers.host,
        authorization: req.headers.authorization,
        userAgent: req.headers["user-agent"],
        body
      })
      if (req.method !== "POST" || req.url !== "/v1/chat/completions")
        return openaiError(res, 404, `Unknown request URL: ${req.method} ${req.url}`, "unknown_url")
      if (req.headers.authorization !== `Bearer ${CLIENT_KEY}`)
        return openaiError(res, 401, "Incorrect API key provided.", "invalid_api_key")
      const which = String(body.messages?.at(-1)?.content ?? "").split(":")[0]!
      const usage = USAGE[which] ?? { prompt: 1, completion: 1 }
      const id = `chatcmpl-${which}${crypto.randomBytes(6).toString("hex")}`
      const created = Math.floor(Date.now() / 1000)
      const common = {
        "x-request-id": `req_${crypto.randomBytes(8).toString("hex")}`,
        "openai-processing-ms": "42",
        "openai-version": "2020-10-01"
      }
      if (body.stream === true) {
        res.writeHead(200, { ...common, "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" })
        const chunk = (choices: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) =>
          res.write(
            `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: ANSWERED_BY, service_tier: "default", system_fingerprint: "fp_0123456789", choices, ...extra })}\n\n`
          )
        const withUsage = body.stream_options?.include_usage === true
        const nullUsage = withUsage ? { usage: null } : {}
        chunk([{ index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }], nullUsage)
        for (const part of STREAM_PARTS) chunk([{ index: 0, delta: { content: part }, logprobs: null, finish_reason: null }], nullUsage)
        chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }], nullUsage)
        if (withUsage) chunk([], { usage: usageOf(usage) })
        return void res.end("data: [DONE]\n\n")
      }
      res.writeHead(200, { ...common, "content-type": "application/json" })
      res.end(
        JSON.stringify({
          id,
          object: "chat.completion",
          created,
          model: ANSWERED_BY,
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: `Hello from the ${which} answer`, refusal: null, annotations: [] },
              logprobs: null,
              finish_reason: "stop"
            }
          ],
          usage: usageOf(usage),
          service_tier: "default",
          system_fingerprint: "fp_0123456789"
        })
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, port: (server.address() as net.AddressInfo).port }
}

// ------------------------------------------------------------------ the client: the OpenAI SDK in a Node 22 child

/**
 * The user's script. Its one addition to what a user writes is a guard: it refuses every name
 * lookup, so a request that did not go through HTTPS_PROXY (the proxy is reached by address, the
 * target's name is resolved by the proxy) fails here instead of leaving the machine.
 */
const CLIENT_SCRIPT = `
import dns from "node:dns"
const [openaiEntry, openaiBase, localBase, apiKey] = process.argv.slice(2)
const lookups = []
dns.lookup = (hostname, options, callback) => {
  lookups.push(hostname)
  const done = typeof options === "function" ? options : callback
  process.nextTick(done, Object.assign(new Error("refused to resolve " + hostname + ": this request did not go through HTTPS_PROXY"), { code: "ENOTFOUND" }))
}
const out = { node: process.version, lookups }
try {
  const { default: OpenAI } = await import(openaiEntry)
  const client = new OpenAI({ baseURL: openaiBase, apiKey, maxRetries: 0, timeout: 20000 })
  const messages = (what) => [{ role: "system", content: "You are terse." }, { role: "user", content: what + ": say hello" }]
  const plain = await client.chat.completions.create({ model: "${MODEL}", messages: messages("plain") })
  out.plain = { id: plain.id, model: plain.model, content: plain.choices[0].message.content, usage: plain.usage }
  const stream = await client.chat.completions.create({ model: "${MODEL}", messages: messages("stream"), stream: true, stream_options: { include_usage: true } })
  const streamed = { chunks: 0, content: "", finishReason: null, usage: null, model: null }
  for await (const chunk of stream) {
    streamed.chunks++
    streamed.model = chunk.model
    streamed.content += chunk.choices[0]?.delta?.content ?? ""
    streamed.finishReason = chunk.choices[0]?.finish_reason ?? streamed.finishReason
    if (chunk.usage) streamed.usage = chunk.usage
  }
  out.streamed = streamed
  const local = new OpenAI({ baseURL: localBase, apiKey, maxRetries: 0, timeout: 20000 })
  const l = await local.chat.completions.create({ model: "${MODEL}", messages: messages("local") })
  out.local = { content: l.choices[0].message.content, usage: l.usage }
} catch (e) {
  out.error = String(e?.stack ?? e) + (e?.cause ? " / cause: " + String(e.cause?.stack ?? e.cause) : "")
}
process.stdout.write(JSON.stringify(out))
`

interface ClientRun {
  readonly code: number
  readonly stderr: string
  readonly out: {
    readonly node: string
    readonly lookups: ReadonlyArray<string>
    readonly error?: string
    readonly plain?: { id: string; model: string; content: string; usage: Record<string, number> }
    readonly streamed?: {
      chunks: number
      content: string
      finishReason: string | null
      usage: Record<string, number> | null
      model: string
    }
    readonly local?: { content: string; usage: Record<string, number> }
  }
  readonly raw: string
}

/** The Node 22 binary, or the failure that says how to get one (never a skip). */
const node22 = (): string => {
  if (node) return node
  throw new Error(
    "the OpenAI SDK goes through HTTPS_PROXY only on Node 22 or newer (NODE_USE_ENV_PROXY): run this file under Node 22, or set GATEWAY_NODE22 to a Node 22 binary"
  )
}

const runClient = (binary: string, dir: string, env: Record<string, string>, args: ReadonlyArray<string>): Promise<ClientRun> =>
  new Promise((resolve) => {
    const script = path.join(dir, "client.mjs")
    fs.writeFileSync(script, CLIENT_SCRIPT)
    execFile(binary, [script, ...args], { env, cwd: dir, timeout: 60_000, maxBuffer: 4 * 1024 * 1024 }, (error, stdout, stderr) => {
      let out: ClientRun["out"]
      try {
        out = JSON.parse(stdout)
      } catch {
        out = { node: "?", lookups: [], error: `no JSON from the client (exit ${error?.code ?? 0}): ${stdout}` }
      }
      resolve({ code: error ? Number(error.code ?? 1) : 0, stderr, out, raw: stdout })
    })
  })

// ------------------------------------------------------------------ fixtures

/** In this process only (the gateway's proxy): api.openai.com is the fake upstream on 127.0.0.1. Restored after the file. */
const realLookup = dns.lookup
const pinOpenAiToLoopback = () => {
  const pinned = (hostname: string, options: unknown, callback?: unknown): void => {
    const done = (typeof options === "function" ? options : callback) as (...a: Array<unknown>) => void
    if (hostname.toLowerCase() !== "api.openai.com") return (realLookup as (...a: Array<unknown>) => void)(hostname, options, callback)
    const all = typeof options === "object" && options !== null && (options as { all?: boolean }).all === true
    process.nextTick(() => (all ? done(null, [{ address: "127.0.0.1", family: 4 }]) : done(null, "127.0.0.1", 4)))
  }
  ;(dns as { lookup: unknown }).lookup = pinned
}

let dir: string
let gw: TestGateway
let upstream: { server: https.Server; port: number }
let upstreamCaFile: string
const seen: Array<Seen> = []
const admin = { authorization: `Bearer ${ADMIN}` }
const base = () => `${gw.url}/api/tools/traffic-inspector`

beforeAll(async () => {
  dir = tempDir("gw-inspector-proxy-client-")
  const certs = await makeUpstreamCerts(dir)
  upstreamCaFile = certs.caFile
  upstream = await startUpstream(certs.key, certs.cert, seen)
  pinOpenAiToLoopback()
  const hostsFile = path.join(dir, "hosts")
  fs.writeFileSync(hostsFile, "127.0.0.1 localhost\n")
  gw = await startGateway({
    env: {
      INSPECTOR_UPSTREAM_CA_FILE: upstreamCaFile,
      // A free port, told by the start answer (the docs' 8080 may be taken).
      INSPECTOR_HTTP_PROXY_PORT: "0",
      GATEWAY_HOSTS_FILE: hostsFile,
      INSPECTOR_SYSTEM_PROXY_HOME: dir
    }
  })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
}, 60_000)

afterAll(async () => {
  ;(dns as { lookup: unknown }).lookup = realLookup
  await gw?.close()
  await new Promise<void>((resolve) => {
    if (!upstream) return resolve()
    upstream.server.closeAllConnections()
    upstream.server.close(() => resolve())
  })
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

// ------------------------------------------------------------------ the test

type Entry = Record<string, any>

describe("the OpenAI SDK through the inspector's HTTP proxy with TLS interception (docs/inspector.md, in five minutes)", () => {
  it("an unmodified SDK on Node 22, set up by environment variables only, has its calls decrypted and listed with model, tokens, merged answer and cost", async () => {
    const binary = node22()
    // 1. The proxy and interception on, as the docs' curl commands do (with an admin key), and the CA fetched.
    const started = await call(`${base()}/capture-modes/http-proxy`, { body: { action: "start" }, headers: admin })
    expect(started.status, started.text).toBe(200)
    expect(started.body.httpProxy).toMatchObject({ running: true, host: "127.0.0.1", error: null })
    const proxyUrl = started.body.httpProxy.url as string
    expect(proxyUrl).toBe(`http://127.0.0.1:${started.body.httpProxy.port}`)
    expect(started.body.httpProxy.port).toBeGreaterThan(0)

    const intercepting = await call(`${base()}/capture-modes/tls-intercept`, { body: { enabled: true }, headers: admin })
    expect(intercepting.status, intercepting.text).toBe(200)
    expect(intercepting.body.tlsIntercept).toEqual({ enabled: true })

    const pem = await fetch(`${base()}/ca.pem`)
    expect(pem.status).toBe(200)
    const caFile = path.join(dir, "gateway-ca.pem")
    fs.writeFileSync(caFile, Buffer.from(await pem.arrayBuffer()))
    // The fingerprint capture-modes shows is the file's (the docs' check before trusting it).
    const modes = await call(`${base()}/capture-modes`, { headers: admin })
    expect(new crypto.X509Certificate(fs.readFileSync(caFile)).fingerprint256).toBe(modes.body.ca.fingerprint256)

    // 2. The client: only the three variables of the docs, plus PATH and HOME.
    const home = path.join(dir, "home")
    fs.mkdirSync(home)
    const env = {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: home,
      HTTPS_PROXY: proxyUrl,
      NODE_USE_ENV_PROXY: "1",
      NODE_EXTRA_CA_CERTS: caFile
    }
    const run = await runClient(binary, dir, env, [
      pathToFileURL(openaiEntry).href,
      `https://api.openai.com:${upstream.port}/v1`,
      `https://localhost:${upstream.port}/v1`,
      CLIENT_KEY
    ])
    const report = `${run.raw}\n${run.stderr}`
    expect(run.out.node, report).toMatch(/^v(2[2-9]|[3-9]\d)\./)
    expect(
      run.out.lookups,
      `the client resolved names itself: this Node did not send its requests through HTTPS_PROXY (NODE_USE_ENV_PROXY)\n${report}`
    ).toEqual([])
    expect(run.out.error, report).toBeUndefined()
    expect(run.code, report).toBe(0)

    // What the SDK got is what the upstream sent, through the proxy.
    expect(run.out.plain).toMatchObject({
      model: ANSWERED_BY,
      content: "Hello from the plain answer",
      usage: { prompt_tokens: 21, completion_tokens: 7, total_tokens: 28 }
    })
    expect(run.out.streamed).toMatchObject({
      model: ANSWERED_BY,
      content: STREAM_PARTS.join(""),
      finishReason: "stop",
      chunks: STREAM_PARTS.length + 3,
      usage: { prompt_tokens: 23, completion_tokens: 4, total_tokens: 27 }
    })
    expect(run.out.local).toMatchObject({ content: "Hello from the local answer", usage: { prompt_tokens: 19, completion_tokens: 3 } })

    // The upstream saw each call once, re-encrypted by the proxy for the name the client asked for, the key whole.
    expect(
      seen.map((s) => ({ servername: s.servername, host: s.host, authorization: s.authorization, stream: s.body.stream === true })),
      JSON.stringify(seen)
    ).toEqual([
      { servername: "api.openai.com", host: `api.openai.com:${upstream.port}`, authorization: `Bearer ${CLIENT_KEY}`, stream: false },
      { servername: "api.openai.com", host: `api.openai.com:${upstream.port}`, authorization: `Bearer ${CLIENT_KEY}`, stream: true },
      { servername: "localhost", host: `localhost:${upstream.port}`, authorization: `Bearer ${CLIENT_KEY}`, stream: false }
    ])
    expect(seen[0]!.userAgent).toMatch(/^OpenAI\/JS /)

    // 3. The inspector: the three calls decrypted, as LLM calls of the proxy source, nothing else from the proxy.
    const list = async (query: string) =>
      (await call(`${base()}/requests${query}`, { headers: admin })).body as { requests: Array<Entry>; total: number }
    const everything = await until("three entries of the proxy, ended", async () => {
      const l = (await list("?source=http-proxy")).requests
      return l.length >= 3 && l.every((r) => r.status !== "in-flight") && l
    })
    expect(
      everything.map((e) => ({ status: e.status, kind: e.detectedKind, tunnelOnly: e.tunnelOnly, error: e.error })),
      JSON.stringify(everything)
    ).toEqual(Array.from({ length: 3 }, () => ({ status: 200, kind: "llm", tunnelOnly: false, error: null })))

    const llm = (await list("?profile=llm")).requests
    expect(llm.map((e) => e.id)).toEqual(everything.map((e) => e.id))
    const [plain, streamed, local] = llm as [Entry, Entry, Entry]
    // Nobody looks: the bodies were read for the model, tokens and cost, and not kept.
    const common = {
      source: "http-proxy",
      status: 200,
      detectedKind: "llm",
      method: "POST",
      tls: true,
      tunnelOnly: false,
      agent: "openai-sdk",
      hasBodies: false
    }
    expect(plain).toMatchObject({
      ...common,
      host: "api.openai.com",
      port: upstream.port,
      path: "/v1/chat/completions",
      url: `https://api.openai.com:${upstream.port}/v1/chat/completions`
    })
    expect(streamed).toMatchObject({ ...common, host: "api.openai.com", port: upstream.port, path: "/v1/chat/completions" })
    expect(local).toMatchObject({ ...common, host: "localhost", port: upstream.port, path: "/v1/chat/completions" })

    const cost = (tokensIn: number, tokensOut: number) => (tokensIn * PRICE.input + tokensOut * PRICE.output) / 1e6
    const llmOf = (tokensIn: number, tokensOut: number, streamedFlag: boolean) => ({
      provider: "openai",
      apiKind: "chat.completions",
      model: MODEL,
      mappedTo: ANSWERED_BY,
      // The user's message: the system prompt is not one of them (it is the conversation's first turn).
      messages: 1,
      tokensIn,
      tokensOut,
      streamed: streamedFlag
    })
    expect(plain.llm).toMatchObject(llmOf(21, 7, false))
    expect(plain.llm.costEstimateUsd).toBeGreaterThan(0)
    expect(plain.llm.costEstimateUsd).toBeCloseTo(cost(21, 7), 12)
    expect(streamed.llm).toMatchObject(llmOf(23, 4, true))
    expect(streamed.llm.costEstimateUsd).toBeGreaterThan(0)
    expect(streamed.llm.costEstimateUsd).toBeCloseTo(cost(23, 4), 12)
    // localhost is no known provider's host: the call is read all the same, but has no price to estimate with.
    expect(local.llm).toMatchObject({ ...llmOf(19, 3, false), provider: null, costEstimateUsd: null })

    const detail = async (id: string) => (await call(`${base()}/requests/${id}`, { headers: admin })).body as Entry
    expect(await detail(streamed.id)).toMatchObject({ requestBody: null, responseBody: null, conversation: null })

    // 4. Someone looks (a feed client, as the Inspector page and `gateway inspect` are): the same calls again keep their bodies.
    const feed = new WebSocket(`${gw.url.replace(/^http/, "ws")}/api/tools/traffic-inspector/ws`, { headers: admin })
    const frames: Array<Entry> = []
    feed.on("message", (data) => frames.push(JSON.parse(String(data))))
    try {
      await until("the feed's snapshot", async () => frames.length > 0 || undefined)
      const again = await runClient(binary, dir, env, [
        pathToFileURL(openaiEntry).href,
        `https://api.openai.com:${upstream.port}/v1`,
        `https://localhost:${upstream.port}/v1`,
        CLIENT_KEY
      ])
      expect(again.code, `${again.raw}\n${again.stderr}`).toBe(0)
      const before = new Set(everything.map((e) => e.id))
      const watched = await until("three more entries of the proxy, ended", async () => {
        const l = (await list("?profile=llm")).requests.filter((e) => !before.has(e.id))
        return l.length >= 3 && l.every((r) => r.status !== "in-flight") && l
      })
      expect(frames.some((f) => f.type === "new")).toBe(true)
      const [plain2, streamed2] = watched as [Entry, Entry, Entry]
      for (const e of watched) expect(e).toMatchObject({ ...common, hasBodies: true })
      expect(streamed2.llm).toMatchObject(llmOf(23, 4, true))

      // The detail of the stream: the answer merged from its chunks, the request's turns, the key masked everywhere.
      const d = await detail(streamed2.id)
      expect(d.conversation.request).toEqual([
        { role: "system", blocks: [{ type: "text", text: "You are terse." }] },
        { role: "user", blocks: [{ type: "text", text: "stream: say hello" }] }
      ])
      expect(d.conversation.response).toEqual([{ role: "assistant", blocks: [{ type: "text", text: STREAM_PARTS.join("") }] }])
      expect(d.contextKey).toMatch(/^[0-9a-f]{12}$/)
      expect(JSON.parse(d.requestBody.text)).toMatchObject({ model: MODEL, stream: true, stream_options: { include_usage: true } })
      expect(d.responseHeaders["content-type"]).toBe("text/event-stream; charset=utf-8")
      expect(d.responseBody.text).toContain('"object":"chat.completion.chunk"')
      expect(d.responseBody.text.trimEnd().endsWith("data: [DONE]")).toBe(true)

      const masked = `Bearer ${CLIENT_KEY.slice(0, 8)}…${CLIENT_KEY.slice(-4)}`
      for (const entry of [plain, streamed, local, ...watched]) {
        const whole = entry.id === streamed2.id ? d : await detail(entry.id)
        expect(whole.requestHeaders.authorization).toBe(masked)
        expect(JSON.stringify(whole)).not.toContain(CLIENT_KEY)
      }
      const p = await detail(plain2.id)
      expect(p.conversation.response).toEqual([{ role: "assistant", blocks: [{ type: "text", text: "Hello from the plain answer" }] }])
      expect(p.contextKey).toBe(d.contextKey)
    } finally {
      feed.close()
    }
  })
})
