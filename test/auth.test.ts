import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AdminAuth } from "../src/services/auth/AdminAuth.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { clientAddress } from "../src/platform/http/request.js"
import { isLoopbackHost } from "../src/platform/config/AppConfig.js"
import {
  FORGET_AFTER_MS,
  FREE_FAILURES,
  makeLoginThrottle,
  MAX_DELAY_SECONDS,
  throttledAddress
} from "../src/services/auth/loginThrottle.js"
import * as nodeHttp from "node:http"
import type * as http from "node:http"

const ADMIN = "gwk_auth_admin_key_0123456789abcdef"
const PASSWORD = "correct horse battery"

let upstream: FakeOpenAI
let gw: TestGateway
const admin = { authorization: `Bearer ${ADMIN}` }
const chatBody = { model: "up/m1", messages: [{ role: "user", content: "hi" }] }

beforeAll(async () => {
  upstream = await FakeOpenAI.start()
  gw = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const res = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl, defaultModel: "m1" },
    headers: admin
  })
  expect(res.status).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

/** POST /api/auth/login from a chosen loopback source address (127.0.0.0/8 is all local). */
const loginFrom = (base: string, localAddress: string, password: string) =>
  new Promise<{ status: number; headers: nodeHttp.IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const u = new URL("/api/auth/login", base)
    const body = JSON.stringify({ password })
    const req = nodeHttp.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: "POST",
        localAddress,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : undefined }))
      }
    )
    req.on("error", reject)
    req.end(body)
  })

const setRequireKey = async (value: string | undefined) => {
  const res = await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "REQUIRE_API_KEY", value }, headers: admin })
  expect(res.status).toBe(200)
}

describe("API keys", () => {
  it("are shown once at creation, listed masked, and removable", async () => {
    const created = await call(`${gw.url}/api/keys`, { body: { name: "laptop" }, headers: admin })
    expect(created.status).toBe(201)
    const secret: string = created.body.secret
    expect(secret).toMatch(/^gwk_[A-Za-z0-9_-]{40,}$/)
    expect(created.body.scopes).toEqual(["inference"])

    const listed = await call(`${gw.url}/api/keys`, { headers: admin })
    expect(listed.status).toBe(200)
    expect(listed.text).not.toContain(secret)
    const entry = listed.body.keys.find((k: any) => k.id === created.body.id)
    expect(entry.key).toBe(`${secret.slice(0, 8)}…${secret.slice(-4)}`)
    expect(entry).not.toHaveProperty("secret")

    const removed = await call(`${gw.url}/api/keys/${created.body.id}`, { method: "DELETE", headers: admin })
    expect(removed.status).toBe(200)
    const again = await call(`${gw.url}/api/keys/${created.body.id}`, { method: "DELETE", headers: admin })
    expect(again.status).toBe(404)
    expect(again.body.message).toContain(created.body.id)
  })

  it("reject bad input with a 400 that names the field", async () => {
    const res = await call(`${gw.url}/api/keys`, { body: { name: "x", scopes: ["root"] }, headers: admin })
    expect(res.status).toBe(400)
    expect(res.text).toContain("scopes")
    const date = await call(`${gw.url}/api/keys`, { body: { expiresAt: "tomorrow" }, headers: admin })
    expect(date.status).toBe(400)
  })

  it("stop working once expired", async () => {
    const created = await gw.run(
      Effect.flatMap(ApiKeys, (k) => k.create({ name: "old", scopes: ["inference"], expiresAt: new Date(Date.now() - 1000) }))
    )
    await setRequireKey("true")
    try {
      const res = await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: { authorization: `Bearer ${created.secret}` } })
      expect(res.status).toBe(401)
    } finally {
      await setRequireKey(undefined)
    }
  })
})

