import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type GatewayChild, startGatewayChild } from "../support/gatewayChild.js"
import { requirements } from "./namespaces.js"

/**
 * A name that does not resolve, through the system resolver the gateway uses by default
 * (getaddrinfo, `dns.lookup`): the gateway runs in a network namespace this test creates with
 * nothing but its loopback (no route anywhere: no query can leave), and `ip netns exec` puts
 * /etc/netns/<ns>/resolv.conf in place of /etc/resolv.conf for it, naming 127.0.0.1, where the
 * gateway process's own DNS server (test/support/fakeDns.ts) answers NXDOMAIN (ENOTFOUND),
 * SERVFAIL (EAI_AGAIN) or nothing (EAI_AGAIN after the resolver's timeout). The test reaches the
 * gateway through a Unix socket. `npm run test:netns` (root).
 */
const ADMIN = "gwk_netns_dns_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const NS = `gwd-${process.pid}`
const SOCKET = path.join(os.tmpdir(), `gw-dns-${process.pid}.sock`)

let gw: GatewayChild

const ip = (...args: Array<string>) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] })
// Each request its own conversation: a conversation stays where its prompt cache is warm
// (docs/routing.md, "Prompt-cache affinity"), and these tests make each request meet the first target.
let conversations = 0
const chat = (model: string, stream = false) =>
  gw.call("/v1/chat/completions", { body: { model, stream, messages: [{ role: "user", content: `hi ${++conversations}` }] } })
const status = () => gw.call("/api/resilience", { headers: admin }).then((r) => r.body)

beforeAll(async () => {
  const missing = requirements()
  if (missing) throw new Error(missing)
  ip("netns", "add", NS)
  ip("-n", NS, "link", "set", "lo", "up")
  fs.mkdirSync(`/etc/netns/${NS}`, { recursive: true })
  fs.writeFileSync(`/etc/netns/${NS}/resolv.conf`, "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
  gw = await startGatewayChild(
    { adminKey: ADMIN, dnsPort: 53, upstream: true, socket: SOCKET, timeouts: { headersMs: 5000, streamHeadersMs: 5000 } },
    { prefix: ["ip", "netns", "exec", NS] }
  )
  const add = async (body: Record<string, unknown>) => {
    const res = await gw.call("/api/providers", { body: { provider: "openai-compatible", defaultModel: "m1", ...body }, headers: admin })
    expect(res.status, res.text).toBe(201)
  }
  await add({ name: "nxdomain", baseUrl: "http://api.netns-dns.invalid:8080/v1" })
  await add({ name: "servfail", baseUrl: "http://servfail.netns-dns.invalid:8080/v1" })
  await add({ name: "silent", baseUrl: "http://silent.netns-dns.invalid:8080/v1" })
  await add({ name: "steady", baseUrl: gw.upstream! })
  for (const first of ["nxdomain", "servfail", "silent"]) {
    const res = await gw.call("/api/combos", {
      body: { name: `${first}-first`, strategy: "priority", targets: [{ model: `${first}/m1` }, { model: "steady/m1" }] },
      headers: admin
    })
    expect(res.status, res.text).toBe(201)
  }
}, 120_000)

afterAll(async () => {
  await gw?.stop()
  fs.rmSync(`/etc/netns/${NS}`, { recursive: true, force: true })
  fs.rmSync(SOCKET, { force: true })
  try {
    ip("netns", "del", NS)
  } catch {
    // never created
  }
})

beforeEach(async () => {
  expect((await gw.call("/api/resilience/reset", { body: { connections: true }, headers: admin })).status).toBe(200)
})

describe("a name the system resolver cannot resolve (a namespace with no route, its DNS on 127.0.0.1)", () => {
  for (const [name, code, words] of [
    ["nxdomain", "ENOTFOUND", "does not resolve"],
    ["servfail", "EAI_AGAIN", "could not be resolved"],
    ["silent", "EAI_AGAIN", "could not be resolved"]
  ] as const) {
    const host = name === "nxdomain" ? "api.netns-dns.invalid" : `${name}.netns-dns.invalid`

    it(`${name}: 502 upstream_unreachable (${code}) naming the name, asked of 127.0.0.1 only; a provider failure with an error cooldown`, async () => {
      const before = gw.lines.length
      const started = Date.now()
      const res = await chat(`${name}/m1`)
      expect(res.status, res.text).toBe(502)
      expect(res.body.error).toMatchObject({ type: "upstream_error", code: "upstream_unreachable" })
      expect(res.body.error.message).toContain(`${code}: the name ${host} ${words}`)
      expect(Date.now() - started).toBeLessThan(5_000)
      // getaddrinfo asked the DNS server the resolv.conf names: the only one it could reach.
      const asked = gw.lines.slice(before).map((l) => l["dns"].name)
      expect(asked).toContain(host)
      const s = await status()
      expect(s.breakers.find((b: any) => b.origin === `http://${host}:8080`)?.consecutiveFailures).toBe(1)
      expect(s.connections.find((c: any) => c.name === name)).toMatchObject({ state: "cooldown", lastErrorType: "unreachable" })
      const again = await chat(`${name}/m1`)
      expect(again.status).toBe(503)
      expect(again.body.error.message).toContain("error cooldown")
    })

    it(`${name}: a combo falls back to its next target, streamed or not`, async () => {
      for (const stream of [false, true]) {
        await gw.call("/api/resilience/reset", { body: { connections: true }, headers: admin })
        const res = await chat(`${name}-first`, stream)
        expect(res.status, res.text).toBe(200)
        expect(res.text).toContain("from steady")
        expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
      }
    })
  }
})
