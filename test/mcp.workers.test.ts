/**
 * An MCP session on `/v1/mcp` outlives the process that opened it: under `gateway --workers N`
 * node's cluster spreads connections, not sessions, over the workers, and the official client
 * sends a session's requests on several connections; behind a balancer, two gateways on one
 * store do the same. A session id is sealed with the storage key, so the process a request lands
 * on takes the session up (docs/mcp.md, "Sessions across workers and gateways").
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as Effect from "effect/Effect"
import path from "node:path"
import { Agent, fetch as undiciFetch } from "undici"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { McpServers } from "../src/services/mcp/McpServers.js"
import { ADMIN_KEY, runCli, type ServerProcess, startServerProcess } from "./support/cli.js"
import { startGateway, type TestGateway, tempDir } from "./support/gateway.js"
import { mcpListed } from "./support/mcpListed.js"

const root = path.resolve(import.meta.dirname, "..")
const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

const until = async <A>(what: string, f: () => Promise<A | undefined> | A | undefined, ms = 20_000): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const textOf = (result: unknown): string =>
  ((result as { content: Array<{ type: string; text?: string }> }).content ?? []).map((c) => c.text ?? "").join("")

/** A fetch that sends each request to the next of `origins` in turn, as a balancer would. */
const roundRobin = (origins: ReadonlyArray<string>) => {
  let n = 0
  const seen: Array<string> = []
  const f = (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input))
    const origin = origins[n++ % origins.length]!
    seen.push(origin)
    return fetch(`${origin}${url.pathname}${url.search}`, init)
  }
  return { fetch: f, seen }
}

describe("an MCP session taken up by another gateway on the same store", () => {
  let a: TestGateway
  let b: TestGateway
  let key: string
  let otherKey: string

  beforeAll(async () => {
    const dataDir = tempDir("gw-mcp-two-")
    a = await startGateway({ dataDir })
    b = await startGateway({ dataDir })
    key = await a.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "caller", mcp: { allow: ["ev"] } } as never))).then((k) => k.secret)
    otherKey = await a.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "other" }))).then((k) => k.secret)
    await a.run(
      Effect.flatMap(McpServers, (s) =>
        s.create({ name: "ev", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: ["*"] })
      )
    )
    for (const g of [a, b]) {
      await g.run(Effect.flatMap(McpServers, (s) => s.refresh))
      await mcpListed(g.run, "ev")
    }
  }, 90_000)

  afterAll(async () => {
    await b?.close()
    await a?.close()
  })

  it("the official client's requests alternate between the two and the session holds, with its narrowing", async () => {
    const rr = roundRobin([a.url, b.url])
    const client = new Client({ name: "two-gateways", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${a.url}/v1/mcp`), {
        // The header narrows the session at initialize; later requests do not repeat it.
        requestInit: { headers: { authorization: `Bearer ${key}` } },
        fetch: async (input, init) => {
          const headers = new Headers(init?.headers)
          if (!headers.has("mcp-session-id")) headers.set("x-gateway-mcp-allow", "ev__echo")
          return rr.fetch(input, { ...init, headers })
        }
      })
    )
    try {
      for (let i = 0; i < 3; i++) {
        expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["ev__echo"])
        expect(textOf(await client.callTool({ name: "ev__echo", arguments: { message: `round ${i}` } }))).toContain(`round ${i}`)
      }
      // The narrowing came with the session: a tool outside it is refused on either gateway.
      const refused = await client.callTool({ name: "ev__get-sum", arguments: { a: 1, b: 2 } }).then(
        () => undefined,
        (e: unknown) => e as Error
      )
      expect(refused?.message).toMatch(/X-Gateway-MCP-Allow/)
      expect(new Set(rr.seen)).toEqual(new Set([a.url, b.url]))
    } finally {
      await client.close()
    }
  })

  it("another key presenting the session's id is refused (403), and an id the gateway did not make is unknown (404)", async () => {
    const client = new Client({ name: "owner", version: "1.0.0" })
    const transport = new StreamableHTTPClientTransport(new URL(`${a.url}/v1/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } }
    })
    await client.connect(transport)
    try {
      const id = transport.sessionId!
      expect(id.startsWith("gwmcp_")).toBe(true)
      const post = (origin: string, bearer: string, sessionId: string) =>
        fetch(`${origin}/v1/mcp`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${bearer}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-session-id": sessionId,
            "mcp-protocol-version": "2025-06-18"
          },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" })
        })
      expect((await post(b.url, otherKey, id)).status).toBe(403)
      expect((await post(b.url, key, `${id.slice(0, -4)}AAAA`)).status).toBe(404)
      expect((await post(b.url, key, "7d6e1c3a-0000-4000-8000-000000000000")).status).toBe(404)
      expect((await post(b.url, key, id)).status).toBe(200)
    } finally {
      await client.close()
    }
  })
})

