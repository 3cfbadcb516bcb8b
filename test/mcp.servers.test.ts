import * as SqlClient from "@effect/sql/SqlClient"
import { describe as describeEffect, expect as expectEffect, it as itEffect } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Redacted from "effect/Redacted"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { exposedNameOf, MCP_HEALTH_STATES, type McpServerRecord } from "../src/domain/mcpServers.js"
import { maskSecret } from "../src/kernel/redact.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { Secrets } from "../src/platform/store/Secrets.js"
import { StoreLive } from "../src/platform/store/StoreLive.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { connectionProblem, McpServers, offeringsOf, viewOf, initialHealth } from "../src/services/mcp/McpServers.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The registry of upstream MCP servers (docs/mcp.md, "MCP servers behind the gateway"): the
 * management API of a real in-process gateway, the service over a store of its own, and the
 * views' pure parts.
 */
const ADMIN = "gwk_mcp_servers_admin_key_0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }
const TOKEN = "ghp_secret_token_value_0123456789abcdef"
const HEADER = "Bearer sk-upstream-mcp-secret-0123456789"

let gw: TestGateway
const api = (p: string, init: { method?: string; body?: unknown } = {}) => call(`${gw.url}${p}`, { ...init, headers: admin })

/** What the database holds for a server: its columns, env and headers opened with the storage key. */
const stored = (name: string) =>
  gw.run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const [row] = yield* sql<{ env_enc: string | null; headers_enc: string | null; allowed_tools: string }>`
        SELECT env_enc, headers_enc, allowed_tools FROM mcp_servers WHERE name = ${name}`
      const open = (sealed: string | null | undefined) =>
        sealed ? Effect.map(secrets.decrypt(sealed), (p) => JSON.parse(Redacted.value(p))) : Effect.succeed(null)
      return {
        raw: row,
        env: yield* open(row?.env_enc),
        headers: yield* open(row?.headers_enc),
        allowedTools: row ? JSON.parse(row.allowed_tools) : null
      }
    })
  )

beforeAll(async () => {
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await gw?.close()
})

