import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

/**
 * `/api/tools/agent-bridge/tproxy` on an installation without the native addon (docs/capture.md):
 * the built gateway, copied with its bin/, dist/ and package.json but no native/build (as after an
 * `npm install` on a machine without a C compiler), started as a user would start it. It says
 * `available: false` and why, refuses a start with that reason, and still checks a body first.
 * The mode itself, for real, is in test/netns/tproxy.netns.ts.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const ADMIN_KEY = "sk-tproxy-api-admin-0123456789"
const ROUTE = "/api/tools/agent-bridge/tproxy"

let copy: string
let child: ChildProcess
let base: string

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer()
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })

const call = async (method: string, body?: string) => {
  const res = await fetch(`${base}${ROUTE}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body } : {})
  })
  return { status: res.status, json: (await res.json()) as any }
}

beforeAll(async () => {
  if (!fs.existsSync(path.join(ROOT, "dist", "bundle"))) throw new Error("dist/ is missing: run npm run build")
  copy = fs.mkdtempSync(path.join(os.tmpdir(), "gw-no-addon-"))
  fs.cpSync(path.join(ROOT, "bin"), path.join(copy, "bin"), { recursive: true })
  fs.cpSync(path.join(ROOT, "dist"), path.join(copy, "dist"), { recursive: true })
  fs.copyFileSync(path.join(ROOT, "package.json"), path.join(copy, "package.json"))
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(copy, "node_modules"))
  fs.symlinkSync(path.join(ROOT, "skills"), path.join(copy, "skills"))
  const dataDir = path.join(copy, "data")
  const env = { ...process.env, DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY }
  execFileSync(process.execPath, [path.join(copy, "bin", "gateway"), "setup", "--non-interactive", "--password", "a long admin password"], {
    env,
    stdio: "ignore"
  })
  const port = await freePort()
  base = `http://127.0.0.1:${port}`
  child = spawn(process.execPath, [path.join(copy, "bin", "gateway")], { env: { ...env, PORT: String(port) }, stdio: "ignore" })
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode})`)
    const up = await fetch(`${base}/api/health/ping`).then(
      (r) => r.ok,
      () => false
    )
    if (up) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error("the gateway did not answer in 30 s")
}, 60_000)

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill("SIGTERM")
    await new Promise((resolve) => child.once("exit", resolve))
  }
  if (copy) fs.rmSync(copy, { recursive: true, force: true })
})

describe("transparent capture without the native addon", () => {
  it("GET says available: false and why (the addon is not built, and how to build it)", async () => {
    const r = await call("GET")
    expect(r.status).toBe(200)
    expect(r.json).toMatchObject({ running: false, available: false, interceptCount: 0, port: 8443, config: null, lastError: null })
    expect(r.json.reason).toContain("the native addon is not built")
    expect(r.json.reason).toContain("npm run build:native")
    // The commands that would undo a start, for the docs' "by hand" section.
    expect(r.json.commands.revert).toContain("ip -4 rule del fwmark 0x2333 lookup 233")
  })

  it("a start is refused with that reason (503), after the body was checked (400 naming the field)", async () => {
    const bad = await call("POST", JSON.stringify({ onPort: 0 }))
    expect(bad.status).toBe(400)
    expect(bad.json).toMatchObject({ _tag: "BadRequest" })
    expect(bad.json.message).toContain("onPort")
    const same = await call("POST", JSON.stringify({ mark: 5, bypassMark: 5 }))
    expect(same.status).toBe(400)
    expect(same.json.message).toContain("bypassMark")
    const r = await call("POST", "{}")
    expect(r.status).toBe(503)
    expect(r.json.message).toContain("transparent capture is unavailable here")
    expect(r.json.message).toContain("the native addon is not built")
    expect((await call("GET")).json).toMatchObject({ running: false, available: false })
  })

  it("DELETE with nothing running is a no-op that answers the status", async () => {
    const r = await call("DELETE")
    expect(r.status).toBe(200)
    expect(r.json).toMatchObject({ running: false, available: false })
  })
})
