import * as Effect from "effect/Effect"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Dashboard, DASHBOARD_CSP } from "../src/management/dashboard/Dashboard.js"
import { LiveFeed } from "../src/management/dashboard/LiveFeed.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, rawCall, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

// The dashboard's server side (docs/dashboard.md): its files under /dashboard, first-run setup,
// and the live feed. The pages themselves are tested in a browser (test/e2e/).

const ADMIN = "sk-dashboard-admin-0123456789abcdef"
const USER = "sk-dashboard-user-0123456789abcdef"
const PASSWORD = "dashboard-test-password"

/** A built dashboard in a temp directory: the same layout Vite writes into dist/web. */
const fakeBuild = () => {
  const dir = tempDir("gw-web-")
  fs.mkdirSync(path.join(dir, "assets"))
  fs.writeFileSync(
    path.join(dir, "index.html"),
    `<!doctype html><html><head><script type="module" src="/dashboard/assets/index-abc123.js"></script></head><body>${"<!-- padding -->".repeat(80)}</body></html>`
  )
  fs.writeFileSync(path.join(dir, "assets/index-abc123.js"), `console.log(${JSON.stringify("x".repeat(4000))})`)
  fs.writeFileSync(path.join(dir, "assets/logo-def456.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47]))
  return dir
}

describe("the dashboard's files (/dashboard)", () => {
  const dir = fakeBuild()
  let url: string
  let close: () => Promise<void>
  beforeAll(async () => {
    const http = await import("node:http")
    const runtime = ManagedRuntime.make(Dashboard.layerFrom(dir))
    const dashboard = await runtime.runPromise(Dashboard)
    const server = http.createServer((req, res) => {
      if (!dashboard.handle(req, res, (req.url ?? "/").split("?")[0]!)) res.writeHead(599).end()
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
    close = async () => {
      server.close()
      await runtime.dispose()
    }
  })
  afterAll(() => close())

  it("serves index.html for every page path, never cached, with the CSP and framing refused", async () => {
    for (const p of ["/dashboard/", "/dashboard/keys", "/dashboard/usage/deep/link"]) {
      const res = await rawCall(url, "GET", p)
      expect(res.status).toBe(200)
      expect(res.headers["content-type"]).toBe("text/html; charset=utf-8")
      expect(res.headers["cache-control"]).toBe("no-cache")
      expect(res.headers["content-security-policy"]).toBe(DASHBOARD_CSP)
      expect(res.headers["x-frame-options"]).toBe("DENY")
      expect(res.headers["x-content-type-options"]).toBe("nosniff")
      expect(res.text).toContain("/dashboard/assets/index-abc123.js")
    }
    expect(DASHBOARD_CSP).toContain("script-src 'self'")
    expect(DASHBOARD_CSP).not.toContain("unsafe-inline")
    expect(DASHBOARD_CSP).toContain("frame-ancestors 'none'")
  })

  it("/dashboard redirects to /dashboard/ (relative asset paths resolve under it)", async () => {
    const res = await rawCall(url, "GET", "/dashboard")
    expect(res.status).toBe(308)
    expect(res.headers.location).toBe("/dashboard/")
  })

  it("a browser at the gateway's root is sent to the dashboard; an API client's GET / is left to the API", async () => {
    const browser = await rawCall(url, "GET", "/", { accept: "text/html,application/xhtml+xml,*/*;q=0.8" })
    expect(browser.status).toBe(302)
    expect(browser.headers.location).toBe("/dashboard/")
    expect((await rawCall(url, "GET", "/", { accept: "application/json" })).status).toBe(599)
    expect((await rawCall(url, "GET", "/")).status).toBe(599)
    expect((await rawCall(url, "POST", "/", { accept: "text/html" }, "")).status).toBe(599)
  })

  it("hashed assets are immutable for a year, compressed as the client accepts, and revalidate by ETag", async () => {
    const plain = await rawCall(url, "GET", "/dashboard/assets/index-abc123.js")
    expect(plain.status).toBe(200)
    expect(plain.headers["cache-control"]).toBe("public, max-age=31536000, immutable")
    expect(plain.headers["content-type"]).toBe("text/javascript; charset=utf-8")
    expect(plain.headers["content-encoding"]).toBeUndefined()
    const br = await rawCall(url, "GET", "/dashboard/assets/index-abc123.js", { "accept-encoding": "gzip, br" })
    expect(br.headers["content-encoding"]).toBe("br")
    expect(Number(br.headers["content-length"])).toBeLessThan(Number(plain.headers["content-length"]))
    const gz = await rawCall(url, "GET", "/dashboard/assets/index-abc123.js", { "accept-encoding": "gzip" })
    expect(gz.headers["content-encoding"]).toBe("gzip")
    expect(gz.headers.vary).toBe("accept-encoding")
    const again = await rawCall(url, "GET", "/dashboard/assets/index-abc123.js", { "if-none-match": String(plain.headers.etag) })
    expect(again.status).toBe(304)
    // Binary files are sent as they are.
    const png = await rawCall(url, "GET", "/dashboard/assets/logo-def456.png", { "accept-encoding": "br" })
    expect(png.headers["content-type"]).toBe("image/png")
    expect(png.headers["content-encoding"]).toBeUndefined()
  })

  it("a missing asset is a JSON 404 (not the page), other methods 405, HEAD has no body", async () => {
    const missing = await rawCall(url, "GET", "/dashboard/assets/index-old999.js")
    expect(missing.status).toBe(404)
    expect(missing.body).toMatchObject({ _tag: "NotFound" })
    const file = await rawCall(url, "GET", "/dashboard/robots.txt")
    expect(file.status).toBe(404)
    const post = await rawCall(url, "POST", "/dashboard/keys", { "content-type": "application/json" }, "{}")
    expect(post.status).toBe(405)
    expect(post.headers.allow).toBe("GET, HEAD")
    const head = await rawCall(url, "HEAD", "/dashboard/")
    expect(head.status).toBe(200)
    expect(head.text).toBe("")
    // Not the dashboard's: left to the other routes.
    expect((await rawCall(url, "GET", "/dashboardx")).status).toBe(599)
  })

  it("without a build it says how to make one (503), and the API is unaffected", async () => {
    const runtime = ManagedRuntime.make(Dashboard.layerFrom(tempDir("gw-noweb-")))
    const dashboard = await runtime.runPromise(Dashboard)
    const http = await import("node:http")
    const server = http.createServer((req, res) => void dashboard.handle(req, res, (req.url ?? "/").split("?")[0]!))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const res = await rawCall(`http://127.0.0.1:${(server.address() as { port: number }).port}`, "GET", "/dashboard/")
    expect(res.status).toBe(503)
    expect(res.body.message).toContain("npm run build")
    server.close()
    await runtime.dispose()
  })
})

describe("first-run setup (POST /api/auth/setup)", () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await startGateway()
    await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  })
  afterAll(() => gw.close())

  it("is refused through a proxy (a forwarded request is not this machine), and a short password is a 400", async () => {
    const proxied = await rawCall(
      gw.url,
      "POST",
      "/api/auth/setup",
      { "content-type": "application/json", "x-forwarded-for": "203.0.113.9" },
      JSON.stringify({ password: PASSWORD })
    )
    expect(proxied.status).toBe(403)
    expect(proxied.body.message).toContain("gateway setup")
    const cross = await rawCall(
      gw.url,
      "POST",
      "/api/auth/setup",
      { "content-type": "application/json", origin: "http://evil.example" },
      JSON.stringify({ password: PASSWORD })
    )
    expect(cross.status).toBe(403)
    const short = await call(`${gw.url}/api/auth/setup`, { body: { password: "short" } })
    expect(short.status).toBe(400)
    expect(short.body.message).toContain("at least 8 characters")
    expect((await call(`${gw.url}/api/init`)).body.passwordSet).toBe(false)
  })

  it("from this machine sets the password and logs in (a session cookie and its CSRF token); a second setup is a 409", async () => {
    const res = await call(`${gw.url}/api/auth/setup`, { body: { password: PASSWORD } })
    expect(res.status).toBe(200)
    expect(res.body.csrfToken).toMatch(/.{16,}/)
    const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0]!
    expect(cookie).toMatch(/^gw_session=/)
    expect(res.headers.get("set-cookie")).toMatch(/HttpOnly/i)
    const session = await call(`${gw.url}/api/auth/session`, { headers: { cookie } })
    expect(session.body).toMatchObject({ authenticated: true, via: "session", passwordSet: true })
    const again = await call(`${gw.url}/api/auth/setup`, { body: { password: "another-password" } })
    expect(again.status).toBe(409)
    const withKey = await call(`${gw.url}/api/auth/setup`, {
      body: { password: "another-password" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(withKey.status).toBe(409)
    // The password that was set is the one that logs in.
    expect((await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })).status).toBe(200)
  })

  it("an admin key may set it up from anywhere", async () => {
    const other = await startGateway()
    try {
      await other.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const res = await rawCall(
        other.url,
        "POST",
        "/api/auth/setup",
        { "content-type": "application/json", "x-forwarded-for": "203.0.113.9", authorization: `Bearer ${ADMIN}` },
        JSON.stringify({ password: PASSWORD })
      )
      expect(res.status).toBe(200)
    } finally {
      await other.close()
    }
  })
})

const open = (url: string, headers: Record<string, string> = {}) =>
  new Promise<{ ws: WebSocket; frames: any[]; next: (pred: (f: any) => boolean) => Promise<any> }>((resolve, reject) => {
    const ws = new WebSocket(url, { headers })
    const frames: any[] = []
    const waiters = new Set<() => void>()
    ws.on("message", (d) => {
      frames.push(JSON.parse(String(d)))
      for (const w of [...waiters]) w()
    })
    ws.once("unexpected-response", (_req, res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c))
      res.on("end", () => reject(Object.assign(new Error(`refused ${res.statusCode}: ${body}`), { status: res.statusCode, body })))
    })
    ws.once("error", reject)
    ws.once("open", () =>
      resolve({
        ws,
        frames,
        next: (pred) =>
          new Promise((done, fail) => {
            const timer = setTimeout(() => fail(new Error(`no matching frame; got ${JSON.stringify(frames).slice(0, 500)}`)), 5000)
            const check = () => {
              const hit = frames.find(pred)
              if (hit) {
                clearTimeout(timer)
                waiters.delete(check)
                done(hit)
              }
            }
            waiters.add(check)
            check()
          })
      })
    )
  })

