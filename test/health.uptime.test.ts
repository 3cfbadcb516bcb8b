import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { startServerProcess } from "./support/cli.js"
import { tempDir } from "./support/gateway.js"

/**
 * `GET /api/health/ping`'s `uptimeSeconds` is the process's: the management plane is built on its
 * first request, so the ping's module loads then, and an uptime counted from its loading would
 * read 0 on a gateway that had been up for minutes. The built gateway, its first management
 * request a few seconds after it listens.
 */
describe("GET /api/health/ping", () => {
  it("counts the uptime from the process's start, not from the first management request", async () => {
    const server = await startServerProcess({ DATA_DIR: path.join(tempDir("gw-uptime-"), "data") }, [], { startMs: 60_000 })
    try {
      await new Promise((r) => setTimeout(r, 2_600))
      const res = await fetch(`${server.url}/api/health/ping`)
      expect(res.status).toBe(200)
      const body = (await res.json()) as { uptimeSeconds: number }
      expect(body.uptimeSeconds).toBeGreaterThanOrEqual(2)
    } finally {
      await server.stop()
    }
  }, 90_000)
})