describe("/api/mcp/servers", () => {
  it("needs management authentication", async () => {
    expect((await call(`${gw.url}/api/mcp/servers`)).status).toBe(401)
    expect((await call(`${gw.url}/api/mcp/servers`, { body: { name: "x", transport: "stdio", command: "x" } })).status).toBe(401)
  })

  it("creates a stdio and an http server (201), env and header values sealed at rest and masked in every listing", async () => {
    const stdio = await api("/api/mcp/servers", {
      body: {
        name: "github",
        transport: "stdio",
        // Harmless should a connection start it: prints its version and exits.
        command: "node",
        args: ["--version"],
        env: { GITHUB_TOKEN: TOKEN, SHORT: "abc" },
        cwd: "/tmp"
      }
    })
    expect(stdio.status, stdio.text).toBe(201)
    expect(stdio.body).toMatchObject({
      name: "github",
      transport: "stdio",
      command: "node",
      args: ["--version"],
      env: { GITHUB_TOKEN: maskSecret(TOKEN), SHORT: "****" },
      cwd: "/tmp",
      url: null,
      headers: {},
      allowedTools: [],
      timeoutMs: 60_000,
      rpm: null,
      enabled: true,
      oauth: null,
      tools: 0,
      resources: 0,
      prompts: 0
    })
    expect(stdio.body.id).toMatch(/^mcp_/)
    expect(MCP_HEALTH_STATES).toContain(stdio.body.health.state)
    expect(new Date(stdio.body.createdAt).toISOString()).toBe(stdio.body.createdAt)

    const http = await api("/api/mcp/servers", {
      body: {
        name: "docs",
        transport: "http",
        url: "http://127.0.0.1:9/mcp",
        headers: { Authorization: HEADER },
        allowedTools: ["search"],
        timeoutMs: 5000,
        rpm: 30
      }
    })
    expect(http.status, http.text).toBe(201)
    expect(http.body).toMatchObject({
      name: "docs",
      transport: "http",
      command: null,
      args: [],
      env: {},
      url: "http://127.0.0.1:9/mcp",
      headers: { Authorization: maskSecret(HEADER) },
      allowedTools: ["search"],
      timeoutMs: 5000,
      rpm: 30
    })

    const list = await api("/api/mcp/servers")
    expect(list.status).toBe(200)
    expect(list.body.servers.map((s: { name: string }) => s.name)).toEqual(["docs", "github"])
    for (const text of [list.text, stdio.text, http.text, (await api("/api/mcp/servers/github")).text]) {
      expect(text).not.toContain(TOKEN)
      expect(text).not.toContain(HEADER)
      expect(text).not.toContain("sk-upstream-mcp-secret")
    }
    // At rest: sealed with the storage key, not readable in the row.
    const row = await stored("github")
    expect(row.raw!.env_enc).toMatch(/^v1:/)
    expect(JSON.stringify(row.raw)).not.toContain(TOKEN)
    expect(row.env).toEqual({ GITHUB_TOKEN: TOKEN, SHORT: "abc" })
    expect((await stored("docs")).headers).toEqual({ Authorization: HEADER })
  })

  it("GET one by name; an unknown name is a 404 naming it", async () => {
    const one = await api("/api/mcp/servers/docs")
    expect(one.status).toBe(200)
    expect(one.body.name).toBe("docs")
    for (const [method, p] of [
      ["GET", "/api/mcp/servers/nobody"],
      ["PATCH", "/api/mcp/servers/nobody"],
      ["DELETE", "/api/mcp/servers/nobody"],
      ["POST", "/api/mcp/servers/nobody/allow"],
      ["GET", "/api/mcp/servers/nobody/tools"]
    ] as const) {
      const res = await api(p, { method, ...(method === "PATCH" ? { body: {} } : method === "POST" ? { body: { all: true } } : {}) })
      expect(res.status, `${method} ${p}`).toBe(404)
      expect(res.body).toMatchObject({ _tag: "NotFound" })
      expect(res.body.message).toContain("nobody")
    }
  })

  it("refuses bad input with a 400 naming the field, and a taken name with a 409", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ name: "Bad Name", transport: "stdio", command: "x" }, /name/],
      [{ name: "-dash", transport: "stdio", command: "x" }, /name/],
      [{ name: "nocmd", transport: "stdio" }, /command: a stdio server needs a command/],
      [{ name: "stdiourl", transport: "stdio", command: "x", url: "http://127.0.0.1:9" }, /url: a stdio server takes no url/],
      [{ name: "httpcmd", transport: "http", url: "http://127.0.0.1:9", command: "node" }, /command: an http server takes no command/],
      [{ name: "nourl", transport: "sse" }, /url: an sse server needs a url/],
      [{ name: "ftp", transport: "http", url: "ftp://127.0.0.1/x" }, /url: must be an http/],
      [{ name: "notaurl", transport: "http", url: "not a url" }, /url: .* is not a URL/],
      [{ name: "badenv", transport: "stdio", command: "x", env: { "A B": "1" } }, /env: "A B" is not a variable name/],
      [{ name: "badhdr", transport: "http", url: "http://127.0.0.1:9", headers: { "X-A": "a\r\nb" } }, /headers\.X-A: /],
      [{ name: "tport", transport: "websocket", command: "x" }, /transport must be one of: stdio, http, sse/],
      [{ name: "extra", transport: "stdio", command: "x", bogus: 1 }, /bogus/],
      [{ name: "slow", transport: "stdio", command: "x", timeoutMs: 5 }, /timeoutMs/]
    ]
    for (const [body, message] of cases) {
      const res = await api("/api/mcp/servers", { body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body._tag).toBe("BadRequest")
      expect(res.body.message, JSON.stringify(body)).toMatch(message)
    }
    const taken = await api("/api/mcp/servers", { body: { name: "github", transport: "stdio", command: "other" } })
    expect(taken.status).toBe(409)
    expect(taken.body).toMatchObject({ _tag: "Conflict" })
    expect(taken.body.message).toContain("github")
    expect((await api("/api/mcp/servers")).body.servers).toHaveLength(2)
  })

  it("PATCH: a masked value sent back keeps the stored secret, a new value replaces it, a name left out goes", async () => {
    const listed = (await api("/api/mcp/servers/github")).body
    const patched = await api("/api/mcp/servers/github", {
      method: "PATCH",
      body: { env: { ...listed.env, SHORT: "xyz", ADDED: "a-new-value-0123456789" }, args: ["-v"], rpm: 10 }
    })
    expect(patched.status, patched.text).toBe(200)
    expect(patched.body).toMatchObject({ args: ["-v"], rpm: 10, env: { GITHUB_TOKEN: maskSecret(TOKEN), SHORT: "****" } })
    expect((await stored("github")).env).toEqual({ GITHUB_TOKEN: TOKEN, SHORT: "xyz", ADDED: "a-new-value-0123456789" })
    expect(new Date(patched.body.updatedAt).getTime()).toBeGreaterThan(new Date(listed.updatedAt).getTime())

    const dropped = await api("/api/mcp/servers/github", { method: "PATCH", body: { env: { GITHUB_TOKEN: maskSecret(TOKEN) } } })
    expect(dropped.status).toBe(200)
    expect((await stored("github")).env).toEqual({ GITHUB_TOKEN: TOKEN })

    // Headers the same way; fields not given stay as they were.
    const docs = (await api("/api/mcp/servers/docs")).body
    expect((await api("/api/mcp/servers/docs", { method: "PATCH", body: { headers: docs.headers, enabled: false } })).body).toMatchObject({
      enabled: false,
      allowedTools: ["search"],
      health: { state: expect.any(String) }
    })
    expect((await stored("docs")).headers).toEqual({ Authorization: HEADER })
  })

  it("PATCH checks the result: an http server cannot get a command; a change of transport drops the other transport's fields", async () => {
    const bad = await api("/api/mcp/servers/docs", { method: "PATCH", body: { command: "node" } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/^command: an http server takes no command/)
    const unknownField = await api("/api/mcp/servers/docs", { method: "PATCH", body: { name: "renamed" } })
    expect(unknownField.status).toBe(400)
    expect(unknownField.body.message).toMatch(/name/)

    const created = await api("/api/mcp/servers", {
      body: { name: "switch", transport: "stdio", command: "node", args: ["--version"], env: { K: "v" } }
    })
    expect(created.status).toBe(201)
    const toHttp = await api("/api/mcp/servers/switch", { method: "PATCH", body: { transport: "sse", url: "https://127.0.0.1:9/sse" } })
    expect(toHttp.status, toHttp.text).toBe(200)
    expect(toHttp.body).toMatchObject({ transport: "sse", command: null, args: [], env: {}, url: "https://127.0.0.1:9/sse" })
    expect((await stored("switch")).raw!.env_enc).toBeNull()
    expect((await api("/api/mcp/servers/switch", { method: "DELETE" })).status).toBe(200)
  })

  it('allow: all → ["*"], names replace or (add) extend, nothing given is a 400', async () => {
    const all = await api("/api/mcp/servers/github/allow", { body: { all: true } })
    expect(all.status, all.text).toBe(200)
    expect(all.body.allowedTools).toEqual(["*"])
    expect((await stored("github")).allowedTools).toEqual(["*"])
    expect((await api("/api/mcp/servers/github/allow", { body: { tools: ["create_issue", "search_repos"] } })).body.allowedTools).toEqual([
      "create_issue",
      "search_repos"
    ])
    expect(
      (await api("/api/mcp/servers/github/allow", { body: { tools: ["get_file", "create_issue"], add: true } })).body.allowedTools
    ).toEqual(["create_issue", "search_repos", "get_file"])
    const none = await api("/api/mcp/servers/github/allow", { body: {} })
    expect(none.status).toBe(400)
    expect(none.body.message).toMatch(/^tools: /)
    const both = await api("/api/mcp/servers/github/allow", { body: { all: true, tools: ["x"] } })
    expect(both.status).toBe(400)
    const empty = await api("/api/mcp/servers/github/allow", { body: { tools: [""] } })
    expect(empty.status).toBe(400)
    expect(empty.body.message).toMatch(/tools/)
  })

  it("tools lists nothing while no connection reported; call is a 503 naming the server", async () => {
    const tools = await api("/api/mcp/servers/github/tools")
    expect(tools.status).toBe(200)
    expect(Array.isArray(tools.body.offerings)).toBe(true)
    const res = await api("/api/mcp/servers/docs/call", { body: { tool: "search", arguments: { q: "x" } } })
    expect(res.status, res.text).toBe(503)
    expect(res.body._tag).toBe("ServiceUnavailable")
    expect(res.body.message).toContain("docs")
    const bad = await api("/api/mcp/servers/docs/call", { body: { arguments: {} } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/tool/)
    expect((await api("/api/mcp/servers/nobody/call", { body: { tool: "x" } })).status).toBe(404)
  })

  it("DELETE answers the removed server (masked) and it is gone", async () => {
    const removed = await api("/api/mcp/servers/docs", { method: "DELETE" })
    expect(removed.status).toBe(200)
    expect(removed.body.removed).toMatchObject({ name: "docs", headers: { Authorization: maskSecret(HEADER) } })
    expect(removed.text).not.toContain(HEADER)
    expect((await api("/api/mcp/servers/docs")).status).toBe(404)
    expect((await stored("docs")).raw).toBeUndefined()
    expect((await api("/api/mcp/servers")).body.servers.map((s: { name: string }) => s.name)).toEqual(["github"])
  })

  it("the OpenAPI document has every endpoint, behind management authentication", async () => {
    const doc = (await call(`${gw.url}/api/openapi.json`)).body
    const ops: Array<[string, string]> = [
      ["get", "/api/mcp/servers"],
      ["post", "/api/mcp/servers"],
      ["get", "/api/mcp/servers/{name}"],
      ["patch", "/api/mcp/servers/{name}"],
      ["delete", "/api/mcp/servers/{name}"],
      ["post", "/api/mcp/servers/{name}/allow"],
      ["get", "/api/mcp/servers/{name}/tools"],
      ["post", "/api/mcp/servers/{name}/call"]
    ]
    for (const [method, p] of ops) {
      const op = doc.paths[p]?.[method]
      expect(op, `${method} ${p}`).toBeDefined()
      expect(op.security.length, `${method} ${p}`).toBeGreaterThan(0)
    }
  })
})