describe("the live feed (GATEWAY_ENABLE_LIVE_WS)", () => {
  let gw: TestGateway
  let up: FakeUpstream
  let cookie: string
  beforeAll(async () => {
    up = await FakeUpstream.start()
    up.always({ content: "hello from upstream" })
    gw = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
    await gw.run(
      Effect.flatMap(ApiKeys, (k) =>
        Effect.zipRight(
          k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN }),
          k.create({ name: "user", scopes: ["inference"] }, { secret: USER })
        )
      )
    )
    const created = await call(`${gw.url}/api/providers`, {
      body: { provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), apiKey: "sk-up", defaultModel: "m1" },
      headers: { authorization: `Bearer ${ADMIN}` }
    })
    expect(created.status).toBe(201)
    const login = await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })
    cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
  })
  afterAll(async () => {
    await gw.close()
    await up.close()
  })
  const ws = () => gw.url.replace(/^http/, "ws") + "/api/live/ws"
  const host = () => new URL(gw.url).host

  it("a dashboard session sees each request as it completes or fails: hello with the recent events, then one frame per event", async () => {
    const chat = (model: string) =>
      call(`${gw.url}/v1/chat/completions`, {
        body: { model, messages: [{ role: "user", content: "hi" }] },
        headers: { authorization: `Bearer ${USER}` }
      })
    expect((await chat("up/m1")).status).toBe(200)
    const client = await open(ws(), { cookie, origin: `http://${host()}` })
    try {
      const hello = await client.next((f) => f.type === "hello")
      expect(hello.recent.some((e: any) => e.event === "request.completed")).toBe(true)
      expect((await chat("up/m1")).status).toBe(200)
      const done = await client.next((f) => f.type === "event" && f.event.event === "request.completed")
      expect(done.event.data).toMatchObject({ provider: expect.any(String), model: "m1", status: 200 })
      expect(typeof done.event.timestamp).toBe("string")
      up.next({ status: 500, body: { error: { message: "boom" } } })
      await chat("up/m1")
      const failed = await client.next((f) => f.type === "event" && f.event.event === "request.failed")
      expect(failed.event.data.status).toBeGreaterThanOrEqual(400)
    } finally {
      client.ws.close()
      await gw.resetResilience()
    }
  })

  it("an admin key may listen; no credentials, an inference key or a foreign page may not", async () => {
    const byKey = await open(ws(), { authorization: `Bearer ${ADMIN}` })
    await byKey.next((f) => f.type === "hello")
    byKey.ws.close()
    await expect(open(ws())).rejects.toMatchObject({ status: 401 })
    await expect(open(ws(), { authorization: `Bearer ${USER}` })).rejects.toMatchObject({ status: 401 })
    await expect(open(ws(), { cookie: "gw_session=forged" })).rejects.toMatchObject({ status: 401 })
    // Another site's page in the admin's browser carries the cookie, but not the Origin.
    await expect(open(ws(), { cookie, origin: "http://evil.example" })).rejects.toMatchObject({ status: 403 })
  })

  it("is also on its own port (GATEWAY_LIVE_WS_PORT; a free one here), which answers plain HTTP with 426", async () => {
    const port = await gw.run(Effect.map(LiveFeed, (l) => l.port()))
    expect(port).toBeGreaterThan(0)
    const client = await open(`ws://127.0.0.1:${port}/`, { cookie, origin: `http://${host()}` })
    await client.next((f) => f.type === "hello")
    client.ws.close()
    const plain = await call(`http://127.0.0.1:${port}/`)
    expect(plain.status).toBe(426)
    await expect(open(`ws://127.0.0.1:${port}/`, { cookie, origin: "http://evil.example" })).rejects.toMatchObject({ status: 403 })
  })

  it("off (GATEWAY_ENABLE_LIVE_WS=false): the path is a 404 saying so, and no port is opened", async () => {
    const off = await startGateway({ env: { GATEWAY_ENABLE_LIVE_WS: "false" } })
    try {
      await off.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const refused = await open(off.url.replace(/^http/, "ws") + "/api/live/ws", { authorization: `Bearer ${ADMIN}` }).catch((e) => e)
      expect(refused.status).toBe(404)
      expect(refused.body).toContain("GATEWAY_ENABLE_LIVE_WS")
      expect(await off.run(Effect.map(LiveFeed, (l) => l.port()))).toBeUndefined()
    } finally {
      await off.close()
    }
  })
})
