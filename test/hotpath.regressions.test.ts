import * as Effect from "effect/Effect"
import * as net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { makeStreamWatchdog, type StreamStalled, type StreamProgress } from "../src/inference/stream.js"
import { DEFAULT_STREAM_TIMEOUTS } from "../src/inference/StreamTimeouts.js"
import { UpstreamHttp } from "../src/upstream/client/UpstreamHttp.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Regressions of the lean request path (docs/performance.md): what the faster code must still do.
 */
const ADMIN = "gwk_hotpath_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
let silent: net.Server
const held: Array<net.Socket> = []
// A raw upstream whose non-streamed answers go wrong after the headers: `cut` ends the connection
// mid-body, `hang` sends part of the body and then waits (recording when the gateway closes it).
let raw: net.Server
const rawClosed: Array<string> = []
/** The modes the raw upstream has begun answering (headers and part of a body sent). */
const rawAnswered: Array<string> = []

beforeAll(async () => {
  up = await FakeUpstream.start()
  // Accepts TCP connections and never says a word: a TLS handshake to it never completes.
  silent = net.createServer((s) => held.push(s))
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r))
  raw = net.createServer((s) => {
    held.push(s)
    let head = ""
    s.on("data", (d) => {
      head += d.toString("latin1")
      const mode = /"model":"(cut|hang|stream)"/.exec(head)?.[1]
      if (!mode || !head.includes("\r\n\r\n")) return
      head = ""
      if (mode === "stream") {
        // Headers and one event of a stream, then nothing: only the gateway can end it.
        s.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        const event = 'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
        s.write(`${Buffer.byteLength(event).toString(16)}\r\n${event}\r\n`)
        s.once("close", () => rawClosed.push(mode))
        return
      }
      s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n{"id":"chatcmpl-1","object":"chat.')
      rawAnswered.push(mode)
      if (mode === "cut") setTimeout(() => s.destroy(), 20)
      else s.once("close", () => rawClosed.push(mode))
    })
  })
  await new Promise<void>((r) => raw.listen(0, "127.0.0.1", r))
  gw = await startGateway({ timeouts: { headersMs: 400, streamHeadersMs: 400, firstContentMs: 2000, idleMs: 2000 } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect((await add({ provider: "openai-compatible", name: "up", baseUrl: up.baseUrl("openai-chat"), defaultModel: "m1" })).status).toBe(
    201
  )
  const port = (silent.address() as net.AddressInfo).port
  expect(
    (await add({ provider: "openai-compatible", name: "tls", baseUrl: `https://127.0.0.1:${port}/v1`, defaultModel: "m1" })).status
  ).toBe(201)
  const rawPort = (raw.address() as net.AddressInfo).port
  expect(
    (await add({ provider: "openai-compatible", name: "raw", baseUrl: `http://127.0.0.1:${rawPort}/v1`, defaultModel: "cut" })).status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
  for (const s of held) s.destroy()
  await new Promise((r) => silent?.close(r))
  await new Promise((r) => raw?.close(r))
})

const chat = (model: string, extra: Record<string, unknown> = {}, signal?: AbortSignal) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], ...extra }),
    ...(signal ? { signal } : {})
  })

describe("the upstream headers timeout", () => {
  it("covers connecting: an upstream whose TLS handshake never completes times out at the headers timeout, not the 10 s connect timeout", async () => {
    const started = Date.now()
    const res = await chat("tls/m1")
    const elapsed = Date.now() - started
    expect(res.status).toBe(504)
    expect(((await res.json()) as any).error.code).toBe("upstream_timeout")
    expect(elapsed).toBeLessThan(5000)
  })
})