describe("inference authentication", () => {
  it("accepts any key, or none, while REQUIRE_API_KEY is off (the default)", async () => {
    expect((await call(`${gw.url}/v1/chat/completions`, { body: chatBody })).status).toBe(200)
    expect((await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: { authorization: "Bearer whatever" } })).status).toBe(
      200
    )
  })

  it("accepts the key in every place clients put it when REQUIRE_API_KEY is on", async () => {
    const { secret } = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "forms" })))
    await setRequireKey("true")
    try {
      const forms: Array<[string, string, Record<string, string>]> = [
        ["Authorization: Bearer", "", { authorization: `Bearer ${secret}` }],
        ["x-api-key", "", { "x-api-key": secret }],
        ["x-goog-api-key", "", { "x-goog-api-key": secret }],
        ["?token=", `?token=${secret}`, {}],
        ["?apiKey=", `?apiKey=${secret}`, {}],
        ["?api_key=", `?api_key=${secret}`, {}],
        ["?key=", `?key=${secret}`, {}]
      ]
      for (const [name, query, headers] of forms) {
        const res = await call(`${gw.url}/v1/chat/completions${query}`, { body: chatBody, headers })
        expect(res.status, name).toBe(200)
      }
      const missing = await call(`${gw.url}/v1/chat/completions`, { body: chatBody })
      expect(missing.status).toBe(401)
      expect(missing.body.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" })
      expect(missing.body.error.message).toContain("Missing API key")
      const wrong = await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: { authorization: "Bearer gwk_wrong" } })
      expect(wrong.status).toBe(401)
      expect(wrong.body.error.message).toContain("Invalid API key")
      const models = await call(`${gw.url}/v1/models`)
      expect(models.status).toBe(401)
    } finally {
      await setRequireKey(undefined)
    }
  })

  it("a removed key stops working at once", async () => {
    const created = await call(`${gw.url}/api/keys`, { body: { name: "short-lived" }, headers: admin })
    await setRequireKey("true")
    try {
      const auth = { authorization: `Bearer ${created.body.secret}` }
      expect((await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: auth })).status).toBe(200)
      await call(`${gw.url}/api/keys/${created.body.id}`, { method: "DELETE", headers: admin })
      expect((await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: auth })).status).toBe(401)
    } finally {
      await setRequireKey(undefined)
    }
  })

  it("never lets a key reach the logs", async () => {
    const { secret } = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "log-check" })))
    await call(`${gw.url}/v1/chat/completions?api_key=${secret}`, { body: chatBody })
    await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: { authorization: `Bearer ${secret}` } })
    const all = JSON.stringify(gw.logs)
    expect(all).not.toContain(secret)
    expect(all).not.toContain(ADMIN)
  })
})