const EVERYTHING = path.join(path.resolve(import.meta.dirname, ".."), "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

describe("a server the gateway connects to (the reference everything server over stdio)", () => {
  it("shows ready with its counts, lists its tools with their exposed names, allows and calls one", async () => {
    const created = await api("/api/mcp/servers", {
      body: { name: "ev", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"] }
    })
    expect(created.status, created.text).toBe(201)
    const ready = await until(
      "ev ready with its tools, resources and prompts listed",
      async () => {
        const v = (await api("/api/mcp/servers/ev")).body
        // Tools, resources and prompts are listed one kind after the other.
        return v.health.state === "ready" && v.tools > 0 && v.resources > 0 && v.prompts > 0 ? v : undefined
      },
      20_000,
      async () => (await api("/api/mcp/servers/ev")).body
    )
    expect(ready.health).toMatchObject({ reason: null, serverInfo: { name: "mcp-servers/everything" } })

    const before = (await api("/api/mcp/servers/ev/tools")).body.offerings
    expect(before.length).toBe(ready.tools + ready.resources + ready.prompts)
    expect(before.find((o: { name: string }) => o.name === "echo")).toMatchObject({
      kind: "tool",
      server: "ev",
      exposedName: "ev__echo",
      allowed: false
    })
    expect(before.every((o: { allowed: boolean }) => !o.allowed)).toBe(true)
    expect((await api("/api/mcp/servers/ev/allow", { body: { tools: ["echo"] } })).status).toBe(200)
    const after = (await api("/api/mcp/servers/ev/tools")).body.offerings
    expect(after.filter((o: { allowed: boolean }) => o.allowed).map((o: { name: string }) => o.name)).toEqual(["echo"])

    const echoed = await api("/api/mcp/servers/ev/call", { body: { tool: "echo", arguments: { message: "through the gateway" } } })
    expect(echoed.status, echoed.text).toBe(200)
    expect(echoed.body.content[0]).toMatchObject({ type: "text" })
    expect(echoed.body.content[0].text).toContain("through the gateway")
    // A tool the server does not have: its answer, a tool error (isError), passed on as it came.
    const unknown = await api("/api/mcp/servers/ev/call", { body: { tool: "no_such_tool" } })
    expect(unknown.status, unknown.text).toBe(200)
    expect(unknown.body).toMatchObject({ isError: true })
    expect(unknown.body.content[0].text).toContain("no_such_tool")

    expect((await api("/api/mcp/servers/ev", { method: "DELETE" })).status).toBe(200)
  }, 60_000)
})

describe("a key's MCP ceiling (mcp.allow)", () => {
  it("round-trips through POST and PATCH /api/keys, null removes it, and the verified key carries it", async () => {
    const created = await api("/api/keys", { body: { name: "agent", mcp: { allow: ["github", "docs__search", "fs__*"] } } })
    expect(created.status, created.text).toBe(201)
    expect(created.body.mcp).toEqual({ allow: ["github", "docs__search", "fs__*"] })
    const secret: string = created.body.secret
    const verified = () => gw.run(Effect.flatMap(ApiKeys, (k) => k.verify(secret)))
    const first = await verified()
    expect(first._tag === "Some" && first.value.mcpAllow).toEqual(["github", "docs__search", "fs__*"])

    const plain = await api("/api/keys", { body: { name: "plain" } })
    expect(plain.body.mcp).toBeNull()

    const patched = await api(`/api/keys/${created.body.id}`, { method: "PATCH", body: { mcp: { allow: ["*"] } } })
    expect(patched.status).toBe(200)
    expect(patched.body.mcp).toEqual({ allow: ["*"] })
    const listed = (await api("/api/keys")).body.keys.find((k: { id: string }) => k.id === created.body.id)
    expect(listed.mcp).toEqual({ allow: ["*"] })

    const cleared = await api(`/api/keys/${created.body.id}`, { method: "PATCH", body: { mcp: null } })
    expect(cleared.body.mcp).toBeNull()
    const after = await verified()
    expect(after._tag === "Some" && after.value.mcpAllow).toBeNull()
    const row = await gw.run(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ mcp_allow: string | null }>`SELECT mcp_allow FROM api_keys WHERE id = ${created.body.id}`
      )
    )
    expect(row[0]!.mcp_allow).toBeNull()

    const bad = await api("/api/keys", { body: { name: "bad", mcp: { allow: ["Not A Server"] } } })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/mcp\.allow/)
  })
})

