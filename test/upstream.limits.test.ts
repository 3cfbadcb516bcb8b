import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { DEFAULT_STREAM_TIMEOUTS, StreamTimeouts } from "../src/inference/StreamTimeouts.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Limits on what an upstream may cost the gateway: the size of a whole answer, how long a
 * silent upstream is waited for (non-streamed requests too), and that an upstream request ends
 * as soon as its client has gone. The first target is a raw HTTP server that misbehaves as each
 * test asks; the second ("steady") answers.
 */
const ADMIN = "gwk_uplim_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const MAX_BYTES = 64 * 1024
const TIMEOUTS = { headersMs: 500, streamHeadersMs: 500, firstContentMs: 500, idleMs: 500, bodyIdleMs: 500 }

type Mode =
  | { readonly kind: "huge"; readonly bytes: number; readonly contentType?: string }
  | { readonly kind: "no-headers" }
  | { readonly kind: "stall-body" }
  | { readonly kind: "sse-headers-only" }
  | { readonly kind: "late"; readonly delayMs: number }
  | { readonly kind: "stream-then-stall" }
  | { readonly kind: "sse-late"; readonly delayMs: number }

interface Seen {
  readonly path: string
  /** The response finished by the server itself. */
  finished: boolean
  /** The request's socket closed (by the gateway, or after the answer). */
  closed: boolean
  /** Bytes of the body written before the socket closed. */
  written: number
}

/** A raw upstream speaking OpenAI chat, misbehaving as `mode` says; records each request's fate. */
const startRaw = async () => {
  const seen: Array<Seen> = []
  let mode: Mode = { kind: "no-headers" }
  const sockets = new Set<import("node:net").Socket>()
  const answer = JSON.stringify({
    id: "chatcmpl-raw",
    object: "chat.completion",
    created: 1,
    model: "m1",
    choices: [{ index: 0, message: { role: "assistant", content: "from raw" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
  })
  const chunk = (content: string) =>
    `data: ${JSON.stringify({ id: "chatcmpl-raw", object: "chat.completion.chunk", created: 1, model: "m1", choices: [{ index: 0, delta: { role: "assistant", content }, finish_reason: null }] })}\n\n`
  const server = http.createServer((req, res) => {
    const s: Seen = { path: req.url ?? "", finished: false, closed: false, written: 0 }
    seen.push(s)
    req.socket.once("close", () => (s.closed = true))
    res.once("finish", () => (s.finished = true))
    const m = mode
    req.resume()
    req.once("end", () => {
      switch (m.kind) {
        case "huge": {
          res.writeHead(200, { "content-type": m.contentType ?? "application/json" })
          const piece = Buffer.alloc(16 * 1024, m.contentType === "application/json" || m.contentType === undefined ? " " : "x")
          if (m.contentType === "text/event-stream") res.write("data: ")
          if (m.contentType === "application/x-ndjson") res.write('{"model":"m1","message":{"role":"assistant","content":"')
          // Written respecting backpressure, so `written` tells how far the reader went.
          const pump = () => {
            while (s.written < m.bytes) {
              if (res.destroyed) return
              s.written += piece.length
              if (!res.write(piece)) return void res.once("drain", pump)
            }
            res.end(m.contentType === "text/event-stream" ? "\n\n" : answer)
          }
          pump()
          return
        }
        case "sse-late":
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.flushHeaders()
          setTimeout(() => {
            if (!res.destroyed) res.end(chunk("from raw") + "data: [DONE]\n\n")
          }, m.delayMs)
          return
        case "no-headers":
          return
        case "sse-headers-only":
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.flushHeaders()
          return
        case "stall-body":
          res.writeHead(200, { "content-type": "application/json" })
          res.write('{"id":"chatcmpl-raw",')
          return
        case "late":
          setTimeout(() => {
            if (!res.destroyed) res.writeHead(200, { "content-type": "application/json" }).end(answer)
          }, m.delayMs)
          return
        case "stream-then-stall":
          res.writeHead(200, { "content-type": "text/event-stream" })
          res.write(chunk("first"))
          return
      }
    })
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.once("close", () => sockets.delete(socket))
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    seen,
    set: (m: Mode) => {
      mode = m
    },
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((r) => server.close(() => r()))
    }
  }
}

type Raw = Awaited<ReturnType<typeof startRaw>>

let gw: TestGateway
let raw: Raw
let steady: FakeUpstream

const chat = (model: string, stream = false) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, stream, messages: [{ role: "user", content: "hi" }] } })

