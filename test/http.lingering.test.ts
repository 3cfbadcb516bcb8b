import * as Effect from "effect/Effect"
import * as http from "node:http"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * An answer given before the request body has arrived (a 401, 404, 400 or 413 given early, a GET
 * or DELETE whose body no route reads), on a keep-alive connection or one that closes after it
 * (`Connection: close`, what node's client sends without an agent): the client gets the whole
 * answer at once, never a reset (src/platform/http/lingering.ts).
 */
let gw: TestGateway
const admin = "gwk_lingering_admin_key_0123456789abcd"
const client = "gwk_lingering_client_key_0123456789abc"
beforeAll(async () => {
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: admin })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: client })))
  const on = await call(`${gw.url}/api/settings/feature-flags`, {
    method: "PUT",
    body: { key: "REQUIRE_API_KEY", value: "true" },
    headers: { authorization: `Bearer ${admin}` }
  })
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

interface Answer {
  readonly status: number
  readonly body: string
}

interface Exchange {
  /** The answers read on the connection, in order. */
  readonly answers: ReadonlyArray<Answer>
  /** How much of the body had been sent when the first answer was read whole (undefined: never). */
  readonly answeredAt?: number
  readonly total: number
  /** The error the connection ended with (a reset, EPIPE), if any. */
  readonly error?: string
}

/** The whole answers at the start of `buf` (each with a content-length, as both planes send them). */
const answersIn = (buf: Buffer): Array<Answer> => {
  const out: Array<Answer> = []
  let at = 0
  for (;;) {
    const end = buf.indexOf("\r\n\r\n", at)
    if (end < 0) return out
    const head = buf.subarray(at, end).toString("latin1")
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
    if (buf.length < end + 4 + length) return out
    out.push({ status: Number(head.slice(9, 12)), body: buf.subarray(end + 4, end + 4 + length).toString("utf8") })
    at = end + 4 + length
  }
}

/**
 * One raw connection: the request's head, then a body of `size` bytes (JSON padded with spaces)
 * in `piece`-byte pieces every `everyMs`, so the answer can come while it is on its way; read as
 * it comes. The body is framed by its length, in chunks, or not at all (`none`: as node's client
 * sends a DELETE body written in pieces). With keep-alive, a `GET /api/health/ping` on the same
 * connection afterwards (`followUp`). The client sends its whole body whatever it was answered
 * (it keeps sending after the gateway's FIN), then closes once it has read `answers` answers or
 * the gateway closed its side.
 */
const exchange = (options: {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly size: number
  readonly chunked?: boolean
  readonly framing?: "length" | "chunked" | "none"
  readonly keepAlive: boolean
  readonly followUp?: boolean
  readonly answers?: number
  readonly piece?: number
  readonly everyMs?: number
}): Promise<Exchange> =>
  new Promise((resolve) => {
    const { size, keepAlive } = options
    const framing = options.framing ?? (options.chunked ? "chunked" : "length")
    const chunked = framing === "chunked"
    const followUp = options.followUp ?? keepAlive
    const piece = options.piece ?? 64 * 1024
    const url = new URL(gw.url)
    const socket = net.connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: true })
    let got = Buffer.alloc(0)
    let sent = 0
    let answeredAt: number | undefined
    let error: string | undefined
    let followed = false
    let ended = false
    const expected = options.answers ?? (followUp ? 2 : 1)
    const guard = setTimeout(() => socket.destroy(new Error("no answer in time")), 25_000)
    const settle = () => {
      if ((answersIn(got).length >= expected || ended) && sent >= size && !socket.destroyed) socket.end()
    }
    socket.on("data", (d: Buffer) => {
      got = Buffer.concat([got, d])
      if (answeredAt === undefined && answersIn(got).length >= 1) answeredAt = sent
      settle()
    })
    socket.on("end", () => {
      ended = true
      settle()
    })
    socket.on("error", (e) => (error ??= (e as NodeJS.ErrnoException).code ?? e.message))
    socket.on("close", () => {
      clearTimeout(guard)
      resolve({ answers: answersIn(got), total: size, ...(answeredAt !== undefined ? { answeredAt } : {}), ...(error ? { error } : {}) })
    })
    const head = [`${options.method} ${options.path} HTTP/1.1`, "Host: 127.0.0.1", `Connection: ${keepAlive ? "keep-alive" : "close"}`]
    for (const [k, v] of Object.entries(options.headers)) head.push(`${k}: ${v}`)
    if (framing !== "none") head.push(chunked ? "Transfer-Encoding: chunked" : `Content-Length: ${size}`)
    // UTF-8 on the wire (a path with characters above ASCII is sent as its bytes).
    socket.write(`${head.join("\r\n")}\r\n\r\n`)
    const json = Buffer.from('{"id":"tl_doesnotexist","model":"m1","messages":[{"role":"user","content":"hi"}]}')
    const pump = () => {
      if (socket.destroyed) return
      const n = Math.min(piece, size - sent)
      const bytes =
        sent === 0 ? Buffer.concat([json, Buffer.alloc(Math.max(0, n - json.length), 0x20)]).subarray(0, n) : Buffer.alloc(n, 0x20)
      socket.write(chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), bytes, Buffer.from("\r\n")]) : bytes)
      sent += n
      if (sent < size) return void setTimeout(pump, options.everyMs ?? 15)
      if (chunked) socket.write("0\r\n\r\n")
      if (followUp && !followed) {
        followed = true
        socket.write("GET /api/health/ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
      }
      settle()
    }
    pump()
  })

