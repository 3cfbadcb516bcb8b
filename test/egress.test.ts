import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import { fakeOpenAIForFile } from "./support/fakeOpenAI.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { httpProxy, socksProxy, type TestProxy } from "./support/proxies.js"
import { refusedPort } from "./support/refusedPort.js"

/**
 * Upstream proxies (docs/egress.md) with real parts: an HTTP CONNECT proxy (the `proxy`
 * package) and a SOCKS5 server (`simple-socks`) on loopback, recording what passed through;
 * the official OpenAI SDK as the client; the registry over HTTP.
 */
const ADMIN = "gwk_egress_admin_key_0123456789abcdefghij"
const admin = { authorization: `Bearer ${ADMIN}` }
const PROXIES = `/api/v1/management/proxies`

const fake = fakeOpenAIForFile()
let gw: TestGateway
let plain: TestProxy
let authed: TestProxy
let socks: TestProxy
let socksAuthed: TestProxy
let client: OpenAI

const setFlag = (
  key: "PROXY_AUTO_SELECT_ENABLED" | "GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK" | "FREE_PROXY_ENABLED",
  value: string | undefined
) => gw.run(Effect.flatMap(FeatureFlags, (f) => Effect.orDie(f.set(key, value))))

const createProxy = async (body: Record<string, unknown>) => {
  const res = await call(`${gw.url}${PROXIES}`, { body, headers: admin })
  expect(res.status, res.text).toBe(201)
  return res.body as { id: string; name: string; url: string; password: string | null }
}
let n = 0
const connection = async (proxyId?: string | null) => {
  const res = await call(`${gw.url}/api/providers`, {
    body: {
      provider: "openai-compatible",
      name: `c${++n}`,
      baseUrl: fake.upstream.baseUrl,
      defaultModel: "m1",
      ...(proxyId !== undefined ? { proxyId } : {})
    },
    headers: admin
  })
  expect(res.status, res.text).toBe(201)
  return res.body as { id: string; name: string; proxyId: string | null }
}
const chatVia = async (name: string, stream: boolean) => {
  if (!stream) {
    const r = await client.chat.completions.create({ model: `${name}/m1`, messages: [{ role: "user", content: "hi" }] })
    return r.choices[0]!.message.content
  }
  const s = await client.chat.completions.create({ model: `${name}/m1`, messages: [{ role: "user", content: "hi" }], stream: true })
  let text = ""
  for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? ""
  return text
}
const upstreamHost = () => new URL(fake.upstream.url).host

beforeAll(async () => {
  ;[plain, authed, socks, socksAuthed] = await Promise.all([
    httpProxy("127.0.0.1"),
    httpProxy("127.0.0.1", { user: "alice", password: "s3cret:pw" }),
    socksProxy("127.0.0.1"),
    socksProxy("127.0.0.1", { user: "bob", password: "hunter2" })
  ])
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: ADMIN, maxRetries: 0 })
})

afterAll(async () => {
  await gw?.close()
  await Promise.all([plain, authed, socks, socksAuthed].map((p) => p?.close()))
})

beforeEach(async () => {
  fake.upstream.always({ content: "Hello through the proxy", chunks: 3 })
  await gw.resetResilience()
})

