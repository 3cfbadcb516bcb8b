import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, rawCall, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { refusedPort } from "./support/refusedPort.js"

/** Global settings (docs/operations.md, "Settings"), over HTTP against a real gateway and SQLite file. */
const ADMIN = "gwk_settings_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
const dataDir = tempDir()

const api = (path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
  call(`${gw.url}${path}`, { ...init, headers: { ...admin, ...init.headers } })
const setFlag = (key: string, value: boolean) => api("/api/settings/feature-flags", { method: "PUT", body: { key, value: String(value) } })
const chat = (headers: Record<string, string> = {}) =>
  call(`${gw.url}/v1/chat/completions`, {
    body: { model: "local/m1", messages: [{ role: "user", content: "hi" }] },
    headers: { ...admin, ...headers }
  })

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway({ dataDir })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  expect(
    (
      await api("/api/providers", {
        body: { provider: "openai-compatible", name: "local", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] }
      })
    ).status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

describe("the settings document", () => {
  it("GET answers every section with its defaults and the read-only info", async () => {
    const res = await api("/api/settings")
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      proxy: { url: null, family: "auto", noProxy: [] },
      ipFilter: { allow: [], deny: [] },
      thinkingBudget: { mode: "passthrough", maxTokens: 8192, effort: "medium", budgetTokens: 8192 },
      systemPrompt: { enabled: false, text: "", position: "prepend", skipKeyIds: [] },
      compression: {
        enabled: true,
        defaultCombo: null,
        activeProfile: null,
        autoTrigger: { enabled: false, thresholdTokens: 64000, windowShare: 0.75 },
        compressByDefault: false,
        injectionMaxTokens: 2000
      },
      requireLogin: true,
      backups: { intervalHours: null, keep: null },
      shadow: [],
      shadowOptions: { budgetUsdPerDay: 1, concurrency: 2, retentionDays: 30, judgeModel: null },
      bridge: { image: null, audio: null, pdf: null },
      info: { restartRequired: [], storedOnly: [], backups: { intervalHours: 24, keep: 7, source: "env" } }
    })
  })

  it("answers 401 without management authentication", async () => {
    expect((await call(`${gw.url}/api/settings`)).status).toBe(401)
    expect((await call(`${gw.url}/api/settings/ip-filter`, { method: "PUT", body: { deny: ["10.0.0.0/8"] } })).status).toBe(401)
  })

  it("PATCH merges into the stored document; PUT replaces it, missing fields taking their defaults", async () => {
    const patched = await api("/api/settings", {
      method: "PATCH",
      body: { systemPrompt: { text: "Be brief." }, compression: { injectionMaxTokens: 700, autoTrigger: { enabled: true } } }
    })
    expect(patched.status).toBe(200)
    expect(patched.body.systemPrompt).toEqual({ enabled: false, text: "Be brief.", position: "prepend", skipKeyIds: [] })
    expect(patched.body.compression.injectionMaxTokens).toBe(700)
    // A nested object merges too: the trigger's other fields keep their values.
    expect(patched.body.compression.autoTrigger).toEqual({ enabled: true, thresholdTokens: 64000, windowShare: 0.75 })
    const again = await api("/api/settings", { method: "PATCH", body: { systemPrompt: { position: "append" } } })
    expect(again.body.systemPrompt).toMatchObject({ text: "Be brief.", position: "append" })
    expect(again.body.compression.injectionMaxTokens).toBe(700)

    const replaced = await api("/api/settings", { method: "PUT", body: { compression: { enabled: false } } })
    expect(replaced.status).toBe(200)
    expect(replaced.body.systemPrompt).toEqual({ enabled: false, text: "", position: "prepend", skipKeyIds: [] })
    expect(replaced.body.compression).toEqual({
      enabled: false,
      defaultCombo: null,
      activeProfile: null,
      autoTrigger: { enabled: false, thresholdTokens: 64000, windowShare: 0.75 },
      compressByDefault: false,
      injectionMaxTokens: 2000
    })
    // What GET answered may be PUT back as it is (info is read-only and ignored).
    const roundTrip = await api("/api/settings", { method: "PUT", body: (await api("/api/settings")).body })
    expect(roundTrip.status).toBe(200)
    expect(roundTrip.body.compression.enabled).toBe(false)
    await api("/api/settings", { method: "PUT", body: {} })
  })

  it("bad input is a 400 naming the field", async () => {
    const cases: Array<[string, string, unknown, RegExp]> = [
      [
        "PATCH",
        "/api/settings",
        { ipFilter: { allow: ["10.0.0.1", "192.168.0.0/16", "nope"] } },
        /ipFilter\.allow\.2: not an IP address or CIDR \(got "nope"\)/
      ],
      ["PUT", "/api/settings", { ipFilter: { deny: ["10.0.0.0/33"] } }, /ipFilter\.deny\.0: not an IP address or CIDR/],
      ["PUT", "/api/settings/ip-filter", { allow: ["2001:db8::/129"] }, /allow\.0: not an IP address or CIDR/],
      ["PUT", "/api/settings/proxy", { url: "ftp://proxy:21" }, /url: scheme must be http, https, socks5 or socks5h/],
      ["PUT", "/api/settings/thinking-budget", { mode: "maximum" }, /mode: mode must be one of: passthrough, cap, force/],
      ["PUT", "/api/settings/thinking-budget", { mode: "cap", maxTokens: -5 }, /maxTokens: maxTokens must be a whole number of tokens/],
      [
        "PATCH",
        "/api/settings",
        { systemPrompt: { position: "middle" } },
        /systemPrompt\.position: position must be one of: prepend, append/
      ],
      ["PATCH", "/api/settings", { backups: { keep: 1.5 } }, /backups\.keep: keep must be a whole number/],
      ["PATCH", "/api/settings", { shadow: [{ model: "x", sampleRate: 1.5 }] }, /sampleRate must be a fraction between 0 and 1/],
      ["PATCH", "/api/settings", { shadowOptions: { concurrency: 0 } }, /shadowOptions\.concurrency must be an integer between 1 and 64/],
      ["PATCH", "/api/settings", { colour: "blue" }, /colour: is unexpected/],
      ["PUT", "/api/settings", { systemPrompt: { txt: "typo" } }, /systemPrompt\.txt: is unexpected/],
      ["PUT", "/api/settings/ip-filter", { allow: [], block: ["10.0.0.1"] }, /block: is unexpected/],
      ["PUT", "/api/settings/compression", { level: 5 }, /level: is unexpected/],
      [
        "PUT",
        "/api/settings/compression",
        { autoTrigger: { windowShare: 2 } },
        /autoTrigger\.windowShare: windowShare must be between 0\.05 and 1/
      ],
      [
        "PATCH",
        "/api/settings",
        { compression: { injectionMaxTokens: -1 } },
        /compression\.injectionMaxTokens: injectionMaxTokens must be a whole number of tokens/
      ],
      ["PUT", "/api/settings/require-login", { requireLogin: "no" }, /requireLogin: expected boolean/],
      ["POST", "/api/settings/purge-request-history", { olderThanDays: -1 }, /olderThanDays: olderThanDays must be a number of days/]
    ]
    for (const [method, path, body, message] of cases) {
      const res = await api(path, { method, body })
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(400)
      expect(res.body.message, `${method} ${path}`).toMatch(message)
    }
    // Nothing was stored by the refused changes.
    expect((await api("/api/settings/ip-filter")).body).toEqual({ allow: [], deny: [] })
  })

  it("each section has its own GET and PUT, answering the section", async () => {
    expect(
      (await api("/api/settings/compression", { method: "PUT", body: { activeProfile: "engine:rtk", compressByDefault: true } })).body
    ).toMatchObject({
      enabled: true,
      activeProfile: "engine:rtk",
      compressByDefault: true
    })
    expect((await api("/api/settings/compression")).body.activeProfile).toBe("engine:rtk")
    expect((await api("/api/settings/require-login")).body).toEqual({ requireLogin: true })
    expect((await api("/api/settings/thinking-budget", { method: "PUT", body: { mode: "cap", maxTokens: 2048 } })).body).toMatchObject({
      mode: "cap",
      maxTokens: 2048
    })
    expect((await api("/api/settings/system-prompt")).body).toEqual({ enabled: false, text: "", position: "prepend", skipKeyIds: [] })
    expect((await api("/api/settings/backups", { method: "PUT", body: { intervalHours: 6, keep: 3 } })).body).toEqual({
      intervalHours: 6,
      keep: 3
    })
    expect((await api("/api/settings")).body.info.backups).toEqual({ intervalHours: 6, keep: 3, source: "settings" })
    // The feature-flags route under /api/settings is still the flags group's.
    expect((await api("/api/settings/feature-flags")).body.summary).toMatchObject({ total: expect.any(Number) })
    await api("/api/settings", { method: "PUT", body: {} })
  })

  it("the proxy password is stored encrypted, masked on GET, and kept when the mask is sent back", async () => {
    const put = await api("/api/settings/proxy", {
      method: "PUT",
      body: { url: "http://alice:s3cret-pw@127.0.0.1:3128", noProxy: ["localhost", ".internal.example", "10.0.0.0/8"] }
    })
    expect(put.status).toBe(200)
    expect(put.body).toEqual({
      url: "http://alice:****@127.0.0.1:3128",
      family: "auto",
      noProxy: ["localhost", ".internal.example", "10.0.0.0/8"]
    })
    expect((await api("/api/settings")).text).not.toContain("s3cret-pw")
    const stored = await gw.run(
      Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ value: string }>`SELECT value FROM kv WHERE namespace = 'settings'`)
    )
    expect(stored[0]!.value).not.toContain("s3cret-pw")
    // Sending the masked URL back (GET → edit → PUT) keeps the password.
    await api("/api/settings/proxy", { method: "PUT", body: { url: "http://alice:****@127.0.0.1:3128", noProxy: [] } })
    const { Settings } = await import("../src/platform/settings/Settings.js")
    const clear = await gw.run(Effect.map(Settings, (s) => s.current().proxy.url))
    expect(clear).toBe("http://alice:s3cret-pw@127.0.0.1:3128")
    await api("/api/settings/proxy", { method: "PUT", body: {} })
  })
})

