import * as Effect from "effect/Effect"
import { execFileSync } from "node:child_process"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import type { ResolvedAddress } from "../../src/upstream/client/egressGuard.js"
import { call, startGateway, type TestGateway } from "../support/gateway.js"
import { makeHosts, type NsHost, requirements } from "./namespaces.js"

/**
 * The egress family policy (docs/egress.md) against real single-family routes: two network
 * namespaces this test creates, an IPv4-only host (10.200.x.x, IPv6 off on its link) and an
 * IPv6-only host (fd00:200:x::x, no IPv4 address on its link), each reached only through its
 * veth pair and running an HTTP CONNECT proxy with an upstream behind it that names the host.
 * Host names resolve through the gateway's injected resolver. `npm run test:netns`.
 */
const ADMIN = "gwk_netns_admin_key_0123456789abcdefghij"
const admin = { authorization: `Bearer ${ADMIN}` }

const hosts = makeHosts()
let v4: NsHost
let v6: NsHost
let gw: TestGateway
let openai: OpenAI
const records = new Map<string, ReadonlyArray<string>>()
const resolve = async (name: string): Promise<ReadonlyArray<ResolvedAddress>> => {
  const list = records.get(name)
  if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: "ENOTFOUND" })
  return list.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }))
}

beforeAll(async () => {
  const missing = requirements()
  if (missing) throw new Error(missing)
  v4 = await hosts.host(4)
  v6 = await hosts.host(6)
  records.set("v4only.netns.test", [v4.address])
  records.set("v6only.netns.test", [v6.address])
  records.set("both.netns.test", [v4.address, v6.address])
  gw = await startGateway({ dns: resolve })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
}, 60_000)

afterAll(async () => {
  await gw?.close()
  hosts.cleanup()
})

let n = 0
/** A registry proxy on `host`:3128 pinned to `family`, and a connection through it to the host's own upstream. */
const through = async (host: string, family: "auto" | "ipv4" | "ipv6") => {
  const p = await call(`${gw.url}/api/v1/management/proxies`, {
    body: { name: `ns${++n}`, type: "http", host, port: 3128, family },
    headers: admin
  })
  expect(p.status, p.text).toBe(201)
  const c = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: `ns-${n}`, baseUrl: "http://127.0.0.1:8080/v1", defaultModel: "m1", proxyId: p.body.id },
    headers: admin
  })
  expect(c.status, c.text).toBe(201)
  return c.body.name as string
}
const chat = (name: string) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model: `${name}/m1`, messages: [{ role: "user", content: "hi" }] }, headers: admin })
const streamed = async (name: string) => {
  const s = await openai.chat.completions.create({ model: `${name}/m1`, messages: [{ role: "user", content: "hi" }], stream: true })
  let text = ""
  for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? ""
  return text
}
const expectRefused = async (name: string, host: NsHost) => {
  const before = host.tunnels.length
  const res = await chat(name)
  expect(res.status, res.text).toBe(503)
  expect(res.body.error.code).toBe("PROXY_FAMILY_UNAVAILABLE")
  expect(host.tunnels.length).toBe(before)
}

describe("an IPv4-only host in its own namespace", () => {
  it("family ipv4 reaches it over IPv4, streamed and not; ipv6 is refused 503 PROXY_FAMILY_UNAVAILABLE; auto reaches it", async () => {
    const before = v4.tunnels.length
    const pinned = await through("v4only.netns.test", "ipv4")
    expect((await chat(pinned)).body.choices[0].message.content).toBe("from ipv4-only host")
    expect(await streamed(pinned)).toBe("from ipv4-only host")
    await expectRefused(await through("v4only.netns.test", "ipv6"), v4)
    expect((await chat(await through("v4only.netns.test", "auto"))).body.choices[0].message.content).toBe("from ipv4-only host")
    const seen = v4.tunnels.slice(before)
    expect(seen.length).toBeGreaterThanOrEqual(2)
    expect(seen.every((t) => t.family === "IPv4" && t.target === "CONNECT 127.0.0.1:8080")).toBe(true)
  })
})

describe("an IPv6-only host in its own namespace", () => {
  it("family ipv6 reaches it over IPv6, streamed and not; ipv4 is refused 503 PROXY_FAMILY_UNAVAILABLE; auto reaches it", async () => {
    const before = v6.tunnels.length
    const pinned = await through("v6only.netns.test", "ipv6")
    expect((await chat(pinned)).body.choices[0].message.content).toBe("from ipv6-only host")
    expect(await streamed(pinned)).toBe("from ipv6-only host")
    await expectRefused(await through("v6only.netns.test", "ipv4"), v6)
    expect((await chat(await through("v6only.netns.test", "auto"))).body.choices[0].message.content).toBe("from ipv6-only host")
    const seen = v6.tunnels.slice(before)
    expect(seen.length).toBeGreaterThanOrEqual(2)
    expect(seen.every((t) => t.family === "IPv6" && t.target === "CONNECT 127.0.0.1:8080")).toBe(true)
  })
})

describe("a name with an address on each host", () => {
  it("ipv4 and ipv6 each take their own route; with the IPv6 link down, ipv6 fails and never falls back to IPv4", async () => {
    const v4Name = await through("both.netns.test", "ipv4")
    const v6Name = await through("both.netns.test", "ipv6")
    expect((await chat(v4Name)).body.choices[0].message.content).toBe("from ipv4-only host")
    expect((await chat(v6Name)).body.choices[0].message.content).toBe("from ipv6-only host")

    // A fresh pinned proxy (no pooled connection) while the IPv6 host's link is down.
    const v6Again = await through("both.netns.test", "ipv6")
    const outer = `g6h${process.pid}`
    execFileSync("ip", ["link", "set", outer, "down"])
    try {
      const before = { v4: v4.tunnels.length, v6: v6.tunnels.length }
      const res = await chat(v6Again)
      expect(res.status, res.text).toBeGreaterThanOrEqual(500)
      expect(res.text).not.toContain("from ipv4-only host")
      expect(v4.tunnels.length).toBe(before.v4)
      expect(v6.tunnels.length).toBe(before.v6)
    } finally {
      execFileSync("ip", ["link", "set", outer, "up"])
    }
  })
})