describe("a multi-MB body nobody reads: the client reads its answer while sending, never a reset", () => {
  const MB = 1024 * 1024
  const adminAuth = { Authorization: `Bearer ${admin}` }
  /** Route, headers, body size, and the status expected with the body's length declared / sent chunked. */
  const routes: ReadonlyArray<{
    name: string
    method: string
    path: string
    headers: Record<string, string>
    size: number
    status: [number, number]
  }> = [
    // Management: a payload route answering 400 before its body (a malformed path); over 1 MiB declared, 413 at once.
    { name: "management 400 early", method: "PUT", path: "/api/providers/%E0%A4%A", headers: adminAuth, size: 4 * MB, status: [413, 400] },
    // Management DELETE with a body: refused at once when declared, part-way (1 MiB) when chunked.
    {
      name: "management DELETE with a payload",
      method: "DELETE",
      path: "/api/usage/token-limits",
      headers: adminAuth,
      size: 4 * MB,
      status: [413, 413]
    },
    // Management DELETE whose route reads no body at all.
    {
      name: "management DELETE without a payload",
      method: "DELETE",
      path: "/api/keys/key_doesnotexist",
      headers: adminAuth,
      size: 4 * MB,
      status: [413, 404]
    },
    { name: "management GET with a body", method: "GET", path: "/api/health/ping", headers: {}, size: 4 * MB, status: [413, 200] },
    {
      name: "inference GET with a body",
      method: "GET",
      path: "/v1/models",
      headers: { Authorization: `Bearer ${client}` },
      size: 4 * MB,
      status: [200, 200]
    },
    {
      name: "inference 401",
      method: "POST",
      path: "/v1/chat/completions",
      headers: { Authorization: "Bearer not-a-key" },
      size: 4 * MB,
      status: [401, 401]
    },
    { name: "no route (404)", method: "POST", path: "/nope/at/all", headers: adminAuth, size: 4 * MB, status: [404, 404] },
    // Inference over its 32 MiB limit: 413 at once when declared.
    {
      name: "inference 413",
      method: "POST",
      path: "/v1/chat/completions",
      headers: { Authorization: `Bearer ${client}` },
      size: 40 * MB,
      status: [413, 413]
    }
  ]

  it("every route, with and without a content type, length or chunked, keep-alive or Connection: close", { timeout: 60_000 }, async () => {
    const cases = routes
      .flatMap((r) =>
        [true, false].flatMap((typed) =>
          [false, true].flatMap((chunked) => [true, false].map((keepAlive) => ({ r, typed, chunked, keepAlive })))
        )
      )
      .filter(({ r, chunked }) => !(chunked && r.size > 32 * MB))
    const outcomes = await Promise.all(
      cases.map(async ({ r, typed, chunked, keepAlive }) => {
        const big = r.size > 4 * MB
        const x = await exchange({
          method: r.method,
          path: r.path,
          headers: { ...r.headers, ...(typed ? { "Content-Type": "application/json" } : {}) },
          size: r.size,
          chunked,
          keepAlive,
          ...(big ? { piece: 512 * 1024, everyMs: 10 } : {})
        })
        return {
          what: `${r.name} (${r.method} ${r.path}, ${typed ? "json" : "no content type"}, ${chunked ? "chunked" : "length"}, ${keepAlive ? "keep-alive" : "close"})`,
          r,
          chunked,
          keepAlive,
          x
        }
      })
    )
    for (const { what, r, chunked, keepAlive, x } of outcomes) {
      expect(x.error, what).toBeUndefined()
      expect(x.answers.length, what).toBe(keepAlive ? 2 : 1)
      expect(x.answers[0]!.status, `${what}: ${x.answers[0]!.body.slice(0, 200)}`).toBe(r.status[chunked ? 1 : 0])
      expect(() => JSON.parse(x.answers[0]!.body), what).not.toThrow()
      // The answer came while the body was still on its way, not held back until its end.
      expect(x.answeredAt, what).toBeLessThan(x.total)
      // A keep-alive connection serves the next request once the body is in.
      if (keepAlive) expect(x.answers[1]!.status, what).toBe(200)
    }
  })

  it("a body sent for longer than the gateway waits between its pieces: the answer at once, no reset", { timeout: 30_000 }, async () => {
    // 4 MB over about 8 s (a piece every 125 ms): longer in all than LINGER_MS, never idle that long.
    const results = await Promise.all(
      [false, true].map((keepAlive) =>
        exchange({
          method: "POST",
          path: "/v1/chat/completions",
          headers: { Authorization: "Bearer not-a-key" },
          size: 4 * MB,
          chunked: false,
          keepAlive,
          everyMs: 125
        })
      )
    )
    for (const x of results) {
      expect(x.error).toBeUndefined()
      expect(x.answers[0]!.status).toBe(401)
      expect(JSON.parse(x.answers[0]!.body).error.code).toBeTruthy()
      expect(x.answeredAt).toBeLessThan(x.total / 4)
    }
  })
})

