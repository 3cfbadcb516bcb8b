import { describe, expect, it } from "vitest"
import { makeInspector } from "../src/services/inspector/buffer.js"
import { inspectorDefaults } from "../src/services/inspector/InspectorConfig.js"

/** A full buffer drops its oldest entry for each new one, over many rounds of its eviction order's compaction. */
describe("the inspector's buffer, full", () => {
  const start = (n: number) => ({
    source: "http-proxy" as const,
    method: "POST",
    url: `https://api.example.test/v1/chat/completions?n=${n}`,
    headers: { "content-type": "application/json" },
    body: undefined
  })

  it("keeps the newest entries of a buffer larger than its eviction order's first ring", () => {
    const core = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 100 } })
    const ids: Array<string> = []
    for (let i = 0; i < 1000; i++) ids.push(core.sink.begin(start(i)))
    expect(core.entries({ limit: 1000 }).map((e) => e.id)).toEqual(ids.slice(-100))
  })

  it("keeps the newest entries, oldest first, and starts over after a clear", () => {
    const core = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 5 } })
    const ids: Array<string> = []
    for (let i = 0; i < 3000; i++) ids.push(core.sink.begin(start(i)))
    expect(core.entries().map((e) => e.id)).toEqual(ids.slice(-5))
    core.clear()
    expect(core.entries()).toEqual([])
    const again: Array<string> = []
    for (let i = 0; i < 7; i++) again.push(core.sink.begin(start(i)))
    expect(core.entries().map((e) => e.id)).toEqual(again.slice(-5))
  })
})
