import * as SqlClient from "@effect/sql/SqlClient"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { maskSecret } from "../src/kernel/redact.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { spawn } from "node:child_process"
import { BIN, cleanEnv, runCli } from "./support/cli.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { PRESET_SECRET, startAuthServer, startResourceServer } from "./support/mcpOAuthServers.js"
import { until } from "./support/until.js"

/**
 * Signing in to a remote MCP server (docs/mcp.md, "Signing in to a remote server (OAuth)"): a
 * small authorization server of our own (RFC 8414 metadata, RFC 7591 registration, PKCE S256,
 * rotating refresh tokens) and an MCP server that answers 401 with its protected-resource
 * metadata (RFC 9728) without one of its tokens, both on 127.0.0.1, behind a real in-process gateway.
 */
const ADMIN = "gwk_mcp_oauth_admin_key_0123456789ab"
const KEY = "gwk_mcp_oauth_client_key_0123456789a"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let as: Awaited<ReturnType<typeof startAuthServer>>
let rs: Awaited<ReturnType<typeof startResourceServer>>
const api = (p: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${p}`, { ...init, headers: admin })
const view = async (name: string) => (await api(`/api/mcp/servers/${name}`)).body
const healthOf = (name: string, state: string, ms = 15_000) =>
  until(
    `${name} ${state}`,
    async () => {
      const v = await view(name)
      return v.health.state === state ? v : undefined
    },
    ms,
    async () => (await view(name))?.health
  )

/** The sign-in as a browser makes it: start, the authorization server's page (auto-approved), its redirect to the callback. */
const signIn = async (name: string) => {
  const started = await api(`/api/mcp/servers/${name}/oauth/start`, { method: "POST" })
  expect(started.status, started.text).toBe(200)
  const approved = await fetch(started.body.authorizationUrl, { redirect: "manual" })
  expect(approved.status).toBe(302)
  const callback = approved.headers.get("location")!
  return { started: started.body, callback, done: await call(callback) }
}

beforeAll(async () => {
  as = await startAuthServer()
  rs = await startResourceServer({ validAccess: as.validAccess, url: () => as.url })
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
})
afterAll(async () => {
  await gw?.close()
  await rs?.close()
  await as?.close()
})

describe("signing in to a remote MCP server", () => {
  it("a server that answers 401 is needs-auth, its reason saying how to sign in", async () => {
    const created = await api("/api/mcp/servers", {
      body: { name: "locked", transport: "http", url: `${rs.state.url}/mcp`, allowedTools: ["*"] }
    })
    expect(created.status, created.text).toBe(201)
    const v = await healthOf("locked", "needs-auth")
    expect(v.health.reason).toContain("401")
    expect(v.health.reason).toContain("gateway mcp servers login locked")
    expect(v.oauth).toMatchObject({ signedIn: false, expiresAt: null, signedInAt: null })
    // A 401 is not tried again and again.
    const seen = rs.state.unauthorized
    await new Promise((r) => setTimeout(r, 700))
    expect(rs.state.unauthorized).toBe(seen)
  })

  it("start discovers, registers and answers a PKCE authorization URL; the callback is public, one-time and state-checked; the server is ready", async () => {
    expect((await call(`${gw.url}/api/mcp/servers/locked/oauth/start`, { body: {} })).status).toBe(401)
    const started = await api("/api/mcp/servers/locked/oauth/start", { method: "POST" })
    expect(started.status, started.text).toBe(200)
    expect(started.body.redirectUri).toBe(`${gw.url}/api/mcp/oauth/callback`)
    const url = new URL(started.body.authorizationUrl)
    expect(url.origin + url.pathname).toBe(`${as.url}/authorize`)
    expect(url.searchParams.get("code_challenge_method")).toBe("S256")
    expect(url.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(url.searchParams.get("client_id")).toMatch(/^dyn_/)
    expect(url.searchParams.get("redirect_uri")).toBe(started.body.redirectUri)
    expect(url.searchParams.get("resource")).toBe(`${rs.state.url}/mcp`)
    expect(url.searchParams.get("scope")).toBe("mcp:tools")
    expect(as.get().registrations).toBe(1)

    const approved = await fetch(started.body.authorizationUrl, { redirect: "manual" })
    const callback = new URL(approved.headers.get("location")!)
    expect(callback.origin + callback.pathname).toBe(started.body.redirectUri)
    const wrong = new URL(callback)
    wrong.searchParams.set("state", "not-the-state")
    const refused = await call(wrong.toString())
    expect(refused.status).toBe(400)
    expect(refused.body.message).toContain("state")

    const done = await call(callback.toString()) // the browser: no management credentials
    expect(done.status, done.text).toBe(200)
    expect(done.body).toMatchObject({ server: "locked", signedIn: true })
    expect(as.get().codeGrants).toBe(1)
    expect(as.get().resources.has(`${rs.state.url}/mcp`)).toBe(true)
    expect((await call(callback.toString())).status).toBe(400)

    const ready = await until(
      "locked ready with its tool",
      async () => {
        const v = await view("locked")
        return v.health.state === "ready" && v.tools === 1 ? v : undefined
      },
      15_000,
      async () => (await view("locked"))?.health
    )
    expect(ready.oauth).toMatchObject({ signedIn: true, lastError: null, clientId: null, clientSecret: null })
    expect(Date.parse(ready.oauth.signedInAt)).toBeGreaterThan(0)
  })

  it("calls a tool through POST /call and through /v1/mcp with the token", async () => {
    const res = await api("/api/mcp/servers/locked/call", { body: { tool: "whoami" } })
    expect(res.status, res.text).toBe(200)
    expect(res.body.content[0].text).toBe("signed in as dev@example.test")

    const client = new Client({ name: "oauth-test", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gw.url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEY}` } } })
    )
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("locked__whoami")
      const result = await client.callTool({ name: "locked__whoami", arguments: {} })
      expect((result.content as Array<{ text: string }>)[0]!.text).toBe("signed in as dev@example.test")
    } finally {
      await client.close()
    }
  })

  it("refreshes a short-lived token ahead of its expiry: the token endpoint sees refresh_token grants and calls keep working without a 401", async () => {
    const refused = rs.state.refusedTokens
    const before = as.get().refreshGrants
    await until("two refreshes", () => as.get().refreshGrants >= before + 2, 10_000)
    // Past the lifetime of the token the sign-in gave: still called with a good one.
    const res = await api("/api/mcp/servers/locked/call", { body: { tool: "whoami" } })
    expect(res.status, res.text).toBe(200)
    expect(rs.state.refusedTokens).toBe(refused)
    const v = await view("locked")
    expect(v.health.state).toBe("ready")
    expect(Date.parse(v.oauth.expiresAt)).toBeGreaterThan(Date.now())
  })

  it("a 401 mid-session takes the SDK's refresh path and the call goes through", async () => {
    const refused = rs.state.refusedTokens
    const before = as.get().refreshGrants
    as.revokeAccess()
    const res = await api("/api/mcp/servers/locked/call", { body: { tool: "whoami" } })
    expect(res.status, res.text).toBe(200)
    expect(rs.state.refusedTokens).toBeGreaterThan(refused)
    expect(as.get().refreshGrants).toBeGreaterThan(before)
    expect((await view("locked")).health.state).toBe("ready")
  })

  it("never shows a token: listings, the view, the logs; tokens are sealed at rest", async () => {
    const texts = [(await api("/api/mcp/servers")).text, (await api("/api/mcp/servers/locked")).text]
    const logs = gw.logs.map((l) => `${l.message} ${JSON.stringify(l.annotations)}`).join("\n")
    const rows = await gw.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ tokens_enc: string; client_enc: string }>`SELECT tokens_enc, client_enc FROM mcp_oauth`
      })
    )
    expect(rows.length).toBe(1)
    const opened = await gw.run(Effect.flatMap(Secrets, (s) => s.decrypt(rows[0]!.tokens_enc)))
    expect(as.get().issued.has(JSON.parse(Redacted.value(opened)).access_token)).toBe(true)
    for (const t of as.get().issued) {
      for (const text of texts) expect(text).not.toContain(t)
      expect(logs).not.toContain(t)
      expect(rows[0]!.tokens_enc).not.toContain(t)
    }
  })

  it("a refresh the authorization server refuses puts the server in needs-auth with the reason; signing in again brings it back", async () => {
    as.revokeRefresh()
    const v = await until(
      "needs-auth after a refused refresh",
      async () => {
        const x = await view("locked")
        return x.health.state === "needs-auth" ? x : undefined
      },
      10_000,
      async () => (await view("locked"))?.health
    )
    expect(v.health.reason).toMatch(/could not be refreshed/)
    expect(v.health.reason).toContain("invalid_grant")
    expect(v.health.reason).toContain("gateway mcp servers login locked")
    expect(v.oauth).toMatchObject({ signedIn: false })
    expect(v.oauth.lastError).toContain("invalid_grant")

    const again = await signIn("locked")
    expect(again.done.status, again.done.text).toBe(200)
    expect(as.get().registrations).toBe(1) // the registered client is kept
    await healthOf("locked", "ready")
    expect((await view("locked")).oauth).toMatchObject({ signedIn: true, lastError: null })
  })

  it("logout forgets the tokens: signed out, and the connection asks for a sign-in again", async () => {
    const out = await api("/api/mcp/servers/locked/oauth/logout", { method: "POST" })
    expect(out.status, out.text).toBe(200)
    expect(out.body.oauth).toMatchObject({ signedIn: false, expiresAt: null })
    const v = await healthOf("locked", "needs-auth")
    expect(v.health.reason).toContain("gateway mcp servers login locked")
    expect((await api("/api/mcp/servers/nobody/oauth/logout", { method: "POST" })).status).toBe(404)
  })
})