describe("browser requests from other origins", () => {
  it("need a key: a drive-by page cannot spend the providers of a keyless localhost gateway", async () => {
    const evil = await call(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify(chatBody),
      headers: { "content-type": "text/plain", origin: "https://evil.example" }
    })
    expect(evil.status).toBe(403)
    expect(evil.body.error.code).toBe("origin_not_allowed")
    const { secret } = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "browser-app" })))
    const withKey = await call(`${gw.url}/v1/chat/completions`, {
      body: chatBody,
      headers: { origin: "https://evil.example", authorization: `Bearer ${secret}` }
    })
    expect(withKey.status).toBe(200)
    const local = await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: { origin: "http://localhost:5173" } })
    expect(local.status).toBe(200)
    const sdk = await call(`${gw.url}/v1/chat/completions`, { body: chatBody })
    expect(sdk.status).toBe(200)
  })

  it("compare the whole origin host: names that merely start like loopback are foreign", async () => {
    const before = upstream.requests.length
    for (const origin of [
      "http://127.0.0.1.evil.example",
      "http://127.evil.example",
      "https://127.0.0.1.nip.io:8443",
      "http://localhost.evil.example",
      "http://localhost-evil.example",
      "http://[::2]",
      "http://[::ffff:10.0.0.1]"
    ]) {
      const res = await call(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify(chatBody),
        headers: { "content-type": "text/plain", origin }
      })
      expect(res.status, origin).toBe(403)
      expect(res.body.error.code, origin).toBe("origin_not_allowed")
    }
    // Refused before any provider was called.
    expect(upstream.requests.length).toBe(before)
  })

  it("allow every real loopback origin", async () => {
    for (const origin of [
      "http://localhost:5173",
      "http://LOCALHOST",
      "http://127.0.0.1:3000",
      "http://127.1.2.3",
      "http://[::1]:8080",
      "http://[0:0:0:0:0:0:0:1]",
      "http://[::ffff:127.0.0.1]:5173"
    ]) {
      const res = await call(`${gw.url}/v1/chat/completions`, { body: chatBody, headers: { origin } })
      expect(res.status, origin).toBe(200)
    }
  })

  it("are allowed from origins listed in GATEWAY_ALLOWED_ORIGINS", async () => {
    const other = await startGateway({ env: { GATEWAY_ALLOWED_ORIGINS: "https://app.example, https://tools.example/" } })
    try {
      const listed = await call(`${other.url}/v1/models`, { headers: { origin: "https://tools.example" } })
      expect(listed.status).toBe(200)
      const unlisted = await call(`${other.url}/v1/models`, { headers: { origin: "https://else.example" } })
      expect(unlisted.status).toBe(403)
    } finally {
      await other.close()
    }
  })
})

