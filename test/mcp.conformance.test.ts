import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * The MCP conformance suite (`@modelcontextprotocol/conformance`, unmodified) against the
 * gateway's `/mcp`. Its CLI needs Node 22 or newer (it imports `fs.globSync`): it runs with this
 * Node when it is one, else with the binary GATEWAY_NODE22 names. vitest.config.ts leaves this
 * file out of `npm test` on an older Node without that variable; CI runs it in its Node 22 pass.
 */
const node = Number(process.versions.node.split(".")[0]) >= 22 ? process.execPath : process.env.GATEWAY_NODE22
const cli = path.resolve("node_modules/@modelcontextprotocol/conformance/dist/index.js")

interface Check {
  readonly id: string
  readonly status: string
  readonly errorMessage?: string
}

const scenario = (url: string, name: string) =>
  new Promise<{ code: number; output: string; checks: ReadonlyArray<Check> }>((resolve, reject) => {
    if (!node)
      return reject(
        new Error("the MCP conformance CLI needs Node 22 or newer: run this file under Node 22, or set GATEWAY_NODE22 to a Node 22 binary")
      )
    const out = tempDir("gw-mcp-conformance-")
    execFile(node, [cli, "server", "--url", url, "--scenario", name, "-o", out], { timeout: 60_000 }, (error, stdout, stderr) => {
      const dir = fs.readdirSync(out).find((d) => d.startsWith(`server-${name}-`))
      const checks = dir ? (JSON.parse(fs.readFileSync(path.join(out, dir, "checks.json"), "utf8")) as Array<Check>) : []
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: stdout + stderr, checks })
    })
  })

let gw: TestGateway
beforeAll(async () => {
  gw = await startGateway()
})
afterAll(async () => {
  await gw?.close()
})

describe("the MCP conformance suite against /mcp", () => {
  for (const host of ["127.0.0.1", "localhost"]) {
    it(`dns-rebinding-protection passes at http://${host}:<port>/mcp (a foreign Host and Origin refused, the gateway's own accepted)`, async () => {
      const url = `http://${host}:${new URL(gw.url).port}/mcp`
      const r = await scenario(url, "dns-rebinding-protection")
      expect(
        r.checks.map((c) => [c.id, c.status]),
        r.output
      ).toEqual([
        ["localhost-host-rebinding-rejected", "SUCCESS"],
        ["localhost-host-valid-accepted", "SUCCESS"]
      ])
      expect(r.code, r.output).toBe(0)
    })
  }

  for (const name of ["server-initialize", "ping", "tools-list"]) {
    it(`${name} passes`, async () => {
      const r = await scenario(`${gw.url}/mcp`, name)
      expect(r.checks.length, r.output).toBeGreaterThan(0)
      expect(
        r.checks.filter((c) => c.status === "FAILURE"),
        r.output
      ).toEqual([])
      expect(r.code, r.output).toBe(0)
    })
  }
})
