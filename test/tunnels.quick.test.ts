import * as Effect from "effect/Effect"
import { execFileSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli, startServerProcess } from "./support/cli.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { alive } from "./support/tunnelStandins.js"

/**
 * The quick tunnel (docs/tunnels.md) against a stand-in helper: a script that prints what the real
 * helper prints (its address, then the registered connection), dies or is slow as a test says.
 * The vendor's edge is outside this machine: the stand-in replaces it.
 */

const ADMIN = "gwk_tunnels_admin_key_0123456789abcdef"
const gateways: Array<TestGateway> = []
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close()
})

interface Behaviour {
  urlDelayMs?: number
  registerDelayMs?: number
  /** Register only once the test says so (a file `register` in the helper's folder), after printing the address. */
  registerOnSignal?: boolean
  /** Exit this long after registering (only the first run, so a restart stays up). */
  dieAfterMs?: number
}

/** A stand-in helper in `dir`: records its arguments and pid, prints like the real one. */
const helper = (dir: string, behaviour: Behaviour = {}) => {
  const file = path.join(dir, "fake-cloudflared")
  const state = path.join(dir, "state")
  fs.mkdirSync(state, { recursive: true })
  fs.writeFileSync(path.join(dir, "behaviour.json"), JSON.stringify(behaviour))
  fs.writeFileSync(
    file,
    `#!${process.execPath}
const fs = require("node:fs"), path = require("node:path")
const dir = ${JSON.stringify(dir)}, state = ${JSON.stringify(state)}
const b = JSON.parse(fs.readFileSync(path.join(dir, "behaviour.json"), "utf8"))
const run = fs.readdirSync(state).filter((f) => f.startsWith("run-")).length + 1
// Written whole, then named: the test reads run-* files while this one may be starting.
fs.writeFileSync(path.join(state, ".tmp-" + process.pid), JSON.stringify({ pid: process.pid, args: process.argv.slice(2) }))
fs.renameSync(path.join(state, ".tmp-" + process.pid), path.join(state, "run-" + run))
const log = (m) => process.stderr.write(new Date().toISOString() + " INF " + m + "\\n")
log("Requesting new quick Tunnel on trycloudflare.com...")
setTimeout(() => {
  log("+--------------------------------------------------------------------------------------------+")
  log("|  Your quick Tunnel has been created! Visit it at (it may take some time to be reachable):  |")
  log("|  https://quiet-river-" + run + ".trycloudflare.com                                          |")
  log("+--------------------------------------------------------------------------------------------+")
  const register = () => {
    log("Registered tunnel connection connIndex=0 connection=abc event=0 ip=127.0.0.1 location=test protocol=http2")
    if (b.dieAfterMs !== undefined && run === 1) setTimeout(() => process.exit(3), b.dieAfterMs)
  }
  if (!b.registerOnSignal) return void setTimeout(register, b.registerDelayMs ?? 50)
  fs.writeFileSync(path.join(state, "address-printed-" + run), "")
  const wait = setInterval(() => {
    if (!fs.existsSync(path.join(dir, "register"))) return
    clearInterval(wait)
    register()
  }, 20)
}, b.urlDelayMs ?? 20)
setInterval(() => {}, 1000)
`,
    { mode: 0o755 }
  )
  const runs = () =>
    fs
      .readdirSync(state)
      .filter((f) => f.startsWith("run-"))
      .sort()
      .map((f) => JSON.parse(fs.readFileSync(path.join(state, f), "utf8")) as { pid: number; args: Array<string> })
  /** Waits until run `run` printed its address; `register` lets it register its connection. */
  const addressPrinted = async (run = 1) => {
    while (!fs.existsSync(path.join(state, `address-printed-${run}`))) await new Promise((r) => setTimeout(r, 20))
  }
  const register = () => fs.writeFileSync(path.join(dir, "register"), "")
  return { file, runs, addressPrinted, register }
}