describe("a configured OAuth client", () => {
  it("is sealed, masked in views, kept when sent back masked, refused on stdio or without a client id", async () => {
    const bad = await api("/api/mcp/servers", {
      body: { name: "local", transport: "stdio", command: "node", args: ["--version"], oauth: { clientId: "x" } }
    })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/^oauth: a stdio server takes no oauth/)
    const noId = await api("/api/mcp/servers", {
      body: { name: "noid", transport: "http", url: `${rs.state.url}/mcp`, oauth: { clientSecret: PRESET_SECRET } }
    })
    expect(noId.status).toBe(400)
    expect(noId.body.message).toMatch(/^oauth.clientSecret: needs oauth.clientId/)

    const created = await api("/api/mcp/servers", {
      body: {
        name: "preset",
        transport: "http",
        url: `${rs.state.url}/mcp`,
        allowedTools: ["*"],
        oauth: { clientId: "preset", clientSecret: PRESET_SECRET, scopes: ["mcp:tools"] }
      }
    })
    expect(created.status, created.text).toBe(201)
    expect(created.body.oauth).toMatchObject({ clientId: "preset", clientSecret: maskSecret(PRESET_SECRET), scopes: ["mcp:tools"] })
    expect(created.text).not.toContain(PRESET_SECRET)
    const patched = await api("/api/mcp/servers/preset", {
      method: "PATCH",
      body: { oauth: { clientId: "preset", clientSecret: created.body.oauth.clientSecret, scopes: ["mcp:tools"] } }
    })
    expect(patched.status, patched.text).toBe(200)
    const sealed = await gw.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ oauth_enc: string }>`SELECT oauth_enc FROM mcp_servers WHERE name = 'preset'`
        return JSON.parse(Redacted.value(yield* Effect.flatMap(Secrets, (s) => s.decrypt(row!.oauth_enc))))
      })
    )
    expect(sealed).toEqual({ clientId: "preset", clientSecret: PRESET_SECRET, scopes: ["mcp:tools"] })
    expect((await api("/api/mcp/servers")).text).not.toContain(PRESET_SECRET)
  })

  it("signs in with it (no dynamic registration), its secret sent to the token endpoint", async () => {
    await healthOf("preset", "needs-auth")
    const registrations = as.get().registrations
    const { started, done } = await signIn("preset")
    expect(new URL(started.authorizationUrl).searchParams.get("client_id")).toBe("preset")
    expect(done.status, done.text).toBe(200)
    expect(as.get().registrations).toBe(registrations)
    const ready = await healthOf("preset", "ready")
    expect(ready.oauth).toMatchObject({ signedIn: true, clientId: "preset" })
    const res = await api("/api/mcp/servers/preset/call", { body: { tool: "whoami" } })
    expect(res.status, res.text).toBe(200)
  })

  it("a stdio server cannot sign in; an unknown one is 404", async () => {
    const stdio = await api("/api/mcp/servers", { body: { name: "plain", transport: "stdio", command: "node", args: ["--version"] } })
    expect(stdio.status).toBe(201)
    expect(stdio.body.oauth).toBeNull()
    const r = await api("/api/mcp/servers/plain/oauth/start", { method: "POST" })
    expect(r.status).toBe(400)
    expect(r.body.message).toContain("stdio")
    expect((await api("/api/mcp/servers/nobody/oauth/start", { method: "POST" })).status).toBe(404)
  })

  it("the OpenAPI document has the sign-in endpoints; the callback alone without authentication", async () => {
    const doc = (await call(`${gw.url}/api/openapi.json`)).body
    expect(doc.paths["/api/mcp/servers/{name}/oauth/start"].post.security.length).toBeGreaterThan(0)
    expect(doc.paths["/api/mcp/servers/{name}/oauth/logout"].post.security.length).toBeGreaterThan(0)
    expect(doc.paths["/api/mcp/oauth/callback"].get.security).toEqual([])
  })
})