const record = (over: Partial<McpServerRecord> = {}): McpServerRecord => ({
  id: "mcp_1",
  name: "srv",
  transport: "stdio",
  command: "node",
  args: [],
  env: {},
  cwd: null,
  url: null,
  headers: {},
  allowedTools: [],
  timeoutMs: 60_000,
  rpm: null,
  enabled: true,
  createdAt: 0,
  updatedAt: 0,
  ...over
})

describe("views", () => {
  it("viewOf masks every env and header value with maskSecret and keeps the names", () => {
    const r = record({ env: { A: "short", B: "a-longer-secret-value-123" }, headers: { Authorization: "Bearer 0123456789abcdefghij" } })
    const v = viewOf(r, { health: initialHealth(r), tools: 1, resources: 2, prompts: 3 })
    expect(v.env).toEqual({ A: maskSecret("short"), B: maskSecret("a-longer-secret-value-123") })
    expect(v.headers).toEqual({ Authorization: maskSecret("Bearer 0123456789abcdefghij") })
    expect(JSON.stringify(v)).not.toContain("a-longer-secret-value-123")
    expect(v).toMatchObject({ tools: 1, resources: 2, prompts: 3, oauth: null, health: { state: "starting", reason: null } })
    expect(initialHealth(record({ enabled: false })).state).toBe("disabled")
  })

  it("offeringsOf names tools and prompts <server>__<name> (a hash past 64 characters), resources by URI, and says what is allowed", () => {
    const long = "a".repeat(80)
    const offerings = offeringsOf(record({ name: "github", allowedTools: ["search", "file:///readme"] }), {
      tools: [
        { name: "search", description: "Search code", inputSchema: { type: "object" } },
        { name: long, inputSchema: { type: "object" } }
      ],
      prompts: [{ name: "review" }],
      resources: [{ uri: "file:///readme", name: "readme" }],
      resourceTemplates: []
    })
    expect(offerings).toEqual([
      { kind: "tool", server: "github", name: "search", exposedName: "github__search", description: "Search code", allowed: true },
      { kind: "tool", server: "github", name: long, exposedName: exposedNameOf("github", long), description: null, allowed: false },
      { kind: "prompt", server: "github", name: "review", exposedName: "github__review", description: null, allowed: false },
      { kind: "resource", server: "github", name: "file:///readme", exposedName: "file:///readme", description: null, allowed: true }
    ])
    expect(exposedNameOf("github", long)).toHaveLength(64)
    expect(exposedNameOf("github", long)).toMatch(/^github__a+_[0-9a-f]{8}$/)
    expect(
      offeringsOf(record({ allowedTools: ["*"] }), {
        tools: [{ name: "x", inputSchema: { type: "object" } }],
        prompts: [],
        resources: [],
        resourceTemplates: []
      })[0]!.allowed
    ).toBe(true)
  })

  it("connectionProblem: stdio needs a command and no url; http and sse need an http(s) url and no command", () => {
    const base = { args: [], env: {}, cwd: null, headers: {} }
    expect(connectionProblem({ ...base, transport: "stdio", command: "node", url: null })).toBeUndefined()
    expect(connectionProblem({ ...base, transport: "http", command: null, url: "https://example.test/mcp" })).toBeUndefined()
    expect(connectionProblem({ ...base, transport: "stdio", command: null, url: null })).toMatch(/^command: /)
    expect(connectionProblem({ ...base, transport: "sse", command: null, url: null })).toMatch(/^url: /)
    expect(connectionProblem({ ...base, transport: "http", command: "x", url: "http://a.test" })).toMatch(/^command: /)
  })
})