describe("an MCP session under gateway --workers 2", () => {
  let gw: ServerProcess
  let key: string

  beforeAll(async () => {
    const dataDir = tempDir("gw-mcp-workers-")
    const setup = await runCli(["setup", "--non-interactive"], { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY })
    expect(setup.code).toBe(0)
    // Both workers serve on any machine (with one core the second would stand by: docs/scale-out.md, "Cores").
    gw = await startServerProcess({ DATA_DIR: dataDir, GATEWAY_WORKERS_STANDBY: "false" }, ["--workers", "2"], { startMs: 60_000 })
    const admin = { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" }
    const created = await fetch(`${gw.url}/api/keys`, { method: "POST", headers: admin, body: JSON.stringify({ name: "mcp" }) })
    key = ((await created.json()) as { secret: string }).secret
    const server = await fetch(`${gw.url}/api/mcp/servers`, {
      method: "POST",
      headers: admin,
      body: JSON.stringify({ name: "ev", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: ["*"] })
    })
    expect(server.status).toBe(201)
    // Each worker connects to the server itself; both must have listed it.
    await until(
      "ev ready in both workers",
      async () => {
        const states = await Promise.all(
          Array.from({ length: 8 }, () =>
            undiciFetch(`${gw.url}/api/mcp/servers/ev`, { headers: admin, dispatcher: new Agent({ pipelining: 0 }) } as never).then(
              (r) => r.json() as Promise<any>
            )
          )
        )
        // Worker 2 starts after worker 1 listens: both must answer (their stdio servers have their own pids), ready.
        return states.every((s) => s.health?.state === "ready" && s.tools > 0) && new Set(states.map((s) => s.health.pid)).size === 2
          ? true
          : undefined
      },
      40_000
    )
  }, 120_000)

  afterAll(async () => {
    await gw?.stop()
  })

  it("the official client lists and calls tools over many connections, whichever worker each lands on", async () => {
    // A connection per request (closed as soon as it is idle): node's cluster hands each new one to
    // the next worker, so a session's requests land on both workers, as they do for a client that
    // keeps its event stream open and sends requests in parallel.
    const dispatcher = new Agent({ keepAliveTimeout: 1, keepAliveMaxTimeout: 1 })
    let connections = 0
    dispatcher.on("connect", () => void connections++)
    const perRequest = (input: string | URL | Request, init?: RequestInit) =>
      undiciFetch(input instanceof Request ? input.url : String(input), {
        ...(init as object),
        dispatcher
      } as never) as unknown as Promise<Response>
    for (let n = 0; n < 4; n++) {
      const client = new Client({ name: "workers", version: "1.0.0" })
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${gw.url}/v1/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${key}` } },
          fetch: perRequest
        })
      )
      try {
        for (let i = 0; i < 4; i++) {
          const [tools, echoed] = await Promise.all([
            client.listTools(),
            client.callTool({ name: "ev__echo", arguments: { message: `client ${n} call ${i}` } })
          ])
          expect(tools.tools.map((t) => t.name)).toContain("ev__echo")
          expect(textOf(echoed)).toContain(`client ${n} call ${i}`)
        }
      } finally {
        await client.close()
      }
    }
    expect(connections).toBeGreaterThan(8)
    await dispatcher.close()
  }, 120_000)
})
