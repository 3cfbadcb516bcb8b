import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type * as net from "node:net"
import * as path from "node:path"
import * as tls from "node:tls"
import { afterEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { KeyValue } from "../src/platform/store/KeyValue.js"
import { clientAddress } from "../src/platform/http/request.js"
import { runCli, startServerProcess } from "./support/cli.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { alive, fakeSudo, meshCli, tokenAgent } from "./support/tunnelStandins.js"

/**
 * The token tunnel and the mesh funnel (docs/tunnels.md) against stand-ins of the vendors'
 * programs (test/support/tunnelStandins.ts): the agent binary on TOKEN_TUNNEL_BIN, the mesh CLI
 * and daemon on MESH_TUNNEL_BIN / MESH_TUNNEL_DAEMON_BIN, and a stand-in sudo for a gateway that
 * does not run as root.
 */

const ADMIN = "gwk_tunnels_backends_admin_0123456789ab"
const gateways: Array<TestGateway> = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close()
  for (const c of cleanups.splice(0)) c()
})

const start = async (env: Record<string, string>, dataDir?: string) => {
  const gw = await startGateway({ env, ...(dataDir ? { dataDir } : {}) })
  gateways.push(gw)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })).pipe(Effect.ignore))
  const api = (method: "GET" | "POST", route: string, body?: unknown) =>
    call(`${gw.url}${route}`, { method, ...(body === undefined ? {} : { body }), headers: { authorization: `Bearer ${ADMIN}` } })
  const until = async (route: string, ok: (s: any) => boolean, ms = 10_000) => {
    const end = Date.now() + ms
    for (;;) {
      const s = (await api("GET", route)).body
      if (ok(s)) return s
      if (Date.now() > end) throw new Error(`${route} never got there: ${JSON.stringify(s)}`)
      await new Promise((r) => setTimeout(r, 25))
    }
  }
  return { gw, api, until }
}

