import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { afterAll, describe, expect, it } from "vitest"
import { type Gc, makeIdleMemory, ServerActivity } from "../src/platform/system/IdleMemory.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { type ServerProcess, startServerProcess } from "./support/cli.js"
import { FakeOpenAI } from "./support/fakeOpenAI.js"
import { call, startGateway, tempDir } from "./support/gateway.js"

const ADMIN = "gwk_test_admin_key_0123456789abcdef"

/**
 * src/platform/system/IdleMemory.ts: a gateway at rest gives back the young generation start-up
 * grew (two 16 MB semi-spaces), seen from outside as its resident memory. Two real gateway
 * processes on fresh data directories, one with the job every second and one with it off.
 */
const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

const dirs: Array<string> = []
const servers: Array<ServerProcess> = []
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

const start = async (seconds: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "idle-memory-"))
  dirs.push(dir)
  const s = await startServerProcess({ DATA_DIR: dir, HOME: dir, GATEWAY_IDLE_GC_SECONDS: seconds })
  servers.push(s)
  return s
}

// Node 22's V8 keeps the pages it frees from the young generation (RSS unchanged), so the job is
// off there by default (src/platform/system/IdleMemory.ts) and this comparison is Node 20's.
describe.runIf(Number(process.versions.node.split(".")[0]) < 22)("memory at rest (Node 20)", () => {
  it("a gateway left idle gives back its young generation within seconds; with GATEWAY_IDLE_GC_SECONDS=0 it keeps it", {
    timeout: 60_000
  }, async () => {
    const [on, off] = await Promise.all([start("1"), start("0")])
    const end = Date.now() + 25_000
    let a = rssMb(on.child.pid!)
    let b = rssMb(off.child.pid!)
    while (!(a < b - 15) && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 500))
      a = rssMb(on.child.pid!)
      b = rssMb(off.child.pid!)
    }
    expect(a, `resident MB with the job ${a.toFixed(0)}, without ${b.toFixed(0)}`).toBeLessThan(b - 15)
    // Both still answer.
    for (const s of [on, off]) expect((await fetch(`${s.url}/api/health/ping`)).status).toBe(200)
  })
})

/**
 * The start-up collection (a compacting full GC, 50-150 ms) at the first rest: with an answer
 * still being streamed the event loop is nearly idle, and the collection was a gap in the stream.
 * An in-process gateway started on a data directory set up beforehand, a paced stream opened
 * before the first look for rest (a quarter second after start-up): the collection waits for the
 * stream's end, then runs.
 */
describe("the start-up collection waits for what is in flight", () => {
  it("not while a stream is open, at the first rest after it", { timeout: 60_000 }, async () => {
    const upstream = await FakeOpenAI.start()
    const dataDir = tempDir("idle-memory-inflight-")
    dirs.push(dataDir)
    try {
      const setUp = await startGateway({ dataDir })
      await setUp.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const created = await call(`${setUp.url}/api/providers`, {
        body: { provider: "openai-compatible", baseUrl: upstream.baseUrl, apiKey: "sk-up", defaultModel: "m1" },
        headers: { authorization: `Bearer ${ADMIN}` }
      })
      expect(created.status).toBe(201)
      await setUp.close()

      // 12 pieces 120 ms apart: about 1.5 s, each quarter second of it at rest.
      const pieces = Array.from({ length: 12 }, (_, i) => `p${String(i + 1).padStart(2, "0")} `)
      upstream.always({ content: pieces.join(""), chunks: pieces.length, chunkDelayMs: 120 })
      const gw = await startGateway({ dataDir, env: { GATEWAY_IDLE_GC_SECONDS: "1" } })
      try {
        const collected = () => gw.logs.filter((l) => l.message.includes("start-up's garbage collected")).length
        const inFlight = () => gw.run(Effect.map(ServerActivity, (a) => a.inFlight()))
        const response = await fetch(`${gw.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer sk-anything" },
          body: JSON.stringify({ model: "openai-compatible/m1", stream: true, messages: [{ role: "user", content: "count" }] })
        })
        expect(response.status).toBe(200)
        expect(await inFlight()).toBe(1)
        // Read as it comes: up to the eleventh piece (`p11`) the answer is still being written (the
        // gateway takes it out of its answers in flight a moment before the client reads the end).
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let text = ""
        while (!text.includes("p11")) {
          const { value, done } = await reader.read()
          if (done) break
          text += decoder.decode(value, { stream: true })
        }
        expect(text).toContain("p11")
        expect(collected(), "collected while the stream was open").toBe(0)
        expect(await inFlight()).toBe(1)
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          text += decoder.decode(value, { stream: true })
        }
        expect(text).toContain("[DONE]")
        // At the first quarter second at rest after it: nothing in flight any more.
        const end = Date.now() + 10_000
        while (collected() === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50))
        expect(await inFlight()).toBe(0)
        expect(collected()).toBe(1)
      } finally {
        await gw.close()
      }
    } finally {
      await upstream.close()
    }
  })
})

/**
 * The young collection every GATEWAY_IDLE_GC_SECONDS runs at rest only: an idle event loop and under
 * a request a second in the interval. Light traffic (a dozen paced streams a second) leaves the event
 * loop idle, and a collection there let V8 shrink the young generation that traffic grows again onto
 * fresh pages (~50 page faults a paced stream, docs/performance.md, "2026-12-02 (midday)"). The
 * layer over a recording `gc`, a young generation above its start and a server whose requests the
 * test counts.
 */
describe("the young collection at rest", () => {
  it("not while requests keep coming, however idle the event loop; once they stop or come now and then", { timeout: 30_000 }, async () => {
    const minor: Array<number> = []
    const gc: Gc = (options) => {
      if (options?.type === "minor") minor.push(performance.now())
    }
    let received = 0
    const layer = makeIdleMemory({ gc: () => gc, youngBytes: () => 8 * 1024 * 1024, growthHeld: () => false }).pipe(
      Layer.provide(Layer.succeed(ServerActivity, { inFlight: () => 0, received: () => received }))
    )
    const run = (ms: number) =>
      Effect.runPromise(
        Layer.launch(layer).pipe(
          Effect.timeoutTo({ duration: ms, onTimeout: () => undefined, onSuccess: () => undefined }),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["GATEWAY_IDLE_GC_SECONDS", "0.2"]])))
        )
      )
    const traffic = setInterval(() => received++, 50)
    try {
      await run(1_500)
    } finally {
      clearInterval(traffic)
    }
    expect(minor.length, "young collections while a request came every 50 ms").toBe(0)
    expect(received).toBeGreaterThan(20)
    await run(1_500)
    expect(minor.length, "young collections in 1.5 s without a request, checked every 0.2 s").toBeGreaterThanOrEqual(1)
    // A request now and then (a dashboard's poll, a probe) does not put it off for good.
    minor.length = 0
    const probe = setTimeout(() => received++, 300)
    await run(1_500)
    clearTimeout(probe)
    expect(minor.length, "young collections with one request in 1.5 s").toBeGreaterThanOrEqual(1)
  })
})
