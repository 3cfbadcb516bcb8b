/**
 * The gateway's connections to upstream MCP servers (src/services/mcp/McpUpstreams.ts), against
 * real servers: the reference "everything" server (stdio, streamable HTTP and HTTP+SSE, started
 * on 127.0.0.1), the reference filesystem server, and a small SDK server of our own
 * (test/fixtures/mcp/paged-server.mjs) for pagination, list_changed, a JSON-RPC error and a crash.
 * The registry is an in-memory stand-in.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as Scope from "effect/Scope"
import { afterEach, describe, expect, it } from "vitest"
import { MCP_DEFAULT_TIMEOUT_MS, type McpServerRecord } from "../src/domain/mcpServers.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"
import { McpServers, type McpServersShape } from "../src/services/mcp/McpServers.js"
import { type McpUpstreamError, McpUpstreams, type McpUpstreamsShape } from "../src/services/mcp/McpUpstreams.js"
import { processRecord, stdioEnv } from "../src/services/mcp/processes.js"
import { LifeEnded, loadConnection, makeSupervisor, restartSchedule } from "../src/services/mcp/supervisor.js"
import { tempDir } from "./support/gateway.js"
import { until } from "./support/until.js"
import { refusedPort } from "./support/refusedPort.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const FILESYSTEM = path.join(root, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
const PAGED = path.join(root, "test/fixtures/mcp/paged-server.mjs")
const LOOPBACK = path.join(root, "test/fixtures/mcp/loopback.mjs")

let ids = 0
const record = (name: string, fields: Partial<McpServerRecord>): McpServerRecord => ({
  id: `mcp-${++ids}`,
  name,
  transport: "stdio",
  command: null,
  args: [],
  env: {},
  cwd: null,
  url: null,
  headers: {},
  allowedTools: [],
  timeoutMs: MCP_DEFAULT_TIMEOUT_MS,
  rpm: null,
  enabled: true,
  createdAt: Date.now(),
  updatedAt: Date.now(),
  ...fields
})
const everything = (name = "ev", fields: Partial<McpServerRecord> = {}) =>
  record(name, { command: process.execPath, args: [EVERYTHING, "stdio"], ...fields })
const paged = (name = "paged", fields: Partial<McpServerRecord> = {}) =>
  record(name, { command: process.execPath, args: [PAGED], ...fields })

/** The registry, in memory: what the test sets, with its change listeners. */
const memoryRegistry = (initial: ReadonlyArray<McpServerRecord>) => {
  const records = new Map(initial.map((r) => [r.name, r]))
  const listeners = new Set<() => void>()
  const changed = () => {
    for (const l of [...listeners]) l()
  }
  const notHere = Effect.die("not in the in-memory registry")
  const shape: McpServersShape = {
    all: () => [...records.values()],
    byName: (name) => records.get(name),
    refresh: Effect.void,
    create: () => notHere,
    update: () => notHere,
    remove: () => notHere,
    onChange: (listener) => {
      listeners.add(listener)
      return () => void listeners.delete(listener)
    }
  }
  return {
    layer: Layer.succeed(McpServers, shape),
    set: (r: McpServerRecord) => {
      records.set(r.name, r)
      changed()
    },
    remove: (name: string) => {
      records.delete(name)
      changed()
    },
    get: (name: string) => records.get(name) as McpServerRecord
  }
}

const logs: Array<string> = []
const quietLogger = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ message }) => void logs.push(Array.isArray(message) ? message.join(" ") : String(message)))
)

const closers: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c().catch(() => undefined)))
})

