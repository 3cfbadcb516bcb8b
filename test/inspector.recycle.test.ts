import { describe, expect, it } from "vitest"
import type { RequestContext } from "../src/kernel/request.js"
import { makeAgentBridge } from "../src/services/inspector/agentBridge.js"
import { makeInspector } from "../src/services/inspector/buffer.js"
import { inspectorDefaults } from "../src/services/inspector/InspectorConfig.js"
import type { UsageRecord } from "../src/services/usage/Usage.js"

/**
 * The agent-bridge's requests recorded while nobody looks, through a full buffer: a slot evicted
 * unread after its request ended is taken, with its request's object, by the next request
 * (buffer.ts, `spare`). What each entry says is its own request's, whichever objects it was built from.
 */
describe("the inspector's buffer, full of unread agent-bridge requests", () => {
  const row = (n: number): UsageRecord => ({
    requestId: `req_${n}`,
    apiKeyId: "key_1",
    connectionId: "conn_1",
    provider: n % 2 === 0 ? "openai" : null,
    model: `model-${n}`,
    endpoint: "/v1/chat/completions",
    stream: n % 3 === 0,
    status: 200,
    usage: { input: n, output: n * 2, cached: null, reasoning: null },
    latencyMs: 5,
    ttftMs: null,
    error: null,
    costUsd: n / 1000,
    requestedModel: `asked-${n}`
  })

  const ctxOf = (n: number) =>
    ({
      requestId: `req_${n}`,
      method: "POST",
      path: n % 4 === 0 ? "/v1/messages" : "/v1/chat/completions",
      query: new URLSearchParams(n % 5 === 0 ? { n: String(n) } : {}),
      headers: { host: "gw.test", "x-n": String(n) },
      startedAt: 1_000 + n
    }) as unknown as RequestContext

  /** Begins request `n`; `end` finishes it as the lifecycle does (its answer's headers, its usage row but for every seventh). */
  const run = (bridge: ReturnType<typeof makeAgentBridge>) => {
    const ctxs = new Map<number, RequestContext>()
    return {
      begin: (n: number) => {
        const ctx = ctxOf(n)
        ctxs.set(n, ctx)
        bridge.begin!(ctx)
      },
      end: (n: number) => {
        const ctx = ctxs.get(n)! as RequestContext & { answerHeaders?: unknown; usageRow?: UsageRecord }
        ctx.answerHeaders = { "content-type": n % 3 === 0 ? "text/event-stream" : "application/json", "x-gateway-model": `model-${n}` }
        if (n % 7 !== 0) ctx.usageRow = row(n)
        bridge.end!(ctx, n % 6 === 0 ? 502 : 200, n % 6 === 0 ? { code: "upstream_error", message: `failed ${n}` } : undefined)
      }
    }
  }

  /** An entry as the tests compare it: what comes from its request (its id and times are its own anyway). */
  const shown = (e: ReturnType<ReturnType<typeof makeInspector>["entries"]>[number]) => ({
    url: e.url,
    method: e.method,
    status: e.status,
    error: e.error,
    requestHeaders: e.requestHeaders,
    responseHeaders: e.responseHeaders,
    llm: e.llm,
    detectedKind: e.detectedKind,
    requestId: e.requestId
  })

  it("shows each request's own entry, as a buffer that keeps every request shows it", () => {
    const small = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 4 } })
    const large = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 1000 } })
    const a = run(makeAgentBridge(small))
    const b = run(makeAgentBridge(large))
    // Requests overlap as they do under load: each ends two requests after it began.
    for (let n = 0; n < 60; n++) {
      a.begin(n)
      b.begin(n)
      if (n >= 2) {
        a.end(n - 2)
        b.end(n - 2)
      }
    }
    // Two still running, read as they are.
    const running = small.entries().map(shown)
    expect(running.map((e) => e.status)).toEqual([200, 200, "in-flight", "in-flight"])
    expect(running).toEqual(large.entries().map(shown).slice(-4))
    for (const n of [58, 59]) {
      a.end(n)
      b.end(n)
    }
    const kept = small.entries().map(shown)
    expect(kept).toHaveLength(4)
    expect(kept).toEqual(large.entries().map(shown).slice(-4))
    expect(kept.map((e) => e.requestId)).toEqual(["req_56", "req_57", "req_58", "req_59"])
  })

  it("leaves alone a slot evicted before its request ended, and one read before it was evicted", () => {
    const core = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 2 } })
    const r = run(makeAgentBridge(core))
    r.begin(1)
    // Read while its request runs: its entry is built and handed out.
    r.begin(2)
    const read = core.entries().find((e) => e.requestId === "req_2")!
    r.end(2)
    // Both evicted: request 1 still running, request 2's entry read.
    r.begin(3)
    r.begin(4)
    r.end(3)
    r.begin(5)
    r.end(4)
    r.begin(6)
    // Request 1 ends long after its slot was evicted: nothing of it shows on the others.
    r.end(1)
    r.end(5)
    r.end(6)
    expect(read.requestId).toBe("req_2")
    expect(read.status).toBe(200)
    const entries = core.entries()
    expect(entries.map((e) => e.requestId)).toEqual(["req_5", "req_6"])
    expect(entries.map((e) => [e.status, e.llm?.tokensIn])).toEqual([
      [200, 5],
      [502, 6]
    ])
  })
})
