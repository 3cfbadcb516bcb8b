import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { quietUpTo } from "../src/inference/relays.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * A same-format SSE stream whose chunks hold whole events with nothing to look at passes to the
 * client as its bytes, unparsed (src/inference/stream.ts, `quiet`): these streams arrive one event
 * per TCP write, so the chunks after the first take that way, and the client must get exactly what
 * the upstream sent, with the usage booked and an error after them still caught and scrubbed.
 */
const ADMIN = "gwk_bytes_admin_key_0123456789abcdef"
const UPSTREAM_KEY = "sk-upstream-secret-0123456789abcdefXYZ"

const chunk = (content: string) =>
  `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`
const ROLE = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n`
const USAGE = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":22,"total_tokens":33}}\n\n`
const DONE = "data: [DONE]\n\n"
/** An event a parser re-writes (a comment and an id line): it must come out as the parsed path writes it. */
const ODD = `: keep-alive\nid: 7\n${chunk(" odd")}`

/** What the upstream sends next, one piece per write, a few ms apart. */
let script: Array<string> = []
let upstream: http.Server
let base = ""
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
  return { status: res.status, text: await res.text(), id: res.headers.get("x-gateway-request-id") }
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    req.resume()
    req.on("end", async () => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      for (const piece of script) {
        res.write(piece)
        await new Promise((r) => setTimeout(r, 5))
      }
      res.end()
    })
  })
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
  base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`
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

describe("a same-format stream's bytes", () => {
  it("reach the client exactly as the upstream sent them, event by event, and its usage is booked", async () => {
    const content = Array.from({ length: 12 }, (_, i) => chunk(`tok${i} `))
    script = [ROLE, ...content, USAGE, DONE]
    const since = Date.now()
    const r = await stream()
    expect(r.status).toBe(200)
    expect(r.text).toBe(script.join(""))
    await gw.usageWritten()
    const rows = queryDb(
      gw.dataDir,
      "SELECT tokens_in, tokens_out, status, error FROM usage WHERE ts >= ? AND endpoint = 'chat.completions'",
      since
    )
    expect(rows).toEqual([{ tokens_in: 11, tokens_out: 22, status: 200, error: null }])
  })

  it("a whole stream in one write: the events after the first pass as they came, the usage among them is read", async () => {
    const content = Array.from({ length: 40 }, (_, i) => chunk(`w${i} `))
    script = [[ROLE, ...content, USAGE, DONE].join("")]
    const since = Date.now()
    const r = await stream()
    expect(r.text).toBe(script[0])
    await gw.usageWritten()
    const rows = queryDb(gw.dataDir, "SELECT tokens_in, tokens_out FROM usage WHERE ts >= ? AND endpoint = 'chat.completions'", since)
    expect(rows).toEqual([{ tokens_in: 11, tokens_out: 22 }])
  })

  it("several events in one write pass too; an event a parser re-writes comes out as before", async () => {
    script = [ROLE, chunk("a") + chunk("b") + chunk("c"), ODD, USAGE + DONE]
    const r = await stream()
    expect(r.status).toBe(200)
    // The comment and the id line are not passed (as on the parsed path): the rest is byte for byte.
    expect(r.text).toBe([ROLE, chunk("a"), chunk("b"), chunk("c"), chunk(" odd"), USAGE, DONE].join(""))
  })

  it("a usage chunk the client did not ask for is still dropped", async () => {
    script = [
      ROLE,
      chunk("x"),
      chunk("y"),
      `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n`,
      DONE
    ]
    const r = await stream({ stream_options: undefined })
    expect(r.status).toBe(200)
    expect(r.text).toBe([ROLE, chunk("x"), chunk("y"), DONE].join(""))
  })

  it("an error after passed chunks is still caught: scrubbed of the upstream's key and booked as the request's error", async () => {
    const error = `data: {"error":{"message":"upstream broke, key ${UPSTREAM_KEY}","type":"server_error"}}\n\n`
    script = [ROLE, chunk("one"), chunk("two"), error]
    const since = Date.now()
    const r = await stream()
    expect(r.status).toBe(200)
    expect(r.text.startsWith(ROLE + chunk("one") + chunk("two"))).toBe(true)
    expect(r.text).toContain("upstream broke")
    expect(r.text).not.toContain(UPSTREAM_KEY)
    await gw.usageWritten()
    // This request's row (by its id): the previous test's row may carry a time at or after `since`.
    const rows = queryDb<{ error: string | null }>(
      gw.dataDir,
      "SELECT error FROM usage WHERE ts >= ? AND endpoint = 'chat.completions' AND request_id = ?",
      since,
      r.id
    )
    expect(rows).toHaveLength(1)
    expect(rows[0]!.error).toContain("upstream broke")
    expect(rows[0]!.error).not.toContain(UPSTREAM_KEY)
  })
})

describe("quietUpTo: how far a chunk passes unparsed", () => {
  const markers = ['"usage"', '"error"', "event: error"]
  const a = 'data: {"x":1}\n\n'
  const b = 'event: delta\ndata: {"y":2}\n\n'
  it("to the end when nothing in it is looked at", () => {
    expect(quietUpTo(a + b, 0, markers)).toBe((a + b).length)
    expect(quietUpTo(a + b, a.length, markers)).toBe((a + b).length)
  })
  it("up to the event holding a marker, whichever line of it holds the marker", () => {
    expect(quietUpTo(a + 'data: {"usage":{}}\n\n' + a, 0, markers)).toBe(a.length)
    expect(quietUpTo(a + b + "event: error\ndata: {}\n\n", 0, markers)).toBe((a + b).length)
    expect(quietUpTo('data: {"usage":{}}\n\n', 0, markers)).toBe(0)
  })
  it("up to an event with a line the parser re-writes: a comment, an id, a field without its space, a \\r", () => {
    for (const odd of [": ping\n", "id: 4\n", "data:{}\n", "retry: 10\n"]) expect(quietUpTo(a + odd + a, 0, markers), odd).toBe(a.length)
    expect(quietUpTo(a + 'data: {"x":1}\r\n\r\n', 0, markers)).toBe(a.length)
    expect(quietUpTo(": ping\n\n" + a, 0, markers)).toBe(0)
  })
})