describe("a gateway bound to a non-loopback address", () => {
  // The tests bind 0.0.0.0 (as a container would) and connect over 127.0.0.1.
  const startBound = async (env: Record<string, string> = {}) => {
    const bound = await startGateway({ host: "0.0.0.0", env })
    const url = bound.url.replace("0.0.0.0", "127.0.0.1")
    await bound.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    const res = await call(`${url}/api/providers`, {
      body: { provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl, defaultModel: "m1" },
      headers: admin
    })
    expect(res.status).toBe(201)
    return { bound, url }
  }

  it("requires a valid key while REQUIRE_API_KEY is off, from loopback callers too: the bind decides", async () => {
    const { bound, url } = await startBound()
    try {
      const missing = await call(`${url}/v1/chat/completions`, { body: chatBody })
      expect(missing.status).toBe(401)
      expect(missing.body.error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" })
      expect(missing.body.error.message).toContain("0.0.0.0")
      expect(missing.body.error.message).toContain("gateway keys add")
      expect(missing.body.error.message).toContain("GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true")
      const wrong = await call(`${url}/v1/chat/completions`, { body: chatBody, headers: { authorization: "Bearer gwk_wrong" } })
      expect(wrong.status).toBe(401)
      expect(wrong.body.error.message).toContain("Invalid API key")
      expect((await call(`${url}/v1/models`)).status).toBe(401)
      expect(
        (await call(`${url}/v1/messages`, { body: { model: "up/m1", max_tokens: 8, messages: [{ role: "user", content: "hi" }] } })).status
      ).toBe(401)

      const { secret } = await bound.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" })))
      expect((await call(`${url}/v1/chat/completions`, { body: chatBody, headers: { authorization: `Bearer ${secret}` } })).status).toBe(
        200
      )
      expect((await call(`${url}/api/health/ping`)).status).toBe(200)
      expect(bound.logs.some((l) => l.level === "WARN" && l.message.includes("requires a gateway API key"))).toBe(true)
    } finally {
      await bound.close()
    }
  })

  it("serves without a key only when the operator sets GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true, with a SECURITY warning", async () => {
    const { bound, url } = await startBound({ GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE: "true" })
    try {
      expect((await call(`${url}/v1/chat/completions`, { body: chatBody })).status).toBe(200)
      const warning = bound.logs.find((l) => l.message.startsWith("SECURITY"))
      expect(warning?.level).toBe("WARN")
      expect(warning?.message).toContain("GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true")
    } finally {
      await bound.close()
    }
  })

  it("keeps REQUIRE_API_KEY=true in force over the opt-out", async () => {
    const { bound, url } = await startBound({ GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE: "true", REQUIRE_API_KEY: "true" })
    try {
      const missing = await call(`${url}/v1/chat/completions`, { body: chatBody })
      expect(missing.status).toBe(401)
      expect(missing.body.error.message).toContain("Missing API key")
    } finally {
      await bound.close()
    }
  })
})

describe("isLoopbackHost", () => {
  it("is exact: loopback literals and localhost only", () => {
    for (const h of [
      "127.0.0.1",
      "127.255.0.9",
      "localhost",
      "LocalHost",
      "::1",
      "[::1]",
      "0:0:0:0:0:0:0:1",
      "::ffff:127.0.0.1",
      "[::ffff:7f00:1]"
    ]) {
      expect(isLoopbackHost(h), h).toBe(true)
    }
    for (const h of [
      "0.0.0.0",
      "::",
      "[::]",
      "192.168.1.2",
      "127.0.0.1.evil.example",
      "127.example",
      "localhost.evil.example",
      "::ffff:10.0.0.1",
      "::2",
      "128.0.0.1",
      ""
    ]) {
      expect(isLoopbackHost(h), h).toBe(false)
    }
  })
})

describe("management authentication", () => {
  it("answers 401 without a session or admin key", async () => {
    for (const [method, path] of [
      ["GET", "/api/keys"],
      ["GET", "/api/providers"],
      ["GET", "/api/settings/feature-flags"],
      ["POST", "/api/keys"]
    ] as const) {
      const res = await call(`${gw.url}${path}`, { method, body: method === "POST" ? {} : undefined })
      expect(res.status, `${method} ${path}`).toBe(401)
      expect(res.body._tag).toBe("Unauthorized")
    }
  })

  it("answers 401 to an API key without the admin scope, as to no key", async () => {
    const { secret } = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "plain" })))
    for (const path of ["/api/keys", "/api/settings/feature-flags"]) {
      const res = await call(`${gw.url}${path}`, { headers: { authorization: `Bearer ${secret}` } })
      expect(res.status, path).toBe(401)
      expect(res.body.message).toContain("admin scope")
    }
  })

  it("refuses an oversized management body with 413 before reading it", async () => {
    const res = await call(`${gw.url}/api/auth/login`, { body: { password: "x".repeat(2 * 1024 * 1024) } })
    expect(res.status).toBe(413)
    expect(res.body._tag).toBe("PayloadTooLarge")
  })

  it("answers 409 when a key name is ambiguous on removal", async () => {
    const a = await call(`${gw.url}/api/keys`, { body: { name: "twin" }, headers: admin })
    await call(`${gw.url}/api/keys`, { body: { name: "twin" }, headers: admin })
    const res = await call(`${gw.url}/api/keys/twin`, { method: "DELETE", headers: admin })
    expect(res.status).toBe(409)
    expect(res.body.message).toContain(a.body.id)
  })

  it("logs in with the password into an HttpOnly, SameSite=Strict cookie session guarded by a CSRF token", async () => {
    const wrong = await call(`${gw.url}/api/auth/login`, { body: { password: "nope" } })
    expect(wrong.status).toBe(401)

    const login = await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })
    expect(login.status).toBe(200)
    const setCookie = login.headers.get("set-cookie") ?? ""
    expect(setCookie).toMatch(/^gw_session=[^;]+/)
    expect(setCookie).toMatch(/HttpOnly/i)
    expect(setCookie).toMatch(/SameSite=Strict/i)
    const cookie = setCookie.split(";")[0]!
    const csrf: string = login.body.csrfToken

    expect((await call(`${gw.url}/api/keys`, { headers: { cookie } })).status).toBe(200)
    const session = await call(`${gw.url}/api/auth/session`, { headers: { cookie } })
    expect(session.body).toMatchObject({ authenticated: true, via: "session", csrfToken: csrf })

    const noCsrf = await call(`${gw.url}/api/keys`, { body: { name: "x" }, headers: { cookie } })
    expect(noCsrf.status).toBe(403)
    expect(noCsrf.body.message).toContain("CSRF")
    const badCsrf = await call(`${gw.url}/api/keys`, { body: { name: "x" }, headers: { cookie, "x-csrf-token": "forged" } })
    expect(badCsrf.status).toBe(403)
    const crossSite = await call(`${gw.url}/api/keys`, {
      body: { name: "x" },
      headers: { cookie, "x-csrf-token": csrf, origin: "https://evil.example" }
    })
    expect(crossSite.status).toBe(403)
    const ok = await call(`${gw.url}/api/keys`, { body: { name: "from-session" }, headers: { cookie, "x-csrf-token": csrf } })
    expect(ok.status).toBe(201)

    const logout = await call(`${gw.url}/api/auth/logout`, { method: "POST", headers: { cookie } })
    expect(logout.status).toBe(200)
    expect(logout.headers.get("set-cookie")).toMatch(/gw_session=;.*Max-Age=0|gw_session=;.*Expires=Thu, 01 Jan 1970/i)
    expect((await call(`${gw.url}/api/keys`, { headers: { cookie } })).status).toBe(401)
  })

  it("counts parallel wrong guesses against the throttle (no race past it)", async () => {
    const other = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
    try {
      const statuses = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          call(`${other.url}/api/auth/login`, { body: { password: `guess-${i}` } }).then((r) => r.status)
        )
      )
      expect(statuses.filter((s) => s === 401).length).toBe(FREE_FAILURES)
      expect(statuses.filter((s) => s === 429).length).toBe(40 - FREE_FAILURES)
    } finally {
      await other.close()
    }
  })

  it("slows an address down after repeated failures with 429 and Retry-After, without locking out other addresses or the admin key", async () => {
    const other = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
    await other.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    try {
      const attacker = "127.0.0.2"
      for (let i = 0; i < FREE_FAILURES; i++) {
        expect((await loginFrom(other.url, attacker, `wrong-${i}`)).status).toBe(401)
      }
      // Even the right password waits: the pair is throttled, not the guess.
      const blocked = await loginFrom(other.url, attacker, PASSWORD)
      expect(blocked.status).toBe(429)
      expect(blocked.body._tag).toBe("TooManyRequests")
      expect(blocked.body.retryAfterSeconds).toBeGreaterThan(0)
      expect(blocked.body.retryAfterSeconds).toBeLessThanOrEqual(2)
      expect(blocked.headers["retry-after"]).toBe(String(blocked.body.retryAfterSeconds))
      for (let i = 0; i < 20; i++) expect((await loginFrom(other.url, attacker, `more-${i}`)).status).toBe(429)

      // Another address (the admin's, behind another NAT) is not affected at all.
      const admin = await loginFrom(other.url, "127.0.0.3", PASSWORD)
      expect(admin.status).toBe(200)
      expect(admin.headers["set-cookie"]).toBeDefined()
      // An admin API key works whatever the throttle says.
      expect((await call(`${other.url}/api/keys`, { headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(200)
      const session = await call(`${other.url}/api/auth/session`, { headers: { authorization: `Bearer ${ADMIN}` } })
      expect(session.body).toMatchObject({ authenticated: true, via: "api-key" })
    } finally {
      await other.close()
    }
  })

  it("forgets an address's failures once it logs in", async () => {
    const other = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
    try {
      const address = "127.0.0.4"
      for (let i = 0; i < FREE_FAILURES - 1; i++) expect((await loginFrom(other.url, address, `wrong-${i}`)).status).toBe(401)
      expect((await loginFrom(other.url, address, PASSWORD)).status).toBe(200)
      for (let i = 0; i < FREE_FAILURES; i++) expect((await loginFrom(other.url, address, `again-${i}`)).status).toBe(401)
      expect((await loginFrom(other.url, address, "one too many")).status).toBe(429)
    } finally {
      await other.close()
    }
  })

  it("stores the password as a slow hash, and INITIAL_PASSWORD does not override a password set later", async () => {
    await gw.run(Effect.flatMap(AdminAuth, (a) => a.setPassword("another long password")))
    expect((await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })).status).toBe(401)
    expect((await call(`${gw.url}/api/auth/login`, { body: { password: "another long password" } })).status).toBe(200)
    const [row] = queryDb<{ value: string }>(gw.dataDir, "SELECT value FROM kv WHERE namespace = 'auth' AND key = 'admin_password'")
    expect(row!.value).toMatch(/^scrypt\$32768\$8\$1\$/)
    expect(row!.value).not.toContain("another long password")
  })
})

