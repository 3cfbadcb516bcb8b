/**
 * `/v1/mcp` (docs/mcp.md, "One endpoint for every server"): the real gateway with two real MCP
 * servers from the npm registry behind it over stdio (the reference "everything" server and the
 * filesystem server confined to a temp directory), reached with the official SDK's client over
 * streamable HTTP: listings and calls, what a key and a session header may use, progress,
 * the refusals as MCP errors, and what a call leaves in the audit log, the inspector and /metrics.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { CreateMcpServer } from "../src/domain/mcpServers.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Policies } from "../src/services/governance/Policies.js"
import { McpServers } from "../src/services/mcp/McpServers.js"
import { call, startGateway, type TestGateway, tempDir } from "./support/gateway.js"
import { mcpListed } from "./support/mcpListed.js"
import { Receiver } from "./support/webhookReceiver.js"

const root = path.resolve(import.meta.dirname, "..")
const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const FILESYSTEM = path.join(root, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
const LOOPBACK = path.join(root, "test/fixtures/mcp/loopback.mjs")

let gw: TestGateway
let files: string
let everyKey: string
let evOnlyKey: string
let adminKey: string
const ENV_SECRET = "sk-test-env-secret-0123456789abcdef"

const until = async <A>(what: string, f: () => Promise<A | undefined> | A | undefined, ms = 15_000): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

const register = (input: CreateMcpServer) => gw.run(Effect.flatMap(McpServers, (s) => s.create(input)))
const ready = (name: string) => mcpListed(gw.run, name)
const newKey = (name: string, mcp?: { allow: Array<string> }, scopes?: Array<"inference" | "admin">) =>
  gw
    .run(Effect.flatMap(ApiKeys, (k) => k.create({ name, ...(scopes ? { scopes } : {}), ...(mcp ? { mcp } : {}) } as never)))
    .then((k) => k.secret)

const admin = (p: string) => call(`${gw.url}${p}`, { headers: { authorization: `Bearer ${adminKey}` } })

/** The official SDK's client on an endpoint of the gateway, with a key and extra headers. */
const connect = async (key: string | undefined, endpoint = "/v1/mcp", headers: Record<string, string> = {}) => {
  const client = new Client({ name: "gateway-test", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}${endpoint}`), {
    requestInit: { headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers } }
  })
  await client.connect(transport)
  return client
}

const textOf = (result: unknown): string =>
  ((result as { content: Array<{ type: string; text?: string }> }).content ?? []).map((c) => c.text ?? "").join("")

beforeAll(async () => {
  gw = await startGateway({ env: { TOOL_POLICY_MODE: "block", INSPECTOR_CAPTURE_BODIES: "true" } })
  files = tempDir("gw-mcp-files-")
  fs.writeFileSync(path.join(files, "notes.txt"), "the quick brown fox\n")
  await register({
    name: "ev",
    transport: "stdio",
    command: process.execPath,
    args: [EVERYTHING, "stdio"],
    env: { EV_TOKEN: ENV_SECRET },
    allowedTools: ["*"],
    rpm: 1000
  })
  await register({ name: "fs", transport: "stdio", command: process.execPath, args: [FILESYSTEM, files], allowedTools: ["*"] })
  // Registered and running, but nothing of it allowed yet.
  await register({ name: "hidden", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"] })
  await Promise.all([ready("ev"), ready("fs"), ready("hidden")])
  everyKey = await newKey("every")
  evOnlyKey = await newKey("ev-only", { allow: ["ev"] })
  adminKey = await newKey("admin", undefined, ["admin"])
}, 60_000)

afterAll(async () => {
  await gw?.close()
})

describe("/v1/mcp: every server behind one endpoint", () => {
  it("lists the allowed tools of both servers as <server>__<tool>, and calls each", async () => {
    const client = await connect(everyKey)
    try {
      const names = (await client.listTools()).tools.map((t) => t.name)
      expect(names).toEqual(expect.arrayContaining(["ev__echo", "ev__get-sum", "fs__read_text_file", "fs__list_directory"]))
      // A server none of whose tools an admin allowed is not there at all.
      expect(names.some((n) => n.startsWith("hidden__"))).toBe(false)
      const echo = (await client.listTools()).tools.find((t) => t.name === "ev__echo")!
      expect(echo._meta).toMatchObject({ "gateway/server": "ev", "gateway/name": "echo" })

      expect(textOf(await client.callTool({ name: "ev__echo", arguments: { message: "hello through the gateway" } }))).toContain(
        "hello through the gateway"
      )
      expect(textOf(await client.callTool({ name: "fs__read_text_file", arguments: { path: path.join(files, "notes.txt") } }))).toBe(
        "the quick brown fox\n"
      )
    } finally {
      await client.close()
    }
  })

  it("serves one server at /v1/mcp/{server} under its own names", async () => {
    const client = await connect(everyKey, "/v1/mcp/fs")
    try {
      const names = (await client.listTools()).tools.map((t) => t.name)
      expect(names).toContain("read_text_file")
      expect(names.every((n) => !n.includes("__"))).toBe(true)
      expect(textOf(await client.callTool({ name: "list_directory", arguments: { path: files } }))).toContain("notes.txt")
    } finally {
      await client.close()
    }
  })

  it("passes the server's progress notifications back to the client", async () => {
    const client = await connect(everyKey)
    try {
      const progress: Array<number> = []
      await client.callTool({ name: "ev__trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } }, undefined, {
        onprogress: (p) => void progress.push(p.progress)
      })
      expect(progress).toEqual([1, 2, 3])
    } finally {
      await client.close()
    }
  })

  it("needs a valid gateway key, always", async () => {
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } }
    }
    const headers = { accept: "application/json, text/event-stream" }
    const none = await call(`${gw.url}/v1/mcp`, { body: init, headers })
    expect(none.status).toBe(401)
    expect(none.body.error.message).toMatch(/needs a gateway API key/)
    const wrong = await call(`${gw.url}/v1/mcp`, {
      body: init,
      headers: { ...headers, authorization: "Bearer sk-not-a-key-of-this-gateway" }
    })
    expect(wrong.status).toBe(401)
    const unknown = await call(`${gw.url}/v1/mcp/nope`, { body: init, headers: { ...headers, authorization: `Bearer ${everyKey}` } })
    expect(unknown.status).toBe(404)
    expect(unknown.body.error.message).toMatch(/no MCP server named "nope"/)
  })
})

describe("/v1/mcp: what a key and a session may use", () => {
  it("a key without a server gets neither its tools in the list nor its calls", async () => {
    const client = await connect(evOnlyKey)
    try {
      const names = (await client.listTools()).tools.map((t) => t.name)
      expect(names).toContain("ev__echo")
      expect(names.some((n) => n.startsWith("fs__"))).toBe(false)
      const refused = await client.callTool({ name: "fs__read_text_file", arguments: { path: path.join(files, "notes.txt") } }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect(refused).toBeInstanceOf(McpError)
      expect((refused as McpError).code).toBe(-32003)
      expect((refused as McpError).message).toMatch(/key ev-only may not use fs__read_text_file \(its mcp.allow is \["ev"\]\)/)
    } finally {
      await client.close()
    }
  })

  it("X-Gateway-MCP-Allow narrows the key for one session, never widens it", async () => {
    const narrowed = await connect(everyKey, "/v1/mcp", { "x-gateway-mcp-allow": "ev__echo, fs__list_*" })
    try {
      const names = (await narrowed.listTools()).tools.map((t) => t.name).sort()
      expect(names).toEqual(["ev__echo", "fs__list_allowed_directories", "fs__list_directory", "fs__list_directory_with_sizes"].sort())
      const refused = await narrowed.callTool({ name: "ev__get-sum", arguments: { a: 1, b: 2 } }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect((refused as McpError).message).toMatch(/X-Gateway-MCP-Allow \(ev__echo, fs__list_\*\) does not cover ev__get-sum/)
    } finally {
      await narrowed.close()
    }
    const widened = await connect(evOnlyKey, "/v1/mcp", { "x-gateway-mcp-allow": "fs" })
    try {
      expect((await widened.listTools()).tools).toEqual([])
    } finally {
      await widened.close()
    }
  })

  it("a change of the key's mcp.allow reaches the sessions already open", async () => {
    const secret = await newKey("changing", { allow: ["ev"] })
    const id = await gw.run(Effect.flatMap(ApiKeys, (k) => k.list)).then((keys: any) => keys.find((k: any) => k.name === "changing").id)
    const client = await connect(secret)
    try {
      const before = (await client.listTools()).tools.map((t) => t.name)
      expect(before.some((n) => n.startsWith("ev__"))).toBe(true)
      expect(before.some((n) => n.startsWith("fs__"))).toBe(false)
      const patched = await call(`${gw.url}/api/keys/${id}`, {
        method: "PATCH",
        body: { mcp: { allow: ["fs"] } },
        headers: { authorization: `Bearer ${adminKey}` }
      })
      expect(patched.status).toBe(200)
      // The same session, its next requests: the key's new ceiling.
      const after = await until("the new ceiling in the open session", async () => {
        const names = (await client.listTools()).tools.map((t) => t.name)
        return names.some((n) => n.startsWith("fs__")) ? names : undefined
      })
      expect(after.some((n) => n.startsWith("ev__"))).toBe(false)
      const refused = await client.callTool({ name: "ev__echo", arguments: { message: "x" } }).then(
        () => undefined,
        (e: unknown) => e as McpError
      )
      expect(refused?.code).toBe(-32003)
    } finally {
      await client.close()
    }
  })

  it("a tool the admin has not allowed is neither listed nor callable", async () => {
    await gw.run(Effect.flatMap(McpServers, (s) => s.update("fs", { allowedTools: ["list_directory"] })))
    const client = await connect(everyKey)
    try {
      const names = (await client.listTools()).tools.map((t) => t.name)
      expect(names.filter((n) => n.startsWith("fs__"))).toEqual(["fs__list_directory"])
      const refused = await client.callTool({ name: "fs__read_text_file", arguments: { path: path.join(files, "notes.txt") } }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect((refused as McpError).message).toMatch(/fs__read_text_file is not allowed on server fs/)
    } finally {
      await client.close()
      await gw.run(Effect.flatMap(McpServers, (s) => s.update("fs", { allowedTools: ["*"] })))
    }
  })

  it("the tool policy in block mode refuses a denied tool, naming the policy", async () => {
    await gw.run(Effect.flatMap(Policies, (p) => p.create({ name: "no-sums", tools: { deny: ["ev__get-sum"] } } as never, "test")))
    const client = await connect(everyKey)
    try {
      // A tool the policy blocks is not listed either; the others are.
      const listed = (await client.listTools()).tools.map((t) => t.name)
      expect(listed).toContain("ev__echo")
      expect(listed).not.toContain("ev__get-sum")
      const refused = await client.callTool({ name: "ev__get-sum", arguments: { a: 1, b: 2 } }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect((refused as McpError).code).toBe(-32003)
      expect((refused as McpError).message).toMatch(/policy "no-sums" v1, rule tools.deny/)
    } finally {
      await client.close()
      await gw.run(Effect.flatMap(Policies, (p) => p.remove("no-sums", "test")))
    }
  })

  it("a server's rate limit per key answers an MCP error with the wait", async () => {
    await gw.run(Effect.flatMap(McpServers, (s) => s.update("ev", { rpm: 2 })))
    const client = await connect(evOnlyKey)
    try {
      await client.callTool({ name: "ev__echo", arguments: { message: "1" } })
      await client.callTool({ name: "ev__echo", arguments: { message: "2" } })
      const limited = await client.callTool({ name: "ev__echo", arguments: { message: "3" } }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect((limited as McpError).code).toBe(-32029)
      expect((limited as McpError).message).toMatch(/rate limit: key ev-only may call server ev 2 times a minute/)
    } finally {
      await client.close()
      await gw.run(Effect.flatMap(McpServers, (s) => s.update("ev", { rpm: null })))
    }
  })
})

describe("/v1/mcp: resources and prompts", () => {
  it("lists and reads resources and templates, lists and gets prompts, under the <server>__<name> names", async () => {
    const client = await connect(everyKey)
    try {
      const resources = (await client.listResources()).resources
      const doc = resources.find((r) => r.uri.startsWith("demo://resource/static/document/"))!
      expect(doc).toBeDefined()
      expect(doc.name.startsWith("ev__")).toBe(true)
      expect(doc._meta).toMatchObject({ "gateway/server": "ev", "gateway/name": doc.uri })
      const read = await client.readResource({ uri: doc.uri })
      expect(read.contents[0]?.uri).toBe(doc.uri)
      const templates = (await client.listResourceTemplates()).resourceTemplates
      expect(templates.some((t) => t.name.startsWith("ev__"))).toBe(true)

      const prompts = (await client.listPrompts()).prompts.map((p) => p.name)
      expect(prompts).toEqual(expect.arrayContaining(["ev__simple-prompt", "ev__args-prompt"]))
      expect(prompts.some((n) => n.startsWith("hidden__"))).toBe(false)
      const simple = await client.getPrompt({ name: "ev__simple-prompt" })
      expect(JSON.stringify(simple.messages)).toContain("This is a simple prompt without arguments.")
      const withArgs = await client.getPrompt({ name: "ev__args-prompt", arguments: { city: "Lisbon" } })
      expect(JSON.stringify(withArgs.messages)).toContain("Lisbon")
    } finally {
      await client.close()
    }
  })

  it("a URI two servers offer is listed once and read from the server the key may use", async () => {
    await register({ name: "ev2", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: ["*"] })
    await ready("ev2")
    const ev2Only = await newKey("ev2-only", { allow: ["ev2"] })
    const every = await connect(everyKey)
    const only = await connect(ev2Only)
    try {
      const uris = (await every.listResources()).resources.map((r) => r.uri)
      expect(uris.length).toBe(new Set(uris).size)
      const listed = (await only.listResources()).resources
      const doc = listed.find((r) => r.uri.startsWith("demo://resource/static/document/"))!
      expect(doc._meta).toMatchObject({ "gateway/server": "ev2" })
      // ev lists the same URI first; this key may not use ev, so it is read from ev2.
      const read = await only.readResource({ uri: doc.uri })
      expect(read.contents[0]?.uri).toBe(doc.uri)
      const evOnly = await connect(evOnlyKey)
      try {
        const refused = await evOnly.readResource({ uri: "demo://resource/nothing-offers-this" }).then(
          () => undefined,
          (e: unknown) => e
        )
        expect((refused as McpError).message).toMatch(/demo:\/\/resource\/nothing-offers-this/)
      } finally {
        await evOnly.close()
      }
    } finally {
      await every.close()
      await only.close()
      await gw.run(Effect.flatMap(McpServers, (s) => s.remove("ev2")))
    }
  })
})

describe("/v1/mcp: a server over streamable HTTP, and cancellation", () => {
  it("serves the everything server's streamable HTTP mode beside the stdio ones, and a client's cancel reaches the server", async () => {
    // The everything server in its streamable HTTP mode, on 127.0.0.1 (test/fixtures/mcp/loopback.mjs prints the port it got).
    const proc = spawn(process.execPath, ["--import", LOOPBACK, EVERYTHING, "streamableHttp"], {
      env: { PATH: process.env.PATH ?? "", PORT: "0" },
      stdio: ["ignore", "ignore", "pipe"]
    })
    let stderr = ""
    proc.stderr?.on("data", (c: Buffer) => (stderr += c.toString()))
    try {
      const port = await until("the HTTP everything server listening", () => /LISTENING (\d+)/.exec(stderr)?.[1])
      await register({
        name: "evhttp",
        transport: "http",
        url: `http://127.0.0.1:${port}/mcp`,
        allowedTools: ["echo", "trigger-long-running-operation"]
      })
      await ready("evhttp")
      const client = await connect(everyKey)
      try {
        const names = (await client.listTools()).tools.map((t) => t.name)
        expect(names).toEqual(
          expect.arrayContaining(["evhttp__echo", "evhttp__trigger-long-running-operation", "ev__echo", "fs__read_text_file"])
        )
        expect(names).not.toContain("evhttp__get-sum")
        expect(textOf(await client.callTool({ name: "evhttp__echo", arguments: { message: "over http" } }))).toContain("over http")

        // A long call the client cancels: the client's request ends at once, the gateway records it failed (cancelled upstream).
        const controller = new AbortController()
        const started = Date.now()
        const pending = client
          .callTool({ name: "evhttp__trigger-long-running-operation", arguments: { duration: 10, steps: 10 } }, undefined, {
            signal: controller.signal
          })
          .then(
            () => "answered",
            (e: unknown) => String(e)
          )
        await new Promise((r) => setTimeout(r, 300))
        controller.abort()
        expect(await pending).toMatch(/abort/i)
        expect(Date.now() - started).toBeLessThan(5_000)
        const failed = await until("the cancelled call recorded", async () => {
          const r = await admin("/api/compliance/audit-log?kind=mcp&limit=100")
          return (r.body?.entries ?? []).find(
            (e: { target: string; action: string }) => e.target === "evhttp__trigger-long-running-operation"
          )
        })
        expect(failed.action).toBe("mcp.tool.failed")
      } finally {
        await client.close()
      }
    } finally {
      await gw.run(Effect.flatMap(McpServers, (s) => s.remove("evhttp")))
      proc.kill("SIGKILL")
    }
  })
})

