import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { startGateway, type TestGateway } from "../support/gateway.js"
import { makeHosts, type NsPeer, nsRequest, requirements } from "./namespaces.js"

/**
 * The traffic inspector's API (`/api/tools/traffic-inspector/*`, docs/inspector.md) is
 * loopback-only, checked before authentication (src/server/Server.ts, `directLocal`), against
 * callers at real non-loopback addresses: two network namespaces this test creates, one linked
 * over IPv4 only (10.201.x.x) and one over IPv6 only (fd00:201:x::x), each reaching this process
 * only through its veth pair. The gateway listens on `::` (both families, so also on loopback);
 * every request is made by a separate node process, started inside a namespace or here, with the
 * same client. `npm run test:netns`.
 */
const ADMIN = "gwk_netns_inspector_admin_key_0123456789abc"
const admin = { authorization: `Bearer ${ADMIN}` }
const INSPECTOR = "/api/tools/traffic-inspector"
/** What a WebSocket client sends to open the inspector's feed. */
const upgrade = {
  connection: "Upgrade",
  upgrade: "websocket",
  "sec-websocket-version": "13",
  "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="
}

const hosts = makeHosts()
const peers: Record<"IPv4" | "IPv6", NsPeer> = {} as never
let gw: TestGateway
let port: number

beforeAll(async () => {
  const missing = requirements()
  if (missing) throw new Error(missing)
  peers.IPv4 = hosts.peer(4)
  peers.IPv6 = hosts.peer(6)
  gw = await startGateway({ host: "::" })
  port = Number(new URL(gw.url).port)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
}, 60_000)

afterAll(async () => {
  try {
    await gw?.close()
  } finally {
    hosts.cleanup()
  }
})

const at = (address: string) => `http://${address.includes(":") ? `[${address}]` : address}:${port}`

/** The 403 of the loopback-only rule: JSON, `Forbidden`, saying so. */
const expectLoopbackOnly = (r: Awaited<ReturnType<typeof nsRequest>>) => {
  expect(r.status, JSON.stringify(r)).toBe(403)
  expect(r.upgraded).toBeUndefined()
  expect(r.headers?.["content-type"]).toContain("application/json")
  expect(r.body).toMatchObject({ _tag: "Forbidden", message: expect.stringContaining("loopback-only") })
}

describe.each(["IPv4", "IPv6"] as const)("a caller at a real non-loopback %s address (its own namespace)", (family) => {
  const peer = () => peers[family]
  const ask = (path: string, headers: Record<string, string> = {}) => nsRequest(peer().name, `${at(peer().hostAddress)}${path}`, headers)

  it("reaches the gateway: health, a management route and an inference route answer it; management auth applies as usual", async () => {
    const ping = await ask("/api/health/ping")
    // The connection really comes from the namespace's address, not from loopback.
    expect(ping.localAddress).toBe(peer().address)
    expect(ping.status, ping.text).toBe(200)
    expect(ping.body).toMatchObject({ ok: true })

    const combos = await ask("/api/combos", admin)
    expect(combos.status, combos.text).toBe(200)
    expect(combos.body).toMatchObject({ combos: expect.any(Array) })
    // Without credentials a management route says 401: the admin key above is what let it in.
    expect((await ask("/api/combos")).status).toBe(401)

    const models = await ask("/v1/models", admin)
    expect(models.status, models.text).toBe(200)
    expect(models.body).toMatchObject({ object: "list", data: expect.any(Array) })
  })

  it("is refused the inspector list with 403 and a JSON loopback-only error, with the admin key, without a key and with a wrong one", async () => {
    const withKey = await ask(`${INSPECTOR}/requests`, admin)
    expect(withKey.localAddress).toBe(peer().address)
    expectLoopbackOnly(withKey)
    expect(withKey.body.requests).toBeUndefined()
    // Before authentication: no 401 for a missing or wrong key, the same 403.
    expectLoopbackOnly(await ask(`${INSPECTOR}/requests`))
    expectLoopbackOnly(await ask(`${INSPECTOR}/requests`, { authorization: "Bearer nope" }))
  })

  it("is refused the CA certificate with the same 403", async () => {
    const ca = await ask(`${INSPECTOR}/ca.pem`, admin)
    expectLoopbackOnly(ca)
    expect(ca.text).not.toContain("BEGIN CERTIFICATE")
    expectLoopbackOnly(await ask(`${INSPECTOR}/ca.pem`))
  })

  it("is refused the transparent-capture route (/api/tools/agent-bridge/tproxy) with the same 403", async () => {
    const r = await ask("/api/tools/agent-bridge/tproxy", admin)
    expect(r.localAddress).toBe(peer().address)
    expectLoopbackOnly(r)
    expect(r.body.running).toBeUndefined()
    expectLoopbackOnly(await ask("/api/tools/agent-bridge/tproxy"))
  })

  it("is refused the live feed: the WebSocket upgrade is answered 403 loopback-only (no 101), and a plain GET of it too", async () => {
    const ws = await ask(`${INSPECTOR}/ws`, { ...admin, ...upgrade })
    expect(ws.localAddress).toBe(peer().address)
    expectLoopbackOnly(ws)
    expect(ws.headers?.connection).toBe("close")
    expectLoopbackOnly(await ask(`${INSPECTOR}/ws`, upgrade))
    expectLoopbackOnly(await ask(`${INSPECTOR}/ws`, admin))
  })
})

describe("a caller on this machine", () => {
  it.each(["127.0.0.1", "::1"])(
    "at %s gets the inspector list with the admin key (200); a wrong key is 401: authentication comes after the loopback check",
    async (address) => {
      const list = await nsRequest(undefined, `${at(address)}${INSPECTOR}/requests`, admin)
      expect(list.localAddress).toBe(address)
      expect(list.status, list.text).toBe(200)
      expect(list.body).toMatchObject({ requests: expect.any(Array), total: expect.any(Number), bufferSize: expect.any(Number) })
      const wrong = await nsRequest(undefined, `${at(address)}${INSPECTOR}/requests`, { authorization: "Bearer nope" })
      expect(wrong.status, wrong.text).toBe(401)
    }
  )

  it("at 127.0.0.1 gets the CA certificate and opens the live feed with the admin key (101)", async () => {
    const ca = await nsRequest(undefined, `${at("127.0.0.1")}${INSPECTOR}/ca.pem`, admin)
    expect(ca.status, ca.text).toBe(200)
    expect(ca.text).toMatch(/^-----BEGIN CERTIFICATE-----/)
    const ws = await nsRequest(undefined, `${at("127.0.0.1")}${INSPECTOR}/ws`, { ...admin, ...upgrade })
    expect(ws.status, JSON.stringify(ws)).toBe(101)
    expect(ws.upgraded).toBe(true)
  })

  it("through its own veth address (not loopback) is refused like the namespace", async () => {
    const r = await nsRequest(undefined, `${at(peers.IPv4.hostAddress)}${INSPECTOR}/requests`, admin)
    expect(r.localAddress).toBe(peers.IPv4.hostAddress)
    expectLoopbackOnly(r)
  })
})
