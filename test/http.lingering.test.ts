import * as Effect from "effect/Effect"
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * An answer given before the request body has arrived, on a connection that closes after it
 * (`Connection: close`, what node's client sends without an agent): the client gets the whole
 * answer, never a reset (src/platform/http/lingering.ts).
 */
let gw: TestGateway
const admin = "gwk_lingering_admin_key_0123456789abcd"
beforeAll(async () => {
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: admin })))
  const on = await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "REQUIRE_API_KEY", value: "true" }, headers: { authorization: `Bearer ${admin}` } })
  expect(on.status).toBe(200)
})
afterAll(async () => {
  await gw?.close()
})

interface Outcome {
  readonly status?: number
  readonly bytes?: number
  readonly body?: string
  readonly error?: string
}

const send = (method: string, path: string, body: Buffer): Promise<Outcome> =>
  new Promise((resolve) => {
    const url = new URL(gw.url)
    const req = http.request({
      host: url.hostname,
      port: url.port,
      method,
      path,
      agent: false,
      headers: { "content-type": "application/json", "content-length": body.length, authorization: "Bearer not-a-key" }
    })
    req.on("error", (e) => resolve({ error: `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}` }))
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (d: Buffer) => chunks.push(d))
      res.on("error", (e) => resolve({ status: res.statusCode!, error: `answer cut: ${e.message}` }))
      res.on("end", () => {
        const all = Buffer.concat(chunks)
        resolve({ status: res.statusCode!, bytes: all.length, body: all.subarray(0, 300).toString("utf8") })
      })
    })
    req.end(body)
  })

const many = async (method: string, path: string, body: Buffer) => {
  const outcomes: Array<Outcome> = []
  for (let round = 0; round < 12; round++) outcomes.push(...(await Promise.all([0, 1, 2].map(() => send(method, path, body)))))
  return outcomes
}

describe("lingering close", () => {
  it("a large answer to a GET whose body nobody reads arrives whole", async () => {
    const outcomes = await many("GET", "/api/openapi.json", Buffer.alloc(300_000, 97))
    expect(outcomes.filter((o) => o.error !== undefined)).toEqual([])
    const sizes = new Set(outcomes.map((o) => o.bytes))
    expect(sizes.size).toBe(1)
    expect([...sizes][0]).toBeGreaterThan(100_000)
    expect(outcomes.every((o) => o.status === 200)).toBe(true)
  })

  it("a 401 given before a 4 MB body arrives is read by the client, not reset", async () => {
    const body = Buffer.from(JSON.stringify({ model: "x", messages: [{ role: "user", content: "a".repeat(4 * 1024 * 1024) }] }))
    const outcomes = await many("POST", "/v1/chat/completions", body)
    expect(outcomes.filter((o) => o.error !== undefined)).toEqual([])
    for (const o of outcomes) {
      expect(o.status).toBe(401)
      expect(JSON.parse(o.body!).error.code).toBeTruthy()
    }
  })
})

/**
 * A body sent in chunks, so its size is known only as it arrives, on one raw connection: the
 * answer as the client reads it, or the error the connection ended with.
 */
const chunked = (head: string, total: number) =>
  new Promise<{ readonly answer: string; readonly error?: string }>((resolve) => {
    const url = new URL(gw.url)
    const socket = net.connect(Number(url.port), url.hostname)
    let answer = ""
    let error: string | undefined
    // The client reads its answer before it closes, as a real one does: a socket ended (FIN) right
    // after its body could be closed by the server before the answer was written.
    const whole = () => {
      const end = answer.indexOf("\r\n\r\n")
      const length = /\r\ncontent-length: (\d+)/i.exec(answer.slice(0, end))
      return end >= 0 && length !== null && Buffer.byteLength(answer.slice(end + 4)) >= Number(length[1])
    }
    socket.on("data", (d) => {
      answer += d.toString("utf8")
      if (whole()) socket.destroy()
    })
    socket.on("error", (e) => (error = (e as NodeJS.ErrnoException).code ?? e.message))
    socket.on("close", () => resolve({ answer, ...(error ? { error } : {}) }))
    socket.write(head)
    const piece = Buffer.alloc(64 * 1024, "[")
    const framed = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
    let sent = 0
    const pump = () => {
      while (sent < total && !socket.destroyed) {
        sent += piece.length
        if (!socket.write(framed)) return void socket.once("drain", pump)
      }
      if (!socket.destroyed) socket.write("0\r\n\r\n")
    }
    pump()
  })

describe("a management body refused part-way (over 1 MiB, sent chunked)", () => {
  const head = (method: string, path: string, connection: string, auth: boolean) =>
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: ${connection}\r\n${auth ? `Authorization: Bearer ${admin}\r\n` : ""}\r\n`
  for (const connection of ["keep-alive", "close"]) {
    it(`gets its 4xx JSON answer, never a reset (Connection: ${connection})`, async () => {
      for (const [method, path] of [
        ["DELETE", "/api/usage/token-limits"],
        ["POST", "/api/keys"],
        ["PUT", "/api/settings"]
      ] as const) {
        for (const auth of [true, false]) {
          const r = await chunked(head(method, path, connection, auth), 3 * 1024 * 1024)
          expect(r.error, `${method} ${path} ${auth}`).toBeUndefined()
          const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(r.answer)?.[1])
          expect(status, `${method} ${path} ${auth}: ${r.answer.slice(0, 200)}`).toBe(auth ? 413 : 401)
          const body = JSON.parse(r.answer.slice(r.answer.indexOf("\r\n\r\n") + 4))
          expect(body._tag).toBe(auth ? "PayloadTooLarge" : "Unauthorized")
        }
      }
    })
  }

  it("keeps a keep-alive connection usable: the next request on it is answered", async () => {
    const url = new URL(gw.url)
    const socket = net.connect(Number(url.port), url.hostname)
    const got: Array<string> = []
    socket.on("data", (d) => got.push(d.toString("utf8")))
    socket.write(head("PUT", "/api/settings", "keep-alive", true))
    const piece = Buffer.alloc(64 * 1024, "[")
    for (let i = 0; i < 40; i++) socket.write(Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")]))
    socket.write("0\r\n\r\n")
    socket.write(`GET /api/health/ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
    await new Promise((r) => socket.on("close", r))
    const all = got.join("")
    expect(all.match(/HTTP\/1\.1 \d{3}/g)).toEqual(["HTTP/1.1 413", "HTTP/1.1 200"])
  })
})
