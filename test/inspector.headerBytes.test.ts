import { describe, expect, it } from "vitest"
import type { RequestContext } from "../src/kernel/request.js"
import { makeAgentBridge } from "../src/services/inspector/agentBridge.js"
import { makeInspector } from "../src/services/inspector/buffer.js"
import { HeaderBytes } from "../src/services/inspector/headerBytes.js"
import { inspectorDefaults } from "../src/services/inspector/InspectorConfig.js"

describe("HeaderBytes: a header set kept as bytes", () => {
  it("gives back the same names, order and values: strings, numbers and lists", () => {
    const h = new HeaderBytes()
    const set = {
      host: "127.0.0.1:20128",
      "content-type": "application/json",
      "content-length": 1234,
      "set-cookie": ["a=1; Path=/", "b=2"],
      empty: "",
      "x-long": "v".repeat(5_000),
      "x-latin1": "caf\u00e9 \u00ff",
      skipped: undefined
    }
    expect(h.store(set)).toBe(true)
    const back = h.read()
    // Everything but the undefined value, in the same order.
    const { skipped: _skipped, ...kept } = set
    expect(back).toStrictEqual(kept)
    expect(Object.keys(back)).toEqual(Object.keys(kept))
    // Read twice: the same again, each a new object.
    expect(h.read()).toEqual(back)
    expect(h.read()).not.toBe(back)
  })

  it("a smaller set stored after a larger one leaves nothing of the larger; clear forgets", () => {
    const h = new HeaderBytes()
    expect(h.store({ a: "x".repeat(3_000), b: "2", c: ["3", "4"] })).toBe(true)
    expect(h.store({ z: "1" })).toBe(true)
    expect(h.read()).toEqual({ z: "1" })
    h.clear()
    expect(h.read()).toEqual({})
  })

  it("a buffer grown for one large set is made small again by a small one", () => {
    const h = new HeaderBytes()
    expect(h.store({ big: "q".repeat(20_000) })).toBe(true)
    const grown = (h as unknown as { bytes: Uint8Array }).bytes.length
    expect(grown).toBeGreaterThan(20_000)
    expect(h.store({ small: "1" })).toBe(true)
    expect((h as unknown as { bytes: Uint8Array }).bytes.length).toBe(1024)
    expect(h.read()).toEqual({ small: "1" })
  })

  it("refuses what bytes cannot hold (beyond Latin-1, another type, over 64 KB) and holds nothing then", () => {
    const h = new HeaderBytes()
    expect(h.store({ a: "1" })).toBe(true)
    expect(h.store({ a: "1", b: "\u20ac" })).toBe(false)
    expect(h.read()).toEqual({})
    expect(h.store({ a: { nested: true } as unknown as string })).toBe(false)
    expect(h.store({ a: "y".repeat(70_000) })).toBe(false)
    expect(h.store({ many: Array.from({ length: 3 }, (_, i) => "z".repeat(30_000) + i) })).toBe(false)
    expect(h.store({ a: "back" })).toBe(true)
    expect(h.read()).toEqual({ a: "back" })
  })
})

describe("the agent-bridge's entry of a request that ended while nobody looked", () => {
  it("shows the request's headers (secrets masked) and the answer's as they were, read after later requests reused the slots", () => {
    const inspector = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 3 } })
    const bridge = makeAgentBridge(inspector)
    const ctxOf = (n: number, headers: Record<string, unknown>) =>
      ({
        requestId: `req_${n}`,
        method: "POST",
        path: "/v1/chat/completions",
        query: new URLSearchParams(),
        headers,
        startedAt: 1_000 + n
      }) as unknown as RequestContext
    const ended = (n: number, headers: Record<string, unknown>, answer: Record<string, string | number | Array<string>>) => {
      const ctx = ctxOf(n, headers)
      bridge.begin!(ctx)
      ;(ctx as { answerHeaders?: unknown }).answerHeaders = answer
      bridge.end!(ctx, 200, undefined)
    }
    // More requests than the buffer holds: the last three slots were taken from evicted ones.
    for (let n = 0; n < 5; n++)
      ended(
        n,
        { host: "gw.test", "x-big": "b".repeat(2_000 + n) },
        {
          "content-type": "text/plain",
          "x-n": String(n),
          "content-length": 10 + n,
          "set-cookie": [`s=${n}`, "t=1"]
        }
      )
    ended(
      5,
      { host: "gw.test", authorization: "Bearer sk-secret-value-123456", "user-agent": "OpenAI/JS 5.0.0", "x-\u00e9": "caf\u00e9" },
      { "content-type": "application/json", "content-length": 42, "set-cookie": ["a=1", "b=2"], "x-unicode": "\u20ac" }
    )
    const entry = inspector.entries().find((e) => e.requestId === "req_5")!
    expect(entry.requestHeaders["host"]).toBe("gw.test")
    expect(entry.requestHeaders["user-agent"]).toBe("OpenAI/JS 5.0.0")
    expect(entry.requestHeaders["x-\u00e9"]).toBe("caf\u00e9")
    expect(entry.requestHeaders["x-big"]).toBeUndefined()
    expect(String(entry.requestHeaders["authorization"])).not.toContain("sk-secret-value-123456")
    // A value beyond Latin-1: that answer's headers were kept as the object, shown all the same.
    expect(entry.responseHeaders).toMatchObject({ "content-type": "application/json", "x-unicode": "\u20ac" })
    // A list is shown joined, its cookies masked (docs/inspector.md#secrets), as ever.
    expect(entry.responseHeaders!["set-cookie"]).toMatch(/^a=1, /)
    expect(String(entry.responseHeaders!["content-length"])).toBe("42")
    const before = inspector.entries().find((e) => e.requestId === "req_4")!
    expect(before.requestHeaders["x-big"]).toBe("b".repeat(2_004))
    expect(before.responseHeaders).toMatchObject({ "content-type": "text/plain", "x-n": "4" })
    expect(String(before.responseHeaders!["content-length"])).toBe("14")
    expect(before.responseHeaders!["set-cookie"]).toMatch(/^s=4, /)
  })
})