describe("a headers timer that fires late", () => {
  /**
   * An upstream that answers at once, then holds the event loop up (a long synchronous task) past the
   * headers timeout: when the loop resumes, the timer is due before the answer, already in the
   * socket, is read. The answer counts; a timeout would be the gateway's own lateness.
   *
   * That needs the answer written before the deadline. On a machine busier than its cores (more
   * test workers than cores) this process can lose the CPU for a while between sending the request
   * and seeing it arrive, and an upstream that then answers after the deadline is late: the timeout
   * is right. So the deadline is generous (300 ms), the hold runs to 400 ms past it, and an attempt
   * whose answer went out after the deadline is tried again.
   */
  const TIMEOUT_MS = 300
  const attempt = async (readWhole: boolean): Promise<{ readonly answeredInTime: boolean; readonly status?: number }> => {
    let sentAt = 0
    let answeredAt = Number.POSITIVE_INFINITY
    const server = net.createServer((s) => {
      s.on("error", () => undefined)
      s.once("data", () => {
        s.end("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
        answeredAt = Date.now()
        const until = sentAt + TIMEOUT_MS + 400
        while (Date.now() < until) {
          // busy: the whole process is held up
        }
      })
    })
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    try {
      const outcome = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const http = yield* UpstreamHttp
            sentAt = Date.now()
            return yield* Effect.either(
              http.request({
                url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/v1/models`,
                method: "GET",
                headers: {},
                headersTimeout: `${TIMEOUT_MS} millis`,
                readWhole
              })
            )
          }).pipe(Effect.provide(UpstreamHttp.layer))
        )
      )
      // A margin under the deadline: the request's own start is counted in the timer too.
      if (answeredAt - sentAt > TIMEOUT_MS - 50) return { answeredInTime: false }
      return { answeredInTime: true, status: outcome._tag === "Right" ? outcome.right.status : undefined }
    } finally {
      await new Promise((r) => server.close(r))
    }
  }

  for (const readWhole of [false, true]) {
    it(`does not time out headers that came in time but were not read yet (${readWhole ? "a whole answer" : "a stream"})`, async () => {
      for (let i = 0; i < 5; i++) {
        const r = await attempt(readWhole)
        if (!r.answeredInTime) continue
        expect(r.status).toBe(200)
        return
      }
      throw new Error("in 5 attempts the machine never let the upstream answer before the deadline")
    })
  }

  it("still times out headers that never come", async () => {
    const server = net.createServer(() => undefined)
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const held: Array<net.Socket> = []
    server.on("connection", (s) => held.push(s))
    try {
      const outcome = await Effect.runPromise(
        Effect.gen(function* () {
          const http = yield* UpstreamHttp
          return yield* Effect.either(
            http.request({
              url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/v1/models`,
              method: "GET",
              headers: {},
              headersTimeout: "50 millis"
            })
          )
        }).pipe(Effect.provide(UpstreamHttp.layer))
      )
      expect(outcome._tag).toBe("Left")
      if (outcome._tag === "Left") expect(outcome.left.message).toMatch(/no response headers from upstream in time/)
    } finally {
      for (const s of held) s.destroy()
      await new Promise((r) => server.close(r))
    }
  })
})

describe("a non-streamed answer read in the same wait as its headers", () => {
  it("a body cut after the headers is a 502 naming the unreadable body, not a hang or a 500", async () => {
    const res = await chat("raw/cut")
    expect(res.status).toBe(502)
    const body = (await res.json()) as any
    expect(body.error.message).toMatch(/upstream response body could not be read/)
  })

  it("a client that leaves while the body is still coming closes the upstream connection", async () => {
    // The cut body of the test before cooled the raw connection down (docs/resilience.md).
    await gw.resetResilience()
    const ctl = new AbortController()
    const hangs = () => rawAnswered.filter((m) => m === "hang").length
    const answeredBefore = hangs()
    const pending = chat("raw/hang", {}, ctl.signal).catch(() => undefined)
    // The raw upstream has sent its headers and part of the body: now the client goes away.
    for (let waited = 0; hangs() === answeredBefore && waited < 10_000; waited += 10) await new Promise((r) => setTimeout(r, 10))
    expect(hangs()).toBe(answeredBefore + 1)
    const deadline = Date.now() + 3000
    ctl.abort()
    await pending
    while (!rawClosed.includes("hang") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25))
    expect(rawClosed).toContain("hang")
  })
})

describe("an upstream call tied to its caller (abortWhen)", () => {
  it("a streamed answer handed over but not yet read is destroyed when the caller goes away", async () => {
    const port = (raw.address() as net.AddressInfo).port
    let goAway: (() => void) | undefined
    let unwatched = false
    const status = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const http = yield* UpstreamHttp
          const res = yield* http.request({
            url: `http://127.0.0.1:${port}/v1/chat/completions`,
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "stream", stream: true }),
            abortWhen: (abort) => {
              goAway = abort
              return () => {
                unwatched = true
              }
            }
          })
          // The headers are here; nobody has started reading the body when the caller leaves.
          goAway!()
          const deadline = Date.now() + 3000
          while (!rawClosed.includes("stream") && Date.now() < deadline) yield* Effect.sleep("25 millis")
          return res.status
        }).pipe(Effect.provide(UpstreamHttp.layer))
      )
    )
    expect(status).toBe(200)
    expect(rawClosed).toContain("stream")
    // Once the body is gone the caller is no longer watched.
    expect(unwatched).toBe(true)
  })
})

describe("a client that leaves", () => {
  it("still gets its request's log line when the fiber is interrupted mid-stream", async () => {
    up.always({ content: "a b c d e f g h", chunks: 8, chunkDelayMs: 150 })
    const abortedBefore = up.aborted
    const ctl = new AbortController()
    const res = await chat("up/m1", { stream: true }, ctl.signal)
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    await reader.read()
    ctl.abort()
    await reader.cancel().catch(() => undefined)
    const deadline = Date.now() + 3000
    const closed = () => gw.logs.find((l) => /POST \/v1\/chat\/completions client closed after \d+ms/.test(l.message))
    while (!closed() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(closed()).toBeDefined()
    expect(closed()!.annotations["requestId"]).toMatch(/^req_/)
    // And the upstream stream was cut when the client left, not read to its end.
    while (up.aborted === abortedBefore && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25))
    expect(up.aborted).toBeGreaterThan(abortedBefore)
  })

  it("a non-streamed answer with one side of usage missing counts that side as 0, as a translated answer would", async () => {
    up.always({
      body: {
        id: "x",
        object: "chat.completion",
        created: 1,
        model: "m1",
        choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 5 }
      }
    })
    const res = await chat("up/m1")
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-tokens-in")).toBe("5")
    expect(res.headers.get("x-gateway-tokens-out")).toBe("0")
    // The upstream's own bytes, unchanged.
    expect(((await res.json()) as any).usage).toEqual({ prompt_tokens: 5 })
  })
})

