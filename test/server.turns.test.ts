import * as Effect from "effect/Effect"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * New requests bounded per turn of the event loop (src/platform/http/turnBudget.ts), in a real
 * gateway: a burst of requests that arrive together is started over several turns, every one
 * answered, and `/metrics` counts those that waited.
 */
const KEY = "gwk_turns_test_key_0123456789abcdefgh"
const METRICS_TOKEN = "turns-metrics-token-0123456789"

let gw: TestGateway
let upstream: FakeUpstream

beforeAll(async () => {
  upstream = await FakeUpstream.start()
  upstream.always({ content: "answered in its turn" })
  // A budget of 0: one new request started a turn, the others wait for the next turns.
  gw = await startGateway({ env: { GATEWAY_TURN_BUDGET_MS: "0", GATEWAY_METRICS_TOKEN: METRICS_TOKEN } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: KEY })))
  const res = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai", name: "up", apiKey: "sk-up", baseUrl: upstream.baseUrl("openai-chat"), defaultModel: "gpt-4o" },
    headers: { authorization: `Bearer ${KEY}` }
  })
  expect(res.status).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

const deferredTotal = async (): Promise<number> => {
  const res = await call(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
  expect(res.status).toBe(200)
  const line = res.text.split("\n").find((l) => l.startsWith("gateway_requests_deferred_total"))
  return line === undefined ? 0 : Number(line.split(" ").at(-1))
}

/** A whole chat completion request, closing its connection after the answer. */
const chatRequest = (): string => {
  const body = JSON.stringify({ model: "up/gpt-4o", messages: [{ role: "user", content: "hi" }] })
  return (
    "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\n" +
    `authorization: Bearer ${KEY}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  )
}

/**
 * `n` connections, each served once (so the server has accepted them all: it accepts about one
 * connection a turn), with what each received so far: a request written on each in one go then
 * reaches the server in the same turn.
 */
const warmConnections = async (n: number): Promise<Array<{ readonly socket: net.Socket; readonly received: () => string }>> => {
  const { port } = new URL(gw.url)
  const sockets = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<net.Socket>((resolve, reject) => {
          const s = net.connect(Number(port), "127.0.0.1", () => {
            s.off("error", reject)
            resolve(s)
          })
          s.once("error", reject)
        })
    )
  )
  const parts = sockets.map(() => [] as Array<Buffer>)
  const served = sockets.map((s, i) => {
    // A socket the test resets later must not fail it.
    s.on("error", () => {})
    s.on("data", (b: Buffer) => parts[i]!.push(b))
    return new Promise<void>((resolve) => s.once("data", () => resolve()))
  })
  for (const s of sockets) s.write("GET /api/health/ping HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
  await Promise.all(served)
  return sockets.map((socket, i) => ({ socket, received: () => Buffer.concat(parts[i]!).toString("utf8") }))
}

/** What each connection received once it closed (the ping's answer included). */
const closed = (conns: ReadonlyArray<{ readonly socket: net.Socket; readonly received: () => string }>): Promise<Array<string>> =>
  Promise.all(conns.map((c) => new Promise<string>((resolve) => c.socket.once("close", () => resolve(c.received())))))

describe("new requests bounded per turn", () => {
  it("answers every request of a burst that arrived together, those past the turn's budget started in later turns", async () => {
    const before = await deferredTotal()
    const conns = await warmConnections(24)
    const answers = closed(conns)
    for (const c of conns) c.socket.write(chatRequest())
    for (const a of await answers) {
      // The ping's answer, then the chat completion's.
      expect(a.match(/HTTP\/1\.1 200 /g)).toHaveLength(2)
      expect(a).toContain("answered in its turn")
    }
    // 24 requests read in the same turn, one started in it: the others waited (at least most of them).
    expect((await deferredTotal()) - before).toBeGreaterThanOrEqual(12)
  })

  it("clients that go away while their requests wait are not sent upstream; the others are answered and the gateway goes on", async () => {
    // Connections accepted and served once first, so the requests below reach the server in one turn.
    const conns = await warmConnections(16)
    const upstreamBefore = upstream.requests.length
    const kept = closed(conns.slice(0, 8))
    for (const c of conns) c.socket.write(chatRequest())
    for (const c of conns.slice(8)) c.socket.resetAndDestroy()
    for (const a of await kept) expect(a.match(/HTTP\/1\.1 200 /g)).toHaveLength(2)
    // The reset ones were not sent upstream: dropped while they waited (turnBudget.test.ts shows the
    // skip itself), or found gone when started.
    expect(upstream.requests.length - upstreamBefore).toBeLessThan(16)
    expect(upstream.requests.length - upstreamBefore).toBeGreaterThanOrEqual(8)
    const after = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "up/gpt-4o", messages: [{ role: "user", content: "still here?" }] },
      headers: { authorization: `Bearer ${KEY}` }
    })
    expect(after.status).toBe(200)
  })
})
