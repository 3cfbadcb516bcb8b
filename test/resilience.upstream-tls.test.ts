import * as fs from "node:fs"
import * as https from "node:https"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { tempDir } from "./support/gateway.js"
import { type GatewayChild, startGatewayChild } from "./support/gatewayChild.js"
import { testCa } from "./support/testCerts.js"
import { until } from "./support/until.js"

/**
 * TLS handshakes that fail on one check while the rest holds: real TLS servers on 127.0.0.1 with
 * certificates (node-forge) from a CA the gateway trusts the way a user makes it trust one,
 * NODE_EXTRA_CA_CERTS, so the gateway runs as a process of its own (from the sources, see
 * test/support/gatewayChild.ts). One certificate is for another name, one expired; a valid one
 * from the same CA shows that the chain is trusted, so each failure is that check alone. An
 * untrusted certificate is in resilience.upstream-faults.test.ts.
 */
const ADMIN = "gwk_upstream_tls_admin_key_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }
const KEY = "sk-tls-upstream-secret-abcdef0123456789"

let child: GatewayChild
let steady: FakeUpstream
const servers: Record<string, https.Server> = {}
const seen: Record<string, { requests: number; handshakeErrors: number }> = {}

/** A TLS server answering every chat completion "over TLS". */
const tlsServer = async (name: string, cert: { certPem: string; keyPem: string }): Promise<string> => {
  seen[name] = { requests: 0, handshakeErrors: 0 }
  const server = https.createServer({ key: cert.keyPem, cert: cert.certPem }, (req, res) => {
    seen[name]!.requests++
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" })
      const message = { role: "assistant", content: "over TLS" }
      res.end(
        JSON.stringify({
          id: "c1",
          object: "chat.completion",
          created: 1,
          model: "m1",
          choices: [{ index: 0, message, finish_reason: "stop" }]
        })
      )
    })
  })
  server.on("tlsClientError", () => seen[name]!.handshakeErrors++)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  servers[name] = server
  return `https://127.0.0.1:${(server.address() as AddressInfo).port}`
}

// Each request its own conversation: a conversation stays where its prompt cache is warm
// (docs/routing.md, "Prompt-cache affinity"), and these tests make each request meet the first target.
let conversations = 0
const chat = (model: string, stream = false) =>
  child.call("/v1/chat/completions", { body: { model, stream, messages: [{ role: "user", content: `hi ${++conversations}` }] } })
const status = () => child.call("/api/resilience", { headers: admin }).then((r) => r.body)

beforeAll(async () => {
  const ca = testCa()
  const dir = tempDir("gw-tls-")
  const caFile = path.join(dir, "ca.pem")
  fs.writeFileSync(caFile, ca.certPem)
  const urls = {
    good: await tlsServer("good", ca.issue(["127.0.0.1"])),
    "wrong-name": await tlsServer("wrong-name", ca.issue(["api.elsewhere.example"])),
    expired: await tlsServer(
      "expired",
      ca.issue(["127.0.0.1"], { notBefore: new Date("2020-01-01T00:00:00Z"), notAfter: new Date("2021-01-01T00:00:00Z") })
    )
  }
  steady = await FakeUpstream.start()
  child = await startGatewayChild(
    { adminKey: ADMIN, timeouts: { headersMs: 2000, streamHeadersMs: 2000 } },
    { env: { NODE_EXTRA_CA_CERTS: caFile } }
  )
  const add = async (body: Record<string, unknown>) => {
    const res = await child.call("/api/providers", { body: { defaultModel: "m1", ...body }, headers: admin })
    expect(res.status, res.text).toBe(201)
  }
  for (const [name, url] of Object.entries(urls))
    await add({ provider: "openai-compatible", name: `tls-${name}`, apiKey: KEY, baseUrl: `${url}/v1` })
  await add({ provider: "anthropic", name: "steady", apiKey: "sk-ant-steady", baseUrl: steady.baseUrl("anthropic") })
  for (const name of ["wrong-name", "expired"]) {
    const res = await child.call("/api/combos", {
      body: { name: `${name}-first`, strategy: "priority", targets: [{ model: `tls-${name}/m1` }, { model: "steady/m1" }] },
      headers: admin
    })
    expect(res.status, res.text).toBe(201)
  }
}, 120_000)

