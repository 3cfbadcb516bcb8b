import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { type FakeRealtime, startFakeRealtime } from "../support/fakeRealtime.js"
import { call, startGateway, type TestGateway } from "../support/gateway.js"
import { launchBrowser, openPage } from "./harness.js"

const ADMIN = "gwk_rt_e2e_admin_0123456789abcdefghijk"
const KEY = "gwk_rt_e2e_client_0123456789abcdefghij"

/** A voice page as a browser app has it: it gets a client secret from its own server, never a gateway key. */
const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>voice</title></head><body><script>
window.talk = (url, secret, text) => new Promise((resolve, reject) => {
  const ws = new WebSocket(url, ["realtime", "openai-insecure-api-key." + secret])
  let out = ""
  ws.onerror = () => reject(new Error("websocket error"))
  ws.onclose = (e) => { if (!out) reject(new Error("closed " + e.code + " " + e.reason)) }
  ws.onmessage = (m) => {
    const e = JSON.parse(m.data)
    if (e.type === "session.created") {
      ws.send(JSON.stringify({ type: "conversation.item.create", item: { type: "message", role: "user", content: [{ type: "input_text", text }] } }))
      ws.send(JSON.stringify({ type: "response.create" }))
    }
    if (e.type === "response.output_text.delta") out += e.delta
    if (e.type === "response.done") { resolve({ text: out, protocol: ws.protocol }); ws.close() }
  }
})
</script></body></html>`

let gw: TestGateway
let up: FakeRealtime
let browser: Browser
let pages: http.Server
let pageUrl = ""

beforeAll(async () => {
  up = await startFakeRealtime()
  gw = await startGateway({ env: { REQUIRE_API_KEY: "true" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "client" }, { secret: KEY })))
  const r = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai", name: "oa", apiKey: "sk-up", baseUrl: up.baseUrl },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(r.status, r.text).toBe(201)
  pages = http.createServer((_req, res) => {
    res.setHeader("content-type", "text/html; charset=utf-8")
    res.end(PAGE)
  })
  await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve))
  pageUrl = `http://127.0.0.1:${(pages.address() as AddressInfo).port}/`
  browser = await launchBrowser()
})

afterAll(async () => {
  await browser?.close()
  await new Promise<void>((resolve) => (pages ? pages.close(() => resolve()) : resolve()))
  await gw?.close()
  await up?.close()
})

describe("a browser's realtime session", () => {
  it("connects from a page with an ephemeral client secret in the subprotocol and gets its answer", async () => {
    const minted = await call(`${gw.url}/v1/realtime/client_secrets`, { body: {}, headers: { authorization: `Bearer ${KEY}` } })
    expect(minted.status, minted.text).toBe(200)
    const { context, page, problems } = await openPage(browser)
    try {
      await page.goto(pageUrl)
      const wsUrl = `${gw.url.replace(/^http/, "ws")}/v1/realtime?model=oa/gpt-realtime`
      const result = await page.evaluate(
        ([url, secret]) =>
          (globalThis as unknown as { talk: (u: string, s: string, t: string) => Promise<unknown> }).talk(
            url!,
            secret!,
            "hi from the browser"
          ),
        [wsUrl, minted.body.value as string]
      )
      expect(result).toEqual({ text: "You said: hi from the browser", protocol: "realtime" })
      expect(problems).toEqual([])
    } finally {
      await context.close()
    }
  })
})