describe("chat through an HTTP CONNECT proxy", () => {
  it("non-streamed and streamed chat completions tunnel through the connection's HTTP proxy (CONNECT host:port)", async () => {
    const p = await createProxy({ name: "http-plain", type: "http", host: "127.0.0.1", port: plain.port })
    const c = await connection(p.id)
    expect(c.proxyId).toBe(p.id)
    const before = plain.passed.length
    expect(await chatVia(c.name, false)).toBe("Hello through the proxy")
    expect(await chatVia(c.name, true)).toBe("Hello through the proxy")
    const tunnels = plain.passed.slice(before)
    expect(tunnels.length).toBeGreaterThanOrEqual(1)
    expect(tunnels.every((t) => t.target === `CONNECT ${upstreamHost()}`)).toBe(true)
    expect(tunnels[0]!.family).toBe("IPv4")
  })

  it("sends the proxy credentials as Proxy-Authorization: Basic, and a wrong password fails the call (502), never goes direct", async () => {
    const p = await createProxy({
      name: "http-authed",
      type: "http",
      host: "127.0.0.1",
      port: authed.port,
      username: "alice",
      password: "s3cret:pw"
    })
    const c = await connection(p.id)
    expect(await chatVia(c.name, true)).toBe("Hello through the proxy")
    expect(authed.passed.at(-1)!.credentials).toBe("alice:s3cret:pw")

    const patched = await call(`${gw.url}${PROXIES}/${p.id}`, { method: "PATCH", body: { password: "wrong" }, headers: admin })
    expect(patched.status, patched.text).toBe(200)
    const upstreamBefore = fake.upstream.chatRequests.length
    const refusedBefore = authed.refused
    const res = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: `${c.name}/m1`, messages: [{ role: "user", content: "hi" }] },
      headers: admin
    })
    expect(res.status).toBe(502)
    expect(authed.refused).toBeGreaterThan(refusedBefore)
    expect(fake.upstream.chatRequests.length).toBe(upstreamBefore)
  })

  it("a connection without a proxy goes direct; the global default (/api/settings/proxy) applies to it until cleared", async () => {
    const c = await connection()
    const before = plain.passed.length
    expect(await chatVia(c.name, false)).toBe("Hello through the proxy")
    expect(plain.passed.length).toBe(before)

    const put = await call(`${gw.url}/api/settings/proxy`, {
      method: "PUT",
      body: { url: `http://127.0.0.1:${plain.port}` },
      headers: admin
    })
    expect(put.status, put.text).toBe(200)
    expect(put.body.family).toBe("auto")
    try {
      expect(await chatVia(c.name, true)).toBe("Hello through the proxy")
      expect(plain.passed.length).toBe(before + 1)
    } finally {
      await call(`${gw.url}/api/settings/proxy`, { method: "PUT", body: { url: null }, headers: admin })
    }
    expect(await chatVia(c.name, false)).toBe("Hello through the proxy")
    expect(plain.passed.length).toBe(before + 1)
  })
})

describe("chat through a SOCKS5 proxy", () => {
  it("non-streamed and streamed chat go through the SOCKS5 proxy, which is given the upstream's host to connect to", async () => {
    const p = await createProxy({ name: "socks-plain", type: "socks5", host: "127.0.0.1", port: socks.port })
    const c = await connection(p.id)
    const before = socks.passed.length
    expect(await chatVia(c.name, false)).toBe("Hello through the proxy")
    expect(await chatVia(c.name, true)).toBe("Hello through the proxy")
    const passed = socks.passed.slice(before)
    expect(passed.length).toBeGreaterThanOrEqual(1)
    expect(passed[0]!.target).toBe(`socks5 ${upstreamHost()}`)
  })

  it("authenticates to the SOCKS5 proxy with the stored user and password (RFC 1929)", async () => {
    const p = await createProxy({
      name: "socks-authed",
      type: "socks5",
      host: "127.0.0.1",
      port: socksAuthed.port,
      username: "bob",
      password: "hunter2"
    })
    const c = await connection(p.id)
    expect(await chatVia(c.name, true)).toBe("Hello through the proxy")
    expect(socksAuthed.passed.at(-1)!.credentials).toBe("bob:hunter2")
  })
})

