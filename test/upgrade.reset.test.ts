/**
 * A client that resets its connection while its WebSocket upgrade waits (here: for the realtime
 * upstream's handshake) costs the gateway nothing: node hands an upgrade's socket over with no
 * `error` listener, and without the gateway's own one the reset would be an uncaught error (in
 * this process, vitest's unhandled error).
 */
import * as Effect from "effect/Effect"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { startFakeRealtime, type FakeRealtime } from "./support/fakeRealtime.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

const ADMIN = "gwk_upgrade_admin_key_0123456789abcdefgh"
const KEY = "gwk_upgrade_client_key_0123456789abcdefg"

let gw: TestGateway
let up: FakeRealtime
/** An upstream that takes connections and never answers: a handshake with it waits. */
let silent: net.Server
const held: Array<net.Socket> = []

const admin = (p: string, body: unknown) => call(`${gw.url}${p}`, { body, headers: { authorization: `Bearer ${ADMIN}` } })

beforeAll(async () => {
  silent = net.createServer((s) => {
    s.on("error", () => undefined)
    held.push(s)
  })
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r))
  up = await startFakeRealtime()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const port = (silent.address() as net.AddressInfo).port
  for (const [name, base] of [
    ["silent", `http://127.0.0.1:${port}/v1`],
    ["oa", up.baseUrl]
  ] as const) {
    const r = await admin("/api/providers", { provider: "openai", name, apiKey: `sk-upstream-${name}`, baseUrl: base })
    expect(r.status, r.text).toBe(201)
  }
}, 60_000)

afterAll(async () => {
  for (const s of held) s.destroy()
  await new Promise((r) => silent?.close(r))
  await gw?.close()
  await up?.close()
})

describe("a WebSocket upgrade whose client resets it while it waits", () => {
  it("leaves the gateway serving: the next requests and upgrades are answered", async () => {
    const before = held.length
    const client = net.connect(Number(new URL(gw.url).port), "127.0.0.1")
    await new Promise<void>((r) => client.once("connect", () => r()))
    client.on("error", () => undefined)
    client.write(
      [
        "GET /v1/realtime?model=silent/gpt-realtime HTTP/1.1",
        `Host: 127.0.0.1`,
        "Connection: Upgrade",
        "Upgrade: websocket",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        `Authorization: Bearer ${KEY}`,
        "",
        ""
      ].join("\r\n")
    )
    // The gateway is in the upstream's handshake: the upgrade waits.
    await until("the gateway connected to the silent upstream", () => held.length > before, 10_000)
    client.resetAndDestroy()
    await new Promise((r) => setTimeout(r, 300))

    const models = await call(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } })
    expect(models.status).toBe(200)
    // A session with an upstream that answers still opens and closes cleanly.
    const ws = new WebSocket(`${gw.url.replace(/^http/, "ws")}/v1/realtime?model=oa/gpt-realtime`, {
      headers: { authorization: `Bearer ${KEY}` }
    })
    const first = await new Promise<any>((resolve, reject) => {
      ws.once("message", (d) => resolve(JSON.parse(String(d))))
      ws.once("error", reject)
    })
    expect(first.type).toBe("session.created")
    ws.close()
  }, 30_000)
})
