import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import * as path from "node:path"
import * as tls from "node:tls"
import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The flag MITM_DISABLE_TLS_VERIFY as an operator uses it, through the real gateway: the HTTP
 * proxy capture mode and TLS interception turned on through the management API, a client that
 * trusts the inspector's CA (fetched from `ca.pem`) sending a request through a CONNECT tunnel, and
 * an HTTPS upstream on 127.0.0.1 whose certificate is self-signed (made here with openssl) and not
 * trusted by the inspector (no INSPECTOR_UPSTREAM_CA_FILE). The flag is changed with
 * `PUT /api/settings/feature-flags`; it is a restart flag, so the change waits for the gateway's
 * next start (on the same data directory, which brings the capture modes back). The component option it drives (`verifyUpstream`) is tested
 * in
 * test/inspector.capture.test.ts; this file proves the flag reaches it. Nothing leaves the machine.
 */

const ADMIN = "gwk_inspector_capture_flags_admin_0123456789"
const admin = { authorization: `Bearer ${ADMIN}` }
const FLAG = "MITM_DISABLE_TLS_VERIFY"
const ANSWER = {
  id: "chatcmpl-flag",
  object: "chat.completion",
  model: "gpt-4o",
  choices: [{ index: 0, message: { role: "assistant", content: "reached the upstream" } }]
}

const openssl = (args: ReadonlyArray<string>, cwd: string): Promise<void> =>
  new Promise((resolve, reject) =>
    execFile("openssl", [...args], { cwd }, (error, _stdout, stderr) =>
      error ? reject(new Error(`openssl ${args[0]} failed: ${stderr}`)) : resolve()
    )
  )

/** A self-signed certificate for localhost and 127.0.0.1: no CA anyone trusts signed it. */
const selfSigned = async (dir: string) => {
  await openssl(
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      "upstream.key",
      "-out",
      "upstream.pem",
      "-days",
      "2",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-addext",
      "extendedKeyUsage=serverAuth"
    ],
    dir
  )
  return { key: fs.readFileSync(path.join(dir, "upstream.key")), cert: fs.readFileSync(path.join(dir, "upstream.pem")) }
}

