import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * A same-format SSE stream written whole at once (one chunk for the gateway): the events the relay
 * reads (the first, the usage, an error) and gives back unchanged go on as their bytes with the
 * rest (src/inference/stream.ts, `passing`), and those it changes (a usage chunk the client did not
 * ask for, an error scrubbed of a key) come out changed, in place, the bytes around them as they came.
 */
const ADMIN = "gwk_burst_admin_key_0123456789abcdef"
const UPSTREAM_KEY = "sk-upstream-secret-0123456789abcdefBURST"

const chunk = (content: string) =>
  `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`
const ROLE = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n`
const USAGE = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16}}\n\n`
const DONE = "data: [DONE]\n\n"

/** What the upstream answers next, in one write. */
let whole = ""
let upstream: http.Server
let gw: TestGateway

const stream = async (body: Record<string, unknown> = {}) => {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN}` },
    body: JSON.stringify({
      model: "up/m1",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hi" }],
      ...body
    })
  })
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) }
}

/**
 * The time from which a test's usage rows are its own: the requests before it have ended and
 * recorded their rows (a row's ts is when its request ended, which can come just after its client
 * had the whole answer), and the clock has moved past their last millisecond.
 */
const rowsFromNow = async (): Promise<number> => {
  await gw.usageWritten()
  await new Promise((r) => setTimeout(r, 2))
  return Date.now()
}

const usageSince = async (since: number) => {
  await gw.usageWritten()
  return queryDb<{ tokens_in: number; tokens_out: number; error: string | null }>(
    gw.dataDir,
    "SELECT tokens_in, tokens_out, error FROM usage WHERE ts >= ? AND endpoint = 'chat.completions'",
    since
  )
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(whole)
    })
  })
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
  const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const added = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai-compatible", name: "up", baseUrl: base, apiKey: UPSTREAM_KEY, defaultModel: "m1" },
    headers: { authorization: `Bearer ${ADMIN}` }
  })
  expect(added.status).toBe(201)
})

afterAll(async () => {
  await gw?.close()
  await new Promise((r) => upstream?.close(r))
})

describe("a same-format stream written at once", () => {
  it("reaches the client as its bytes, the usage among them booked", async () => {
    whole = [chunk("tok0"), ...Array.from({ length: 30 }, (_, i) => chunk(` tok${i + 1}`)), USAGE, DONE].join("")
    const since = await rowsFromNow()
    const r = await stream()
    expect(r.status).toBe(200)
    expect(r.bytes.equals(Buffer.from(whole))).toBe(true)
    expect(await usageSince(since)).toEqual([{ tokens_in: 7, tokens_out: 9, error: null }])
  })

  it("with text that is not ASCII, byte for byte", async () => {
    whole = [ROLE, chunk("héllo wörld"), chunk(" 日本語 🙂"), chunk("ok"), USAGE, DONE].join("")
    const r = await stream()
    expect(r.bytes.equals(Buffer.from(whole))).toBe(true)
  })

  it("without the usage chunk the client did not ask for, the rest as it came", async () => {
    const content = [chunk("a"), chunk("b"), chunk("c")]
    whole = [ROLE, ...content, USAGE, DONE].join("")
    const since = await rowsFromNow()
    const r = await stream({ stream_options: undefined })
    expect(r.bytes.toString()).toBe([ROLE, ...content, DONE].join(""))
    expect(await usageSince(since)).toEqual([{ tokens_in: 7, tokens_out: 9, error: null }])
  })

  it("lines a parser re-writes (a comment, an id, a CRLF event) come out as the parsed path writes them", async () => {
    whole = [ROLE, chunk("a"), `: keep-alive\nid: 3\n${chunk("b")}`, chunk("c").replace("\n\n", "\r\n\r\n"), chunk("d"), USAGE, DONE].join(
      ""
    )
    const r = await stream()
    expect(r.bytes.toString()).toBe([ROLE, chunk("a"), chunk("b"), chunk("c"), chunk("d"), USAGE, DONE].join(""))
  })

  // Last: the error puts the target in a cooldown.
  it("an error among the events: scrubbed of the upstream's key in place, booked as the request's error", async () => {
    const error = `data: {"error":{"message":"upstream broke, key ${UPSTREAM_KEY}","type":"server_error"}}\n\n`
    whole = [ROLE, chunk("one"), chunk("two"), error].join("")
    const since = await rowsFromNow()
    const r = await stream()
    const text = r.bytes.toString()
    expect(text.startsWith(ROLE + chunk("one") + chunk("two"))).toBe(true)
    expect(text).toContain("upstream broke")
    expect(text).not.toContain(UPSTREAM_KEY)
    const rows = await usageSince(since)
    expect(rows).toHaveLength(1)
    expect(rows[0]!.error).toContain("upstream broke")
    expect(rows[0]!.error).not.toContain(UPSTREAM_KEY)
  })
})