describe("persistence", () => {
  it("the document survives a restart on the same DATA_DIR", async () => {
    await api("/api/settings", {
      method: "PATCH",
      body: {
        compression: { activeProfile: "engine:json" },
        thinkingBudget: { mode: "force", effort: "low" },
        proxy: { url: "socks5://bob:pw@127.0.0.1:1080" }
      }
    })
    const before = (await api("/api/settings")).body
    await gw.close()
    gw = await startGateway({ dataDir })
    const after = await api("/api/settings")
    expect(after.status).toBe(200)
    expect(after.body).toEqual(before)
    expect(after.body.proxy.url).toBe("socks5://bob:****@127.0.0.1:1080")
    await api("/api/settings", { method: "PUT", body: {} })
  })
})

describe("a document stored before compression was built", () => {
  it("keeps its other sections; the old stored-only compression section takes today's defaults", async () => {
    const legacy = {
      document: {
        systemPrompt: { enabled: true, text: "Kept.", position: "append", skipKeyIds: [] },
        compression: { enabled: false, engine: "rtk", level: 5, minTokens: 4000, toolResults: true }
      }
    }
    await gw.run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql`UPDATE kv SET value = ${JSON.stringify(legacy)} WHERE namespace = 'settings' AND key = 'document'`
      )
    )
    await gw.close()
    gw = await startGateway({ dataDir })
    const after = (await api("/api/settings")).body
    expect(after.systemPrompt.text).toBe("Kept.")
    expect(after.compression.enabled).toBe(true)
    expect(after.compression.activeProfile).toBeNull()
    await api("/api/settings", { method: "PUT", body: {} })
  })
})