/** The layer over an in-memory registry, built in a scope of the test's own (closed after it, or by `close`). */
const start = async (initial: ReadonlyArray<McpServerRecord>) => {
  const registry = memoryRegistry(initial)
  const dataDir = tempDir("gw-mcp-upstreams-")
  const scope = Effect.runSync(Scope.make())
  const layer = McpUpstreams.layer.pipe(Layer.provide(Layer.mergeAll(registry.layer, AppConfig.layerTest({ dataDir }))))
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope).pipe(Effect.provide(quietLogger)))
  const up = Context.get(context, McpUpstreams)
  let closed = false
  const close = async () => {
    if (closed) return
    closed = true
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
  closers.push(close)
  const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect.pipe(Effect.provide(quietLogger)))
  const fail = async <A>(effect: Effect.Effect<A, McpUpstreamError>) => {
    const exit = await Effect.runPromiseExit(effect.pipe(Effect.flip, Effect.provide(quietLogger)))
    if (Exit.isFailure(exit)) throw new Error("expected a failure, got a success")
    return exit.value
  }
  return { up, registry, close, run, fail, dataDir }
}

const ready = (up: McpUpstreamsShape, server: string, ms = 15_000) =>
  until(`${server} ready`, () => (up.health(server)?.state === "ready" ? up.health(server) : undefined), ms)
const listed = (up: McpUpstreamsShape, server: string) =>
  until(`${server} listed`, () => (up.health(server)?.listedAt != null ? up.offerings(server) : undefined))
const text = (result: { content: ReadonlyArray<unknown> }) =>
  (result.content as ReadonlyArray<{ type: string; text?: string }>).map((c) => c.text ?? "").join("\n")
/** Whether `pid` runs: a zombie (exited, waiting for a parent that is not ours to collect it) does not. */
const running = (pid: number) => {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"))
  } catch {
    return true
  }
}

/** The everything server in one of its HTTP modes, on 127.0.0.1 (loopback.mjs; a free port unless given), stopped after the test. */
const httpEverything = async (mode: "streamableHttp" | "sse", port = 0) => {
  const proc: ChildProcess = spawn(process.execPath, ["--import", LOOPBACK, EVERYTHING, mode], {
    env: { PATH: process.env.PATH ?? "", PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"]
  })
  const kill = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return
    proc.kill("SIGKILL")
    await new Promise((r) => proc.once("exit", r))
  }
  closers.push(kill)
  let stderr = ""
  proc.stderr?.on("data", (c: Buffer) => (stderr += c.toString()))
  const listening = await until(`the everything server (${mode}) listening`, () => /LISTENING (\d+)/.exec(stderr)?.[1])
  return { port: Number(listening), kill }
}

