import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, rawCall, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { fetchWithHost } from "./support/hostFetch.js"

const ADMIN = "gwk_mcp_admin_key_0123456789abcdef"
const INFERENCE = "gwk_mcp_inference_key_0123456789ab"
const SCOPED = "gwk_mcp_scoped_key_0123456789abcd"
const admin = { authorization: `Bearer ${ADMIN}` }
const PREVIOUS_REVISION = "2025-06-18"

const CATALOG_TOOLS = ["gateway_agent_skills_list", "gateway_agent_skills_get", "gateway_agent_skills_coverage"]
const ALL_TOOLS = [
  ...CATALOG_TOOLS,
  "gateway_providers_list",
  "gateway_providers_test",
  "gateway_combos_list",
  "gateway_combos_switch_primary",
  "gateway_usage_summary",
  "gateway_health_summary",
  "gateway_keys_list",
  "gateway_keys_create",
  "gateway_keys_revoke",
  "skills_run"
]

const skill = (name: string, description: string) =>
  `---\nname: ${name}\ndescription: "${description}"\n---\n\n## Overview\n\n${name} in detail.\n`

let gw: TestGateway
let upstream: FakeOpenAI
let skillsDir: string
const clients: Array<Client> = []

beforeAll(async () => {
  skillsDir = tempDir("gw-mcp-skills-")
  fs.writeFileSync(path.join(skillsDir, "gw-providers.md"), skill("Providers", "Connect upstream providers"))
  fs.writeFileSync(path.join(skillsDir, "gw-api-keys.md"), skill("API keys", "Hand out gateway keys"))
  fs.writeFileSync(path.join(skillsDir, "cli-keys.md"), skill("gateway keys", "Keys from the command line"))
  upstream = await FakeOpenAI.start()
  gw = await startGateway({ env: { GATEWAY_SKILLS_DIR: skillsDir } })
  await gw.run(
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      yield* keys.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })
      yield* keys.create({ name: "app" }, { secret: INFERENCE })
      yield* keys.create({ name: "ops", scopes: ["read:usage", "write:keys"] }, { secret: SCOPED })
    })
  )
})
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => undefined)))
})
afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

const connect = async (headers: Record<string, string> = {}, options: { readonly host?: string; readonly url?: string } = {}) => {
  const client = new Client({ name: "mcp-test", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(`${options.url ?? gw.url}/mcp`), {
    requestInit: { headers },
    ...(options.host ? { fetch: fetchWithHost(options.host) } : {})
  })
  await client.connect(transport)
  clients.push(client)
  return { client, transport }
}
const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name)
const text = (result: Awaited<ReturnType<Client["callTool"]>>) => (result.content as Array<{ text: string }>).map((c) => c.text).join("\n")
const setFlag = (key: string, value?: string) =>
  call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", headers: admin, body: value === undefined ? { key } : { key, value } })