/** Waits until `check` holds, up to `deadlineMs` (a generous deadline, not a timing assertion). */
const eventually = async (check: () => boolean, deadlineMs = 2000) => {
  const until = Date.now() + deadlineMs
  while (!check()) {
    if (Date.now() > until) return false
    await new Promise((r) => setTimeout(r, 20))
  }
  return true
}

beforeAll(async () => {
  raw = await startRaw()
  steady = await FakeUpstream.start()
  gw = await startGateway({ timeouts: TIMEOUTS, env: { GATEWAY_MAX_UPSTREAM_RESPONSE_BYTES: String(MAX_BYTES) } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect((await add({ provider: "openai-compatible", name: "raw", baseUrl: raw.url, defaultModel: "m1" })).status).toBe(201)
  expect(
    (await add({ provider: "anthropic", name: "steady", apiKey: "sk-ant", baseUrl: steady.baseUrl("anthropic"), defaultModel: "m1" }))
      .status
  ).toBe(201)
  expect(
    (
      await add({
        provider: "ollama",
        name: "rawollama",
        baseUrl: raw.url.replace(/\/v1$/, ""),
        defaultModel: "m1",
        timeouts: { idleMs: 10_000 }
      })
    ).status
  ).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/combos`, {
        body: { name: "pair", strategy: "priority", targets: [{ model: "raw/m1" }, { model: "steady/m1" }] },
        headers: admin
      })
    ).status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await raw?.close()
  await steady?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  steady.always({ content: "from steady" })
  raw.seen.length = 0
})

describe("a client that goes away ends its upstream request at once", () => {
  // The usual (long) timeouts: only the client leaving can end these upstream requests early.
  let patient: TestGateway
  beforeAll(async () => {
    patient = await startGateway()
    await patient.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    expect(
      (
        await call(`${patient.url}/api/providers`, {
          body: { provider: "openai-compatible", name: "raw", baseUrl: raw.url, defaultModel: "m1" },
          headers: admin
        })
      ).status
    ).toBe(201)
  })
  afterAll(() => patient?.close())

  it("non-streamed, while the upstream has not answered yet", async () => {
    // A pooled (kept-alive) upstream connection first: its reuse must be cut as well.
    raw.set({ kind: "late", delayMs: 0 })
    expect(
      (await call(`${patient.url}/v1/chat/completions`, { body: { model: "raw/m1", messages: [{ role: "user", content: "hi" }] } })).status
    ).toBe(200)
    raw.seen.length = 0
    raw.set({ kind: "late", delayMs: 20_000 })
    const ac = new AbortController()
    const pending = fetch(`${patient.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "raw/m1", messages: [{ role: "user", content: "hi" }] }),
      signal: ac.signal
    }).catch(() => undefined)
    expect(await eventually(() => raw.seen.length === 1)).toBe(true)
    ac.abort()
    await pending
    expect(await eventually(() => raw.seen[0]!.closed)).toBe(true)
  })

  for (const [name, mode] of [
    ["non-streamed, while the upstream body is under way", { kind: "stall-body" }],
    ["streamed, before the upstream answered", { kind: "no-headers" }],
    ["streamed, before any content", { kind: "sse-headers-only" }]
  ] as const) {
    it(name, async () => {
      raw.set(mode)
      const ac = new AbortController()
      const pending = fetch(`${patient.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "raw/m1", stream: name.startsWith("streamed"), messages: [{ role: "user", content: "hi" }] }),
        signal: ac.signal
      }).catch(() => undefined)
      expect(await eventually(() => raw.seen.length === 1)).toBe(true)
      await new Promise((r) => setTimeout(r, 100))
      ac.abort()
      await pending
      expect(await eventually(() => raw.seen[0]!.closed)).toBe(true)
    })
  }

  for (const [name, path, body] of [
    ["streamed, pass-through", "/v1/chat/completions", { model: "raw/m1", stream: true, messages: [{ role: "user", content: "hi" }] }],
    ["streamed, translated", "/v1/messages", { model: "raw/m1", stream: true, max_tokens: 10, messages: [{ role: "user", content: "hi" }] }]
  ] as const) {
    it(`${name}, after the answer began`, async () => {
      raw.set({ kind: "stream-then-stall" })
      const ac = new AbortController()
      const res = await fetch(`${patient.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
        body: JSON.stringify(body),
        signal: ac.signal
      })
      expect(res.status).toBe(200)
      const reader = res.body!.getReader()
      const first = await reader.read()
      expect(new TextDecoder().decode(first.value)).toContain("first")
      ac.abort()
      expect(await eventually(() => raw.seen[0]?.closed === true)).toBe(true)
    })
  }
})

