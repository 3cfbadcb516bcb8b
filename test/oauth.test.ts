import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeOAuth } from "./support/fakeOAuth.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * OAuth connections end to end: a real gateway and SQLite file, a fake authorization server and
 * fake upstreams on 127.0.0.1 (nothing leaves the machine), the management API and inference.
 */
const ADMIN = "gwk_oauth_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let auth: FakeOAuth
let up: FakeUpstream
let gw: TestGateway
/** A second gateway without the scheduled refresh: only the request path refreshes there. */
let gw2: TestGateway

const api = (g: TestGateway, p: string, init: { method?: string; body?: unknown } = {}) => call(`${g.url}${p}`, { ...init, headers: admin })

/** Waits for an observable condition (no fixed sleeps). */
const until = async (check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time")
    await new Promise((r) => setTimeout(r, 25))
  }
}

const qwenEnv = (o: FakeOAuth) => ({
  GATEWAY_OAUTH_QWEN_TOKEN_URL: `${o.url}/token`,
  GATEWAY_OAUTH_QWEN_DEVICE_AUTHORIZATION_URL: `${o.url}/device/code`
})

/** Connects a qwen connection through the device flow (no pending answers). */
const connectQwen = async (g: TestGateway, name: string) => {
  const started = await api(g, "/api/oauth/qwen/device-code", { body: { name, baseUrl: up.baseUrl("openai-chat") } })
  expect(started.status).toBe(200)
  const done = await api(g, "/api/oauth/qwen/poll", { body: { state: started.body.state, wait: true, timeoutSeconds: 20 } })
  expect(done.status).toBe(200)
  expect(done.body.status).toBe("complete")
  return done.body.connection
}