afterAll(async () => {
  await child?.stop()
  await steady?.close()
  for (const server of Object.values(servers)) {
    server.closeAllConnections()
    await new Promise((r) => server.close(r))
  }
})

beforeEach(async () => {
  expect((await child.call("/api/resilience/reset", { body: { connections: true }, headers: admin })).status).toBe(200)
  steady.always({ content: "from steady", chunks: 1 })
})

describe("TLS certificates the gateway refuses, from a CA it trusts", () => {
  it("the CA is trusted: a valid certificate from it serves (so each failure below is its own check)", async () => {
    const res = await chat("tls-good/m1")
    expect(res.status, res.text).toBe(200)
    expect(res.body.choices[0].message.content).toBe("over TLS")
  })

  for (const [name, code, words] of [
    ["wrong-name", "ERR_TLS_CERT_ALTNAME_INVALID", "does not match certificate's altnames"],
    ["expired", "CERT_HAS_EXPIRED", "certificate has expired"]
  ] as const) {
    it(`a certificate ${name === "wrong-name" ? "for another name" : "that has expired"}: 502 upstream_tls_error naming the check, nothing sent, a provider failure with an error cooldown`, async () => {
      const before = { ...seen[name]! }
      for (const stream of [false, true]) {
        await child.call("/api/resilience/reset", { body: { connections: true }, headers: admin })
        const started = Date.now()
        const res = await chat(`tls-${name}/m1`, stream)
        expect(res.status, res.text).toBe(502)
        expect(res.headers.get("content-type")).toContain("application/json")
        expect(res.body.error).toMatchObject({ type: "upstream_error", code: "upstream_tls_error" })
        expect(res.body.error.message).toContain(`tls-${name}: the TLS handshake with the upstream failed (${code}: `)
        expect(res.body.error.message).toContain(words)
        expect(res.text).not.toContain(KEY)
        expect(Date.now() - started).toBeLessThan(3_000)
        const s = await status()
        const origin = `https://127.0.0.1:${(servers[name]!.address() as AddressInfo).port}`
        expect(s.breakers.find((b: any) => b.provider === "openai-compatible" && b.origin === origin)?.consecutiveFailures).toBe(1)
        expect(s.connections.find((c: any) => c.name === `tls-${name}`)).toMatchObject({
          state: "cooldown",
          lastErrorType: "tls",
          errorCode: "upstream_tls_error"
        })
      }
      // The handshake was refused each time: the server never saw a request (nor the key).
      expect(seen[name]!.requests).toBe(before.requests)
      expect(seen[name]!.handshakeErrors).toBeGreaterThan(before.handshakeErrors)
      // Cooling down after it: the next direct request is a 503 naming why, not a rate-limit 429.
      const again = await chat(`tls-${name}/m1`)
      expect(again.status).toBe(503)
      expect(again.body.error).toMatchObject({ code: "no_available_target" })
      expect(again.body.error.message).toContain("error cooldown")
    })

    it(`a certificate ${name === "wrong-name" ? "for another name" : "that has expired"} in a combo: the next target answers, one usage row`, async () => {
      for (const stream of [false, true]) {
        await child.call("/api/resilience/reset", { body: { connections: true }, headers: admin })
        const res = await chat(`${name}-first`, stream)
        expect(res.status, res.text).toBe(200)
        expect(res.text).toContain("from steady")
        expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
        const id = res.headers.get("x-gateway-request-id")
        const rows = await until("the request's usage row", () => {
          const r = queryDb(child.dataDir, "SELECT status FROM usage WHERE request_id = ?", id)
          return r.length > 0 && r
        })
        expect(rows).toEqual([{ status: 200 }])
      }
    })
  }
})
