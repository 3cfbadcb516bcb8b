import * as http from "node:http"
import { describe, expect, it } from "vitest"
import { runCli, startServerProcess } from "./support/cli.js"
import { tempDir } from "./support/gateway.js"
import { alive, tokenAgent } from "./support/tunnelStandins.js"
import { until } from "./support/until.js"

/**
 * Tunnels under `gateway --workers 2` (docs/tunnels.md, "With --workers N"): one helper per
 * gateway, run by worker 1; worker 2 hands it enable/disable and answers its status.
 */

const get = (url: string, agent: http.Agent, key: string, method = "GET", body?: unknown): Promise<{ status: number; body: any }> =>
  new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(
      url,
      {
        agent,
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(data ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) } : {})
        }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
      }
    )
    req.on("error", reject)
    req.end(data)
  })

describe("tunnels under --workers 2", () => {
  it("worker 1 runs the one helper; worker 2 starts and stops it and answers its status; nothing is left after SIGTERM", async () => {
    const agent = tokenAgent(tempDir("gw-tunnel-workers-"))
    const dataDir = tempDir("gw-tunnel-workers-data-")
    const made = await runCli(["keys", "add", "--scope", "admin", "--name", "t", "--json"], { DATA_DIR: dataDir })
    expect(made.code, made.stderr).toBe(0)
    const key: string = JSON.parse(made.stdout).secret
    // Both workers serve on any machine (with one core the second would stand by: docs/scale-out.md, "Cores").
    const server = await startServerProcess({ DATA_DIR: dataDir, TOKEN_TUNNEL_BIN: agent.file, GATEWAY_WORKERS_STANDBY: "false" }, [
      "--workers",
      "2"
    ])
    try {
      const to = (n: number) =>
        until(
          `a connection to worker ${n}`,
          async () => {
            const a = new http.Agent({ keepAlive: true, maxSockets: 1 })
            if ((await get(`${server.url}/api/health/ping`, a, key)).body.worker === n) return a
            a.destroy()
            return undefined
          },
          30_000
        )
      const [w1, w2] = [await to(1), await to(2)]
      const enabled = await get(`${server.url}/api/tunnels/token`, w2, key, "POST", { action: "enable", authToken: "workers-token-123" })
      expect(enabled.status).toBe(200)
      expect(enabled.body.phase).toBe("starting")
      const running = await until(
        "running as seen by worker 2",
        async () => {
          const s = (await get(`${server.url}/api/tunnels/token`, w2, key)).body
          return s.phase === "running" ? s : undefined
        },
        10_000
      )
      expect(running.publicUrl).toBe("https://calm-otter-1.ngrok-free.app")
      expect((await get(`${server.url}/api/tunnels/token`, w1, key)).body).toEqual(running)
      expect(agent.runs()).toHaveLength(1)
      expect(agent.runs()[0]!.authtoken).toBe("workers-token-123")
      expect((await get(`${server.url}/api/health/ping`, w2, key)).body.tunnelOpen).toBe(true)

      expect((await get(`${server.url}/api/tunnels/token`, w2, key, "POST", { action: "disable" })).body.phase).toBe("stopped")
      expect(alive(agent.runs()[0]!.pid)).toBe(false)
      expect((await get(`${server.url}/api/tunnels/token`, w1, key)).body.phase).toBe("stopped")
      await get(`${server.url}/api/tunnels/token`, w1, key, "POST", { action: "enable" })
      await until(
        "running again",
        async () => ((await get(`${server.url}/api/tunnels/token`, w2, key)).body.phase === "running" ? true : undefined),
        10_000
      )
      expect(agent.runs()).toHaveLength(2)
      w1.destroy()
      w2.destroy()
      await server.stop("SIGTERM")
      expect(alive(agent.runs()[1]!.pid)).toBe(false)
    } finally {
      await server.stop().catch(() => undefined)
    }
  }, 90_000)
})