describe("the shared stream watchdog", () => {
  it("one stream whose stall handler throws does not stop the watchdog for the others", async () => {
    const timeouts = { ...DEFAULT_STREAM_TIMEOUTS, firstContentMs: 40, idleMs: 40 }
    const stalledSecond: Array<StreamStalled> = []
    const state = (): StreamProgress => ({ headersAt: Date.now(), lastChunkAt: Date.now(), firstContentAt: 0 })
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const watchdog = yield* makeStreamWatchdog(timeouts)
          watchdog.watch({
            state: state(),
            stalled: () => {
              throw new Error("boom")
            }
          })
          yield* Effect.sleep("120 millis")
          // Registered after the first one threw: the sweep must still be running.
          watchdog.watch({ state: state(), stalled: (e) => stalledSecond.push(e) })
          yield* Effect.sleep("200 millis")
        })
      )
    )
    expect(stalledSecond).toHaveLength(1)
    expect(stalledSecond[0]!.message).toMatch(/no content within 40 ms/)
  })

  /** Blocks the event loop for `ms`, from the check phase, so the loop's next stop is its timers (before it reads any socket). */
  const blockFromCheckPhase = (ms: number) =>
    new Promise<void>((resolve) =>
      setImmediate(() => {
        const until = Date.now() + ms
        while (Date.now() < until) {
          // busy: the event loop is held up, as by a long synchronous task
        }
        resolve()
      })
    )

  it("a chunk that arrived while the event loop was held up counts before a stall is judged", async () => {
    const timeouts = { ...DEFAULT_STREAM_TIMEOUTS, firstContentMs: 100, idleMs: 100 }
    const server = net.createServer()
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
    const accepted = new Promise<net.Socket>((r) => server.once("connection", r))
    const client = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1")
    await new Promise((r) => client.once("connect", r))
    const upstream = await accepted
    const reported: Array<StreamStalled> = []
    try {
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const watchdog = yield* makeStreamWatchdog(timeouts)
            const state: StreamProgress = { headersAt: Date.now(), lastChunkAt: Date.now(), firstContentAt: 0 }
            client.on("data", () => {
              state.firstContentAt = state.lastChunkAt = Date.now()
            })
            watchdog.watch({ state, stalled: (e) => reported.push(e) })
            yield* Effect.promise(() => {
              // The first content is written at once and waits in the socket while the loop is held up
              // for three times the limit; the sweep's timer is then the first thing the loop runs.
              upstream.write("data: first\n\n")
              return blockFromCheckPhase(300)
            })
            yield* Effect.sleep("100 millis")
            expect(state.firstContentAt).toBeGreaterThan(0)
          })
        )
      )
    } finally {
      client.destroy()
      upstream.destroy()
      await new Promise((r) => server.close(r))
    }
    expect(reported).toEqual([])
  })

  it("a stream silent through a held-up event loop is still reported after it", async () => {
    const timeouts = { ...DEFAULT_STREAM_TIMEOUTS, firstContentMs: 100, idleMs: 100 }
    const reported: Array<StreamStalled> = []
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const watchdog = yield* makeStreamWatchdog(timeouts)
          watchdog.watch({ state: { headersAt: Date.now(), lastChunkAt: Date.now(), firstContentAt: 0 }, stalled: (e) => reported.push(e) })
          yield* Effect.promise(() => blockFromCheckPhase(300))
          // The late sweep judges after the loop has read its sockets: nothing came, so it reports.
          yield* Effect.sleep("150 millis")
        })
      )
    )
    expect(reported).toHaveLength(1)
    expect(reported[0]!.message).toMatch(/no content within 100 ms/)
  })

  it("a stream that stops being watched is never reported", async () => {
    const timeouts = { ...DEFAULT_STREAM_TIMEOUTS, firstContentMs: 40, idleMs: 40 }
    let reported = 0
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const watchdog = yield* makeStreamWatchdog(timeouts)
          const unwatch = watchdog.watch({
            state: { headersAt: Date.now(), lastChunkAt: Date.now(), firstContentAt: 0 },
            stalled: () => reported++
          })
          unwatch()
          yield* Effect.sleep("150 millis")
        })
      )
    )
    expect(reported).toBe(0)
  })
})
