import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { maskSecret } from "../src/kernel/redact.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * `gateway mcp servers ...` against a running gateway's /api/mcp/servers, and `gateway keys add
 * --mcp-allow` on the local database. Spawns bin/gateway: needs the build (npm test makes it).
 */
const ADMIN = "gwk_mcp_servers_cli_admin_0123456789"
const TOKEN = "ghp_cli_secret_token_0123456789abcdef"
const SLOW = { timeout: 120_000 }

let gw: TestGateway
/** The running gateway, for every command but add (whose --url is the MCP server's). */
const remote = () => ["--url", gw.url, "--api-key", ADMIN]
const toGateway = () => ["--gateway-url", gw.url, "--api-key", ADMIN]
const cli = (args: ReadonlyArray<string>) => runCli(["mcp", "servers", ...args], {})

beforeAll(async () => {
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(async () => {
  await gw?.close()
})

describe("gateway mcp servers", () => {
  it("add registers stdio (--command) and http (--url) servers, list shows them with env and header values masked", SLOW, async () => {
    // `node -e 0` exits at once, should a connection start it.
    const stdio = await cli(["add", "gh", "--command", "node", "--arg", "-e", "--arg", "0", "--env", `TOKEN=${TOKEN}`, ...toGateway()])
    expect(stdio.code, stdio.stderr).toBe(0)
    expect(stdio.stdout.trim()).toBe("added gh (stdio: node -e 0)")
    expect(stdio.stderr).toMatch(/nothing of it is exposed yet/)
    const http = await cli([
      "add",
      "docs",
      "--url",
      "http://127.0.0.1:9/mcp",
      "--header",
      "Authorization=Bearer x=y",
      "--json",
      ...toGateway()
    ])
    expect(http.code, http.stderr).toBe(0)
    expect(JSON.parse(http.stdout)).toMatchObject({ name: "docs", transport: "http", headers: { Authorization: maskSecret("Bearer x=y") } })
    const sse = await cli(["add", "events", "--url", "https://127.0.0.1:9/sse", "--transport", "sse", "--allow", "*", ...toGateway()])
    expect(sse.code, sse.stderr).toBe(0)
    expect(sse.stdout).toContain("added events (sse: https://127.0.0.1:9/sse)")

    const list = await cli(["list", ...remote()])
    expect(list.code).toBe(0)
    expect(list.stdout.split("\n")[0]).toMatch(/^NAME\s+TRANSPORT\s+TARGET\s+ENABLED\s+HEALTH/)
    for (const name of ["gh", "docs", "events"]) expect(list.stdout).toContain(name)
    const json = JSON.parse((await cli(["list", "--json", ...remote()])).stdout)
    expect(json.servers.map((s: { name: string }) => s.name)).toEqual(["docs", "events", "gh"])
    expect(json.servers.find((s: { name: string }) => s.name === "gh").env).toEqual({ TOKEN: maskSecret(TOKEN) })
    expect(list.stdout + JSON.stringify(json)).not.toContain(TOKEN)
  })

  it("refuses a bad command line with exit 2 and one line naming the flag, before any request", SLOW, async () => {
    const cases: Array<[ReadonlyArray<string>, string]> = [
      [["add", "nocmd"], "error: --command: a stdio server needs a command"],
      [["add", "both", "--command", "node", "--url", "http://127.0.0.1:9"], "error: --command: an http server takes no command"],
      [["add", "Bad_Name", "--command", "node"], "error: <name>: name must match"],
      [["add", "e", "--command", "node", "--env", "NOVALUE"], "error: --env: expected NAME=VALUE"],
      [["add", "e", "--command", "node", "--env", "A B=1"], 'error: --env: "A B" is not a variable name'],
      [["add", "t", "--url", "http://127.0.0.1:9", "--transport", "ws"], "error: --transport: transport must be one of"],
      [["allow", "gh"], "error: --tool: "],
      [["allow", "gh", "--all", "--tool", "x"], "error: --all: "],
      [["call", "gh", "t", "--args", "{not json"], "error: --args: not JSON"],
      [["call", "gh", "t", "--args", "[1]"], "error: --args: must be a JSON object"]
    ]
    for (const [args, prefix] of cases) {
      const r = await cli([...args, ...(args[0] === "add" ? toGateway() : remote())])
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2)
      expect(r.stderr.trim().split("\n")).toHaveLength(1)
      expect(r.stderr.trim().startsWith(prefix), `${r.stderr.trim()} should start with ${prefix}`).toBe(true)
    }
    const taken = await cli(["add", "gh", "--command", "node", ...toGateway()])
    expect(taken.code).toBe(1)
    expect(taken.stderr).toMatch(/^error: an MCP server named 'gh' already exists/)
  })

  it("allow, tools, call and remove", SLOW, async () => {
    const all = await cli(["allow", "gh", "--all", ...remote()])
    expect(all.code, all.stderr).toBe(0)
    expect(all.stdout.trim()).toBe("gh: allowed *")
    expect((await cli(["allow", "gh", "--tool", "search", "--tool", "read", ...remote()])).stdout.trim()).toBe("gh: allowed search, read")
    expect((await cli(["allow", "gh", "--tool", "write", "--add", ...remote()])).stdout.trim()).toBe("gh: allowed search, read, write")

    const tools = await cli(["tools", "gh", "--json", ...remote()])
    expect(tools.code, tools.stderr).toBe(0)
    expect(Array.isArray(JSON.parse(tools.stdout).offerings)).toBe(true)

    // Nothing answers at docs' address: the call cannot be made.
    const called = await cli(["call", "docs", "search", "--args", '{"q":"x"}', ...remote()])
    expect(called.code).toBe(1)
    expect(called.stderr).toMatch(/^error: .*docs/)

    const removed = await cli(["remove", "events", ...remote()])
    expect(removed.code, removed.stderr).toBe(0)
    expect(removed.stdout.trim()).toBe("removed events")
    const again = await cli(["remove", "events", ...remote()])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/no MCP server named 'events'/)
  })
})

describe("gateway keys add --mcp-allow", () => {
  it("sets the key's MCP ceiling (repeatable), checked as the API checks it", SLOW, async () => {
    const env = { DATA_DIR: tempDir() }
    const added = await runCli(["keys", "add", "--name", "agent", "--mcp-allow", "github", "--mcp-allow", "docs__search", "--json"], env)
    expect(added.code, added.stderr).toBe(0)
    expect(JSON.parse(added.stdout).mcp).toEqual({ allow: ["github", "docs__search"] })
    const plain = await runCli(["keys", "add", "--name", "plain", "--json"], env)
    expect(JSON.parse(plain.stdout).mcp).toBeNull()
    const list = await runCli(["keys", "list"], env)
    expect(list.stdout).toContain("github,docs__search")
    const bad = await runCli(["keys", "add", "--mcp-allow", "Not A Server"], env)
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim()).toMatch(/^error: --mcp-allow: mcp\.allow entries are/)
  })
})