describe("the failed-login throttle", () => {
  it("lets the first failures through, then makes each further attempt wait twice as long, up to a cap", () => {
    const throttle = makeLoginThrottle()
    let now = 1_000_000
    for (let i = 0; i < FREE_FAILURES; i++) expect(throttle.admit("10.0.0.1", "admin", now)).toBeUndefined()
    const waits: Array<number> = []
    for (let i = 0; i < 14; i++) {
      const wait = throttle.admit("10.0.0.1", "admin", now)!
      expect(wait).toBeGreaterThan(0)
      // Still waiting one second before the end; admitted (and counted) at the end.
      expect(throttle.admit("10.0.0.1", "admin", now + (wait - 1) * 1000)).toBe(1)
      now += wait * 1000
      expect(throttle.admit("10.0.0.1", "admin", now)).toBeUndefined()
      waits.push(wait)
    }
    expect(waits.slice(0, 5)).toEqual([2, 4, 8, 16, 32])
    expect(Math.max(...waits)).toBe(MAX_DELAY_SECONDS)
    expect(waits.at(-1)).toBe(MAX_DELAY_SECONDS)
    // Other pairs are independent, and a success resets the pair.
    expect(throttle.admit("10.0.0.2", "admin", now)).toBeUndefined()
    expect(throttle.admit("10.0.0.1", "someone-else", now)).toBeUndefined()
    throttle.succeeded("10.0.0.1", "admin")
    expect(throttle.admit("10.0.0.1", "admin", now)).toBeUndefined()
  })

  it("forgets a pair a day after its last failure, not sooner", () => {
    const throttle = makeLoginThrottle()
    for (let i = 0; i < FREE_FAILURES + 1; i++) throttle.admit("10.0.0.1", "admin", i * 60_000)
    const last = FREE_FAILURES * 60_000
    expect(throttle.admit("10.0.0.1", "admin", last + 1000)).toBeGreaterThan(0)
    expect(throttle.admit("10.0.0.1", "admin", last + FORGET_AFTER_MS)).toBeUndefined()
  })
})