const start = async (env: Record<string, string>) => {
  const gw = await startGateway({ env })
  gateways.push(gw)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const api = (method: "GET" | "POST", body?: unknown) =>
    call(`${gw.url}/api/tunnels/quick`, { method, ...(body === undefined ? {} : { body }), headers: { authorization: `Bearer ${ADMIN}` } })
  const statusUntil = async (ok: (s: any) => boolean, ms = 8000) => {
    const end = Date.now() + ms
    for (;;) {
      const s = (await api("GET")).body
      if (ok(s)) return s
      if (Date.now() > end) throw new Error(`the quick tunnel never got there: ${JSON.stringify(s)}`)
      await new Promise((r) => setTimeout(r, 20))
    }
  }
  return { gw, api, statusUntil }
}

describe("the quick tunnel", () => {
  it("goes stopped → starting → running → stopped: the address is shown only once the helper says it is registered", async () => {
    const h = helper(tempDir("gw-tunnel-"), { urlDelayMs: 50, registerOnSignal: true })
    const { gw, api, statusUntil } = await start({ QUICK_TUNNEL_BIN: h.file })
    expect((await api("GET")).body).toEqual({
      phase: "stopped",
      running: false,
      publicUrl: null,
      apiUrl: null,
      targetUrl: gw.url,
      lastError: null
    })
    const enabled = await api("POST", { action: "enable" })
    expect(enabled.status).toBe(200)
    expect(enabled.body).toMatchObject({ phase: "starting", running: false, publicUrl: null })
    // The address is printed, and the connection not registered yet: not shown until it is.
    await h.addressPrinted()
    await new Promise((r) => setTimeout(r, 200))
    expect((await api("GET")).body).toMatchObject({ phase: "starting", running: false, publicUrl: null, apiUrl: null })
    h.register()
    const running = await statusUntil((s) => s.publicUrl !== null)
    expect(running).toEqual({
      phase: "running",
      running: true,
      publicUrl: "https://quiet-river-1.trycloudflare.com",
      apiUrl: "https://quiet-river-1.trycloudflare.com/v1",
      targetUrl: gw.url,
      lastError: null
    })
    const [run] = h.runs()
    expect(run!.args).toEqual(["tunnel", "--no-autoupdate", "--protocol", "http2", "--url", gw.url])
    const stopped = await api("POST", { action: "disable" })
    expect(stopped.body).toMatchObject({ phase: "stopped", running: false, publicUrl: null })
    expect(alive(run!.pid)).toBe(false)
    expect((await api("POST", { action: "enable", authToken: "x" })).status).toBe(400)
    expect((await api("POST", { action: "open" })).status).toBe(400)
  })

  it("a helper that dies while wanted is started again (a new address), saying why meanwhile; TUNNEL_TRANSPORT_PROTOCOL is passed", async () => {
    const h = helper(tempDir("gw-tunnel-"), { dieAfterMs: 100 })
    const { api, statusUntil } = await start({ QUICK_TUNNEL_BIN: h.file, TUNNEL_TRANSPORT_PROTOCOL: "quic" })
    await api("POST", { action: "enable" })
    await statusUntil((s) => s.phase === "running" && s.publicUrl === "https://quiet-river-1.trycloudflare.com")
    // Between the death and the restart (a second later): starting, no address, the reason.
    const between = await statusUntil((s) => s.lastError !== null)
    expect(between).toMatchObject({ phase: "starting", running: false, publicUrl: null })
    expect(between.lastError).toMatch(/^the quick-tunnel helper exited \(3\)/)
    const restarted = await statusUntil((s) => s.phase === "running" && s.publicUrl === "https://quiet-river-2.trycloudflare.com", 10_000)
    expect(restarted.lastError).toBeNull()
    const runs = h.runs()
    expect(runs).toHaveLength(2)
    expect(runs[1]!.args).toContain("quic")
    expect(alive(runs[0]!.pid)).toBe(false)
    await api("POST", { action: "disable" })
    expect(alive(runs[1]!.pid)).toBe(false)
  })

  it("a helper that hangs without registering is ended and started again after TUNNEL_REGISTER_TIMEOUT_SECONDS, saying so", async () => {
    const h = helper(tempDir("gw-tunnel-"), { urlDelayMs: 600_000 })
    const { api, statusUntil } = await start({ QUICK_TUNNEL_BIN: h.file, TUNNEL_REGISTER_TIMEOUT_SECONDS: "1" })
    await api("POST", { action: "enable" })
    const hung = await statusUntil((s) => s.lastError !== null)
    expect(hung).toMatchObject({ phase: "starting", running: false, publicUrl: null })
    expect(hung.lastError).toMatch(/^the helper registered no connection within 1s; starting it again/)
    const end = Date.now() + 8000
    while (h.runs().length < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 25))
    expect(h.runs().length).toBeGreaterThanOrEqual(2)
    expect(alive(h.runs()[0]!.pid)).toBe(false)
    await api("POST", { action: "disable" })
    for (const run of h.runs()) expect(alive(run.pid)).toBe(false)
  })

  it("stays wanted across a restart of the gateway, and leaves no helper behind when the gateway stops", async () => {
    const dir = tempDir("gw-tunnel-")
    const h = helper(dir)
    const first = await start({ QUICK_TUNNEL_BIN: h.file })
    await first.api("POST", { action: "enable" })
    await first.statusUntil((s) => s.phase === "running")
    const pid = h.runs()[0]!.pid
    const data = first.gw.dataDir
    await first.gw.close()
    gateways.splice(gateways.indexOf(first.gw), 1)
    expect(alive(pid)).toBe(false)
    const second = await startGateway({ env: { QUICK_TUNNEL_BIN: h.file }, dataDir: data })
    gateways.push(second)
    const status = async () => (await call(`${second.url}/api/tunnels/quick`, { headers: { authorization: `Bearer ${ADMIN}` } })).body
    const end = Date.now() + 8000
    let s = await status()
    while (s.phase !== "running" && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 25))
      s = await status()
    }
    expect(s).toMatchObject({ phase: "running", publicUrl: "https://quiet-river-2.trycloudflare.com" })
  })
})