describe("/v1/mcp: plugins see each call (onMcpCall)", () => {
  it("a plugin refuses one tool and answers another itself; the rest go to the server", async () => {
    const dir = tempDir("gw-mcp-plugin-")
    fs.writeFileSync(path.join(dir, "plugin.json"), JSON.stringify({ name: "mcp-guard", version: "1.0.0", main: "index.mjs" }))
    fs.writeFileSync(
      path.join(dir, "index.mjs"),
      `import { definePlugin, blockRequest } from "gateway/plugin-sdk"
export default definePlugin({
  name: "mcp-guard",
  onMcpCall(ctx) {
    if (ctx.exposedName === "ev__get-sum") return blockRequest({ message: "no sums on " + ctx.server })
    if (ctx.name === "echo" && ctx.arguments.message === "answer yourself") return blockRequest({ body: { content: [{ type: "text", text: "answered by the plugin" }] } })
  }
})
`
    )
    const installed = await call(`${gw.url}/api/plugins`, {
      body: { path: dir, enable: true },
      headers: { authorization: `Bearer ${adminKey}` }
    })
    expect(installed.status).toBe(201)
    await until("the plugin running", async () => ((await admin("/api/plugins/mcp-guard")).body?.state === "running" ? true : undefined))
    const client = await connect(everyKey)
    try {
      const refused = await client.callTool({ name: "ev__get-sum", arguments: { a: 1, b: 2 } }).then(
        () => undefined,
        (e: unknown) => e
      )
      expect((refused as McpError).code).toBe(-32003)
      expect((refused as McpError).message).toMatch(/ev__get-sum blocked by plugin mcp-guard: no sums on ev/)
      expect(textOf(await client.callTool({ name: "ev__echo", arguments: { message: "answer yourself" } }))).toBe("answered by the plugin")
      expect(textOf(await client.callTool({ name: "ev__echo", arguments: { message: "to the server" } }))).toContain("Echo: to the server")
    } finally {
      await client.close()
      await call(`${gw.url}/api/plugins/mcp-guard`, { method: "DELETE", headers: { authorization: `Bearer ${adminKey}` } })
    }
  })
})

