import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { BIN, cleanEnv, runCli, startServerProcess, type ServerProcess } from "./support/cli.js"
import { tempDir } from "./support/gateway.js"

// Spawns bin/gateway: needs `npm run build` first (npm test does it). Each test starts several
// processes, which take seconds each on a loaded machine: a longer timeout.
const SLOW = { timeout: 120_000 }

const open: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)))
})

const skillsDir = () => {
  const dir = tempDir("gw-mcp-stdio-skills-")
  fs.writeFileSync(
    path.join(dir, "cli-mcp.md"),
    "---\nname: gateway mcp\ndescription: The MCP server from the command line\n---\n\n## Overview\n"
  )
  return dir
}

/** `gateway --mcp` as an MCP client's configuration would start it, with the official client on its stdio. */
const stdio = async (env: Record<string, string>) => {
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, "--mcp"], env: cleanEnv(env), stderr: "pipe" })
  let stderr = ""
  transport.stderr?.on("data", (c: Buffer) => (stderr += c.toString()))
  // Anything on stdout that is not a protocol message reaches the client as an error.
  const errors: Array<Error> = []
  transport.onerror = (e) => errors.push(e)
  const client = new Client({ name: "stdio-test", version: "1.0.0" })
  await client.connect(transport)
  open.push(client)
  return { client, errors, stderr: () => stderr }
}
const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name)
const text = (result: Awaited<ReturnType<Client["callTool"]>>) => (result.content as Array<{ text: string }>).map((c) => c.text).join("\n")

describe("gateway --mcp (stdio)", () => {
  it("serves every tool in-process on the local database: a key created over MCP is in `gateway keys list`", SLOW, async () => {
    const dataDir = tempDir("gw-mcp-stdio-")
    const { client, errors } = await stdio({ DATA_DIR: dataDir, GATEWAY_SKILLS_DIR: skillsDir() })
    expect(await names(client)).toHaveLength(13)
    const skills = await client.callTool({ name: "gateway_agent_skills_list", arguments: { category: "cli" } })
    expect(skills.structuredContent).toMatchObject({
      skills: [{ id: "cli-mcp", name: "gateway mcp", rawUrl: "http://127.0.0.1:20128/api/agent-skills/cli-mcp/raw" }]
    })

    const created = await client.callTool({ name: "gateway_keys_create", arguments: { name: "from-stdio" } })
    expect(created.isError).toBeFalsy()
    const id = (created.structuredContent as { id: string }).id
    const listed = await runCli(["keys", "list", "--json"], { DATA_DIR: dataDir })
    expect(listed.code).toBe(0)
    expect(JSON.parse(listed.stdout).keys).toEqual(
      expect.arrayContaining([expect.objectContaining({ id, name: "from-stdio", scopes: ["inference"] })])
    )
    const health = await client.callTool({ name: "gateway_health_summary", arguments: {} })
    expect(health.structuredContent).toMatchObject({ status: "down", configuredCount: 0 })
    expect(errors).toEqual([])
  })

  it("GATEWAY_MCP_SCOPES narrows the operator's scopes; GATEWAY_MCP_ENFORCE_SCOPES=false lifts the check", SLOW, async () => {
    const env = { DATA_DIR: tempDir("gw-mcp-stdio-"), GATEWAY_SKILLS_DIR: skillsDir(), GATEWAY_MCP_SCOPES: "read:catalog, read:keys" }
    const narrowed = await stdio(env)
    expect(await names(narrowed.client)).toEqual([
      "gateway_agent_skills_list",
      "gateway_agent_skills_get",
      "gateway_agent_skills_coverage",
      "gateway_keys_list"
    ])
    const refused = await narrowed.client.callTool({ name: "gateway_keys_create", arguments: { name: "nope" } })
    expect(refused.isError).toBe(true)
    expect(text(refused)).toMatch(/gateway_keys_create needs scope write:keys; the stdio operator has read:catalog, read:keys/)

    const lifted = await stdio({ ...env, GATEWAY_MCP_ENFORCE_SCOPES: "false" })
    expect(await names(lifted.client)).toHaveLength(13)
    expect((await lifted.client.callTool({ name: "gateway_keys_create", arguments: { name: "now-allowed" } })).isError).toBeFalsy()
  })

  it("an unknown scope in GATEWAY_MCP_SCOPES is an error on stderr, nothing on stdout", SLOW, async () => {
    const r = await runCli(["--mcp"], { DATA_DIR: tempDir("gw-mcp-stdio-"), GATEWAY_MCP_SCOPES: "read:everything" })
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/GATEWAY_MCP_SCOPES names unknown scopes \(read:everything\)/)
    expect(r.stdout).toBe("")
  })
})

describe("gateway mcp status | restart", () => {
  let server: ServerProcess | undefined
  afterEach(async () => {
    await server?.stop()
    server = undefined
  })

  it("report and restart the running server's MCP state", SLOW, async () => {
    const dataDir = tempDir("gw-mcp-cli-")
    const key = await runCli(["keys", "add", "--name", "admin", "--scope", "admin", "--json"], { DATA_DIR: dataDir })
    const secret = JSON.parse(key.stdout).secret as string
    server = await startServerProcess({ DATA_DIR: dataDir })
    const remote = ["--url", server.url, "--api-key", secret]

    const status = await runCli(["mcp", "status", "--json", ...remote], {})
    expect(status.code).toBe(0)
    expect(JSON.parse(status.stdout)).toMatchObject({ tools: 13, sessionsActive: 0, enforceScopes: true, restartedAt: null })
    const human = await runCli(["mcp", "status", ...remote], {})
    expect(human.stdout).toMatch(/MCP server: 13 tools; streamable HTTP at \/mcp/)

    const restart = await runCli(["mcp", "restart", "--json", ...remote], {})
    expect(restart.code).toBe(0)
    expect(JSON.parse(restart.stdout)).toMatchObject({ closedSessions: 0, tools: 13 })
    const after = await runCli(["mcp", "status", "--json", ...remote], {})
    expect(JSON.parse(after.stdout).restartedAt).toBe(JSON.parse(restart.stdout).restartedAt)

    const refused = await runCli(["mcp", "status", "--url", server.url, "--api-key", "gwk_wrong_000000000000000000"], {})
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/the admin key was refused/)
  })
})