describe("requests that come through the tunnel", () => {
  it("are remote: inference and the playground need a key, loopback-only and management routes refuse them", async () => {
    const { gw } = await start({})
    const through = { host: "quiet-river-1.trycloudflare.com", "x-forwarded-for": "203.0.113.9", "cf-connecting-ip": "203.0.113.9" }
    const models = await call(`${gw.url}/v1/models`, { headers: through })
    expect(models.status).toBe(401)
    expect(models.body.error.message).toMatch(/came through a tunnel from the internet/)
    expect((await call(`${gw.url}/api/playground/presets`, { headers: through })).status).toBe(401)
    expect((await call(`${gw.url}/api/tools/traffic-inspector/requests`, { headers: through })).status).toBe(403)
    expect((await call(`${gw.url}/api/settings/feature-flags`, { headers: through })).status).toBe(401)
    // With a key the tunnel works; from this machine directly, no key is needed (REQUIRE_API_KEY off).
    expect((await call(`${gw.url}/v1/models`, { headers: { ...through, authorization: `Bearer ${ADMIN}` } })).status).toBe(200)
    expect((await call(`${gw.url}/v1/models`)).status).toBe(200)
    expect((await call(`${gw.url}/api/playground/presets`)).status).toBe(200)
  })
})

describe("the quick tunnel and the gateway's process", () => {
  it("SIGTERM of the gateway stops the helper: no orphan", async () => {
    const h = helper(tempDir("gw-tunnel-"))
    const dataDir = tempDir("gw-tunnel-proc-")
    const made = await runCli(["keys", "add", "--scope", "admin", "--name", "t", "--json"], { DATA_DIR: dataDir })
    expect(made.code, made.stderr).toBe(0)
    const key: string = JSON.parse(made.stdout).secret
    const server = await startServerProcess({ DATA_DIR: dataDir, QUICK_TUNNEL_BIN: h.file })
    try {
      const post = await call(`${server.url}/api/tunnels/quick`, {
        body: { action: "enable" },
        headers: { authorization: `Bearer ${key}` }
      })
      expect(post.status).toBe(200)
      const end = Date.now() + 8000
      while (h.runs().length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 25))
      const pid = h.runs()[0]!.pid
      expect(alive(pid)).toBe(true)
      await server.stop("SIGTERM")
      expect(alive(pid)).toBe(false)
    } finally {
      await server.stop().catch(() => undefined)
    }
  })
})

