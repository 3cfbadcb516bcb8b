import * as fs from "node:fs"
import * as https from "node:https"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { startServerProcess } from "./support/cli.js"
import { tempDir } from "./support/gateway.js"
import { testCa } from "./support/testCerts.js"

/**
 * The built `gateway` serving HTTPS itself (docs/realtime.md, "HTTPS"): `--tls-cert` and
 * `--tls-key` on the command line, a client that trusts the test CA, and the same port refusing
 * plain HTTP's meaning (a TLS server answers no cleartext request).
 */
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
})
