import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ADMIN_KEY, type ServerProcess, setupWithProvider, startServerProcess } from "./support/cli.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { call, tempDir } from "./support/gateway.js"
import { httpProxy, type TestProxy } from "./support/proxies.js"
import { until } from "./support/until.js"

/**
 * The `https` proxy type (docs/egress.md, "HTTPS proxies"): the gateway speaks TLS to the proxy,
 * then CONNECT. A real TLS proxy on 127.0.0.1 (node's https.Server under the `proxy` package)
 * with the test certificate of test/fixtures/tls, which the gateway trusts the way a user makes
 * it trust a private CA: NODE_EXTRA_CA_CERTS, so the gateway runs as its own process (bin/gateway).
 */
const TLS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "fixtures/tls")
const CERT = path.join(TLS_DIR, "loopback.crt")
const admin = { authorization: `Bearer ${ADMIN_KEY}` }

const fake = fakeOpenAIForFile()
let proxy: TestProxy
let trusting: ServerProcess
let dataDir: string

/** Points the setup's connection at a new https registry proxy on the TLS proxy. */
const viaTlsProxy = async (url: string) => {
  const created = await call(`${url}/api/v1/management/proxies`, {
    body: { name: "tls-proxy", type: "https", host: "127.0.0.1", port: proxy.port },
    headers: admin
  })
  expect(created.status, created.text).toBe(201)
  expect(created.body.url).toBe(`https://127.0.0.1:${proxy.port}/`)
  const put = await call(`${url}/api/providers/openai-compatible`, { method: "PUT", body: { proxyId: created.body.id }, headers: admin })
  expect(put.status, put.text).toBe(200)
}

beforeAll(async () => {
  proxy = await httpProxy("127.0.0.1", undefined, 0, {
    key: fs.readFileSync(path.join(TLS_DIR, "loopback.key")),
    cert: fs.readFileSync(CERT)
  })
  dataDir = tempDir()
  const setup = await setupWithProvider(dataDir, fake.upstream.baseUrl)
  expect(setup.code, setup.stderr).toBe(0)
  trusting = await startServerProcess({ DATA_DIR: dataDir, NODE_EXTRA_CA_CERTS: CERT })
  await viaTlsProxy(trusting.url)
}, 90_000)

afterAll(async () => {
  await trusting?.stop("SIGTERM")
  await proxy?.close()
})

describe("an https proxy on loopback, trusted through NODE_EXTRA_CA_CERTS", () => {
  // Each test starts gateway processes: generous limits for a loaded machine (nothing here asserts a time).
  it("chat completions, streamed and not, tunnel through the TLS proxy with the OpenAI SDK", { timeout: 90_000 }, async () => {
    fake.upstream.always({ content: "Hello over TLS to the proxy", chunks: 3 })
    const before = proxy.passed.length
    const upstreamBefore = fake.upstream.requests.length
    const client = new OpenAI({ baseURL: `${trusting.url}/v1`, apiKey: ADMIN_KEY, maxRetries: 0 })
    const completion = await client.chat.completions.create({ model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] })
    expect(completion.choices[0]?.message.content).toBe("Hello over TLS to the proxy")
    const stream = await client.chat.completions.create({
      model: "openai-compatible/m1",
      messages: [{ role: "user", content: "hi" }],
      stream: true
    })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("Hello over TLS to the proxy")

    const tunnels = proxy.passed.slice(before)
    expect(tunnels.length).toBeGreaterThanOrEqual(1)
    expect(tunnels.every((t) => t.target === `CONNECT ${new URL(fake.upstream.url).host}`)).toBe(true)
    expect(fake.upstream.requests.length - upstreamBefore).toBe(2)
    expect(proxy.tlsErrors).toBe(0)
  })

  it("a gateway that does not trust the proxy's certificate refuses the handshake: 502, and the call never goes direct", {
    timeout: 90_000
  }, async () => {
    // A second gateway set up the same way (its own data directory), without NODE_EXTRA_CA_CERTS.
    const otherDir = tempDir()
    const setup = await setupWithProvider(otherDir, fake.upstream.baseUrl)
    expect(setup.code, setup.stderr).toBe(0)
    const untrusting = await startServerProcess({ DATA_DIR: otherDir })
    try {
      await viaTlsProxy(untrusting.url)
      const upstreamBefore = fake.upstream.requests.length
      const tlsErrorsBefore = proxy.tlsErrors
      const res = await call(`${untrusting.url}/v1/chat/completions`, {
        body: { model: "openai-compatible/m1", messages: [{ role: "user", content: "hi" }] },
        headers: admin
      })
      expect(res.status).toBe(502)
      // The proxy hears of the refused handshake when its socket closes, which may be after the 502.
      await until("the proxy saw the refused handshake", () => proxy.tlsErrors > tlsErrorsBefore || undefined, 5_000)
      expect(proxy.tlsErrors).toBeGreaterThan(tlsErrorsBefore)
      expect(fake.upstream.requests.length).toBe(upstreamBefore)
    } finally {
      await untrusting.stop("SIGTERM")
    }
  })
})