/** A CONNECT tunnel through the gateway's capture proxy. */
const connectTunnel = (proxyPort: number, authority: string): Promise<net.Socket> =>
  new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: proxyPort, method: "CONNECT", path: authority, agent: false })
    req.on("connect", (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT answered ${res.statusCode}`))))
    req.on("error", reject)
    req.end()
  })

/** One chat completion over a new tunnel, the client trusting the inspector's CA only. */
const chatThroughProxy = async (proxyPort: number, upstreamPort: number, inspectorCa: string) => {
  const socket = await connectTunnel(proxyPort, `localhost:${upstreamPort}`)
  return new Promise<{ status: number; contentType: string | undefined; body: any }>((resolve, reject) => {
    const req = https.request(
      {
        host: "localhost",
        method: "POST",
        path: "/v1/chat/completions",
        headers: { "content-type": "application/json" },
        createConnection: () => tls.connect({ socket, servername: "localhost", ca: inspectorCa })
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, contentType: res.headers["content-type"], body: JSON.parse(text) }))
      }
    )
    req.on("error", reject)
    req.end(JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "Hi" }] }))
  })
}

let dir: string
let gw: TestGateway
const gatewayEnv = (hostsFile: string) => ({
  INSPECTOR_HTTP_PROXY_PORT: "0",
  INSPECTOR_MITM_PORT: "0",
  GATEWAY_HOSTS_FILE: hostsFile,
  INSPECTOR_SYSTEM_PROXY_HOME: dir
})
/** Stops the gateway and starts it again on the same data directory (a restart). */
const restart = async () => {
  await gw.close()
  gw = await startGateway({ dataDir: gw.dataDir, env: gatewayEnv(path.join(dir, "hosts")) })
}
let upstream: https.Server
let upstreamPort: number
let hits = 0
const base = () => `${gw.url}/api/tools/traffic-inspector`

beforeAll(async () => {
  dir = tempDir("gw-capture-flags-")
  const cert = await selfSigned(dir)
  upstream = https.createServer(cert, (req, res) => {
    req.resume()
    req.on("end", () => {
      hits++
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify(ANSWER))
    })
  })
  upstreamPort = await new Promise<number>((resolve) =>
    upstream.listen(0, "127.0.0.1", () => resolve((upstream.address() as net.AddressInfo).port))
  )
  const hostsFile = path.join(dir, "hosts")
  fs.writeFileSync(hostsFile, "127.0.0.1 localhost\n")
  gw = await startGateway({ dataDir: path.join(dir, "data"), env: gatewayEnv(hostsFile) })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
}, 60_000)

afterAll(async () => {
  await gw?.close()
  await new Promise<void>((resolve) => {
    if (!upstream) return resolve()
    upstream.closeAllConnections()
    upstream.close(() => resolve())
  })
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

describe("MITM_DISABLE_TLS_VERIFY through the gateway's capture proxy", () => {
  it("off (default) an intercepted request to an untrusted upstream is refused (502); set on through the API it waits for a restart, then the request reaches it; set back and restarted, refused again", async () => {
    const started = await call(`${base()}/capture-modes/http-proxy`, { body: { action: "start" }, headers: admin })
    expect(started.status, started.text).toBe(200)
    const intercepting = await call(`${base()}/capture-modes/tls-intercept`, { body: { enabled: true }, headers: admin })
    expect(intercepting.status, intercepting.text).toBe(200)
    expect(intercepting.body.tlsIntercept).toEqual({ enabled: true })
    const pem = await fetch(`${base()}/ca.pem`)
    expect(pem.status).toBe(200)
    const inspectorCa = await pem.text()
    /** The capture proxy's port now (port 0: a new one after each restart, which brings the mode back). */
    const proxyPort = async () => {
      const modes = await call(`${base()}/capture-modes`, { headers: admin })
      expect(modes.status, modes.text).toBe(200)
      expect(modes.body.tlsIntercept).toEqual({ enabled: true })
      const port = modes.body.httpProxy.port as number
      expect(port).toBeGreaterThan(0)
      return port
    }

    const flagView = async () =>
      ((await call(`${gw.url}/api/settings/feature-flags`, { headers: admin })).body.flags as Array<any>).find((f) => f.key === FLAG)
    const setFlag = async (value: string) => {
      const put = await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: FLAG, value }, headers: admin })
      expect(put.status, put.text).toBe(200)
      expect(put.body).toMatchObject({ key: FLAG, requiresRestart: true })
      expect(await flagView()).toMatchObject({ pendingRestart: true })
    }
    const expectRefused = async () => {
      const refused = await chatThroughProxy(await proxyPort(), upstreamPort, inspectorCa)
      expect(refused.status, JSON.stringify(refused.body)).toBe(502)
      expect(refused.contentType).toBe("application/json")
      expect(refused.body.error.code).toBe("upstream_tls_error")
      expect(refused.body.error.message).toMatch(/certificate of localhost.*MITM_DISABLE_TLS_VERIFY/)
    }
    const entries = async () =>
      (await call(`${base()}/requests?source=http-proxy`, { headers: admin })).body.requests as Array<{
        status: unknown
        error: string | null
      }>

    // 1. The default: verified, so the self-signed upstream is refused and never gets the request.
    expect(await flagView()).toMatchObject({ effectiveValue: "false", source: "default", pendingRestart: false })
    await expectRefused()
    expect(hits).toBe(0)
    const failed = await until("the refused request recorded", async () => (await entries()).find((e) => e.error !== null))
    expect(failed.error).toMatch(/certificate of localhost/)

    // 2. On through the management API: stored, pending, and the running gateway still verifies.
    await setFlag("true")
    await expectRefused()
    expect(hits).toBe(0)
    // After a restart it holds: the next intercepted request reaches the upstream.
    await restart()
    expect(await flagView()).toMatchObject({ effectiveValue: "true", source: "db", pendingRestart: false })
    const passed = await chatThroughProxy(await proxyPort(), upstreamPort, inspectorCa)
    expect(passed.status, JSON.stringify(passed.body)).toBe(200)
    expect(passed.body).toEqual(ANSWER)
    expect(hits).toBe(1)

    // 3. Back off and restarted: refused again, and the upstream saw nothing more.
    await setFlag("false")
    await restart()
    await expectRefused()
    expect(hits).toBe(1)
  }, 60_000)
})