describe("the failed-login throttle's addresses and capacity", () => {
  const exhaust = (throttle: ReturnType<typeof makeLoginThrottle>, address: string, now: number) => {
    for (let i = 0; i <= FREE_FAILURES; i++) throttle.admit(address, "admin", now)
  }

  it("reduces an IPv6 address to its /64, and an IPv4-mapped address to the IPv4 one", () => {
    expect(throttledAddress("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64")
    expect(throttledAddress("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64")
    expect(throttledAddress("2001:db8::1%eth0")).toBe("2001:db8:0:0::/64")
    expect(throttledAddress("::ffff:203.0.113.7")).toBe("203.0.113.7")
    expect(throttledAddress("::FFFF:cb00:7107")).toBe("203.0.113.7")
    expect(throttledAddress("203.0.113.7")).toBe("203.0.113.7")
    expect(throttledAddress("unknown")).toBe("unknown")
  })

  it("does not reset the count of a client that rotates through its /64 or switches address family", () => {
    const throttle = makeLoginThrottle()
    const now = 1_000_000
    // Rotating through a /64 does not reset the count.
    for (let i = 0; i < FREE_FAILURES - 1; i++) expect(throttle.admit(`2001:db8:1:2::${i + 1}`, "admin", now)).toBeUndefined()
    expect(throttle.admit("2001:db8:1:2:dead:beef:0:1", "admin", now)).toBeUndefined()
    expect(throttle.admit("2001:db8:1:2::99", "admin", now)).toBeGreaterThan(0)
    // The next /64 is another address.
    expect(throttle.admit("2001:db8:1:3::1", "admin", now)).toBeUndefined()
    // An IPv4 client seen through a dual-stack socket is the same client.
    exhaust(throttle, "198.51.100.4", now)
    expect(throttle.admit("::ffff:198.51.100.4", "admin", now)).toBeGreaterThan(0)
  })

  it("never forgets a waiting pair to make room; refuses a new pair while every tracked one waits", () => {
    const throttle = makeLoginThrottle({ maxEntries: 4 })
    let now = 1_000_000
    for (let i = 1; i <= 4; i++) exhaust(throttle, `10.0.0.${i}`, now)
    const waiting = throttle.admit("10.0.0.1", "admin", now)!
    expect(waiting).toBeGreaterThan(0)
    // Full of waiting pairs: a new address is refused, not counted, and told when there is room.
    const refused = throttle.admit("10.0.0.9", "admin", now + 500)!
    expect(refused).toBe(2)
    expect(throttle.tracks("10.0.0.9", "admin")).toBe(false)
    expect(throttle.tracks("10.0.0.1", "admin")).toBe(true)
    // The waiting pairs are all still there, still waiting.
    for (let i = 1; i <= 4; i++) expect(throttle.admit(`10.0.0.${i}`, "admin", now + 500), `10.0.0.${i}`).toBe(2)
    // Once their delays end they may be forgotten to make room.
    now += 2000
    expect(throttle.admit("10.0.0.9", "admin", now)).toBeUndefined()
    expect(throttle.tracks("10.0.0.9", "admin")).toBe(true)
  })

  it("makes room by forgetting pairs that are not waiting, least recently failed first", () => {
    const throttle = makeLoginThrottle({ maxEntries: 4 })
    const now = 1_000_000
    exhaust(throttle, "10.0.0.1", now)
    throttle.admit("10.0.0.2", "admin", now)
    throttle.admit("10.0.0.3", "admin", now + 1)
    exhaust(throttle, "10.0.0.4", now + 2)
    expect(throttle.admit("10.0.0.5", "admin", now + 3)).toBeUndefined()
    // Down to half the map, so that a spray does not sweep on every attempt.
    expect(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"].map((a) => throttle.tracks(a, "admin"))).toEqual([
      true,
      false,
      false,
      true,
      true
    ])
    expect(throttle.admit("10.0.0.1", "admin", now + 3)).toBeGreaterThan(0)
    expect(throttle.admit("10.0.0.4", "admin", now + 3)).toBeGreaterThan(0)
  })
})

describe("client address behind a trusted proxy", () => {
  const req = (xff: string | undefined) =>
    ({
      headers: xff === undefined ? {} : { "x-forwarded-for": xff },
      socket: { remoteAddress: "10.0.0.9" }
    }) as unknown as http.IncomingMessage
  it("is the entry the proxy appended (rightmost), never what the client claimed", () => {
    expect(clientAddress(req("1.2.3.4, 203.0.113.7"), true)).toBe("203.0.113.7")
    expect(clientAddress(req("203.0.113.7"), true)).toBe("203.0.113.7")
    expect(clientAddress(req("1.2.3.4, 203.0.113.7"), false)).toBe("10.0.0.9")
    expect(clientAddress(req(undefined), true)).toBe("10.0.0.9")
  })
})