describe("/v1/mcp: webhooks", () => {
  it("deliver mcp.call.completed and mcp.call.failed to a receiver that asked for them", async () => {
    const receiver = await Receiver.start()
    try {
      const created = await call(`${gw.url}/api/webhooks`, {
        body: { url: receiver.url, events: ["mcp.call.completed", "mcp.call.failed"] },
        headers: { authorization: `Bearer ${adminKey}` }
      })
      expect(created.status, created.text).toBe(201)
      const client = await connect(evOnlyKey)
      try {
        await client.callTool({ name: "ev__echo", arguments: { message: "hooked" } })
        await client.callTool({ name: "fs__list_directory", arguments: { path: files } }).catch(() => undefined)
      } finally {
        await client.close()
      }
      const events = await until("both deliveries", () => {
        const got = receiver.deliveries.map((d) => d.body as { event: string; data: Record<string, unknown> })
        return got.some((e) => e.event === "mcp.call.completed") && got.some((e) => e.event === "mcp.call.failed") ? got : undefined
      })
      expect(events.find((e) => e.event === "mcp.call.completed")?.data).toMatchObject({
        server: "ev",
        name: "echo",
        exposedName: "ev__echo",
        outcome: "ok"
      })
      expect(events.find((e) => e.event === "mcp.call.failed")?.data).toMatchObject({
        server: "fs",
        exposedName: "fs__list_directory",
        outcome: "refused"
      })
      await call(`${gw.url}/api/webhooks/${created.body.id}`, { method: "DELETE", headers: { authorization: `Bearer ${adminKey}` } })
    } finally {
      await receiver.close()
    }
  })
})