describe("ip filter", () => {
  const xff = (address: string) => ({ "x-forwarded-for": address })

  it("refuses denied addresses with 403 JSON before authentication, on inference and management routes; X-Forwarded-For only with the trust flag", async () => {
    const put = await api("/api/settings/ip-filter", { method: "PUT", body: { deny: ["203.0.113.0/24", "2001:db8::/32"] } })
    expect(put.status).toBe(200)
    expect(put.body).toEqual({ allow: [], deny: ["203.0.113.0/24", "2001:db8::/32"] })

    // Trust flag off: the socket address (127.0.0.1) counts; the header is ignored.
    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", false)
    expect((await chat(xff("203.0.113.7"))).status).toBe(200)

    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", true)
    const refused = await chat(xff("203.0.113.7"))
    expect(refused.status).toBe(403)
    expect(refused.body.error).toMatchObject({ code: "ip_not_allowed", message: "your address is on this gateway's deny list" })
    expect(refused.text).not.toContain("203.0.113.0/24")
    // Before authentication: no key at all still gets the 403, not a 401.
    expect((await call(`${gw.url}/api/settings`, { headers: xff("203.0.113.9") })).status).toBe(403)
    expect((await call(`${gw.url}/v1/models`, { headers: xff("2001:db8::5") })).status).toBe(403)
    expect((await call(`${gw.url}/no/such/route`, { headers: xff("203.0.113.9") })).status).toBe(403)
    // Other addresses pass; the rightmost entry (the one the trusted proxy appended) counts.
    expect((await chat(xff("198.51.100.4"))).status).toBe(200)
    expect((await chat(xff("203.0.113.7, 198.51.100.4"))).status).toBe(200)
    expect((await chat(xff("198.51.100.4, 203.0.113.7"))).status).toBe(403)
    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", false)
    expect((await api("/api/settings/ip-filter", { method: "PUT", body: {} })).status).toBe(200)
  })

  it("a non-empty allow list lets only its addresses in (deny wins); loopback always passes", async () => {
    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", true)
    expect(
      (
        await api("/api/settings/ip-filter", {
          method: "PUT",
          body: { allow: ["198.51.100.0/24"], deny: ["198.51.100.66"] },
          headers: xff("198.51.100.1")
        })
      ).status
    ).toBe(200)
    expect((await chat(xff("198.51.100.1"))).status).toBe(200)
    const outside = await chat(xff("192.0.2.1"))
    expect(outside.status).toBe(403)
    expect(outside.body.error.message).toBe("your address is not on this gateway's allow list")
    expect((await chat(xff("198.51.100.66"))).status).toBe(403)
    // The machine itself (a direct loopback connection) is never locked out.
    expect((await chat()).status).toBe(200)
    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", false)
    await api("/api/settings/ip-filter", { method: "PUT", body: {} })
  })

  it("refuses (400) a change that would lock out the caller's own address", async () => {
    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", true)
    const res = await api("/api/settings/ip-filter", { method: "PUT", body: { deny: ["192.0.2.0/24"] }, headers: xff("192.0.2.10") })
    expect(res.status).toBe(400)
    expect(res.body.message).toMatch(/^ipFilter: this change would refuse your own address 192\.0\.2\.10/)
    const allow = await api("/api/settings", { method: "PATCH", body: { ipFilter: { allow: ["10.0.0.0/8"] } }, headers: xff("192.0.2.10") })
    expect(allow.status).toBe(400)
    expect((await api("/api/settings/ip-filter")).body).toEqual({ allow: [], deny: [] })
    await setFlag("GATEWAY_TRUST_PROXY_HEADERS", false)
  })
})