/** Text of a chat completion, whole or streamed. */
const textOf = (res: { text: string; body: any }): string =>
  res.body?.choices?.[0]?.message?.content ??
  res.text
    .split("\n")
    .filter((l) => l.startsWith("data: {"))
    .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? "")
    .join("")

describe("a whole answer larger than GATEWAY_MAX_UPSTREAM_RESPONSE_BYTES", () => {
  it("is not read past the limit, and the combo falls back to its next target", async () => {
    raw.set({ kind: "huge", bytes: 16 * 1024 * 1024 })
    const res = await chat("pair")
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(textOf(res)).toBe("from steady")
    // The upstream connection was dropped long before the answer was all sent.
    expect(await eventually(() => raw.seen[0]?.closed === true)).toBe(true)
    expect(raw.seen[0]!.finished).toBe(false)
  })

  it("also when a stream was asked for and the upstream answered whole", async () => {
    raw.set({ kind: "huge", bytes: 16 * 1024 * 1024 })
    const res = await chat("pair", true)
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(textOf(res)).toBe("from steady")
    expect(raw.seen[0]!.finished).toBe(false)
  })

  it("with a single target: 502 upstream_response_too_large, and the gateway goes on serving", async () => {
    raw.set({ kind: "huge", bytes: 16 * 1024 * 1024 })
    const res = await chat("raw/m1")
    expect(res.status, res.text.slice(0, 300)).toBe(502)
    expect(res.body.error.code).toBe("upstream_response_too_large")
    expect(res.text).not.toMatch(/at .*\.(ts|js):\d+/)
    // The failure cooled the connection down (a transient error): forget it, then ask again.
    await gw.resetResilience()
    raw.set({ kind: "late", delayMs: 0 })
    const again = await chat("raw/m1")
    expect(again.status, again.text.slice(0, 300)).toBe(200)
    expect(textOf(again)).toBe("from raw")
  })

  it("embeddings answer the same codes as chat: 502 upstream_response_too_large, 504 upstream_timeout", async () => {
    const embed = () => call(`${gw.url}/v1/embeddings`, { body: { model: "raw/m1", input: "hi" } })
    raw.set({ kind: "huge", bytes: 16 * 1024 * 1024 })
    const large = await embed()
    expect(large.status, large.text.slice(0, 300)).toBe(502)
    expect(large.body.error.code).toBe("upstream_response_too_large")
    await gw.resetResilience()
    raw.set({ kind: "stall-body" })
    const stalled = await embed()
    expect(stalled.status, stalled.text.slice(0, 300)).toBe(504)
    expect(stalled.body.error.code).toBe("upstream_timeout")
  })

  it("a stream line without an end is not held past the frame limit", async () => {
    // One NDJSON line of 64 MB: the relay gives up at 16 MiB instead of buffering it whole (the
    // connection's own silence limit keeps the watchdog out of this: a line is not content yet).
    raw.set({ kind: "huge", bytes: 64 * 1024 * 1024, contentType: "application/x-ndjson" })
    const res = await call(`${gw.url}/api/chat`, {
      body: { model: "rawollama/m1", stream: true, messages: [{ role: "user", content: "hi" }] }
    })
    expect(res.status, res.text.slice(0, 300)).toBe(502)
    expect(await eventually(() => raw.seen[0]?.closed === true)).toBe(true)
    expect(raw.seen[0]!.finished).toBe(false)
  })
})

