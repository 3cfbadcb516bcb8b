import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import { FakeOAuth } from "./support/fakeOAuth.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { httpProxy, type TestProxy } from "./support/proxies.js"
import { refusedPort } from "./support/refusedPort.js"

/**
 * Control-plane calls through the egress (docs/egress.md, "Which proxy a call uses"): OAuth token
 * endpoints, provider-node probes and the sync client go through the connection's proxy, else the
 * global default of /api/settings/proxy, with the same rules as provider checks. A real HTTP
 * CONNECT proxy (the `proxy` package) on loopback counts the tunnels that passed through it.
 */
const ADMIN = "gwk_control_admin_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }
const PROXIES = `/api/v1/management/proxies`

let auth: FakeOAuth
let up: FakeUpstream
let proxy: TestProxy
let gw: TestGateway
/** The sync server the gateway pushes to. */
let syncServer: TestGateway

const api = (g: TestGateway, p: string, init: { method?: string; body?: unknown } = {}) => call(`${g.url}${p}`, { ...init, headers: admin })
const hostOf = (url: string) => new URL(url).host
/** Tunnels to `target` (host:port) the proxy opened since `before`. */
const tunnelsTo = (target: string, before: number) => proxy.passed.slice(before).filter((p) => p.target === `CONNECT ${target}`).length

const setFallback = (value: string | undefined) =>
  gw.run(Effect.flatMap(FeatureFlags, (f) => Effect.orDie(f.set("GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK", value))))
const setGlobalProxy = async (url: string | null, family?: string) => {
  const res = await api(gw, "/api/settings/proxy", { method: "PUT", body: { url, ...(family ? { family } : {}) } })
  expect(res.status, res.text).toBe(200)
}
const registryProxy = async (name: string, port: number) => {
  const res = await api(gw, PROXIES, { body: { name, type: "http", host: "127.0.0.1", port } })
  expect(res.status, res.text).toBe(201)
  return res.body.id as string
}
/** A proxy port that nothing listens on. */
const deadPort = refusedPort

/** A qwen connection signed in with the device flow. */
const connectQwen = async (name: string) => {
  const started = await api(gw, "/api/oauth/qwen/device-code", { body: { name, baseUrl: up.baseUrl("openai-chat") } })
  expect(started.status, started.text).toBe(200)
  const done = await api(gw, "/api/oauth/qwen/poll", { body: { state: started.body.state, wait: true, timeoutSeconds: 20 } })
  expect(done.status, done.text).toBe(200)
  expect(done.body.status).toBe("complete")
  return done.body.connection as { id: string; name: string }
}

beforeAll(async () => {
  auth = await FakeOAuth.start()
  up = await FakeUpstream.start()
  proxy = await httpProxy("127.0.0.1")
  const env = {
    GATEWAY_OAUTH_QWEN_TOKEN_URL: `${auth.url}/token`,
    GATEWAY_OAUTH_QWEN_DEVICE_AUTHORIZATION_URL: `${auth.url}/device/code`,
    GATEWAY_OAUTH_REFRESH_CHECK_SECONDS: "0",
    GATEWAY_OAUTH_RETRY_BASE_MS: "10"
  }
  ;[gw, syncServer] = await Promise.all([startGateway({ env }), startGateway()])
  for (const g of [gw, syncServer])
    await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await Promise.all([gw?.close(), syncServer?.close()])
  await Promise.all([auth?.close(), up?.close(), proxy?.close()])
})
beforeEach(async () => {
  up.always({ content: "hello" })
  await setGlobalProxy(null)
  await setFallback(undefined)
})