const quiet = Logger.replace(Logger.defaultLogger, Logger.none)
const storeAt = (dataDir: string) =>
  StoreLive.pipe(
    Layer.provide(AppConfig.layerTest({ dataDir })),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map()))),
    Layer.provide(quiet)
  )
const registryAt = (dataDir: string) => McpServers.layer.pipe(Layer.provideMerge(storeAt(dataDir)))

describeEffect("McpServers", () => {
  itEffect.live(
    "holds the rows in memory, tells listeners after each change, and reads another process's writes on refresh",
    () => {
      const dir = tempDir()
      return Effect.gen(function* () {
        const servers = yield* McpServers
        let heard = 0
        const stop = servers.onChange(() => heard++)
        const made = yield* servers.create({ name: "one", transport: "stdio", command: "node", env: { TOKEN: "t-0123456789abcdef" } })
        expectEffect(made).toMatchObject({ name: "one", timeoutMs: 60_000, allowedTools: [], env: { TOKEN: "t-0123456789abcdef" } })
        expectEffect(servers.byName("one")?.id).toBe(made.id)
        expectEffect(heard).toBe(1)
        yield* servers.update("one", { allowedTools: ["*"] })
        expectEffect(heard).toBe(2)
        expectEffect(yield* Effect.flip(servers.update("nobody", {}))).toMatchObject({ _tag: "McpServerRefused", status: 404 })
        expectEffect((yield* Effect.flip(servers.create({ name: "one", transport: "stdio", command: "x" }))).status).toBe(409)
        expectEffect(heard).toBe(2)

        // Another process (the same layers on the same file) adds one: a refresh reads it and tells the listeners.
        yield* Effect.provide(
          Effect.flatMap(McpServers, (other) => other.create({ name: "two", transport: "http", url: "http://127.0.0.1:9" })),
          registryAt(dir)
        )
        yield* Effect.sleep("1100 millis")
        yield* servers.refresh
        expectEffect(servers.all().map((r) => r.name)).toEqual(["one", "two"])
        expectEffect(heard).toBe(3)
        stop()
        yield* servers.remove("one")
        expectEffect(servers.all().map((r) => r.name)).toEqual(["two"])
        expectEffect(heard).toBe(3)
      }).pipe(Effect.provide(registryAt(dir)))
    },
    { timeout: 10_000 }
  )
})
