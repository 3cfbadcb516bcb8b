import { describe, expect, it } from "vitest"
import { ADMIN_KEY, runCli, setupWithProvider, startServerProcess } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { tempDir } from "./support/gateway.js"

/** `gateway models [provider]` and `gateway provider list|add`, spawned against a running server. */
describe("gateway models and gateway provider", () => {
  it("adds a connection for a provider node without echoing its key, lists it masked, and lists the node's models", async () => {
    const up = await FakeUpstream.start()
    const dataDir = tempDir()
    expect((await setupWithProvider(dataDir, up.baseUrl("openai-chat"))).code).toBe(0)
    const server = await startServerProcess({ DATA_DIR: dataDir })
    const env = { DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY }
    const port = new URL(server.url).port
    try {
      const node = await fetch(`${server.url}/api/provider-nodes`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({
          id: "mylab",
          prefix: "lab",
          baseUrl: up.baseUrl("openai-chat"),
          family: "openai-chat",
          models: [{ id: "lab-large", contextLength: 32000, price: { input: 2, output: 8 } }]
        })
      })
      expect(node.status).toBe(201)

      const secret = "sk-lab-very-secret-0123456789"
      const add = await runCli(
        ["--port", port, "provider", "add", "--provider", "mylab", "--api-key", secret, "--base-url", up.baseUrl("openai-chat")],
        env
      )
      expect(add.stderr).toBe("")
      expect(add.code).toBe(0)
      expect(add.stdout).toContain("added lab (mylab")
      expect(add.stdout + add.stderr).not.toContain(secret)

      const list = await runCli(["--port", port, "provider", "list"], env)
      expect(list.code).toBe(0)
      expect(list.stdout).toMatch(/lab\s+mylab/)
      expect(list.stdout).toMatch(/openai-compatible\s+openai-compatible/)
      expect(list.stdout).not.toContain(secret)
      const listed = JSON.parse((await runCli(["--port", port, "provider", "list", "--json"], env)).stdout)
      expect(listed.connections.map((c: any) => c.name).sort()).toEqual(["lab", "openai-compatible"])
      expect(JSON.stringify(listed)).not.toContain(secret)

      const models = await runCli(["--port", port, "models", "mylab"], env)
      expect(models.code).toBe(0)
      expect(models.stdout).toMatch(/lab\/lab-large\s+chat\s+32000/)
      const all = JSON.parse((await runCli(["--port", port, "models", "--json"], env)).stdout)
      expect(all.models.map((m: any) => m.id)).toEqual(expect.arrayContaining(["lab/lab-large", "anthropic/claude-sonnet-4-5"]))
      const connected = JSON.parse((await runCli(["--port", port, "models", "--connected", "--json"], env)).stdout)
      expect(connected.models.map((m: any) => m.id).sort()).toEqual(["lab/lab-large", "openai-compatible/m1"])

      // A bad add says why and exits 1.
      const bad = await runCli(["--port", port, "provider", "add", "--provider", "nowhere"], env)
      expect(bad.code).toBe(1)
      expect(bad.stderr).toContain("unknown provider 'nowhere'")
    } finally {
      await server.stop("SIGTERM")
      await up.close()
    }
  })
})