describe("the quick tunnel after a crash of the gateway", () => {
  it("a helper left running by a gateway that was killed (SIGKILL) is stopped when the gateway starts again", async () => {
    const h = helper(tempDir("gw-tunnel-"))
    const dataDir = tempDir("gw-tunnel-crash-")
    const made = await runCli(["keys", "add", "--scope", "admin", "--name", "t", "--json"], { DATA_DIR: dataDir })
    const key: string = JSON.parse(made.stdout).secret
    const first = await startServerProcess({ DATA_DIR: dataDir, QUICK_TUNNEL_BIN: h.file })
    let pid: number
    try {
      await call(`${first.url}/api/tunnels/quick`, { body: { action: "enable" }, headers: { authorization: `Bearer ${key}` } })
      // Once it is running (a helper that writes to the dead gateway's pipe dies of it by itself).
      const end = Date.now() + 8000
      for (;;) {
        const s = await call(`${first.url}/api/tunnels/quick`, { method: "GET", headers: { authorization: `Bearer ${key}` } })
        if (s.body.phase === "running" || Date.now() > end) break
        await new Promise((r) => setTimeout(r, 25))
      }
      pid = h.runs()[0]!.pid
      await first.stop("SIGKILL")
      // Its own process group: the helper outlives a gateway killed outright.
      expect(alive(pid)).toBe(true)
      expect(JSON.parse(fs.readFileSync(path.join(dataDir, "tunnels", "helpers.json"), "utf8"))).toEqual({ [String(pid)]: h.file })
    } finally {
      await first.stop().catch(() => undefined)
    }
    // Still wanted (the store says so), so the next run opens it again: the old helper is stopped first.
    const second = await startServerProcess({ DATA_DIR: dataDir, QUICK_TUNNEL_BIN: h.file })
    try {
      expect(alive(pid)).toBe(false)
      // The warning goes to stderr, which may arrive after the line saying it listens (stdout).
      const said = Date.now() + 3000
      while (!second.output().includes("stopped 1 helper process left running") && Date.now() < said)
        await new Promise((r) => setTimeout(r, 25))
      expect(second.output(), second.output()).toContain("stopped 1 helper process left running by a previous run of the gateway")
      const end = Date.now() + 8000
      while (h.runs().length < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 25))
      expect(alive(h.runs()[1]!.pid)).toBe(true)
    } finally {
      await second.stop()
    }
    expect(alive(h.runs()[1]!.pid)).toBe(false)
  })
})

describe("the quick tunnel stopped and started at once", () => {
  it("ends up with one helper and a status that says so (a start waits for the stop before it)", async () => {
    const h = helper(tempDir("gw-tunnel-"))
    const { api, statusUntil } = await start({ QUICK_TUNNEL_BIN: h.file })
    await api("POST", { action: "enable" })
    await statusUntil((s) => s.phase === "running")
    const [off, on] = await Promise.all([
      api("POST", { action: "disable" }),
      new Promise((r) => setTimeout(r, 5)).then(() => api("POST", { action: "enable" }))
    ])
    expect(off.status).toBe(200)
    expect(on.status).toBe(200)
    const running = await statusUntil((s) => s.phase === "running")
    expect(running.publicUrl).toBe("https://quiet-river-2.trycloudflare.com")
    expect(h.runs().filter((r) => alive(r.pid))).toHaveLength(1)
    await api("POST", { action: "disable" })
    expect(h.runs().filter((r) => alive(r.pid))).toHaveLength(0)
  })
})