/** An initialize request sent by hand, asking for `version`: the answer and the session it opened. */
const initialize = async (version: string) => {
  const res = await fetch(`${gw.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...admin },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: version, capabilities: {}, clientInfo: { name: "raw", version: "1" } }
    })
  })
  const body = await res.text()
  const data = body.split("\n").find((l) => l.startsWith("data: "))!
  return { status: res.status, sessionId: res.headers.get("mcp-session-id"), result: JSON.parse(data.slice(6)).result }
}

describe("MCP over streamable HTTP", () => {
  it("an admin key lists every tool and reads the agent-skill catalog through the three catalog tools", async () => {
    const { client } = await connect(admin)
    expect((await names(client)).sort()).toEqual([...ALL_TOOLS].sort())

    const api = await client.callTool({ name: "gateway_agent_skills_list", arguments: { category: "api" } })
    expect(api.isError).toBeFalsy()
    const skills = (api.structuredContent as { skills: Array<{ id: string; name: string; rawUrl: string }> }).skills
    expect(skills.map((s) => s.id)).toEqual(["gw-providers", "gw-api-keys"])
    expect(skills[0]).toMatchObject({
      name: "Providers",
      description: "Connect upstream providers",
      category: "api",
      area: "providers",
      rawUrl: `${gw.url}/api/agent-skills/gw-providers/raw`
    })
    const byArea = await client.callTool({ name: "gateway_agent_skills_list", arguments: { area: "cli-keys" } })
    expect((byArea.structuredContent as { skills: Array<{ id: string }> }).skills.map((s) => s.id)).toEqual(["cli-keys"])

    const got = await client.callTool({ name: "gateway_agent_skills_get", arguments: { id: "cli-keys" } })
    expect(got.structuredContent).toMatchObject({
      skill: { id: "cli-keys", category: "cli" },
      markdown: fs.readFileSync(path.join(skillsDir, "cli-keys.md"), "utf8")
    })
    expect((got.content as Array<{ text: string }>)[1]!.text).toContain("gateway keys in detail.")

    const coverage = await client.callTool({ name: "gateway_agent_skills_coverage", arguments: {} })
    expect(coverage.structuredContent).toMatchObject({ api: { have: 2, total: 22 }, cli: { have: 1, total: 20 }, totalSkills: 3 })

    const missing = await client.callTool({ name: "gateway_agent_skills_get", arguments: { id: "gw-tunnels" } })
    expect(missing.isError).toBe(true)
    expect(text(missing)).toMatch(/no agent skill 'gw-tunnels'/)
    const bad = await client.callTool({ name: "gateway_agent_skills_list", arguments: { category: "web" } })
    expect(bad.isError).toBe(true)
    expect(text(bad)).toMatch(/invalid arguments for gateway_agent_skills_list: category: category must be one of: api, cli \(got "web"\)/)
    await expect(client.callTool({ name: "gateway_nothing", arguments: {} })).rejects.toThrow(/unknown tool 'gateway_nothing'/)
  })

  it("management tools change the gateway, and the management API shows it", async () => {
    const { client } = await connect(admin)
    const created = await client.callTool({
      name: "gateway_keys_create",
      arguments: { name: "from-mcp", scopes: ["read:health"], rpm: 30 }
    })
    expect(created.isError).toBeFalsy()
    const key = created.structuredContent as { id: string; secret: string; key: string }
    expect(key.secret).toMatch(/^gwk_/)
    expect(key.key).not.toContain(key.secret.slice(8, 30))
    const listed = await call(`${gw.url}/api/keys`, { headers: admin })
    expect(listed.body.keys.find((k: { id: string }) => k.id === key.id)).toMatchObject({
      name: "from-mcp",
      scopes: ["read:health"],
      rpm: 30
    })
    expect(listed.text).not.toContain(key.secret)
    const viaMcp = await client.callTool({ name: "gateway_keys_list", arguments: {} })
    expect(text(viaMcp)).not.toContain(key.secret)

    expect((await client.callTool({ name: "gateway_keys_revoke", arguments: { key: key.id } })).isError).toBeFalsy()
    expect((await call(`${gw.url}/api/keys`, { headers: admin })).body.keys.some((k: { id: string }) => k.id === key.id)).toBe(false)
    const again = await client.callTool({ name: "gateway_keys_revoke", arguments: { key: key.id } })
    expect(again.isError).toBe(true)
    expect(text(again)).toMatch(/no API key with id or name/)

    const provider = await call(`${gw.url}/api/providers`, {
      headers: admin,
      body: {
        provider: "openai-compatible",
        name: "mcp-up",
        baseUrl: upstream.baseUrl,
        apiKey: "sk-mcp-upstream-secret-0123456789",
        defaultModel: "m1"
      }
    })
    expect(provider.status).toBe(201)
    const providers = await client.callTool({ name: "gateway_providers_list", arguments: {} })
    expect((providers.structuredContent as { connections: Array<{ name: string }> }).connections.map((c) => c.name)).toContain("mcp-up")
    expect(text(providers)).not.toContain("sk-mcp-upstream-secret-0123456789")
    const tested = await client.callTool({ name: "gateway_providers_test", arguments: { provider: "mcp-up" } })
    expect(tested.structuredContent).toMatchObject({ name: "mcp-up", ok: true })
    expect((await call(`${gw.url}/api/providers/${provider.body.id}`, { headers: admin })).body.testStatus).toBe("active")

    const combo = await call(`${gw.url}/api/combos`, {
      headers: admin,
      body: { name: "mcp-team", strategy: "priority", targets: [{ model: "mcp-up/m1" }, { model: "mcp-up/m2" }] }
    })
    expect(combo.status).toBe(201)
    const switched = await client.callTool({ name: "gateway_combos_switch_primary", arguments: { combo: "mcp-team", model: "mcp-up/m2" } })
    expect(switched.structuredContent).toMatchObject({ added: false, primary: { model: "mcp-up/m2" } })
    const after = await call(`${gw.url}/api/combos/${combo.body.id}`, { headers: admin })
    expect(after.body.targets.map((t: { model: string }) => t.model)).toEqual(["mcp-up/m2", "mcp-up/m1"])
    expect((await client.callTool({ name: "gateway_combos_list", arguments: {} })).structuredContent).toMatchObject({
      combos: [{ name: "mcp-team" }]
    })

    const chat = await call(`${gw.url}/v1/chat/completions`, {
      headers: admin,
      body: { model: "mcp-up/m1", messages: [{ role: "user", content: "hi" }] }
    })
    expect(chat.status).toBe(200)
    const usage = await client.callTool({ name: "gateway_usage_summary", arguments: { groupBy: "model" } })
    const history = await call(`${gw.url}/api/usage/history?groupBy=model`, { headers: admin })
    expect((usage.structuredContent as { totals: unknown }).totals).toEqual(history.body.totals)
    const health = await client.callTool({ name: "gateway_health_summary", arguments: {} })
    expect(health.structuredContent).toMatchObject({
      status: "ok",
      configuredCount: 1,
      providers: [{ connection: "mcp-up", state: "available" }]
    })
  })

  it("an inference key and an unauthenticated caller get the catalog only; a key carrying MCP scopes gets those, and cannot raise itself", async () => {
    for (const headers of [{ authorization: `Bearer ${INFERENCE}` }, {}] as Array<Record<string, string>>) {
      const { client } = await connect(headers)
      expect(await names(client)).toEqual(CATALOG_TOOLS)
      expect((await client.callTool({ name: "gateway_agent_skills_coverage", arguments: {} })).isError).toBeFalsy()
      const refused = await client.callTool({ name: "gateway_keys_list", arguments: {} })
      expect(refused.isError).toBe(true)
      expect(text(refused)).toMatch(/gateway_keys_list needs scope read:keys/)
    }

    const { client } = await connect({ authorization: `Bearer ${SCOPED}` })
    expect(await names(client)).toEqual([...CATALOG_TOOLS, "gateway_usage_summary", "gateway_keys_create", "gateway_keys_revoke"])
    const escalate = await client.callTool({ name: "gateway_keys_create", arguments: { name: "escalate", scopes: ["admin"] } })
    expect(escalate.isError).toBe(true)
    expect(text(escalate)).toMatch(/may create keys only with scopes it holds .*asked for admin/)
    const narrower = await client.callTool({ name: "gateway_keys_create", arguments: { name: "reporting", scopes: ["read:usage"] } })
    expect(narrower.isError).toBeFalsy()
    const revokeAdmin = await client.callTool({ name: "gateway_keys_revoke", arguments: { key: "admin" } })
    expect(text(revokeAdmin)).toMatch(/names an admin key, which only an admin may revoke/)
    expect((await call(`${gw.url}/api/keys`, { headers: admin })).body.keys.map((k: { name: string }) => k.name)).toEqual(
      expect.arrayContaining(["admin", "reporting"])
    )
  })

  it("a key creating keys stays within its own MCP ceiling: a key without mcp.allow gets the creator's, a wider one is refused", async () => {
    const CEILED = "gwk_mcp_ceiled_key_0123456789abcdef"
    await gw.run(
      Effect.flatMap(ApiKeys, (k) =>
        k.create({ name: "ceiled", scopes: ["write:keys"], mcp: { allow: ["github", "docs__search"] } }, { secret: CEILED })
      )
    )
    const { client } = await connect({ authorization: `Bearer ${CEILED}` })
    const create = (args: Record<string, unknown>) => client.callTool({ name: "gateway_keys_create", arguments: args })
    const inherited = await create({ name: "child" })
    expect(inherited.isError).toBeFalsy()
    expect((inherited.structuredContent as { mcp: unknown }).mcp).toEqual({ allow: ["github", "docs__search"] })
    const narrower = await create({ name: "narrower", mcp: { allow: ["github__create_issue", "github__*", "docs__search"] } })
    expect(narrower.isError).toBeFalsy()
    for (const wider of [["*"], ["docs"], ["docs__*"], ["docs__fetch"], ["fs"]]) {
      const refused = await create({ name: "wider", mcp: { allow: wider } })
      expect(refused.isError, wider.join(",")).toBe(true)
      expect(text(refused)).toMatch(/may create keys only within its own mcp\.allow \(github, docs__search\); asked for/)
    }
    const removing = await create({ name: "unbounded", mcp: null })
    expect((removing.structuredContent as { mcp: unknown }).mcp).toEqual({ allow: ["github", "docs__search"] })
    // An admin is not bounded.
    const byAdmin = await (await connect(admin)).client.callTool({ name: "gateway_keys_create", arguments: { name: "free" } })
    expect((byAdmin.structuredContent as { mcp: unknown }).mcp).toBeNull()
  })

  it("GATEWAY_MCP_ENFORCE_SCOPES off: any authenticated caller may call every tool; an unauthenticated one still only the catalog", async () => {
    expect((await setFlag("GATEWAY_MCP_ENFORCE_SCOPES", "false")).status).toBe(200)
    try {
      const { client } = await connect({ authorization: `Bearer ${INFERENCE}` })
      expect((await names(client)).sort()).toEqual([...ALL_TOOLS].sort())
      const keys = await client.callTool({ name: "gateway_keys_list", arguments: {} })
      expect(keys.isError).toBeFalsy()
      expect((keys.structuredContent as { keys: Array<unknown> }).keys.length).toBeGreaterThan(2)
      const anonymous = (await connect()).client
      expect(await names(anonymous)).toEqual(CATALOG_TOOLS)
      expect(text(await anonymous.callTool({ name: "gateway_keys_list", arguments: {} }))).toMatch(/sent no credentials/)
    } finally {
      await setFlag("GATEWAY_MCP_ENFORCE_SCOPES")
    }
    const { client } = await connect({ authorization: `Bearer ${INFERENCE}` })
    expect((await client.callTool({ name: "gateway_keys_list", arguments: {} })).isError).toBe(true)
  })

  it("GATEWAY_MCP_COMPRESS_DESCRIPTIONS lists each tool with the first sentence of its description and no argument docs", async () => {
    const { client } = await connect(admin)
    const full = (await client.listTools()).tools
    expect((await setFlag("GATEWAY_MCP_COMPRESS_DESCRIPTIONS", "true")).status).toBe(200)
    try {
      const short = (await client.listTools()).tools
      expect(short.map((t) => t.name)).toEqual(full.map((t) => t.name))
      for (const [i, t] of short.entries()) {
        const long = full[i]!.description!
        expect(long.startsWith(t.description!), t.name).toBe(true)
        expect(t.description, t.name).toMatch(/^[^.]*(\.\.\.)?[^.]*\.$/)
      }
      const chars = (tools: typeof full) => tools.reduce((n, t) => n + t.description!.length, 0)
      expect(chars(short)).toBeLessThan(chars(full) * 0.6)
      expect(JSON.stringify(short.find((t) => t.name === "gateway_agent_skills_list")!.inputSchema)).not.toContain("description")
      expect(JSON.stringify(full.find((t) => t.name === "gateway_agent_skills_list")!.inputSchema)).toContain("description")
    } finally {
      await setFlag("GATEWAY_MCP_COMPRESS_DESCRIPTIONS")
    }
  })

  it("negotiates the current protocol revision and the one before it; an unsupported one gets the current", async () => {
    const { transport } = await connect(admin)
    expect(transport.protocolVersion).toBe(LATEST_PROTOCOL_VERSION)

    const previous = await initialize(PREVIOUS_REVISION)
    expect(previous.status).toBe(200)
    expect(previous.result.protocolVersion).toBe(PREVIOUS_REVISION)
    // The official client goes on in that session, speaking the older revision.
    const older = new StreamableHTTPClientTransport(new URL(`${gw.url}/mcp`), {
      sessionId: previous.sessionId!,
      requestInit: { headers: admin }
    })
    older.setProtocolVersion(PREVIOUS_REVISION)
    const client = new Client({ name: "older", version: "1.0.0" })
    await client.connect(older)
    clients.push(client)
    expect((await names(client)).length).toBe(ALL_TOOLS.length)

    const unsupported = await initialize("1999-01-01")
    expect(unsupported.result.protocolVersion).toBe(LATEST_PROTOCOL_VERSION)
    const status = await call(`${gw.url}/api/mcp/status`, { headers: admin })
    expect(status.body.latestProtocolVersion).toBe(LATEST_PROTOCOL_VERSION)
    expect(status.body.protocolVersions.slice(0, 2)).toEqual([LATEST_PROTOCOL_VERSION, PREVIOUS_REVISION])
  })

  it("status counts sessions; restart closes them and a client must initialize again", async () => {
    const { client } = await connect(admin)
    await client.listTools()
    const before = await call(`${gw.url}/api/mcp/status`, { headers: admin })
    expect(before.status).toBe(200)
    expect(before.body).toMatchObject({ tools: ALL_TOOLS.length, enforceScopes: true, compressDescriptions: false, restartedAt: null })
    expect(before.body.transports).toEqual([
      { name: "streamable-http", endpoint: "/mcp" },
      { name: "stdio", endpoint: "gateway --mcp" }
    ])
    expect(before.body.sessionsActive).toBeGreaterThanOrEqual(1)

    const restarted = await call(`${gw.url}/api/mcp/restart`, { method: "POST", headers: admin })
    expect(restarted.status).toBe(200)
    expect(restarted.body.closedSessions).toBe(before.body.sessionsActive)
    const after = await call(`${gw.url}/api/mcp/status`, { headers: admin })
    expect(after.body).toMatchObject({ sessionsActive: 0, restartedAt: restarted.body.restartedAt })
    await expect(client.listTools()).rejects.toThrow(/404|Session not found/)
    const fresh = await connect(admin)
    expect((await names(fresh.client)).length).toBe(ALL_TOOLS.length)
    expect((await call(`${gw.url}/api/mcp/status`)).status).toBe(401)
  })

  it("answers bad requests with JSON-RPC errors and a 4xx, never a 500", async () => {
    const json = { "content-type": "application/json", accept: "application/json, text/event-stream" }
    const wrongKey = await rawCall(gw.url, "POST", "/mcp", { ...json, authorization: "Bearer gwk_nope_0000000000000000" }, "{}")
    expect(wrongKey.status).toBe(401)
    expect(wrongKey.body.error.message).toMatch(/invalid, disabled or expired API key/)
    const notJson = await rawCall(gw.url, "POST", "/mcp", { ...json, ...admin }, "{nope")
    expect([notJson.status, notJson.body.error.code]).toEqual([400, -32700])
    const noSession = await rawCall(
      gw.url,
      "POST",
      "/mcp",
      { ...json, ...admin },
      JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" })
    )
    expect(noSession.status).toBe(400)
    expect(noSession.body.error.message).toMatch(/begins with an initialize request/)
    const unknown = await rawCall(
      gw.url,
      "POST",
      "/mcp",
      { ...json, ...admin, "mcp-session-id": "no-such-session" },
      JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" })
    )
    expect(unknown.status).toBe(404)
    const deep = await rawCall(gw.url, "POST", "/mcp", { ...json, ...admin }, "[".repeat(200) + "]".repeat(200))
    expect(deep.status).toBe(400)
    expect((await rawCall(gw.url, "PUT", "/mcp", admin)).status).toBe(405)
    for (const hostile of [
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":5}',
      '{"jsonrpc":"2.0","id":1,"method":"initialize"}',
      '[{"method":"initialize"},7]'
    ]) {
      const r = await rawCall(gw.url, "POST", "/mcp", { ...json, ...admin }, hostile)
      expect(r.status, hostile).toBeGreaterThanOrEqual(200)
      expect(r.status, hostile).toBeLessThan(500)
    }
    const noAccept = await rawCall(gw.url, "GET", "/mcp", { ...admin, "mcp-session-id": "x" })
    expect(noAccept.status).toBeLessThan(500)

    // A session belongs to the caller that opened it.
    const opened = await initialize(LATEST_PROTOCOL_VERSION)
    const stolen = await rawCall(
      gw.url,
      "POST",
      "/mcp",
      { ...json, authorization: `Bearer ${INFERENCE}`, "mcp-session-id": opened.sessionId! },
      JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" })
    )
    expect(stolen.status).toBe(403)
    expect(gw.logs.some((l) => l.level === "ERROR" && l.message.includes("/mcp"))).toBe(false)
  })
})

describe("DNS rebinding: /mcp checks Origin, and Host on a loopback bind (the MCP SDK's own client)", () => {
  const port = () => new URL(gw.url).port
  const sessions = async () => (await call(`${gw.url}/api/mcp/status`, { headers: admin })).body.sessionsActive as number

  it("a foreign Origin, with or without credentials, is refused with 403 before any session opens", async () => {
    const before = await sessions()
    for (const headers of [{ origin: "http://evil.example.com" }, { origin: "http://evil.example.com", ...admin }, { origin: "null" }]) {
      const err = await connect(headers).catch((e: unknown) => e as { code?: number; message: string })
      expect(err, JSON.stringify(headers)).toMatchObject({ code: 403 })
      expect((err as Error).message).toMatch(/not allowed here \(DNS rebinding protection\)/)
    }
    expect(await sessions()).toBe(before)
    const raw = await rawCall(
      gw.url,
      "POST",
      "/mcp",
      { "content-type": "application/json", accept: "application/json, text/event-stream", origin: "http://evil.example.com" },
      "{}"
    )
    expect(raw.status).toBe(403)
    expect(raw.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000, data: { code: "origin_not_allowed" } } })
  })

  it("a Host that is no name of this loopback gateway is refused, whatever the Origin; its own names work", async () => {
    const evil = await connect({}, { host: "evil.example.com" }).catch((e: unknown) => e as { code?: number; message: string })
    expect(evil).toMatchObject({ code: 403 })
    expect((evil as Error).message).toMatch(/Host \\?"evil\.example\.com\\?" is not a name of this gateway/)
    const rebound = await connect({ origin: "http://evil.example.com" }, { host: "evil.example.com" }).catch(
      (e: unknown) => e as { code?: number }
    )
    expect(rebound).toMatchObject({ code: 403 })
    // A name that merely starts with a loopback address is anyone's name.
    expect(await connect({}, { host: `127.0.0.1.evil.example:${port()}` }).catch((e: unknown) => e as { code?: number })).toMatchObject({
      code: 403
    })
    for (const host of [`localhost:${port()}`, `127.0.0.1:${port()}`, "localhost", `[::1]:${port()}`]) {
      const { client } = await connect({ ...admin, origin: `http://${host}` }, { host })
      expect((await names(client)).length, host).toBe(ALL_TOOLS.length)
    }
  })

  it("an unauthenticated local client (no Origin, the gateway's own Host) still opens a session and reads the catalog", async () => {
    const { client } = await connect()
    expect(await names(client)).toEqual(CATALOG_TOOLS)
  })
})