describe("require login", () => {
  it("off: a direct loopback caller without credentials may use management routes; forwarded or cross-origin requests still need login", async () => {
    expect((await call(`${gw.url}/api/settings/require-login`)).status).toBe(401)
    expect((await api("/api/settings/require-login", { method: "PUT", body: { requireLogin: false } })).body).toEqual({
      requireLogin: false
    })
    const open = await call(`${gw.url}/api/settings/require-login`)
    expect(open.status).toBe(200)
    expect(open.body).toEqual({ requireLogin: false })
    expect((await call(`${gw.url}/api/settings`, { headers: { "x-forwarded-for": "198.51.100.4" } })).status).toBe(401)
    expect(
      (await call(`${gw.url}/api/settings/compression`, { method: "PUT", body: {}, headers: { origin: "https://evil.example" } })).status
    ).toBe(401)
    const u = new URL(gw.url)
    expect((await rawCall(gw.url, "GET", "/api/settings", { host: `attacker.example:${u.port}` })).status).toBe(401)
    // Turned back on without login, from the machine itself.
    expect((await call(`${gw.url}/api/settings/require-login`, { method: "PUT", body: { requireLogin: true } })).status).toBe(200)
    expect((await call(`${gw.url}/api/settings/require-login`)).status).toBe(401)
  })
})