describe("McpUpstreams over stdio: the everything server", () => {
  it("connects: ready with its pid and serverInfo, its tools, resources and prompts listed; echo answers through it", async () => {
    const { up, run } = await start([everything()])
    const health = await ready(up, "ev")
    expect(health).toMatchObject({ state: "ready", reason: null, restarts: 0, serverInfo: { name: "mcp-servers/everything" } })
    expect(health.pid).toBeGreaterThan(0)
    expect(running(health.pid as number)).toBe(true)
    const offerings = await listed(up, "ev")
    expect(offerings.tools.map((t) => t.name)).toEqual(expect.arrayContaining(["echo", "trigger-long-running-operation", "get-env"]))
    expect(offerings.resources.length).toBeGreaterThan(0)
    expect(offerings.resourceTemplates.length).toBeGreaterThan(0)
    expect(offerings.prompts.map((p) => p.name)).toContain("simple-prompt")

    const echoed = await run(up.callTool("ev", "echo", { message: "hello upstream" }))
    expect(text(echoed)).toBe("Echo: hello upstream")
    const prompt = await run(up.getPrompt("ev", "simple-prompt", undefined))
    expect(JSON.stringify(prompt.messages)).toContain("This is a simple prompt without arguments.")
    const uri = offerings.resources[0]?.uri as string
    const resource = await run(up.readResource("ev", uri))
    expect(resource.contents[0]?.uri).toBe(uri)
    expect(logs.some((l) => l.includes("MCP server ev: ready"))).toBe(true)
  })

  it("forwards progress: the long-running operation's notifications reach onProgress", async () => {
    const { up, run } = await start([everything()])
    await ready(up, "ev")
    const progress: Array<{ progress: number; total?: number }> = []
    const result = await run(
      up.callTool("ev", "trigger-long-running-operation", { duration: 0.3, steps: 3 }, { onProgress: (p) => progress.push(p) })
    )
    expect(text(result)).toContain("Long running operation completed")
    expect(progress).toEqual([
      { progress: 1, total: 3 },
      { progress: 2, total: 3 },
      { progress: 3, total: 3 }
    ])
  })

  it("a call past its time limit fails with reason timeout, naming the server and the limit; the connection serves on", async () => {
    const { up, run, fail } = await start([everything()])
    await ready(up, "ev")
    const began = Date.now()
    const error = await fail(up.callTool("ev", "trigger-long-running-operation", { duration: 5, steps: 5 }, { timeoutMs: 300 }))
    expect(Date.now() - began).toBeLessThan(2500)
    expect(error).toMatchObject({ _tag: "McpUpstreamError", server: "ev", reason: "timeout" })
    expect(error.message).toContain('"ev"')
    expect(error.message).toContain("300 ms")
    expect(text(await run(up.callTool("ev", "echo", { message: "still here" })))).toBe("Echo: still here")
  })

  it("a call whose signal aborts is cancelled (reason cancelled), and so is one aborted before it starts", async () => {
    const { up, fail } = await start([everything()])
    await ready(up, "ev")
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 200)
    const began = Date.now()
    const error = await fail(up.callTool("ev", "trigger-long-running-operation", { duration: 5, steps: 5 }, { signal: controller.signal }))
    expect(Date.now() - began).toBeLessThan(2500)
    expect(error).toMatchObject({ server: "ev", reason: "cancelled" })
    expect(await fail(up.callTool("ev", "echo", { message: "x" }, { signal: AbortSignal.abort() }))).toMatchObject({ reason: "cancelled" })
  })

  it("a process killed with SIGKILL: restarting with the exit in the reason, then ready again with a new pid", async () => {
    const { up, run } = await start([everything()])
    const first = await ready(up, "ev")
    const seen: Array<{ state: string; reason: string | null }> = []
    up.onChange((server) => {
      const h = up.health(server)
      if (server === "ev" && h) seen.push({ state: h.state, reason: h.reason })
    })
    process.kill(first.pid as number, "SIGKILL")
    const again = await until("ready with a new pid", () => {
      const h = up.health("ev")
      return h?.state === "ready" && h.pid !== first.pid ? h : undefined
    })
    expect(seen).toContainEqual({ state: "restarting", reason: expect.stringMatching(/^process exited with code null \(signal SIGKILL\)/) })
    expect(again.restarts).toBeGreaterThanOrEqual(1)
    expect(running(first.pid as number)).toBe(false)
    expect(text(await run(up.callTool("ev", "echo", { message: "back" })))).toBe("Echo: back")
  })

  it("a stdio server gets the minimal environment and its own env, not the gateway's", async () => {
    process.env.GATEWAY_UPSTREAMS_TEST_SECRET = "do-not-leak"
    try {
      const { up, run } = await start([everything("ev", { env: { MY_SETTING: "from-the-record" } })])
      await ready(up, "ev")
      const env = JSON.parse(text(await run(up.callTool("ev", "get-env", {})))) as Record<string, string>
      expect(env.MY_SETTING).toBe("from-the-record")
      expect(env.PATH).toBe(process.env.PATH)
      expect(env.GATEWAY_UPSTREAMS_TEST_SECRET).toBeUndefined()
      expect(Object.keys(env).filter((k) => !["MY_SETTING", ...Object.keys(stdioEnv({}))].includes(k))).toEqual([])
    } finally {
      delete process.env.GATEWAY_UPSTREAMS_TEST_SECRET
    }
  })
})