describe("OAuth token endpoints", () => {
  it("refreshes a proxied OAuth connection's token through its proxy; a dead proxy fails the refresh (never direct) unless the direct fallback is on", async () => {
    const before = proxy.passed.length
    const c = await connectQwen("qwen-proxied")
    // Signed in without a proxy: nothing went through it.
    expect(proxy.passed.length).toBe(before)

    const live = await registryProxy("oauth-live", proxy.port)
    expect((await api(gw, `/api/providers/${c.id}`, { method: "PUT", body: { proxyId: live } })).status).toBe(200)
    const calls = auth.refreshCalls.length
    const refreshed = await api(gw, "/api/oauth/qwen/refresh", { body: { connection: c.name } })
    expect(refreshed.status, refreshed.text).toBe(200)
    expect(auth.refreshCalls.length).toBe(calls + 1)
    expect(tunnelsTo(hostOf(auth.url), before)).toBeGreaterThanOrEqual(1)

    const dead = await registryProxy("oauth-dead", await deadPort())
    expect((await api(gw, `/api/providers/${c.id}`, { method: "PUT", body: { proxyId: dead } })).status).toBe(200)
    const refused = await api(gw, "/api/oauth/qwen/refresh", { body: { connection: c.name } })
    expect(refused.status).toBe(502)
    expect(auth.refreshCalls.length).toBe(calls + 1)

    await setFallback("true")
    const direct = await api(gw, "/api/oauth/qwen/refresh", { body: { connection: c.name } })
    expect(direct.status, direct.text).toBe(200)
    expect(auth.refreshCalls.length).toBe(calls + 2)
    expect(gw.logs.some((l) => l.message.includes("goes direct") && l.message.includes("oauth-dead"))).toBe(true)
  })

  it("signs in with the device flow through the global default proxy, and its family rules refuse the token endpoint with PROXY_FAMILY_UNAVAILABLE", async () => {
    await setGlobalProxy(`http://127.0.0.1:${proxy.port}`)
    const before = proxy.passed.length
    const deviceCalls = auth.deviceCalls.length
    await connectQwen("qwen-global")
    expect(auth.deviceCalls.length).toBe(deviceCalls + 1)
    expect(tunnelsTo(hostOf(auth.url), before)).toBeGreaterThanOrEqual(1)
    expect(proxy.passed.slice(before).every((p) => p.target === `CONNECT ${hostOf(auth.url)}`)).toBe(true)

    // An IPv4 literal pinned to ipv6 contradicts the directive (rule 3): refused before anything is sent.
    await setGlobalProxy(`http://127.0.0.1:${proxy.port}`, "ipv6")
    const refused = await api(gw, "/api/oauth/qwen/device-code", { body: { name: "qwen-v6", baseUrl: up.baseUrl("openai-chat") } })
    expect(refused.status).toBe(502)
    expect(refused.body.message).toContain("PROXY_FAMILY_UNAVAILABLE")
    expect(auth.deviceCalls.length).toBe(deviceCalls + 1)
  })
})

describe("provider-node probes", () => {
  it("POST /api/provider-nodes/{id}/test probes through the proxy of the node's connection", async () => {
    const node = await api(gw, "/api/provider-nodes", {
      body: { id: "proxlab", name: "Proxied lab", baseUrl: up.baseUrl("openai-chat"), family: "openai-chat", models: [{ id: "m1" }] }
    })
    expect(node.status, node.text).toBe(201)
    const viaProxy = await registryProxy("node-proxy", proxy.port)
    const conn = await api(gw, "/api/providers", { body: { provider: "proxlab", apiKey: "sk-node-key", proxyId: viaProxy } })
    expect(conn.status, conn.text).toBe(201)
    const before = proxy.passed.length
    const probed = await api(gw, "/api/provider-nodes/proxlab/test", { body: {} })
    expect(probed.status, probed.text).toBe(200)
    expect(probed.body).toMatchObject({ ok: true, status: 200 })
    expect(tunnelsTo(hostOf(up.baseUrl("openai-chat")), before)).toBe(1)

    // Through a proxy that is gone, the probe reports the failure rather than going direct.
    const dead = await registryProxy("node-dead", await deadPort())
    expect((await api(gw, `/api/providers/${conn.body.id}`, { method: "PUT", body: { proxyId: dead } })).status).toBe(200)
    const probes = up.requests.filter((r) => r.path.endsWith("/models")).length
    const failed = await api(gw, "/api/provider-nodes/proxlab/test", { body: {} })
    expect(failed.status, failed.text).toBe(200)
    expect(failed.body.ok).toBe(false)
    expect(up.requests.filter((r) => r.path.endsWith("/models")).length).toBe(probes)
  })
})

describe("the sync client", () => {
  it("pushes to the sync server through the global default proxy", async () => {
    const init = await api(gw, "/api/sync/initialize", {
      body: { serverUrl: syncServer.url, apiKey: ADMIN, space: "proxied", passphrase: "correct horse battery staple" }
    })
    expect(init.status, init.text).toBe(200)
    await setGlobalProxy(`http://127.0.0.1:${proxy.port}`)
    const before = proxy.passed.length
    const pushed = await api(gw, "/api/sync/cloud", { body: { action: "push" } })
    expect(pushed.status, pushed.text).toBe(200)
    expect(pushed.body).toMatchObject({ action: "push", result: "pushed" })
    expect(tunnelsTo(hostOf(syncServer.url), before)).toBeGreaterThanOrEqual(1)

    // The global proxy unreachable: the push fails naming the sync server, and nothing reaches it directly.
    await setGlobalProxy(`http://127.0.0.1:${await deadPort()}`)
    const failed = await api(gw, "/api/sync/cloud", { body: { action: "push", force: true } })
    expect(failed.status).toBeGreaterThanOrEqual(500)
    expect(failed.body.message).toContain(syncServer.url)
    const versions = await api(syncServer, "/api/cloud/bundles/proxied/versions")
    expect(versions.status, versions.text).toBe(200)
    expect(versions.body.current).toBe(pushed.body.version)
  })
})