describe("the token tunnel", () => {
  it("needs an authtoken: needs_auth until one is given, then stopped → starting → running → stopped with the address shown only once the edge serves it", async () => {
    const agent = tokenAgent(tempDir("gw-token-"), { gated: true })
    const { gw, api, until } = await start({ TOKEN_TUNNEL_BIN: agent.file })
    const none = await api("GET", "/api/tunnels/token")
    expect(none.body).toMatchObject({ phase: "needs_auth", running: false, publicUrl: null, apiUrl: null, targetUrl: gw.url })
    expect(none.body.lastError).toMatch(/no authtoken is known/)
    expect((await api("POST", "/api/tunnels/token", { action: "enable" })).body).toMatchObject({ phase: "needs_auth", running: false })
    expect(agent.runs()).toEqual([])

    const token = "2abcDEF_secret_authtoken_value_42"
    const enabled = await api("POST", "/api/tunnels/token", { action: "enable", authToken: token })
    expect(enabled.status).toBe(200)
    expect(enabled.body).toMatchObject({ phase: "starting", running: false, publicUrl: null })
    await until("/api/tunnels/token", () => agent.runs().length === 1)
    expect((await api("GET", "/api/tunnels/token")).body).toMatchObject({ phase: "starting", publicUrl: null })
    agent.serve()
    const running = await until("/api/tunnels/token", (s) => s.phase === "running")
    expect(running).toEqual({
      phase: "running",
      running: true,
      publicUrl: "https://calm-otter-1.ngrok-free.app",
      apiUrl: "https://calm-otter-1.ngrok-free.app/v1",
      targetUrl: gw.url,
      lastError: null
    })
    const [run] = agent.runs()
    // The token goes in the environment, never in argv; the edge is asked to mark what it forwards.
    expect(run!.authtoken).toBe(token)
    expect(run!.args).toEqual([
      "http",
      gw.url,
      "--log",
      "stdout",
      "--log-format",
      "json",
      "--inspect=false",
      "--request-header-add",
      "x-gateway-tunnel: token"
    ])
    expect(JSON.stringify(running)).not.toContain(token)
    // Stored encrypted.
    const stored = await gw.run(Effect.flatMap(KeyValue, (kv) => kv.get("tunnels", "token.authtoken")))
    expect(Option.isSome(stored)).toBe(true)
    expect(Option.getOrThrow(stored)).not.toContain(token)
    // The public host is one of the gateway's names now (DNS-rebinding protection of /mcp).
    const mcp = await fetch(`${gw.url}/mcp`, {
      method: "POST",
      headers: { host: "calm-otter-1.ngrok-free.app", "content-type": "application/json" },
      body: "{}"
    })
    expect(mcp.status === 403 && (await mcp.text()).includes("host_not_allowed")).toBe(false)
    expect((await api("GET", "/api/health/ping")).body.tunnelOpen).toBe(true)

    const stopped = await api("POST", "/api/tunnels/token", { action: "disable" })
    expect(stopped.body).toMatchObject({ phase: "stopped", running: false, publicUrl: null })
    expect(alive(run!.pid)).toBe(false)
    expect((await api("GET", "/api/health/ping")).body.tunnelOpen).toBe(false)
    // The token is kept: enabling again needs none.
    expect((await api("POST", "/api/tunnels/token", { action: "enable" })).body.phase).toBe("starting")
    await until("/api/tunnels/token", (s) => s.phase === "running")
    expect(agent.runs()[1]!.authtoken).toBe(token)
  })

  it("a refused authtoken is needs_auth with the reason, masked, and is not tried again", async () => {
    const agent = tokenAgent(tempDir("gw-token-"))
    const { api, until } = await start({ TOKEN_TUNNEL_BIN: agent.file })
    await api("POST", "/api/tunnels/token", { action: "enable", authToken: "bad-token" })
    const refused = await until("/api/tunnels/token", (s) => s.phase === "needs_auth")
    expect(refused.lastError).toMatch(/^the authtoken was refused: authentication failed/)
    expect(refused.lastError).not.toContain("bad-token")
    await new Promise((r) => setTimeout(r, 1500))
    expect(agent.runs()).toHaveLength(1)
    expect(alive(agent.runs()[0]!.pid)).toBe(false)
    // Enabling again with the same token does not try it again; a new one is.
    expect((await api("POST", "/api/tunnels/token", { action: "enable" })).body.phase).toBe("needs_auth")
    expect(agent.runs()).toHaveLength(1)
    await api("POST", "/api/tunnels/token", { action: "enable", authToken: "good-token-2" })
    await until("/api/tunnels/token", (s) => s.phase === "running")
    expect(agent.runs()[1]!.authtoken).toBe("good-token-2")
  })

  it("takes TOKEN_TUNNEL_AUTHTOKEN from the environment; an authToken must be a non-empty string", async () => {
    const agent = tokenAgent(tempDir("gw-token-"))
    const { api, until } = await start({ TOKEN_TUNNEL_BIN: agent.file, TOKEN_TUNNEL_AUTHTOKEN: "env-token-123456" })
    expect((await api("GET", "/api/tunnels/token")).body).toMatchObject({ phase: "stopped", lastError: null })
    await api("POST", "/api/tunnels/token", { action: "enable" })
    await until("/api/tunnels/token", (s) => s.phase === "running")
    expect(agent.runs()[0]!.authtoken).toBe("env-token-123456")
    const bad = await api("POST", "/api/tunnels/token", { action: "enable", authToken: "" })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/authToken must not be empty/)
    expect((await api("POST", "/api/tunnels/token", { action: "start" })).status).toBe(400)
  })

  it("through the vendor's SDK (no TOKEN_TUNNEL_BIN): an edge that cannot be reached is `starting` with the reason, tried again, and never shows the token", async () => {
    // A local TLS endpoint that is no tunnel edge: the SDK's handshake fails there.
    const edge = net_server()
    await new Promise<void>((r) => edge.listen(0, "127.0.0.1", r))
    cleanups.push(() => edge.close())
    const port = (edge.address() as net.AddressInfo).port
    const { api, until } = await start({ TOKEN_TUNNEL_SERVER_ADDR: `127.0.0.1:${port}` })
    await api("POST", "/api/tunnels/token", { action: "enable", authToken: "sdk-secret-token-9876" })
    const failing = await until("/api/tunnels/token", (s) => s.lastError !== null)
    expect(failing).toMatchObject({ phase: "starting", running: false, publicUrl: null })
    expect(failing.lastError).toMatch(/^the token tunnel could not connect: failed to connect session/)
    expect(failing.lastError).not.toContain("sdk-secret-token-9876")
    const before = edge.connections
    await new Promise((r) => setTimeout(r, 2500))
    expect(edge.connections).toBeGreaterThan(before)
    expect((await api("POST", "/api/tunnels/token", { action: "disable" })).body.phase).toBe("stopped")
  })
})