const chat = (g: TestGateway, model: string) =>
  call(`${g.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }] } })

const bearerOf = (r: { headers: Record<string, unknown> }) => String(r.headers["authorization"] ?? "")

beforeAll(async () => {
  auth = await FakeOAuth.start()
  up = await FakeUpstream.start()
  up.always({ content: "hello from upstream" })
  gw = await startGateway({
    env: {
      ...qwenEnv(auth),
      GATEWAY_OAUTH_REFRESH_CHECK_SECONDS: "0.1",
      GATEWAY_OAUTH_SLOW_DOWN_MS: "300",
      GATEWAY_OAUTH_RETRY_BASE_MS: "10"
    }
  })
  gw2 = await startGateway({ env: { ...qwenEnv(auth), GATEWAY_OAUTH_REFRESH_CHECK_SECONDS: "0", GATEWAY_OAUTH_RETRY_BASE_MS: "10" } })
  for (const g of [gw, gw2]) await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await gw?.close()
  await gw2?.close()
  await up?.close()
  await auth?.close()
})

describe("authorization code with PKCE", () => {
  it("needs management authentication to start, and names unknown or non-OAuth providers", async () => {
    expect((await call(`${gw.url}/api/oauth/claude-code/authorize`, { body: {} })).status).toBe(401)
    const unknown = await api(gw, "/api/oauth/openai/authorize", { body: {} })
    expect(unknown.status).toBe(404)
    expect(unknown.body.message).toContain("claude-code")
    const bad = await api(gw, "/api/oauth/claude-code/authorize", { body: { tokenUrl: "ftp://x" } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain("tokenUrl")
  })

  it("answers an S256 authorize URL; a callback with a wrong state is 400; the right one creates the connection after the verifier checks out", async () => {
    const callback = `${gw.url}/api/oauth/claude-code/callback`
    const started = await api(gw, "/api/oauth/claude-code/authorize", {
      body: {
        name: "claude1",
        authorizeUrl: `${auth.url}/authorize`,
        tokenUrl: `${auth.url}/token`,
        redirectUri: callback,
        baseUrl: up.baseUrl("anthropic")
      }
    })
    expect(started.status).toBe(200)
    const url = new URL(started.body.authorizeUrl)
    expect(url.searchParams.get("code_challenge_method")).toBe("S256")
    expect(url.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(url.searchParams.get("state")).toBe(started.body.state)
    expect(url.searchParams.get("client_id")).toBe("9d1c250a-e61b-44d9-88ed-5944d1962f5e")

    // The user approves: the fake redirects the browser back with a code.
    const approved = await fetch(started.body.authorizeUrl, { redirect: "manual" })
    const location = new URL(approved.headers.get("location")!)
    expect(location.origin + location.pathname).toBe(callback)

    const wrong = new URL(location)
    wrong.searchParams.set("state", "not-the-state")
    const refused = await call(wrong.toString())
    expect(refused.status).toBe(400)
    expect(refused.body.message).toContain("state")

    const verifiedBefore = auth.verified
    const done = await call(location.toString()) // the browser: no management credentials
    expect(done.status).toBe(200)
    expect(done.body.created).toBe(true)
    expect(auth.verified).toBe(verifiedBefore + 1)
    expect(done.body.connection).toMatchObject({
      name: "claude1",
      provider: "claude-code",
      authType: "oauth",
      oauth: { email: "dev@example.test", accountId: "acct-123", hasRefreshToken: true }
    })

    // One-time: the same redirect again is refused.
    expect((await call(location.toString())).status).toBe(400)
  })

  it("completes headless from a pasted redirect URL, re-authorizing the existing connection", async () => {
    const started = await api(gw, "/api/oauth/claude-code/authorize", {
      body: {
        name: "claude1",
        authorizeUrl: `${auth.url}/authorize`,
        tokenUrl: `${auth.url}/token`,
        redirectUri: "https://console.example.test/oauth/code/callback"
      }
    })
    const approved = await fetch(started.body.authorizeUrl, { redirect: "manual" })
    const pasted = await api(gw, "/api/oauth/claude-code/callback", { body: { url: approved.headers.get("location") } })
    expect(pasted.status).toBe(200)
    expect(pasted.body.created).toBe(false)
    const missing = await api(gw, "/api/oauth/claude-code/callback", { body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body.message).toContain("url or code")
  })

  it("sends inference to the upstream with the access token as a bearer", async () => {
    const res = await call(`${gw.url}/v1/messages`, {
      body: { model: "claude1/claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] }
    })
    expect(res.status).toBe(200)
    const seen = up.requestsOf("anthropic").at(-1)!
    expect(bearerOf(seen)).toBe(`Bearer ${auth.lastAccessToken}`)
    expect(seen.headers["x-api-key"]).toBeUndefined()
    expect(String(seen.headers["anthropic-beta"])).toContain("oauth-2025-04-20")
  })
})

describe("device flow", () => {
  it("honours authorization_pending, then slow_down (a longer interval), then connects", async () => {
    auth.deviceScript = ["authorization_pending", "slow_down"]
    const started = await api(gw, "/api/oauth/qwen/device-code", { body: { name: "qwen1", baseUrl: up.baseUrl("openai-chat") } })
    expect(started.status).toBe(200)
    expect(started.body).toMatchObject({ flow: "device", userCode: "ABCD-1234", verificationUri: `${auth.url}/device` })
    expect(auth.deviceCalls.at(-1)!["code_challenge_method"]).toBe("S256")
    const before = auth.tokenCalls.length
    const first = await api(gw, "/api/oauth/qwen/poll", { body: { state: started.body.state } })
    expect(first.body.status).toBe("pending")
    const second = await api(gw, "/api/oauth/qwen/poll", { body: { state: started.body.state } })
    expect(second.body).toMatchObject({ status: "slow_down", interval: 0.3 })
    const done = await api(gw, "/api/oauth/qwen/poll", { body: { state: started.body.state, wait: true } })
    expect(done.body.status).toBe("complete")
    expect(done.body.connection).toMatchObject({ name: "qwen1", authType: "oauth", oauth: { email: "dev@example.test" } })
    const polls = auth.tokenCalls.slice(before)
    expect(polls.map((p) => p.grant)).toEqual(Array(3).fill("urn:ietf:params:oauth:grant-type:device_code"))
    // After slow_down the gateway waited the longer interval before polling again.
    expect(polls[2]!.at - polls[1]!.at).toBeGreaterThanOrEqual(290)
    expect(auth.verified).toBeGreaterThan(0)
    // The flow is over: its state no longer polls.
    expect((await api(gw, "/api/oauth/qwen/poll", { body: { state: started.body.state } })).status).toBe(400)
  })

  it("answers 400 when the user denies access", async () => {
    auth.deviceScript = ["access_denied"]
    const started = await api(gw, "/api/oauth/qwen/device-code", { body: { name: "qwen-denied" } })
    const denied = await api(gw, "/api/oauth/qwen/poll", { body: { state: started.body.state } })
    expect(denied.status).toBe(400)
    expect(denied.body.message).toContain("access_denied")
    expect((await api(gw, "/api/providers")).body.connections.some((c: any) => c.name === "qwen-denied")).toBe(false)
  })
})

describe("refresh", () => {
  it("refreshes ahead of expiry on the schedule, and inference carries the new token", async () => {
    auth.accessTtl = 60 // under the 5-minute lead: due at once
    auth.refreshTtl = 3600
    await connectQwen(gw, "qwen-soon")
    const first = auth.lastAccessToken
    await until(
      async () => (await api(gw, "/api/oauth/qwen/status")).body.connections.find((c: any) => c.name === "qwen-soon")?.refreshedAt != null
    )
    auth.accessTtl = 3600
    expect(auth.lastAccessToken).not.toBe(first)
    const res = await chat(gw, "qwen-soon/qwen3-coder-plus")
    expect(res.status).toBe(200)
    expect(bearerOf(up.requestsOf("openai-chat").at(-1)!)).toBe(`Bearer ${auth.lastAccessToken}`)
  })

  it("retries transient token-endpoint failures with backoff and does not expire the connection", async () => {
    auth.failRefreshes = 2
    const before = auth.refreshCalls.length
    const ok = await api(gw, "/api/oauth/qwen/refresh", { body: { connection: "qwen1" } })
    expect(ok.status).toBe(200)
    expect(auth.refreshCalls.length - before).toBe(3)
    auth.failRefreshes = 10
    const failed = await api(gw, "/api/oauth/qwen/refresh", { body: { connection: "qwen1" } })
    expect(failed.status).toBe(502)
    auth.failRefreshes = 0
    const status = (await api(gw, "/api/oauth/qwen/status")).body.connections.find((c: any) => c.name === "qwen1")
    expect(status.state).not.toBe("expired")
    expect((await chat(gw, "qwen1/qwen3-coder-plus")).status).toBe(200)
  })

  it("refreshes an about-to-expire token on the request path, once for concurrent requests", async () => {
    auth.accessTtl = 5 // inside the request path's 30 s margin
    auth.refreshTtl = 3600
    await connectQwen(gw2, "qwen-rp")
    auth.accessTtl = 3600
    const before = auth.refreshCalls.length
    const answers = await Promise.all([1, 2, 3].map(() => chat(gw2, "qwen-rp/qwen3-coder-plus")))
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
    expect(auth.refreshCalls.length - before).toBe(1)
    expect(bearerOf(up.requestsOf("openai-chat").at(-1)!)).toBe(`Bearer ${auth.lastAccessToken}`)
  })

  it("invalid_grant puts the connection in the terminal expired state: not routed, fallback works, a new authorization clears it", async () => {
    expect(
      (
        await api(gw2, "/api/providers", {
          body: { provider: "openai-compatible", name: "backup", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1", models: ["m1"] }
        })
      ).status
    ).toBe(201)
    expect(
      (
        await api(gw2, "/api/combos", {
          body: { name: "coder", strategy: "priority", targets: [{ model: "qwen-rp/qwen3-coder-plus" }, { model: "backup/m1" }] }
        })
      ).status
    ).toBe(201)
    auth.refreshTtl = 5 // the next token is again about to expire
    expect((await api(gw2, "/api/oauth/qwen/refresh", { body: { connection: "qwen-rp" } })).status).toBe(200)
    auth.revokeAll()
    const res = await chat(gw2, "coder")
    expect(res.status).toBe(200)
    expect(up.requestsOf("openai-chat").at(-1)!.body.model).toBe("m1")
    const conn = (await api(gw2, "/api/providers")).body.connections.find((c: any) => c.name === "qwen-rp")
    expect(conn.testStatus).toBe("expired")
    const resilience = (await api(gw2, "/api/resilience")).body.connections.find((c: any) => c.name === "qwen-rp")
    expect(resilience.state).toBe("expired")
    expect((await api(gw2, "/api/oauth/qwen/status")).body.connections.find((c: any) => c.name === "qwen-rp").state).toBe("expired")
    // Not routed: the direct model id has nothing left to try.
    const upstreamCalls = up.requests.length
    expect((await chat(gw2, "qwen-rp/qwen3-coder-plus")).status).not.toBe(200)
    expect(up.requests.length).toBe(upstreamCalls)
    // A new authorization clears the state.
    auth.accessTtl = 3600
    auth.refreshTtl = 3600
    await connectQwen(gw2, "qwen-rp")
    expect((await chat(gw2, "qwen-rp/qwen3-coder-plus")).status).toBe(200)
  })
})

describe("an upstream 401 on an OAuth connection", () => {
  it("refreshes the token once (shared by concurrent requests) and retries the same attempt with the new token", async () => {
    auth.accessTtl = 3600
    auth.refreshTtl = 3600
    await connectQwen(gw2, "qwen-401")
    // The upstream no longer takes the token the gateway holds (revoked or rotated elsewhere).
    const old = `Bearer ${auth.lastAccessToken}`
    up.script((r) => (bearerOf(r) === old ? { status: 401, errorMessage: "invalid access token" } : { content: "hello again" }))
    try {
      const refreshes = auth.refreshCalls.length
      const sent = up.requests.length
      const answers = await Promise.all([1, 2, 3].map(() => chat(gw2, "qwen-401/qwen3-coder-plus")))
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200])
      expect(auth.refreshCalls.length - refreshes).toBe(1)
      const seen = up.requests.slice(sent).map(bearerOf)
      expect(seen.filter((b) => b === old)).toHaveLength(3)
      expect(seen.filter((b) => b === `Bearer ${auth.lastAccessToken}`)).toHaveLength(3)
      const resilience = (await api(gw2, "/api/resilience")).body.connections.find((c: any) => c.name === "qwen-401")
      expect(resilience.state).not.toBe("expired")
    } finally {
      up.always({ content: "hello from upstream" })
    }
  })

  it("a second 401 with the refreshed token puts the connection in the terminal expired state; no further retries", async () => {
    await connectQwen(gw2, "qwen-401b")
    up.script(() => ({ status: 401, errorMessage: "account disabled" }))
    try {
      const refreshes = auth.refreshCalls.length
      const sent = up.requests.length
      const res = await chat(gw2, "qwen-401b/qwen3-coder-plus")
      expect(res.status).toBe(401)
      expect(auth.refreshCalls.length - refreshes).toBe(1)
      expect(up.requests.length - sent).toBe(2)
      const resilience = (await api(gw2, "/api/resilience")).body.connections.find((c: any) => c.name === "qwen-401b")
      expect(resilience.state).toBe("expired")
    } finally {
      up.always({ content: "hello from upstream" })
    }
  })
})

describe("secrecy and disconnect", () => {
  it("never shows a token in listings, status, errors or logs", async () => {
    const texts = [
      (await api(gw, "/api/providers")).text,
      (await api(gw2, "/api/providers")).text,
      (await api(gw, "/api/oauth/qwen/status")).text,
      (await api(gw2, "/api/oauth/qwen/status")).text,
      (await api(gw2, "/api/resilience")).text,
      JSON.stringify(gw.logs),
      JSON.stringify(gw2.logs)
    ].join("\n")
    expect(auth.issued.length).toBeGreaterThan(4)
    for (const token of auth.issued) expect(texts).not.toContain(token)
  })

  it("revoke removes the connection and its grant", async () => {
    const removed = await api(gw, "/api/oauth/claude-code/revoke", { body: { connection: "claude1" } })
    expect(removed.status).toBe(200)
    expect(removed.body.removed.name).toBe("claude1")
    expect((await api(gw, "/api/providers")).body.connections.some((c: any) => c.name === "claude1")).toBe(false)
    expect((await api(gw, "/api/oauth/claude-code/status")).body.connections).toEqual([])
  })
})