describe("McpUpstreams: discovery, errors and supervision (a server of our own)", () => {
  it("follows the cursors, lists only what the capabilities declare, lists again on tools/list_changed", async () => {
    const { up, run } = await start([paged()])
    const health = await ready(up, "paged")
    expect(health.serverInfo).toEqual({ name: "paged", version: "1.2.3" })
    const offerings = await listed(up, "paged")
    // Five tools in pages of two, after a line on stdout that is not JSON-RPC.
    expect(offerings.tools.map((t) => t.name)).toEqual(["grow", "fail", "crash", "spawn-child", "cwd"])
    expect(offerings).toMatchObject({ resources: [], resourceTemplates: [], prompts: [] })
    const changes: Array<string> = []
    up.onChange((s) => changes.push(s))
    await run(up.callTool("paged", "grow", {}))
    await until("the new tool listed", () => up.offerings("paged").tools.some((t) => t.name === "added-5"))
    expect(changes).toContain("paged")
  })

  it("the server's JSON-RPC error is reason upstream with its code; unknown servers and disabled ones are named", async () => {
    const { up, registry, fail } = await start([paged(), paged("off", { enabled: false })])
    await ready(up, "paged")
    const error = await fail(up.callTool("paged", "fail", {}))
    expect(error).toMatchObject({ server: "paged", reason: "upstream", code: -32011 })
    expect(error.message).toContain("not today")
    expect(error.message).toContain('"paged"')
    expect(await fail(up.callTool("nope", "x", {}))).toMatchObject({ server: "nope", reason: "unknown_server" })
    expect(up.health("nope")).toBeUndefined()
    expect(up.health("off")).toMatchObject({ state: "disabled", pid: null })
    const off = await fail(up.callTool("off", "cwd", {}))
    expect(off).toMatchObject({ reason: "unavailable" })
    expect(off.message).toContain("disabled")
    expect(await fail(up.restart("off"))).toMatchObject({ reason: "unavailable" })
    // Enabled: connected.
    registry.set({ ...registry.get("off"), enabled: true })
    await ready(up, "off")
  })

  it("a process that exits: the reason has its code and its last stderr line; it is started again", async () => {
    const { up, run } = await start([paged()])
    const first = await ready(up, "paged")
    const seen: Array<string | null> = []
    up.onChange(() => {
      const h = up.health("paged")
      if (h?.state === "restarting") seen.push(h.reason)
    })
    await run(up.callTool("paged", "crash", {}))
    const again = await until("ready again", () => {
      const h = up.health("paged")
      return h?.state === "ready" && h.pid !== first.pid ? h : undefined
    })
    expect(seen).toContain("process exited with code 3 (signal null): fatal: out of cheese")
    expect(again.restarts).toBe(1)
  })

  it("runs in its cwd; restart() gives a new process; removed: its process group is gone, its health too", async () => {
    const cwd = tempDir("gw-mcp-cwd-")
    const { up, registry, run } = await start([paged("paged", { cwd })])
    const first = await ready(up, "paged")
    expect(fs.realpathSync(text(await run(up.callTool("paged", "cwd", {}))))).toBe(fs.realpathSync(cwd))

    await run(up.restart("paged"))
    expect(running(first.pid as number)).toBe(false)
    const second = await ready(up, "paged")
    expect(second.pid).not.toBe(first.pid)
    expect(second.restarts).toBe(1)

    const grandchild = Number(text(await run(up.callTool("paged", "spawn-child", {}))))
    expect(running(grandchild)).toBe(true)
    registry.remove("paged")
    await until("removed", () => up.health("paged") === undefined && !running(second.pid as number) && !running(grandchild))
    expect(up.offerings("paged").tools).toEqual([])
  })

  it("a changed record is connected again; a disabled one is closed", async () => {
    const { up, registry, fail } = await start([paged()])
    const first = await ready(up, "paged")
    registry.set({ ...registry.get("paged"), args: [PAGED, "--changed"] })
    const second = await until("connected again", () => {
      const h = up.health("paged")
      return h?.state === "ready" && h.pid !== first.pid ? h : undefined
    })
    expect(running(first.pid as number)).toBe(false)
    registry.set({ ...registry.get("paged"), enabled: false })
    await until("disabled", () => up.health("paged")?.state === "disabled" && !running(second.pid as number))
    expect(await fail(up.callTool("paged", "cwd", {}))).toMatchObject({ reason: "unavailable" })
  })

  it("a command that cannot run is failed (not restarted); a stdio record without a command too", async () => {
    const { up } = await start([record("missing", { command: "/nonexistent/mcp-server-binary" }), record("nocommand", { command: null })])
    const missing = await until("failed", () => (up.health("missing")?.state === "failed" ? up.health("missing") : undefined))
    expect(missing.reason).toContain("/nonexistent/mcp-server-binary")
    expect(missing.reason).toContain("not found")
    await until("failed", () => up.health("nocommand")?.state === "failed")
    expect(up.health("nocommand")?.reason).toBe("a stdio server needs a command")
    await new Promise((r) => setTimeout(r, 800))
    expect(up.health("missing")?.restarts).toBe(0)
  })

  it("after the layer's scope closes, no server process remains", async () => {
    const { up, close, run } = await start([paged(), everything()])
    const a = await ready(up, "paged")
    const b = await ready(up, "ev")
    const grandchild = Number(text(await run(up.callTool("paged", "spawn-child", {}))))
    await close()
    for (const pid of [a.pid as number, b.pid as number, grandchild]) expect(running(pid)).toBe(false)
  })

  it("a client that cannot be loaded, then an internal error, each end a life that is begun again: said in the health, never a server left starting", async () => {
    const scope = Effect.runSync(Scope.make())
    closers.push(() => Effect.runPromise(Scope.close(scope, Exit.void).pipe(Effect.provide(quietLogger))))
    const rec = paged("unlucky")
    const seen: Array<string> = []
    let loads = 0
    const supervisor = makeSupervisor({
      all: () => [rec],
      processes: processRecord(tempDir("gw-mcp-supervisor-")),
      scope,
      changed: () => {
        const h = supervisor.entries.get("unlucky")?.health
        if (h !== undefined) seen.push(`${h.state}: ${h.reason ?? ""}`)
      },
      load: async () => {
        loads++
        if (loads === 1) throw new Error("the module could not be read")
        const real = await loadConnection()
        if (loads > 2) return real
        // The second life connects, then meets a bug: a throw where nothing expects one.
        return {
          ...real,
          createConnection: (r, child, auth) => {
            const conn = real.createConnection(r, child, auth)
            conn.client.getServerVersion = () => {
              throw new Error("a bug in the client")
            }
            return conn
          }
        }
      }
    })
    logs.length = 0
    await Effect.runPromise(supervisor.reconcile.pipe(Effect.provide(quietLogger)))
    const health = () => supervisor.entries.get("unlucky")!.health
    await until("ready on the third life", () => (health().state === "ready" ? health() : undefined), 20_000)
    expect(health().restarts).toBe(2)
    expect(seen).toContain("restarting: the MCP client could not be loaded: the module could not be read")
    expect(seen).toContain("restarting: an internal error: a bug in the client")
    expect(logs.some((l) => l.includes("unlucky: its connection ended on an internal error"))).toBe(true)
  })

  it("a life that ends for good (failed) stays failed when a finalizer also throws: the throw is logged, the end is not turned into a restart", async () => {
    const scope = Effect.runSync(Scope.make())
    closers.push(() => Effect.runPromise(Scope.close(scope, Exit.void).pipe(Effect.provide(quietLogger))))
    const rec = paged("doomed")
    const record = processRecord(tempDir("gw-mcp-supervisor-"))
    const supervisor = makeSupervisor({
      all: () => [rec],
      // Removing the process from the record throws, in the life's finalizer.
      processes: {
        ...record,
        remove: () => {
          throw new Error("the record could not be written")
        }
      },
      scope,
      changed: () => {},
      load: async () => {
        const real = await loadConnection()
        return {
          ...real,
          createConnection: () => {
            throw new Error("no client for this record")
          }
        }
      }
    })
    logs.length = 0
    await Effect.runPromise(supervisor.reconcile.pipe(Effect.provide(quietLogger)))
    const health = () => supervisor.entries.get("doomed")!.health
    await until("failed", () => (health().state === "failed" ? health() : undefined), 10_000, health)
    expect(health().reason).toBe("no client for this record")
    await new Promise((r) => setTimeout(r, 800))
    expect(health()).toMatchObject({ state: "failed", restarts: 0 })
    expect(logs.some((l) => l.includes("doomed: its connection ended on an internal error"))).toBe(true)
  })
})