/** A TCP server that closes every connection at once, counting them. */
const net_server = () => {
  const server = tls.createServer({}, () => {}) as tls.Server & { connections: number }
  server.connections = 0
  server.on("connection", (s: net.Socket) => {
    server.connections++
    s.destroy()
  })
  return server
}

describe("the mesh funnel", () => {
  it("walks the setup: not installed → install (server-sent progress) → start the daemon → log in (authUrl) → check", async () => {
    const dir = tempDir("gw-mesh-")
    const mesh = meshCli(dir)
    const script = `#!/bin/sh
set -e
echo "Installing the mesh client for this platform"
cat > ${mesh.bin} <<'EOT'
${mesh.sources.tailscale}
EOT
cat > ${mesh.daemonBin} <<'EOT'
${mesh.sources.tailscaled}
EOT
chmod 755 ${mesh.bin} ${mesh.daemonBin}
echo "Installation complete! Log in to start using it."
`
    const server = http.createServer((_req, res) => res.end(script))
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    cleanups.push(() => server.close())
    const installUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/install.sh`
    const { api } = await start({ MESH_TUNNEL_BIN: mesh.bin, MESH_TUNNEL_DAEMON_BIN: mesh.daemonBin, MESH_TUNNEL_INSTALL_URL: installUrl })
    cleanups.push(() => {
      const pid = mesh.daemonPid()
      if (pid) process.kill(pid, "SIGTERM")
    })

    const before = (await api("GET", "/api/tunnels/mesh/check")).body
    expect(before).toMatchObject({ installed: false, daemonRunning: false, loggedIn: false, funnels: [] })
    expect(before.problem).toMatch(/not installed/)

    const res = await fetch(`${(gateways[0] as TestGateway).url}/api/tunnels/mesh/install`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: "{}"
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/)
    const events = (await res.text())
      .split("\n\n")
      .filter(Boolean)
      .map((block) => ({ event: /^event: (.*)$/m.exec(block)![1], data: JSON.parse(/^data: (.*)$/m.exec(block)![1]!) }))
    expect(events.filter((e) => e.event === "progress").map((e) => e.data.line)).toEqual(
      expect.arrayContaining([
        `downloading the install script from ${installUrl}`,
        "Installing the mesh client for this platform",
        "Installation complete! Log in to start using it."
      ])
    )
    expect(events.at(-1)).toEqual({ event: "done", data: { ok: true } })

    const installed = (await api("GET", "/api/tunnels/mesh/check")).body
    expect(installed).toMatchObject({ installed: true, version: "1.76.6", daemonRunning: false })
    expect(installed.problem).toMatch(/daemon does not answer/)

    expect((await api("POST", "/api/tunnels/mesh/start-daemon", {})).body).toEqual({ ok: true })
    const up = (await api("GET", "/api/tunnels/mesh/check")).body
    expect(up).toMatchObject({ installed: true, daemonRunning: true, loggedIn: false, backendState: "NeedsLogin" })
    expect(up.problem).toMatch(/not logged in/)

    const login = await api("POST", "/api/tunnels/mesh/login", { hostname: "homebox" })
    expect(login.body).toEqual({ authUrl: "https://login.tailscale.com/a/abc1" })
    expect(mesh.loginRuns()[0]!.args).toEqual(["login", "--hostname=homebox"])
    mesh.set("login-done")
    const end = Date.now() + 5000
    let done = (await api("GET", "/api/tunnels/mesh/check")).body
    while (!done.loggedIn && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 50))
      done = (await api("GET", "/api/tunnels/mesh/check")).body
    }
    expect(done).toMatchObject({
      loggedIn: true,
      backendState: "Running",
      hostname: "homebox",
      dnsName: "homebox.tail1234.ts.net",
      problem: null
    })
    expect((await api("POST", "/api/tunnels/mesh/login", { hostname: "not a label" })).status).toBe(400)
  })

  it("enable: funnelNotEnabled with enableUrl until the network allows it, then running at https://<machine>.<network>.ts.net/; disable stops it", async () => {
    const mesh = meshCli(tempDir("gw-mesh-"))
    mesh.install()
    mesh.set("daemon")
    mesh.set("login")
    const { gw, api, until } = await start({ MESH_TUNNEL_BIN: mesh.bin })
    expect((await api("GET", "/api/tunnels/mesh")).body).toEqual({
      phase: "stopped",
      running: false,
      publicUrl: null,
      tunnelUrl: null,
      apiUrl: null,
      targetUrl: gw.url,
      lastError: null
    })
    const enabled = await api("POST", "/api/tunnels/mesh/enable", {})
    expect(enabled.body).toMatchObject({
      phase: "needs_auth",
      running: false,
      tunnelUrl: null,
      publicUrl: null,
      funnelNotEnabled: true,
      enableUrl: "https://login.tailscale.com/f/funnel?node=n123"
    })
    expect(mesh.funnelRuns()[0]!.args).toEqual(["funnel", gw.url])
    // Allowed in the browser: the waiting funnel comes up by itself.
    mesh.set("allowed")
    const running = await until("/api/tunnels/mesh", (s) => s.phase === "running")
    expect(running).toEqual({
      phase: "running",
      running: true,
      publicUrl: "https://box.tail1234.ts.net/",
      tunnelUrl: "https://box.tail1234.ts.net/",
      apiUrl: "https://box.tail1234.ts.net/v1",
      targetUrl: gw.url,
      lastError: null
    })
    // The daemon's own funnel status (printed as JSON, `null` when nothing is configured) shows it.
    expect((await api("GET", "/api/tunnels/mesh/check")).body.funnels).toEqual([{ url: "https://box.tail1234.ts.net/", proxy: gw.url }])
    const funnelPid = mesh.funnelRuns()[0]!.pid
    const off = await api("POST", "/api/tunnels/mesh/disable", {})
    expect(off.body).toMatchObject({ phase: "stopped", running: false, tunnelUrl: null })
    expect(alive(funnelPid)).toBe(false)
    expect((await api("GET", "/api/tunnels/mesh/check")).body.funnels).toEqual([])
  })

  it("enable with a hostname and a port; a funnel set up outside the gateway to it is turned off on disable", async () => {
    const mesh = meshCli(tempDir("gw-mesh-"))
    mesh.install()
    for (const f of ["daemon", "login", "allowed"]) mesh.set(f)
    const { api } = await start({ MESH_TUNNEL_BIN: mesh.bin })
    const enabled = await api("POST", "/api/tunnels/mesh/enable", { hostname: "gw-home", port: 8080 })
    expect(enabled.body).toMatchObject({
      phase: "running",
      tunnelUrl: "https://gw-home.tail1234.ts.net/",
      targetUrl: "http://127.0.0.1:8080"
    })
    expect(mesh.funnelRuns()[0]!.args).toEqual(["funnel", "http://127.0.0.1:8080"])
    await api("POST", "/api/tunnels/mesh/disable", {})
    mesh.set("bg", true, "http://127.0.0.1:8080")
    expect((await api("GET", "/api/tunnels/mesh/check")).body.funnels).toHaveLength(1)
    await api("POST", "/api/tunnels/mesh/enable", { port: 8080 })
    await api("POST", "/api/tunnels/mesh/disable", {})
    expect(mesh.has("bg")).toBe(false)
    expect((await api("POST", "/api/tunnels/mesh/enable", { port: 0 })).status).toBe(400)
    expect((await api("POST", "/api/tunnels/mesh/enable", { sudoPassword: "" })).status).toBe(400)
    expect((await api("POST", "/api/tunnels/mesh/enable", { sudoPassword: "a\nb" })).status).toBe(400)
  })

  it("not logged in: needs_auth naming the login step; the CLI missing: error naming the install step", async () => {
    const mesh = meshCli(tempDir("gw-mesh-"))
    mesh.install()
    mesh.set("daemon")
    const { api } = await start({ MESH_TUNNEL_BIN: mesh.bin })
    const out = await api("POST", "/api/tunnels/mesh/enable", {})
    expect(out.body).toMatchObject({ phase: "needs_auth", running: false })
    expect(out.body.lastError).toMatch(/not logged in .*\/api\/tunnels\/mesh\/login/)
    expect(mesh.funnelRuns()).toEqual([])
    const missing = await start({ MESH_TUNNEL_BIN: path.join(tempDir("gw-mesh-none-"), "tailscale") })
    const none = await missing.api("POST", "/api/tunnels/mesh/enable", {})
    expect(none.body).toMatchObject({ phase: "error" })
    expect(none.body.lastError).toMatch(/not installed.*\/api\/tunnels\/mesh\/install/)
  })

  it("a funnel that dies while wanted is started again; it stays wanted across a restart of the gateway", async () => {
    const mesh = meshCli(tempDir("gw-mesh-"))
    mesh.install()
    for (const f of ["daemon", "login", "allowed"]) mesh.set(f)
    const first = await start({ MESH_TUNNEL_BIN: mesh.bin })
    expect((await first.api("POST", "/api/tunnels/mesh/enable", {})).body.phase).toBe("running")
    process.kill(mesh.funnelRuns()[0]!.pid, "SIGKILL")
    const between = await first.until("/api/tunnels/mesh", (s) => s.lastError !== null)
    expect(between).toMatchObject({ phase: "starting", tunnelUrl: null })
    await first.until("/api/tunnels/mesh", (s) => s.phase === "running")
    expect(mesh.funnelRuns()).toHaveLength(2)
    const data = first.gw.dataDir
    await first.gw.close()
    gateways.splice(gateways.indexOf(first.gw), 1)
    expect(alive(mesh.funnelRuns()[1]!.pid)).toBe(false)
    const second = await start({ MESH_TUNNEL_BIN: mesh.bin }, data)
    await second.until("/api/tunnels/mesh", (s) => s.phase === "running")
    expect(mesh.funnelRuns()).toHaveLength(3)
  })
})

describe("the mesh funnel on a gateway that does not run as root", () => {
  it("passes sudoPassword to sudo on stdin for that call only: never in argv, logs, answers or the data folder; a wrong one is refused", async () => {
    const dir = tempDir("gw-mesh-sudo-")
    fs.chmodSync(dir, 0o755)
    const mesh = meshCli(dir)
    mesh.install()
    for (const f of ["daemon", "login", "allowed", "needs-root"]) mesh.set(f)
    const password = "correct horse battery staple 7"
    const sudo = fakeSudo(dir, password)
    const dataDir = tempDir("gw-mesh-sudo-data-")
    const made = await runCli(["keys", "add", "--scope", "admin", "--name", "t", "--json"], { DATA_DIR: dataDir })
    expect(made.code, made.stderr).toBe(0)
    const key: string = JSON.parse(made.stdout).secret
    execFileSync("chown", ["-R", "65534:65534", dataDir])
    const server = await startServerProcess(
      { DATA_DIR: dataDir, MESH_TUNNEL_BIN: mesh.bin, PATH: `${sudo.binDir}:${process.env.PATH}`, HOME: dataDir },
      [],
      {
        prefix: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
      }
    )
    try {
      const post = (route: string, body: unknown) => call(`${server.url}${route}`, { body, headers: { authorization: `Bearer ${key}` } })
      // Without a password the CLI refuses: the reason says what to do.
      const denied = await post("/api/tunnels/mesh/enable", {})
      expect(denied.body.phase).toBe("error")
      expect(denied.body.lastError).toMatch(/needs root: send sudoPassword/)
      const wrong = await post("/api/tunnels/mesh/enable", { sudoPassword: "not it" })
      expect(wrong.body.phase).toBe("error")
      expect(wrong.body.lastError).toMatch(/sudo refused the password/)
      const ok = await post("/api/tunnels/mesh/enable", { sudoPassword: password })
      expect(ok.body).toMatchObject({ phase: "running", tunnelUrl: "https://box.tail1234.ts.net/" })
      const runs = mesh.funnelRuns()
      expect(runs.at(-1)!.sudoUser).toBe("nobody")
      expect(sudo.calls().map((c) => c.ok)).toEqual([false, true])
      for (const c of sudo.calls()) {
        expect(c.argv.slice(0, 5)).toEqual(["-S", "-k", "-p", "", "--"])
        expect(c.argv.join(" ")).not.toContain(password)
      }
      const off = await post("/api/tunnels/mesh/disable", { sudoPassword: password })
      expect(off.body.phase).toBe("stopped")
      expect(alive(runs.at(-1)!.pid)).toBe(false)
      for (const text of [JSON.stringify([denied.body, wrong.body, ok.body, off.body]), server.output()])
        expect(text).not.toContain(password)
      const files = (d: string): Array<string> =>
        fs.readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(d, e.name)) : [path.join(d, e.name)]))
      await server.stop("SIGTERM")
      for (const f of files(dataDir)) expect(fs.readFileSync(f).includes(Buffer.from(password)), f).toBe(false)
    } finally {
      await server.stop().catch(() => undefined)
    }
  })
})

describe("requests through the token tunnel or the mesh funnel", () => {
  it("are remote: inference needs a key, the inspector and the feature flags refuse them; failed logins are counted per internet address, not against this machine", async () => {
    const { gw } = await start({ INITIAL_PASSWORD: "right-password-123" })
    const viaToken = {
      host: "calm-otter-1.ngrok-free.app",
      "x-forwarded-for": "198.51.100.7",
      "x-forwarded-proto": "https",
      "x-gateway-tunnel": "token"
    }
    const viaMesh = {
      host: "box.tail1234.ts.net",
      "x-forwarded-for": "198.51.100.8",
      "x-forwarded-host": "box.tail1234.ts.net",
      "tailscale-funnel-request": "?1"
    }
    for (const through of [viaToken, viaMesh]) {
      const models = await call(`${gw.url}/v1/models`, { headers: through })
      expect(models.status).toBe(401)
      expect(models.body.error.message).toMatch(/came through a tunnel from the internet/)
      expect((await call(`${gw.url}/api/tools/traffic-inspector/requests`, { headers: through })).status).toBe(403)
      expect(
        (await call(`${gw.url}/api/tools/traffic-inspector/requests`, { headers: { ...through, authorization: `Bearer ${ADMIN}` } })).status
      ).toBe(403)
      expect((await call(`${gw.url}/api/settings/feature-flags`, { headers: through })).status).toBe(401)
      expect((await call(`${gw.url}/api/playground/presets`, { headers: through })).status).toBe(401)
      expect((await call(`${gw.url}/v1/models`, { headers: { ...through, authorization: `Bearer ${ADMIN}` } })).status).toBe(200)
    }
    // Five free failures, then the address waits; this machine's own login is not slowed by it.
    const login = (headers: Record<string, string>, password: string) => call(`${gw.url}/api/auth/login`, { body: { password }, headers })
    for (let i = 0; i < 5; i++) expect((await login(viaToken, "wrong")).status).toBe(401)
    const throttled = await login(viaToken, "wrong")
    expect(throttled.status).toBe(429)
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThan(0)
    expect((await login(viaToken, "right-password-123")).status).toBe(429)
    expect((await login(viaMesh, "right-password-123")).status).toBe(200)
    expect((await login({}, "right-password-123")).status).toBe(200)
  })
})

describe("the client address of a request", () => {
  const req = (remoteAddress: string, headers: Record<string, string>) =>
    ({ socket: { remoteAddress }, headers }) as unknown as import("node:http").IncomingMessage

  it("through a tunnel (a marker on a loopback connection) is the one the edge appended; a marker from elsewhere changes nothing", () => {
    const marked = { "x-gateway-tunnel": "token", "x-forwarded-for": "10.9.9.9, 198.51.100.7" }
    expect(clientAddress(req("127.0.0.1", marked), false)).toBe("198.51.100.7")
    expect(clientAddress(req("127.0.0.1", { "cf-connecting-ip": "198.51.100.9" }), false)).toBe("198.51.100.9")
    // A client on the network that sends the headers itself keeps its own address.
    expect(clientAddress(req("203.0.113.9", marked), false)).toBe("203.0.113.9")
    expect(clientAddress(req("203.0.113.9", { "cf-connecting-ip": "192.168.1.10" }), false)).toBe("203.0.113.9")
    expect(clientAddress(req("127.0.0.1", { "x-forwarded-for": "198.51.100.7" }), false)).toBe("127.0.0.1")
  })
})
