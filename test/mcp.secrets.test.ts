/**
 * An MCP server's secrets are kept out of everything the gateway shows and records, by value as
 * well as by field: secrets with no recognisable shape (a plain env value, a url's password and
 * token, a key on the command line) that a server echoes in a tool's result or prints on its
 * stderr. The client still gets the tool's own answer.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Effect from "effect/Effect"
import path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { CreateMcpServer } from "../src/domain/mcpServers.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { McpServers } from "../src/services/mcp/McpServers.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { refusedPort } from "./support/refusedPort.js"
import { until } from "./support/until.js"
import { mcpListed } from "./support/mcpListed.js"

const root = path.resolve(import.meta.dirname, "..")
const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const LEAKY = path.join(root, "test/fixtures/mcp/leaky-server.mjs")

// None has a shape a pattern would know: only their values say they are secret.
const ENV_PLAIN = "plain-env-value-7f3a9c2d41b8"
const LEAKY_TOKEN = "plain-env-leak-5d2b8f41c9e7"
const ARG_KEY = "plain-arg-secret-93c1e0a7b6"
const URL_PASSWORD = "pw-secret-71ab9c3e"
const URL_TOKEN = "plain-url-token-4f8e2a6b1d"
const ALL = [ENV_PLAIN, LEAKY_TOKEN, ARG_KEY, URL_PASSWORD, URL_TOKEN]

let gw: TestGateway
let key: string
let adminKey: string
let remoteUrl: string

const register = (input: CreateMcpServer) => gw.run(Effect.flatMap(McpServers, (s) => s.create(input)))
const admin = (p: string, init: { method?: string; body?: unknown } = {}) =>
  call(`${gw.url}${p}`, { ...init, headers: { authorization: `Bearer ${adminKey}` } })
const expectNoSecret = (text: string) => {
  for (const s of ALL) expect(text).not.toContain(s)
}

beforeAll(async () => {
  gw = await startGateway({ env: { INSPECTOR_CAPTURE_BODIES: "true" } })
  key = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "caller" }))).then((k) => k.secret)
  adminKey = await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }))).then((k) => k.secret)
  await register({
    name: "ev",
    transport: "stdio",
    command: process.execPath,
    args: [EVERYTHING, "stdio"],
    env: { EV_PLAIN: ENV_PLAIN },
    allowedTools: ["*"]
  })
  await register({
    name: "leaky",
    transport: "stdio",
    command: process.execPath,
    args: [LEAKY, "--api-key", ARG_KEY],
    env: { LEAKY_TOKEN },
    allowedTools: ["*"]
  })
  // Nothing listens there: the connection fails, and its error may quote the url.
  remoteUrl = `http://user:${URL_PASSWORD}@127.0.0.1:${await refusedPort()}/mcp?access_token=${URL_TOKEN}&region=eu`
  await register({ name: "remote", transport: "http", url: remoteUrl, allowedTools: ["*"] })
  await mcpListed(gw.run, "ev")
}, 60_000)

afterAll(async () => {
  await gw?.close()
})

describe("an MCP server's secrets, by value", () => {
  it("a tool that prints the server's environment: the client gets it, the inspector and the audit log do not", async () => {
    const client = new Client({ name: "secrets-test", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gw.url}/v1/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } })
    )
    try {
      const result = await client.callTool({ name: "ev__get-env", arguments: {} })
      expect(JSON.stringify(result)).toContain(ENV_PLAIN)
    } finally {
      await client.close()
    }
    const entry = await until(
      "the inspector entry",
      async () => {
        const r = await admin("/api/tools/traffic-inspector/requests?source=mcp")
        const list = r.body?.items ?? r.body?.requests ?? r.body?.entries ?? r.body
        return Array.isArray(list) ? list.find((e: { path: string }) => e.path.includes("get-env")) : undefined
      },
      20_000
    )
    const detail = await admin(`/api/tools/traffic-inspector/requests/${entry.id}`)
    expect(detail.status).toBe(200)
    // The result was recorded (the env's names are there), its secret value is not.
    expect(detail.text).toContain("EV_PLAIN")
    expectNoSecret(detail.text)
    const audit = await until(
      "the audit entry",
      async () => {
        const r = await admin("/api/compliance/audit-log?kind=mcp&limit=50")
        return (r.body?.entries ?? []).find((e: { target: string }) => e.target === "ev__get-env")
      },
      20_000
    )
    expectNoSecret(JSON.stringify(audit))
  })

  it("a server that prints its token and its key on stderr and exits: the health says why, without them", async () => {
    const leaky = await until(
      "leaky's exit in its health",
      async () => {
        const r = await admin("/api/mcp/servers")
        const s = (r.body?.servers ?? []).find((x: { name: string }) => x.name === "leaky")
        return s?.health?.reason?.includes("fatal") ? { s, text: r.text } : undefined
      },
      20_000
    )
    expect(leaky.s.health.reason).toMatch(/exited with code 1.*fatal: upstream refused key/)
    expectNoSecret(leaky.text)
    expectNoSecret(gw.logs.map((l) => l.message).join("\n"))
  })

  it("a url's password and token, and a key among the arguments, are masked in listings; sent back, they keep the stored ones", async () => {
    const listed = await until(
      "remote's failure in its health",
      async () => {
        const r = await admin("/api/mcp/servers")
        const items = r.body?.servers ?? []
        const remote = items.find((x: { name: string }) => x.name === "remote")
        return remote?.health?.reason ? { items, text: r.text } : undefined
      },
      20_000
    )
    expectNoSecret(listed.text)
    const remote = listed.items.find((x: { name: string }) => x.name === "remote")
    expect(remote.url).toMatch(/^http:\/\/user:\*\*\*\*@127\.0\.0\.1:\d+\/mcp\?access_token=.+&region=eu$/)
    const leaky = listed.items.find((x: { name: string }) => x.name === "leaky")
    expect(leaky.args).toEqual([LEAKY, "--api-key", expect.not.stringContaining(ARG_KEY)])
    const one = await admin("/api/mcp/servers/remote")
    if (one.status === 200) expectNoSecret(one.text)

    // The listing sent back as an update changes nothing secret.
    const a = await admin("/api/mcp/servers/remote", { method: "PATCH", body: { url: remote.url, timeoutMs: 5000 } })
    expect(a.status).toBe(200)
    expectNoSecret(a.text)
    const b = await admin("/api/mcp/servers/leaky", { method: "PATCH", body: { args: leaky.args } })
    expect(b.status).toBe(200)
    const stored = await gw.run(Effect.map(McpServers, (s) => ({ remote: s.byName("remote"), leaky: s.byName("leaky") })))
    expect(stored.remote?.url).toBe(remoteUrl)
    expect(stored.remote?.timeoutMs).toBe(5000)
    expect(stored.leaky?.args).toEqual([LEAKY, "--api-key", ARG_KEY])
    // A new value replaces the stored one.
    const c = await admin("/api/mcp/servers/leaky", { method: "PATCH", body: { args: [LEAKY, "--api-key", "another-key-0042"] } })
    expect(c.status).toBe(200)
    expect(await gw.run(Effect.map(McpServers, (s) => s.byName("leaky")?.args))).toEqual([LEAKY, "--api-key", "another-key-0042"])
  })
})