describe("a request node's HTTP parser refuses, with a multi-MB body on its way", () => {
  const MB = 1024 * 1024

  it("a malformed request (raw UTF-8 in its path) gets a 400 JSON answer, then the end, never a reset", { timeout: 30_000 }, async () => {
    const cases = [true, false].flatMap((typed) =>
      (["length", "chunked"] as const).flatMap((framing) => [true, false].map((keepAlive) => ({ typed, framing, keepAlive })))
    )
    const outcomes = await Promise.all(
      cases.map(async ({ typed, framing, keepAlive }) => ({
        what: `${typed ? "json" : "no content type"}, ${framing}, ${keepAlive ? "keep-alive" : "close"}`,
        x: await exchange({
          method: "POST",
          path: "/v1/models/模型:generateContent",
          headers: { Authorization: `Bearer ${client}`, ...(typed ? { "Content-Type": "application/json" } : {}) },
          size: 4 * MB,
          framing,
          keepAlive,
          followUp: false
        })
      }))
    )
    for (const { what, x } of outcomes) {
      expect(x.error, what).toBeUndefined()
      expect(x.answers.length, what).toBe(1)
      expect(x.answers[0]!.status, what).toBe(400)
      expect(JSON.parse(x.answers[0]!.body).error.code, what).toBe("malformed_request")
      expect(x.answeredAt, what).toBeLessThan(x.total)
    }
  })

  it("the same request as HEAD: a 400 without a body (node's client reads it whole), never a reset", { timeout: 30_000 }, async () => {
    const url = new URL(gw.url)
    const outcomes = await Promise.all(
      [false, true].map(
        (keepAlive) =>
          new Promise<{ status?: number; error?: string }>((resolve) => {
            const req = http.request({
              host: url.hostname,
              port: url.port,
              method: "HEAD",
              // Latin-1 characters go on the wire as single bytes above ASCII, which node's parser refuses in a path.
              path: "/v1/models/\u00e6\u00a8\u00a1:generateContent",
              agent: keepAlive ? new http.Agent({ keepAlive: true }) : false,
              headers: { "content-type": "application/json", "content-length": 2 * MB }
            })
            req.on("error", (e) => resolve({ error: `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}` }))
            req.on("response", (res) => {
              res.resume()
              res.on("end", () => resolve({ status: res.statusCode! }))
            })
            req.end(Buffer.alloc(2 * MB, 0x20))
          })
      )
    )
    for (const o of outcomes) expect(o).toEqual({ status: 400 })
  })

  it("a DELETE body sent without a length (node's client writing it in pieces): the route's 400, then the end, never a reset", {
    timeout: 30_000
  }, async () => {
    // The request has no body as far as HTTP goes: the route answers 400 (no id), and the body's
    // bytes are read as the next request, which the parser refuses.
    const cases = [true, false].flatMap((typed) => [true, false].map((keepAlive) => ({ typed, keepAlive })))
    const outcomes = await Promise.all(
      cases.map(async ({ typed, keepAlive }) => ({
        what: `${typed ? "json" : "no content type"}, ${keepAlive ? "keep-alive" : "close"}`,
        x: await exchange({
          method: "DELETE",
          path: "/api/usage/token-limits",
          headers: { Authorization: `Bearer ${admin}`, ...(typed ? { "Content-Type": "application/json" } : {}) },
          size: 4 * MB,
          framing: "none",
          keepAlive,
          followUp: false,
          answers: 2
        })
      }))
    )
    for (const { what, x } of outcomes) {
      expect(x.error, what).toBeUndefined()
      expect(x.answers[0]?.status, what).toBe(400)
      expect(JSON.parse(x.answers[0]!.body)._tag, what).toBe("BadRequest")
      expect(x.answeredAt, what).toBeLessThan(x.total)
      // Whatever follows says the rest was not a request.
      for (const later of x.answers.slice(1)) expect(JSON.parse(later.body).error.code, what).toBe("malformed_request")
    }
  })
})