describe("McpUpstreams over HTTP", () => {
  it("streamable HTTP: the everything server on 127.0.0.1 connects, lists its tools, answers echo", async () => {
    const { port } = await httpEverything("streamableHttp")
    const { up, run } = await start([record("web", { transport: "http", url: `http://127.0.0.1:${port}/mcp` })])
    const health = await ready(up, "web")
    expect(health).toMatchObject({ pid: null, serverInfo: { name: "mcp-servers/everything" } })
    expect((await listed(up, "web")).tools.map((t) => t.name)).toContain("echo")
    expect(text(await run(up.callTool("web", "echo", { message: "over http" })))).toBe("Echo: over http")
  })

  it("HTTP+SSE: the everything server's older transport connects and answers", async () => {
    const { port } = await httpEverything("sse")
    const { up, run } = await start([record("old", { transport: "sse", url: `http://127.0.0.1:${port}/sse` })])
    await ready(up, "old")
    expect((await listed(up, "old")).tools.map((t) => t.name)).toContain("echo")
    expect(text(await run(up.callTool("old", "echo", { message: "over sse" })))).toBe("Echo: over sse")
  })

  it("a streamable HTTP server that goes away: restarting with the reason, connected again once it is back", async () => {
    const first = await httpEverything("streamableHttp")
    const { up, run } = await start([record("web", { transport: "http", url: `http://127.0.0.1:${first.port}/mcp` })])
    await ready(up, "web")
    await first.kill()
    const down = await until("restarting", () => (up.health("web")?.state === "restarting" ? up.health("web") : undefined))
    expect(down.reason).toMatch(/connection failed|cannot connect|connection closed/)
    await httpEverything("streamableHttp", first.port)
    const again = await ready(up, "web", 20_000)
    expect(again.restarts).toBeGreaterThanOrEqual(1)
    expect(text(await run(up.callTool("web", "echo", { message: "back over http" })))).toBe("Echo: back over http")
  })

  it("a server that answers 401 is needs-auth with the reason, and is not tried again and again; the record's headers are sent", async () => {
    let hits = 0
    const seenHeaders: Array<string | undefined> = []
    const server = http.createServer((req, res) => {
      hits++
      seenHeaders.push(req.headers["x-team"] as string | undefined)
      res.writeHead(401, { "www-authenticate": 'Bearer realm="mcp"', "content-type": "text/plain" })
      res.end("sign in first")
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    closers.push(() => new Promise((r) => server.close(() => r())))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
    const { up } = await start([record("locked", { transport: "http", url, headers: { "x-team": "blue" } })])
    const health = await until("needs-auth", () => (up.health("locked")?.state === "needs-auth" ? up.health("locked") : undefined))
    expect(health.reason).toContain("401")
    expect(seenHeaders[0]).toBe("blue")
    const after = hits
    await new Promise((r) => setTimeout(r, 1200))
    expect(hits).toBe(after)
    expect(up.health("locked")?.restarts).toBe(0)
  })

  it("a server that is not there is restarting with the reason, tried again on the schedule", async () => {
    const port = await refusedPort()
    const { up } = await start([record("gone", { transport: "http", url: `http://127.0.0.1:${port}/mcp` })])
    const h = await until("restarted once", () => ((up.health("gone")?.restarts ?? 0) >= 1 ? up.health("gone") : undefined))
    expect(h.state).toBe("restarting")
    expect(h.reason).toMatch(/^cannot connect: /)
  })
})

describe("McpUpstreams: the filesystem server", () => {
  it("confined to a folder, lists it and reads a file in it", async () => {
    const dir = tempDir("gw-mcp-fs-")
    fs.writeFileSync(path.join(dir, "notes.txt"), "the quick brown fox\n")
    const { up, run } = await start([record("files", { command: process.execPath, args: [FILESYSTEM, dir] })])
    await ready(up, "files")
    expect((await listed(up, "files")).tools.map((t) => t.name)).toEqual(expect.arrayContaining(["list_directory", "read_text_file"]))
    expect(text(await run(up.callTool("files", "list_directory", { path: dir })))).toContain("[FILE] notes.txt")
    expect(text(await run(up.callTool("files", "read_text_file", { path: path.join(dir, "notes.txt") })))).toBe("the quick brown fox\n")
    const outside = await run(up.callTool("files", "read_text_file", { path: "/etc/hostname" }))
    expect(outside.isError).toBe(true)
  })
})

describe("the restart schedule and the process record", () => {
  const delays = (ends: ReadonlyArray<LifeEnded>) =>
    Chunk.toReadonlyArray(Effect.runSync(Schedule.run(Schedule.delays(restartSchedule), 0, ends))).map(Duration.toMillis)
  const quick = new LifeEnded({ reason: "x", state: "restarting", upMs: 100 })
  /** How many of `ends` in a row the schedule begins again after (it stops at the first it does not). */
  const retried = (ends: ReadonlyArray<LifeEnded>) =>
    Effect.runSync(
      Effect.gen(function* () {
        let state = restartSchedule.initial
        let n = 0
        for (const ended of ends) {
          const [next, , decision] = yield* restartSchedule.step(0, ended, state)
          if (ScheduleDecision.isDone(decision)) break
          state = next
          n++
        }
        return n
      })
    )

  it("doubles from 0.5 s to at most 30 s, starts again after a life of a minute, stops for failed and needs-auth", () => {
    expect(delays(Array(9).fill(quick))).toEqual([500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000])
    expect(delays([quick, quick, quick, new LifeEnded({ reason: "x", state: "restarting", upMs: 120_000 }), quick])).toEqual([
      500, 1000, 2000, 500, 1000
    ])
    expect(retried([quick, quick, quick])).toBe(3)
    expect(retried([quick, new LifeEnded({ reason: "x", state: "needs-auth", upMs: 0 }), quick])).toBe(1)
    expect(retried([new LifeEnded({ reason: "x", state: "failed", upMs: 0 })])).toBe(0)
  })

  it("stops the process groups a gateway process that is gone left running, not a live one's", async () => {
    const dir = tempDir("gw-mcp-processes-")
    const orphan = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { detached: true, stdio: "ignore" })
    const kept = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { detached: true, stdio: "ignore" })
    closers.push(async () => {
      kept.kill("SIGKILL")
      orphan.kill("SIGKILL")
    })
    // A gateway process that has exited recorded the orphan; this (live) one recorded `kept`.
    const gone = spawn(process.execPath, ["-e", ""], { stdio: "ignore" })
    await new Promise((r) => gone.once("exit", r))
    processRecord(dir, gone.pid as number).add(orphan.pid as number, `${process.execPath} -e setInterval`)
    const mine = processRecord(dir)
    mine.add(kept.pid as number, `${process.execPath} -e setInterval`)
    expect(await mine.reap()).toBe(1)
    await until("the orphan stopped", () => orphan.exitCode !== null || orphan.signalCode !== null)
    expect(running(kept.pid as number)).toBe(true)
    expect(fs.readdirSync(dir)).toEqual([`${process.pid}.json`])

    // A previous run under the same pid (a container started again): its file is reaped too.
    const again = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { detached: true, stdio: "ignore" })
    closers.push(async () => void again.kill("SIGKILL"))
    fs.writeFileSync(path.join(dir, `${process.pid}.json`), JSON.stringify({ [String(again.pid)]: `${process.execPath} -e x` }))
    expect(await processRecord(dir).reap()).toBe(1)
    await until("the previous run's process stopped", () => again.exitCode !== null || again.signalCode !== null)
  })
})