describe("DNS rebinding: names and origins the operator allows", () => {
  let other: TestGateway
  beforeAll(async () => {
    other = await startGateway({
      env: {
        GATEWAY_SKILLS_DIR: skillsDir,
        GATEWAY_ALLOWED_HOSTS: "gateway.lan",
        GATEWAY_ALLOWED_ORIGINS: "https://app.example",
        NEXT_PUBLIC_BASE_URL: "https://gw.example.net/"
      }
    })
  })
  afterAll(async () => {
    await other?.close()
  })

  it("GATEWAY_ALLOWED_HOSTS, the hosts of GATEWAY_ALLOWED_ORIGINS and NEXT_PUBLIC_BASE_URL are names of the gateway; others are not", async () => {
    const url = other.url
    for (const [host, origin] of [
      ["gateway.lan:8080", "http://gateway.lan:8080"],
      ["app.example", "https://app.example"],
      ["gw.example.net", "https://gw.example.net"]
    ] as const) {
      const { client } = await connect({ origin }, { host, url })
      expect(await names(client), host).toEqual(CATALOG_TOOLS)
    }
    expect(await connect({}, { host: "other.lan", url }).catch((e: unknown) => e as { code?: number })).toMatchObject({ code: 403 })
    expect(await connect({ origin: "https://gw.example.net.evil" }, { url }).catch((e: unknown) => e as { code?: number })).toMatchObject({
      code: 403
    })
  })
})