describe("gateway mcp servers login (the built CLI)", () => {
  const SLOW = { timeout: 120_000 }
  const remote = () => ["--url", gw.url, "--api-key", ADMIN]

  /** `gateway mcp servers login ...` running: its output so far, and its end. */
  const login = (args: ReadonlyArray<string>) => {
    const child = spawn(process.execPath, [BIN, "mcp", "servers", "login", ...args, ...remote()], {
      env: cleanEnv({}),
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out = { stdout: "", stderr: "" }
    child.stdout.on("data", (c: Buffer) => (out.stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (out.stderr += c.toString()))
    const ended = new Promise<number | null>((r) => child.on("close", (code) => r(code)))
    return { out, ended }
  }

  it("prints the address, waits until the browser's sign-in completes, and says the server is ready; logout signs out", SLOW, async () => {
    const created = await api("/api/mcp/servers", { body: { name: "cli", transport: "http", url: `${rs.state.url}/mcp` } })
    expect(created.status, created.text).toBe(201)
    await healthOf("cli", "needs-auth")
    const run = login(["cli", "--timeout", "60"])
    const address = await until("the address printed", () => /^(http:\/\/\S+\/authorize\?\S+)$/m.exec(run.out.stdout)?.[1], 60_000)
    expect(run.out.stdout).toContain("To sign in to cli, open this address in a browser")
    // The browser: the authorization server's page, then its redirect to the gateway's callback.
    const approved = await fetch(address, { redirect: "manual" })
    expect((await call(approved.headers.get("location")!)).status).toBe(200)
    expect(await run.ended).toBe(0)
    expect(run.out.stdout).toMatch(/signed in to cli .*; health: ready/)
    for (const t of as.get().issued) expect(run.out.stdout + run.out.stderr).not.toContain(t)

    const out = await runCli(["mcp", "servers", "logout", "cli", ...remote()])
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout.trim()).toBe("signed out of cli")
    expect((await view("cli")).oauth.signedIn).toBe(false)
  })

  it("gives up after --timeout with exit 1; an unknown server is exit 1 naming it", SLOW, async () => {
    const run = login(["cli", "--timeout", "5"])
    expect(await run.ended).toBe(1)
    expect(run.out.stderr).toMatch(/did not complete within 5 s/)
    const unknown = await runCli(["mcp", "servers", "login", "nobody", ...remote()])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/no MCP server named 'nobody'/)
  })
})
