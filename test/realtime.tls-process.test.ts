import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { ADMIN_KEY, setupWithProvider, startServerProcess } from "./support/cli.js"
import { queryDb } from "./support/db.js"
import { startFakeRealtime } from "./support/fakeRealtime.js"
import { tempDir } from "./support/gateway.js"
import { testCa } from "./support/testCerts.js"

/**
 * The built `gateway` serving HTTPS itself (docs/realtime.md, "HTTPS"): `--tls-cert` and
 * `--tls-key` on the command line, a client that trusts the test CA, and the same port refusing
 * plain HTTP's meaning (a TLS server answers no cleartext request).
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/**
 * A voice client as its author writes it: the official SDK's realtime client, nothing about
 * certificates in its code (the test CA comes from NODE_EXTRA_CA_CERTS, as docs/realtime.md has
 * it); prints what it heard as JSON.
 */
const SDK_CLIENT = `
import OpenAI from "openai"
import { OpenAIRealtimeWS } from "openai/realtime/ws"
const server = new OpenAI({ apiKey: process.env.GATEWAY_KEY, baseURL: process.env.GATEWAY_URL + "/v1" })
// As a web app's server does for its page: an ephemeral secret, the session opened with it in place of the key.
const secret = await server.realtime.clientSecrets.create({ session: { type: "realtime", model: "oa/gpt-realtime" } })
if (!secret.value.startsWith("ek_") || !(secret.expires_at > Date.now() / 1000)) throw new Error("not a client secret: " + JSON.stringify(secret))
const client = new OpenAI({ apiKey: secret.value, baseURL: process.env.GATEWAY_URL + "/v1" })
const rt = new OpenAIRealtimeWS({ model: "oa/gpt-realtime" }, client)
let text = ""
rt.on("error", (e) => { console.error(String(e?.message ?? e)); process.exit(2) })
rt.on("response.output_text.delta", (e) => { text += e.delta })
rt.on("response.done", (e) => { console.log(JSON.stringify({ text, usage: e.response.usage })); rt.close() })
rt.socket.on("open", () => {
  rt.send({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_text", text: "over wss" }] } })
  rt.send({ type: "response.create" })
})
rt.socket.on("close", () => process.exit(text ? 0 : 3))
`

/** Runs the SDK client in its own node process (NODE_EXTRA_CA_CERTS is read at a process's start). */
const runSdkClient = (env: Record<string, string>) =>
  new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", SDK_CLIENT], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    const timer = setTimeout(() => child.kill(), 30_000)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, out, err })
    })
  })

const get = (url: string, ca: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    https
      .get(url, { ca }, (res) => {
        let body = ""
        res.on("data", (d) => (body += d))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      .on("error", reject)
  })

describe("gateway --tls-cert --tls-key", () => {
  it("serves its routes over HTTPS with the certificate given on the command line", async () => {
    const ca = testCa()
    const leaf = ca.issue(["127.0.0.1", "localhost"])
    const dir = tempDir("gw-tls-proc-")
    fs.writeFileSync(path.join(dir, "cert.pem"), leaf.certPem)
    fs.writeFileSync(path.join(dir, "key.pem"), leaf.keyPem)
    const server = await startServerProcess(
      { DATA_DIR: path.join(dir, "data") },
      ["--tls-cert", path.join(dir, "cert.pem"), "--tls-key", path.join(dir, "key.pem")],
      { startMs: 60_000 }
    )
    const url = server.url
    expect(url.startsWith("https://")).toBe(true)
    const ping = await get(`${url}/api/health/ping`, ca.certPem)
    expect(ping.status).toBe(200)
    expect(JSON.parse(ping.body)).toHaveProperty("version")
    // A client that does not trust the certificate's issuer is refused at the handshake.
    await expect(get(`${url}/api/health/ping`, testCa("another CA").certPem)).rejects.toThrow()
    await server.stop()
  }, 90_000)

  it("relays a session from the official SDK's realtime client over wss: with a client secret the SDK minted, trusting the test CA through NODE_EXTRA_CA_CERTS", async () => {
    const ca = testCa()
    const leaf = ca.issue(["127.0.0.1", "localhost"])
    const dir = tempDir("gw-tls-sdk-")
    const dataDir = path.join(dir, "data")
    fs.writeFileSync(path.join(dir, "ca.pem"), ca.certPem)
    fs.writeFileSync(path.join(dir, "cert.pem"), leaf.certPem)
    fs.writeFileSync(path.join(dir, "key.pem"), leaf.keyPem)
    const up = await startFakeRealtime()
    const server = await (async () => {
      // The admin key (GATEWAY_API_KEY) stored by setup, as the README's flow does.
      expect((await setupWithProvider(dataDir, up.baseUrl)).code).toBe(0)
      return startServerProcess(
        { DATA_DIR: dataDir, REQUIRE_API_KEY: "true" },
        ["--tls-cert", path.join(dir, "cert.pem"), "--tls-key", path.join(dir, "key.pem")],
        { startMs: 60_000 }
      )
    })()
    try {
      expect(server.url.startsWith("https://")).toBe(true)
      const added = await new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ provider: "openai", name: "oa", apiKey: "sk-upstream", baseUrl: up.baseUrl })
        const req = https.request(
          `${server.url}/api/providers`,
          {
            method: "POST",
            ca: ca.certPem,
            headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) }
          },
          (res) => {
            res.resume()
            res.on("end", () => resolve(res.statusCode ?? 0))
          }
        )
        req.on("error", reject)
        req.end(body)
      })
      expect(added).toBe(201)

      const env = { GATEWAY_URL: server.url, GATEWAY_KEY: ADMIN_KEY }
      const trusted = await runSdkClient({ ...env, NODE_EXTRA_CA_CERTS: path.join(dir, "ca.pem") })
      expect(trusted.code, trusted.err).toBe(0)
      expect(JSON.parse(trusted.out)).toMatchObject({ text: "You said: over wss", usage: { input_tokens: 200, output_tokens: 150 } })
      expect(up.handshakes.at(-1)?.headers.authorization).toBe("Bearer sk-upstream")
      // The session's response is a usage row of the gateway's own database.
      await expect
        .poll(
          () =>
            queryDb(
              dataDir,
              "SELECT endpoint, tokens_in, tokens_out, tokens_cached, cost_usd FROM usage WHERE requested_model = ?",
              "oa/gpt-realtime"
            ),
          {
            timeout: 15_000
          }
        )
        .toMatchObject([{ endpoint: "realtime", tokens_in: 200, tokens_out: 150, tokens_cached: 40 }])
      // Without the CA the same client is refused at the TLS handshake.
      const untrusted = await runSdkClient(env)
      expect(untrusted.code).not.toBe(0)
      expect(untrusted.err).toMatch(/certificate|self.signed|issuer/i)
    } finally {
      await server.stop()
      await up.close()
    }
  }, 120_000)
})