describe("/v1/mcp: every call recorded", () => {
  it("in the audit log, the inspector (arguments masked) and /metrics; the server's secret env nowhere", async () => {
    const client = await connect(everyKey)
    const secretArg = "sk-live-argument-secret-abcdefghijklmnop"
    try {
      await client.callTool({ name: "ev__echo", arguments: { message: "recorded", api_key: secretArg } })
    } finally {
      await client.close()
    }
    const audit = await until("the audit entry", async () => {
      const r = await admin("/api/compliance/audit-log?kind=mcp&limit=50")
      const hit = (r.body?.entries ?? []).find(
        (e: { target: string; detail: unknown }) => e.target === "ev__echo" && JSON.stringify(e.detail).includes("recorded")
      )
      return hit
    })
    expect(audit).toMatchObject({ action: "mcp.tool.ok" })
    expect(JSON.stringify(audit)).not.toContain(secretArg)

    const entries = await until("the inspector entry", async () => {
      const r = await admin("/api/tools/traffic-inspector/requests?source=mcp")
      const list = r.body?.items ?? r.body?.requests ?? r.body?.entries ?? r.body
      return Array.isArray(list) && list.some((e: { path: string }) => e.path.includes("echo")) ? list : undefined
    })
    // The newest call of echo is this test's.
    const entry = entries
      .filter((e: { path: string }) => e.path.includes("echo"))
      .reduce((a: { seq: number }, b: { seq: number }) => (b.seq > a.seq ? b : a))
    expect(entry).toMatchObject({ source: "mcp", host: "mcp.ev" })
    const detail = await admin(`/api/tools/traffic-inspector/requests/${entry.id}`)
    expect(detail.status).toBe(200)
    expect(detail.text).toContain("recorded")
    expect(detail.text).not.toContain(secretArg)

    const metrics = await admin("/metrics")
    expect(metrics.text).toMatch(/gateway_mcp_calls_total\{[^}]*server="ev"[^}]*kind="tool"[^}]*outcome="ok"[^}]*\} [1-9]/)

    const servers = await admin("/api/mcp/servers")
    expect(servers.status).toBe(200)
    expect(servers.text).toContain("EV_TOKEN")
    expect(servers.text).not.toContain(ENV_SECRET)
    expect(detail.text).not.toContain(ENV_SECRET)
  })
})
