import * as http from "node:http"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import { readBodyNow } from "../src/inference/io.js"
import { until } from "./support/until.js"

/**
 * `readBodyNow` (src/inference/io.ts) on a real node:http server: a request the parser already has
 * whole (one that waited for its turn, docs/ARCHITECTURE.md "New requests per turn") is read before
 * the call returns, so the turn's budget counts what the request does next; one whose body is
 * still coming is read on its events, as before.
 */
type Outcome = { readonly synchronous: boolean; readonly body?: string; readonly error?: string }

const servers: Array<http.Server> = []
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r))
})

/** A server that reads each request's body `later` (in a later turn) or at once, and answers what it saw. */
const serve = async (later: boolean, limit?: number): Promise<number> => {
  const server = http.createServer((req, res) => {
    const read = () => {
      let returned = false
      readBodyNow(
        req,
        {
          bodyRead: (r) => {
            const outcome: Outcome =
              "error" in r ? { synchronous: !returned, error: r.error.message } : { synchronous: !returned, body: r.body.toString("utf8") }
            const text = JSON.stringify(outcome)
            res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text)
          }
        },
        limit
      )
      returned = true
    }
    // Two turns later: the parser has read the whole message by then.
    if (later) setImmediate(() => setImmediate(read))
    else read()
  })
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return (server.address() as net.AddressInfo).port
}

/** Writes `head` and `body` on one connection (the body `bodyDelayMs` later when given) and parses the answer. */
const send = (port: number, body: string, bodyDelayMs?: number): Promise<Outcome> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    let received = ""
    socket.on("data", (d) => (received += d))
    socket.on("error", reject)
    socket.on("end", () => {
      try {
        resolve(JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)))
      } catch (e) {
        reject(e)
      }
    })
    const head = `POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`
    if (bodyDelayMs === undefined) socket.write(head + body)
    else {
      socket.write(head)
      setTimeout(() => socket.write(body), bodyDelayMs)
    }
  })

describe("readBodyNow", () => {
  it("reads a request the parser has whole before it returns, its body intact", async () => {
    const port = await serve(true)
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "é ✓ ".repeat(300) }] })
    expect(await send(port, body)).toEqual({ synchronous: true, body })
    expect(await send(port, "")).toEqual({ synchronous: true, body: "" })
  })

  it("leaves a kept-alive connection ready for its next request, both read at once", async () => {
    const port = await serve(true)
    const socket = net.connect(port, "127.0.0.1")
    let received = ""
    socket.on("data", (d) => (received += d))
    const ended = new Promise((r) => socket.on("end", r))
    const request = (body: string, last: boolean) =>
      `POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: ${last ? "close" : "keep-alive"}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
    // Two on one connection, the second written behind the first (pipelined), then an empty one.
    socket.write(request('{"n":1}', false) + request('{"n":2}', false))
    await until("two answers", () => received.split("HTTP/1.1 200").length - 1 === 2)
    socket.write(request("", true))
    await ended
    const answers = received
      .split("HTTP/1.1 200")
      .slice(1)
      .map((a) => JSON.parse(a.slice(a.indexOf("\r\n\r\n") + 4)))
    expect(answers).toEqual([
      { synchronous: true, body: '{"n":1}' },
      { synchronous: true, body: '{"n":2}' },
      { synchronous: true, body: "" }
    ])
  })

  it("reads a body still on its way on its events", async () => {
    const port = await serve(true)
    expect(await send(port, '{"late":true}', 150)).toEqual({ synchronous: false, body: '{"late":true}' })
  })

  it("reads on events when the request is taken as it arrives (its body is parsed after the request starts)", async () => {
    const port = await serve(false)
    expect(await send(port, '{"now":true}')).toEqual({ synchronous: false, body: '{"now":true}' })
  })

  it("refuses a whole body over the limit with 413's message, on events as before", async () => {
    const port = await serve(true, 64)
    const outcome = await send(port, "x".repeat(200))
    expect(outcome.error).toMatch(/exceeds/)
  })
})