/** A tiny HTTP proxy on 127.0.0.1 that answers CONNECT (with optional Basic credentials) and records what it tunnelled. */
const startConnectProxy = async (credentials?: string) => {
  const tunnels: Array<string> = []
  const server = http.createServer((_req, res) => res.writeHead(405).end())
  server.on("connect", (req, socket, head) => {
    const auth = req.headers["proxy-authorization"]
    if (credentials && auth !== `Basic ${Buffer.from(credentials).toString("base64")}`) {
      socket.end("HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n")
      return
    }
    const [host, port] = [req.url!.slice(0, req.url!.lastIndexOf(":")), Number(req.url!.slice(req.url!.lastIndexOf(":") + 1))]
    tunnels.push(req.url!)
    const upstream = net.connect(port, host, () => {
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      if (head.length) upstream.write(head)
      upstream.pipe(socket)
      socket.pipe(upstream)
    })
    upstream.on("error", () => socket.destroy())
    socket.on("error", () => upstream.destroy())
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    tunnels,
    close: () => new Promise<void>((r) => server.close(() => r()))
  }
}

describe("proxy test", () => {
  it("connects through the configured proxy to the target and reports status and latency; wrong credentials and a dead proxy are reported", async () => {
    const target = http.createServer((req, res) => res.writeHead(req.url === "/health" ? 204 : 404).end())
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", r))
    const targetUrl = `http://127.0.0.1:${(target.address() as net.AddressInfo).port}`
    const proxy = await startConnectProxy("carol:pw1")
    try {
      // Nothing configured, nothing given.
      const none = await api("/api/settings/proxy/test", { body: { url: `${targetUrl}/health` } })
      expect(none.status).toBe(400)
      expect(none.body.message).toMatch(/^proxy: no proxy is configured/)

      const withCreds = proxy.url.replace("http://", "http://carol:pw1@")
      await api("/api/settings/proxy", { method: "PUT", body: { url: withCreds } })
      const ok = await api("/api/settings/proxy/test", { body: { url: `${targetUrl}/health` } })
      expect(ok.status).toBe(200)
      expect(ok.body).toEqual({
        ok: true,
        status: 204,
        latencyMs: expect.any(Number),
        error: null,
        proxy: proxy.url.replace("http://", "http://carol:****@"),
        family: "ipv4"
      })
      expect(proxy.tunnels).toEqual([new URL(targetUrl).host])

      const missing = await api("/api/settings/proxy/test", { body: { url: `${targetUrl}/nothing` } })
      expect(missing.body).toMatchObject({ ok: false, status: 404, error: null })

      const badCreds = await api("/api/settings/proxy/test", {
        body: { url: targetUrl, proxy: proxy.url.replace("http://", "http://carol:wrong@") }
      })
      expect(badCreds.body).toMatchObject({ ok: false, status: null, error: expect.stringMatching(/407/) })
      expect(badCreds.text).not.toContain("wrong")

      const deadPort = await refusedPort()
      const dead = await api("/api/settings/proxy/test", { body: { url: targetUrl, proxy: `http://127.0.0.1:${deadPort}` } })
      expect(dead.body).toMatchObject({ ok: false, status: null, error: expect.stringMatching(/ECONNREFUSED/) })

      expect((await api("/api/settings/proxy/test", { body: { url: "gopher://x" } })).status).toBe(400)
    } finally {
      await api("/api/settings/proxy", { method: "PUT", body: {} })
      await proxy.close()
      await new Promise<void>((r) => target.close(() => r()))
    }
  })
})

describe("scheduled backups from settings", () => {
  it("a changed interval and count re-arm the schedule at once, without a restart", async () => {
    const scheduled = async () =>
      ((await api("/api/db-backups")).body.backups as Array<{ kind: string }>).filter((b) => b.kind === "scheduled").length
    expect(await scheduled()).toBe(0)
    // About every 0.4 s, keeping 2.
    expect((await api("/api/settings/backups", { method: "PUT", body: { intervalHours: 0.0001, keep: 2 } })).status).toBe(200)
    expect((await api("/api/settings")).body.info.backups).toEqual({ intervalHours: 0.0001, keep: 2, source: "settings" })
    await expect.poll(scheduled, { timeout: 10_000, interval: 100 }).toBe(2)
    // Pruned to `keep` as more are taken.
    const names = async () =>
      ((await api("/api/db-backups")).body.backups as Array<{ id: string; kind: string }>)
        .filter((b) => b.kind === "scheduled")
        .map((b) => b.id)
    const first = await names()
    await expect.poll(async () => (await names()).some((id) => !first.includes(id)), { timeout: 10_000, interval: 100 }).toBe(true)
    expect(await scheduled()).toBeLessThanOrEqual(2)
    expect((await api("/api/settings/backups", { method: "PUT", body: { intervalHours: 0 } })).status).toBe(200)
    await api("/api/settings", { method: "PUT", body: {} })
  })
})

describe("purge request history", () => {
  it("deletes usage rows older than the cutoff but keeps the open budget windows, and answers how many", async () => {
    const now = Date.now()
    const day = 86_400_000
    await gw.run(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.forEach(
          [400, 200, 100],
          (age, i) =>
            sql`INSERT INTO usage (ts, request_id, endpoint, status) VALUES (${now - age * day}, ${`old-${i}`}, 'chat.completions', 200)`,
          {
            discard: true
          }
        )
      )
    )
    expect((await chat()).status).toBe(200)
    const count = (where: "old" | "recent") =>
      gw
        .run(
          Effect.flatMap(SqlClient.SqlClient, (sql) =>
            where === "old"
              ? sql<{ n: number }>`SELECT COUNT(*) AS n FROM usage WHERE request_id LIKE 'old-%'`
              : sql<{ n: number }>`SELECT COUNT(*) AS n FROM usage WHERE ts >= ${now - 60_000}`
          )
        )
        .then((r) => r[0]!.n)
    await expect.poll(() => count("recent"), { timeout: 10_000 }).toBeGreaterThanOrEqual(1)
    const recent = await count("recent")
    const some = await api("/api/settings/purge-request-history", { body: { olderThanDays: 300 } })
    expect(some.status).toBe(200)
    expect(some.body.removed).toBe(1)
    expect(Math.abs(Date.parse(some.body.keptSince) - (now - 300 * day))).toBeLessThan(60_000)

    const rest = await api("/api/settings/purge-request-history", { body: {} })
    expect(rest.body.removed).toBe(2)
    expect(await count("old")).toBe(0)
    // This month's (and this week's) rows stay: budgets and token limits sum them.
    expect(await count("recent")).toBeGreaterThanOrEqual(recent)
    // All rows: the cutoff is the start of the oldest open window (at most a month and a week back).
    expect(Date.parse(rest.body.keptSince)).toBeGreaterThan(now - 40 * day)
  })
})