describe("the quick tunnel's helper download", () => {
  const serve = async (bytes: Buffer) => {
    const server = http.createServer((_req, res) => res.end(bytes))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    return { server, url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/cloudflared-linux-amd64` }
  }

  it("is downloaded on first use into DATA_DIR and run once its SHA-256 matches", async () => {
    const h = helper(tempDir("gw-tunnel-"))
    const bytes = fs.readFileSync(h.file)
    const { server, url } = await serve(bytes)
    try {
      const sha = crypto.createHash("sha256").update(bytes).digest("hex")
      const { gw, api, statusUntil } = await start({ QUICK_TUNNEL_DOWNLOAD_URL: url, QUICK_TUNNEL_SHA256: sha })
      await api("POST", { action: "enable" })
      await statusUntil((s) => s.phase === "running")
      expect(fs.existsSync(path.join(gw.dataDir, "tunnels", "cloudflared"))).toBe(true)
      await api("POST", { action: "disable" })
    } finally {
      server.close()
    }
  })

  it("as an archive (the vendor's macOS release is a .tgz): the archive is checked, then the helper taken out of it and run", async () => {
    const dir = tempDir("gw-tunnel-")
    const h = helper(dir)
    const pack = tempDir("gw-tunnel-pack-")
    fs.copyFileSync(h.file, path.join(pack, "cloudflared"))
    fs.chmodSync(path.join(pack, "cloudflared"), 0o755)
    const tgz = path.join(dir, "cloudflared-darwin-amd64.tgz")
    execFileSync("tar", ["-czf", tgz, "-C", pack, "cloudflared"])
    const bytes = fs.readFileSync(tgz)
    const server = http.createServer((_req, res) => res.end(bytes))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    try {
      const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/cloudflared-darwin-amd64.tgz`
      const sha = crypto.createHash("sha256").update(bytes).digest("hex")
      const { gw, api, statusUntil } = await start({ QUICK_TUNNEL_DOWNLOAD_URL: url, QUICK_TUNNEL_SHA256: sha })
      await api("POST", { action: "enable" })
      await statusUntil((s) => s.phase === "running")
      expect(h.runs()).toHaveLength(1)
      expect(sha).toBe(
        crypto
          .createHash("sha256")
          .update(fs.readFileSync(path.join(gw.dataDir, "tunnels", "cloudflared.tgz")))
          .digest("hex")
      )
      await api("POST", { action: "disable" })
      // The archive changed on disk: never extracted or run again.
      fs.appendFileSync(path.join(gw.dataDir, "tunnels", "cloudflared.tgz"), "x")
      await api("POST", { action: "enable" })
      const failed = await statusUntil((s) => s.phase === "error")
      expect(failed.lastError).toMatch(/cloudflared\.tgz does not match its SHA-256/)
      expect(h.runs()).toHaveLength(1)
    } finally {
      server.close()
    }
  })

  it("with a wrong SHA-256 is never written or run: error, with the reason", async () => {
    const h = helper(tempDir("gw-tunnel-"))
    const { server, url } = await serve(fs.readFileSync(h.file))
    try {
      const { gw, api, statusUntil } = await start({ QUICK_TUNNEL_DOWNLOAD_URL: url, QUICK_TUNNEL_SHA256: "0".repeat(64) })
      await api("POST", { action: "enable" })
      const failed = await statusUntil((s) => s.phase === "error")
      expect(failed.running).toBe(false)
      expect(failed.lastError).toMatch(/does not match its SHA-256 \(expected 0{64}, got [0-9a-f]{64}\): deleted, never run/)
      expect(fs.existsSync(path.join(gw.dataDir, "tunnels", "cloudflared"))).toBe(false)
      expect(h.runs()).toEqual([])
    } finally {
      server.close()
    }
  })
})
