import { spawn } from "node:child_process"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { BIN, cleanEnv } from "./support/cli.js"
import { tempDir } from "./support/gateway.js"

/**
 * `GET /api/health/ping`'s `uptimeSeconds` is the process's: the management plane is built on its
 * first request, so the ping's module loads then, and an uptime counted from its loading would
 * read 0 on a gateway that had been up for minutes. The built gateway, its first management
 * request a few seconds after it listens.
 */
const children: Array<ReturnType<typeof spawn>> = []
afterAll(() => {
  for (const c of children) c.kill("SIGTERM")
})

describe("GET /api/health/ping", () => {
  it("counts the uptime from the process's start, not from the first management request", async () => {
    const dir = tempDir("gw-uptime-")
    const child = spawn(process.execPath, [BIN, "--port", "0"], {
      env: cleanEnv({ DATA_DIR: path.join(dir, "data"), LOG_FORMAT: "json" }),
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(child)
    let out = ""
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line: ${out}`)), 60_000)
      const seen = (d: Buffer) => {
        out += d.toString()
        const m = /listening on (https?:\/\/[^ "]+)/.exec(out)
        if (m) {
          clearTimeout(timer)
          resolve(m[1]!)
        }
      }
      child.stdout!.on("data", seen)
      child.stderr!.on("data", seen)
      child.on("exit", (code) => reject(new Error(`exited ${code}: ${out}`)))
    })
    await new Promise((r) => setTimeout(r, 2_600))
    const res = await fetch(`${url}/api/health/ping`)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { uptimeSeconds: number }
    expect(body.uptimeSeconds).toBeGreaterThanOrEqual(2)
  }, 90_000)
})
