import { execFile } from "node:child_process"
import fs from "node:fs"
import path from "node:path"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { McpServers } from "../src/services/mcp/McpServers.js"
import { McpUpstreams } from "../src/services/mcp/McpUpstreams.js"
import { startGateway, type TestGateway, tempDir } from "./support/gateway.js"

/**
 * The MCP inspector's command line (`@modelcontextprotocol/inspector`, unmodified), a client
 * nobody here wrote, against `/v1/mcp` with two real servers behind it (the everything server and
 * the filesystem server over stdio). The inspector needs Node 22.19 or newer: it runs with this
 * Node when it is one, else with the binary GATEWAY_NODE22 names (vitest.config.ts leaves this file
 * out of `npm test` on an older Node without it; CI runs it in its Node 22 pass).
 */
const node = Number(process.versions.node.split(".")[0]) >= 22 ? process.execPath : process.env.GATEWAY_NODE22
const root = path.resolve(import.meta.dirname, "..")
const launcher = path.join(root, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const FILESYSTEM = path.join(root, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")

let gw: TestGateway
let key: string
let narrowKey: string
let files: string

/** `mcp-inspector --cli <url> --transport http ...`: its exit code and what it printed (JSON on stdout). */
const inspector = (endpoint: string, bearer: string, args: ReadonlyArray<string>) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
    if (!node) return reject(new Error("the MCP inspector needs Node 22.19 or newer: run this file under Node 22, or set GATEWAY_NODE22"))
    execFile(
      node,
      [launcher, "--cli", `${gw.url}${endpoint}`, "--transport", "http", "--header", `Authorization: Bearer ${bearer}`, ...args],
      // Its catalog file goes to a temp directory, not the home directory.
      { timeout: 60_000, env: { ...process.env, MCP_CATALOG_PATH: path.join(tempDir("gw-inspector-"), "mcp.json") } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    )
  })

const until = async <A>(what: string, f: () => Promise<A | undefined>, ms = 20_000): Promise<A> => {
  const end = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

beforeAll(async () => {
  gw = await startGateway()
  files = tempDir("gw-inspector-files-")
  fs.writeFileSync(path.join(files, "hello.txt"), "hello from the filesystem server\n")
  await gw.run(
    Effect.flatMap(McpServers, (s) =>
      Effect.zipRight(
        s.create({ name: "ev", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: ["*"] }),
        s.create({ name: "fs", transport: "stdio", command: process.execPath, args: [FILESYSTEM, files], allowedTools: ["*"] })
      )
    )
  )
  for (const name of ["ev", "fs"])
    await until(`${name} listed`, () => gw.run(Effect.map(McpUpstreams, (u) => (u.health(name)?.listedAt != null ? true : undefined))))
  key = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "inspector" })))).secret
  narrowKey = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "ev-only", mcp: { allow: ["ev"] } } as never)))).secret
}, 60_000)

afterAll(async () => {
  await gw?.close()
})

describe("the MCP inspector's CLI against /v1/mcp", () => {
  it("lists the tools of both servers and calls one of each", async () => {
    const list = await inspector("/v1/mcp", key, ["--method", "tools/list"])
    expect(list.code, list.stderr).toBe(0)
    const names = (JSON.parse(list.stdout).tools as Array<{ name: string }>).map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(["ev__echo", "fs__read_text_file"]))

    const echo = await inspector("/v1/mcp", key, [
      "--method",
      "tools/call",
      "--tool-name",
      "ev__echo",
      "--tool-arg",
      "message=from the inspector"
    ])
    expect(echo.code, echo.stderr).toBe(0)
    expect(echo.stdout).toContain("from the inspector")

    const read = await inspector("/v1/mcp", key, [
      "--method",
      "tools/call",
      "--tool-name",
      "fs__read_text_file",
      "--tool-arg",
      `path=${path.join(files, "hello.txt")}`
    ])
    expect(read.code, read.stderr).toBe(0)
    expect(read.stdout).toContain("hello from the filesystem server")
  })

  it("a key limited to one server sees only its tools, and a call beyond is refused naming the rule", async () => {
    const list = await inspector("/v1/mcp", narrowKey, ["--method", "tools/list"])
    expect(list.code, list.stderr).toBe(0)
    const names = (JSON.parse(list.stdout).tools as Array<{ name: string }>).map((t) => t.name)
    expect(names).toContain("ev__echo")
    expect(names.some((n) => n.startsWith("fs__"))).toBe(false)
    const refused = await inspector("/v1/mcp", narrowKey, [
      "--method",
      "tools/call",
      "--tool-name",
      "fs__read_text_file",
      "--tool-arg",
      `path=${path.join(files, "hello.txt")}`
    ])
    // The inspector looks the tool up in the listing first: a tool the key may not use is not there.
    expect(refused.code).not.toBe(0)
    expect(refused.stdout + refused.stderr).toMatch(/tool_not_found[\s\S]*fs__read_text_file/)
    expect(refused.stdout).not.toContain("hello from the filesystem server")
  })

  it("reaches one server at /v1/mcp/{server} under its own names", async () => {
    const list = await inspector("/v1/mcp/fs", key, ["--method", "tools/list"])
    expect(list.code, list.stderr).toBe(0)
    const names = (JSON.parse(list.stdout).tools as Array<{ name: string }>).map((t) => t.name)
    expect(names).toContain("read_text_file")
  })
})