describe("the proxy registry", () => {
  it("creates, lists, reads, patches and deletes entries; the password is never answered", async () => {
    const created = await createProxy({
      name: "crud",
      type: "https",
      host: "proxy.example",
      port: 8443,
      username: "u",
      password: "pw-secret"
    })
    expect(created).toMatchObject({
      name: "crud",
      type: "https",
      host: "proxy.example",
      port: 8443,
      username: "u",
      password: "****",
      family: "auto",
      free: false
    })
    expect(created.url).toBe("https://u:****@proxy.example:8443/")
    const list = await call(`${gw.url}${PROXIES}`, { headers: admin })
    expect(list.status).toBe(200)
    expect(list.text).not.toContain("pw-secret")
    expect(list.body.proxies.map((p: { id: string }) => p.id)).toContain(created.id)

    const patched = await call(`${gw.url}${PROXIES}/${created.id}`, {
      method: "PATCH",
      body: { id: created.id, family: "ipv6", port: 9443 },
      headers: admin
    })
    expect(patched.status, patched.text).toBe(200)
    expect(patched.body).toMatchObject({
      port: 9443,
      family: "ipv6",
      password: "****",
      url: "https://u:****@proxy.example:9443/?family=ipv6"
    })
    const got = await call(`${gw.url}${PROXIES}/${created.id}`, { headers: admin })
    expect(got.body.family).toBe("ipv6")
    expect(got.text).not.toContain("pw-secret")

    const del = await call(`${gw.url}${PROXIES}/${created.id}`, { method: "DELETE", headers: admin })
    expect(del.status).toBe(200)
    expect((await call(`${gw.url}${PROXIES}/${created.id}`, { headers: admin })).status).toBe(404)
  })

  it("stores the password encrypted: the database never holds it in clear", async () => {
    const created = await createProxy({
      name: "enc",
      type: "http",
      host: "127.0.0.1",
      port: 3128,
      username: "u",
      password: "plain-text-pw"
    })
    const { queryDb } = await import("./support/db.js")
    const rows = queryDb<{ password_enc: string }>(gw.dataDir, `SELECT password_enc FROM proxies WHERE id = '${created.id}'`)
    expect(rows[0]!.password_enc).toBeTruthy()
    expect(rows[0]!.password_enc).not.toContain("plain-text-pw")
  })

  it("answers 400 naming the field for bad input, and 409 for a duplicate name", async () => {
    const bad = async (body: unknown, field: string) => {
      const res = await call(`${gw.url}${PROXIES}`, { body, headers: admin })
      expect(res.status, res.text).toBe(400)
      expect(res.body.message).toContain(field)
    }
    await bad({ name: "x", type: "ftp", host: "h", port: 1 }, "type")
    await bad({ name: "x", type: "http", host: "h", port: 70000 }, "port")
    await bad({ name: "x", type: "http", host: "http://h/", port: 1 }, "host")
    await bad({ name: "x", type: "http", host: "h", port: 1, family: "ipv5" }, "family")
    await bad({ name: "x", type: "http", host: "h", port: 1, extra: true }, "extra")
    await bad({ name: "x", type: "http", host: "h", port: 1, password: "p" }, "username")
    await bad({ name: "x", type: "http", host: "127.0.0.1", port: 1, family: "ipv6" }, "family")
    const patch = await call(`${gw.url}${PROXIES}/nope`, { method: "PATCH", body: { port: 2 }, headers: admin })
    expect(patch.status).toBe(404)
    await createProxy({ name: "dup", type: "http", host: "h", port: 1 })
    const dup = await call(`${gw.url}${PROXIES}`, { body: { name: "dup", type: "http", host: "h", port: 2 }, headers: admin })
    expect(dup.status).toBe(409)
    const unauth = await call(`${gw.url}${PROXIES}`)
    expect(unauth.status).toBe(401)
  })

  it("refuses to delete a proxy a connection uses (409 naming the connection), and a connection naming an unknown proxy is a 400", async () => {
    const p = await createProxy({ name: "in-use", type: "http", host: "127.0.0.1", port: plain.port })
    const c = await connection(p.id)
    const del = await call(`${gw.url}${PROXIES}/${p.id}`, { method: "DELETE", headers: admin })
    expect(del.status).toBe(409)
    expect(del.body.message).toContain(`'${c.name}'`)
    const got = await call(`${gw.url}${PROXIES}/${p.id}`, { headers: admin })
    expect(got.body.usedBy).toEqual([c.name])

    const unknown = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "bad-proxy", baseUrl: fake.upstream.baseUrl, proxyId: "proxy_nope" },
      headers: admin
    })
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toContain("proxyId")
    // PUT /api/providers/{id} points the connection elsewhere; then the proxy can go.
    const put = await call(`${gw.url}/api/providers/${c.id}`, { method: "PUT", body: { proxyId: null }, headers: admin })
    expect(put.status, put.text).toBe(200)
    expect(put.body.proxyId).toBeNull()
    expect((await call(`${gw.url}${PROXIES}/${p.id}`, { method: "DELETE", headers: admin })).status).toBe(200)
  })
})

describe("control-plane direct fallback (GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK)", () => {
  it("a provider test goes direct when its proxy is unreachable and the flag is on; inference through the same proxy never does", async () => {
    const deadPort = await refusedPort()
    const p = await createProxy({ name: "dead", type: "http", host: "127.0.0.1", port: deadPort })
    const c = await connection(p.id)
    const test = () => call(`${gw.url}/api/providers/${c.id}/test`, { method: "POST", body: {}, headers: admin })
    const off = await test()
    expect(off.body.ok).toBe(false)
    await setFlag("GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK", "true")
    try {
      const on = await test()
      expect(on.body.ok, on.text).toBe(true)
      const chat = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: `${c.name}/m1`, messages: [{ role: "user", content: "hi" }] },
        headers: admin
      })
      expect(chat.status).toBe(502)
    } finally {
      await setFlag("GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK", undefined)
    }
  })
})