describe("a silent upstream of a non-streamed request is left within the timeouts", () => {
  it("defaults fall back within tens of seconds", () => {
    for (const ms of Object.values(DEFAULT_STREAM_TIMEOUTS).filter((_, i) => Object.keys(DEFAULT_STREAM_TIMEOUTS)[i] !== "idleMs")) {
      expect(ms).toBeLessThanOrEqual(60_000)
    }
  })

  it("the environment overrides them", async () => {
    const read = (env: Record<string, string>) =>
      Effect.runPromise(
        Effect.provide(StreamTimeouts, StreamTimeouts.layer).pipe(
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
          Effect.either
        )
      )
    const t = await read({ GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS: "90000", GATEWAY_UPSTREAM_BODY_IDLE_TIMEOUT_MS: "15000" })
    expect(t._tag === "Right" && t.right).toMatchObject({
      headersMs: 90_000,
      bodyIdleMs: 15_000,
      streamHeadersMs: DEFAULT_STREAM_TIMEOUTS.streamHeadersMs
    })
    expect((await read({ GATEWAY_STREAM_IDLE_TIMEOUT_MS: "0" }))._tag).toBe("Left")
  })

  it("no headers: falls back to the next target", async () => {
    raw.set({ kind: "no-headers" })
    const res = await chat("pair")
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(textOf(res)).toBe("from steady")
  })

  it("headers, then a body that stalls: falls back to the next target", async () => {
    raw.set({ kind: "stall-body" })
    const res = await chat("pair")
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(textOf(res)).toBe("from steady")
    expect(await eventually(() => raw.seen[0]?.closed === true)).toBe(true)
  })

  it("with a single target, a stalled body is a 504 upstream_timeout", async () => {
    raw.set({ kind: "stall-body" })
    const res = await chat("raw/m1")
    expect(res.status, res.text).toBe(504)
    expect(res.body.error.code).toBe("upstream_timeout")
  })
})

describe("a connection's own timeouts", () => {
  beforeAll(async () => {
    const created = await call(`${gw.url}/api/providers`, {
      body: {
        provider: "openai-compatible",
        name: "slowpoke",
        baseUrl: raw.url,
        defaultModel: "m1",
        timeouts: { headersMs: 5000, idleMs: 5000 }
      },
      headers: admin
    })
    expect(created.status, created.text).toBe(201)
    expect(created.body.timeouts).toEqual({ headersMs: 5000, idleMs: 5000 })
    expect(
      (
        await call(`${gw.url}/api/combos`, {
          body: { name: "slow-pair", strategy: "priority", targets: [{ model: "slowpoke/m1" }, { model: "steady/m1" }] },
          headers: admin
        })
      ).status
    ).toBe(201)
  })
  const setTimeouts = (timeouts: unknown) => call(`${gw.url}/api/providers/slowpoke`, { method: "PUT", body: { timeouts }, headers: admin })

  it("are listed, validated and changed through the management API", async () => {
    const list = await call(`${gw.url}/api/providers`, { headers: admin })
    expect(list.body.connections.find((c: any) => c.name === "slowpoke").timeouts).toEqual({ headersMs: 5000, idleMs: 5000 })
    expect(list.body.connections.find((c: any) => c.name === "raw").timeouts).toBeNull()
    expect((await setTimeouts({ headersMs: 5 })).status).toBe(400)
    expect((await setTimeouts({ headersMs: 5000, other: 1 })).status).toBe(400)
    expect((await setTimeouts(null)).body.timeouts).toBeNull()
    expect((await setTimeouts({ headersMs: 5000, idleMs: 5000 })).body.timeouts).toEqual({ headersMs: 5000, idleMs: 5000 })
  })

  it("a longer headers timeout waits for a slow upstream the gateway's would have left", async () => {
    raw.set({ kind: "late", delayMs: 1200 })
    const res = await chat("slow-pair")
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(textOf(res)).toBe("from raw")
  })

  it("a longer silence limit waits for a stream's late first content", async () => {
    raw.set({ kind: "sse-late", delayMs: 1200 })
    const res = await chat("slow-pair", true)
    expect(res.status, res.text.slice(0, 300)).toBe(200)
    expect(textOf(res)).toBe("from raw")
  })

  it("a shorter one leaves sooner than the gateway's", async () => {
    expect((await setTimeouts({ headersMs: 300 })).status).toBe(200)
    try {
      raw.set({ kind: "late", delayMs: 5000 })
      // The gateway's own headers timeout is set far above it for this test's connection.
      const res = await chat("slow-pair")
      expect(res.status, res.text.slice(0, 300)).toBe(200)
      expect(textOf(res)).toBe("from steady")
    } finally {
      await setTimeouts({ headersMs: 5000, idleMs: 5000 })
    }
  })
})
