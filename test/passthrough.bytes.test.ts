import * as Effect from "effect/Effect"
import * as http from "node:http"
import type * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * A whole answer passed through goes out as the upstream's own bytes when they are valid UTF-8,
 * else as its text encoded again (each invalid sequence a U+FFFD): the bytes the client gets are
 * always those of the text the gateway read, whichever way they are written.
 */
const ADMIN = "gwk_passthrough_bytes_admin_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }

const answer = (content: Buffer): Buffer =>
  Buffer.concat([
    Buffer.from(
      '{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"m1","choices":[{"index":0,"message":{"role":"assistant","content":"'
    ),
    content,
    Buffer.from('"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}')
  ])

/** What the upstream answers, by the model asked for. */
const ANSWERS: Record<string, Buffer> = {
  // Multi-byte characters, all valid.
  valid: answer(Buffer.from("héllo wörld ✓ 😀 日本", "utf8")),
  // A lone 0xFF byte and a four-byte sequence cut short after three bytes (the same length as its U+FFFD).
  invalid: answer(
    Buffer.concat([Buffer.from("a"), Buffer.from([0xff]), Buffer.from("b"), Buffer.from([0xf0, 0x9f, 0x98]), Buffer.from("c")])
  )
}

let gw: TestGateway
let upstream: http.Server

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => (body += c.toString()))
    req.on("end", () => {
      const model = (JSON.parse(body) as { model: string }).model
      const bytes = ANSWERS[model] ?? ANSWERS["valid"]!
      res.writeHead(200, { "content-type": "application/json", "content-length": bytes.length })
      res.end(bytes)
    })
  })
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const port = (upstream.address() as net.AddressInfo).port
  const added = await call(`${gw.url}/api/providers`, {
    headers: admin,
    body: {
      provider: "openai-compatible",
      name: "bytes",
      baseUrl: `http://127.0.0.1:${port}/v1`,
      defaultModel: "valid",
      timeouts: { nonStreamed: "whole" }
    }
  })
  expect(added.status).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await new Promise((r) => upstream?.close(r))
})

/** The client's answer as raw bytes, with its declared length. */
const ask = async (model: string): Promise<{ readonly status: number; readonly length: string | null; readonly bytes: Buffer }> => {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: `bytes/${model}`, messages: [{ role: "user", content: "hi" }] })
  })
  return { status: res.status, length: res.headers.get("content-length"), bytes: Buffer.from(await res.arrayBuffer()) }
}

describe("a whole answer passed through", () => {
  it("goes out byte for byte when it is valid UTF-8", async () => {
    for (let i = 0; i < 3; i++) {
      const got = await ask("valid")
      expect(got.status).toBe(200)
      expect(got.bytes.equals(ANSWERS["valid"]!)).toBe(true)
      expect(got.length).toBe(String(ANSWERS["valid"]!.length))
    }
  })

  it("goes out as its text read as UTF-8 when it is not (each invalid sequence a U+FFFD)", async () => {
    const expected = Buffer.from(ANSWERS["invalid"]!.toString("utf8"), "utf8")
    expect(expected.equals(ANSWERS["invalid"]!)).toBe(false)
    for (let i = 0; i < 3; i++) {
      const got = await ask("invalid")
      expect(got.status).toBe(200)
      expect(got.bytes.equals(expected)).toBe(true)
      expect(got.length).toBe(String(expected.length))
    }
  })
})