describe("auto-select (PROXY_AUTO_SELECT_ENABLED)", () => {
  it("a connection with no proxy and no global default uses the oldest registry proxy that accepts a connection", async () => {
    // Every earlier entry of this file is older: delete the ones nothing uses, so the order is known.
    const list = await call(`${gw.url}${PROXIES}`, { headers: admin })
    for (const p of list.body.proxies as Array<{ id: string; usedBy: Array<string> }>) {
      if (p.usedBy.length === 0) await call(`${gw.url}${PROXIES}/${p.id}`, { method: "DELETE", headers: admin })
    }
    const rest = await call(`${gw.url}${PROXIES}`, { headers: admin })
    for (const p of rest.body.proxies as Array<{ id: string; usedBy: Array<string> }>) {
      for (const name of p.usedBy) {
        const c = await call(`${gw.url}/api/providers/${name}`, { method: "PUT", body: { proxyId: null }, headers: admin })
        expect(c.status, c.text).toBe(200)
      }
      await call(`${gw.url}${PROXIES}/${p.id}`, { method: "DELETE", headers: admin })
    }
    const deadPort = await refusedPort()
    await createProxy({ name: "auto-dead", type: "http", host: "127.0.0.1", port: deadPort })
    await createProxy({ name: "auto-free", type: "socks5", host: "127.0.0.1", port: socks.port, free: true })
    await createProxy({ name: "auto-live", type: "http", host: "127.0.0.1", port: plain.port })
    const c = await connection()
    const before = { plain: plain.passed.length, socks: socks.passed.length }
    await setFlag("PROXY_AUTO_SELECT_ENABLED", "true")
    await setFlag("FREE_PROXY_ENABLED", "false")
    try {
      // The dead one fails its test, the free one is skipped while FREE_PROXY_ENABLED is off.
      expect(await chatVia(c.name, false)).toBe("Hello through the proxy")
      expect(plain.passed.length).toBe(before.plain + 1)
      expect(socks.passed.length).toBe(before.socks)
      // With free proxies allowed, the free SOCKS5 entry (older than the live HTTP one) is first.
      await setFlag("FREE_PROXY_ENABLED", undefined)
      expect(await chatVia(c.name, true)).toBe("Hello through the proxy")
      expect(socks.passed.length).toBe(before.socks + 1)
    } finally {
      await setFlag("PROXY_AUTO_SELECT_ENABLED", undefined)
      await setFlag("FREE_PROXY_ENABLED", undefined)
    }
  })
})

describe("POST /api/settings/proxy/test", () => {
  it("reports the address family of the connection to the proxy and the latency through it", async () => {
    const res = await call(`${gw.url}/api/settings/proxy/test`, {
      body: { url: `${fake.upstream.url}/v1/models`, proxy: `http://127.0.0.1:${plain.port}` },
      headers: admin
    })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ ok: true, status: 200, family: "ipv4" })
    expect(typeof res.body.latencyMs).toBe("number")
  })
})

describe("ENABLE_SOCKS5_PROXY=false", () => {
  it("refuses socks5 entries (400 naming the flag) and refuses calls through a stored one (503 PROXY_DISABLED), never direct", async () => {
    const p = await createProxy({ name: "socks-before-off", type: "socks5", host: "127.0.0.1", port: socks.port })
    const c = await connection(p.id)
    const off = await startGateway({ dataDir: gw.dataDir, env: { ENABLE_SOCKS5_PROXY: "false" } })
    try {
      const created = await call(`${off.url}${PROXIES}`, {
        body: { name: "socks-off", type: "socks5", host: "127.0.0.1", port: socks.port },
        headers: admin
      })
      expect(created.status).toBe(400)
      expect(created.body.message).toContain("ENABLE_SOCKS5_PROXY")
      const upstreamBefore = fake.upstream.chatRequests.length
      const res = await call(`${off.url}/v1/chat/completions`, {
        body: { model: `${c.name}/m1`, messages: [{ role: "user", content: "hi" }] },
        headers: admin
      })
      expect(res.status).toBe(503)
      expect(res.body.error.code).toBe("PROXY_DISABLED")
      expect(fake.upstream.chatRequests.length).toBe(upstreamBefore)
      // HTTP proxies are unaffected.
      const http = await call(`${off.url}${PROXIES}`, {
        body: { name: "http-while-off", type: "http", host: "127.0.0.1", port: plain.port },
        headers: admin
      })
      expect(http.status).toBe(201)
    } finally {
      await off.close()
    }
  })
})
