import { describe, expect, it } from "vitest"
import { Findings, type HttpCase, judge } from "./support/fuzz.js"

/** The fuzz harness's own rules: which findings a replay may clear, and which always count. */
const kase: HttpCase = {
  kind: "http",
  route: "inference POST /v1/chat/completions",
  plane: "inference",
  method: "POST",
  target: "/v1/chat/completions",
  headers: {},
  key: "valid",
  tags: []
}

describe("fuzz findings", () => {
  it("a 503 that does not show again on replay is reported apart and does not fail the run", async () => {
    const f = new Findings()
    f.record(1, kase, judge(kase, { status: 503, excerpt: '{"error":{"code":"no_available_target"}}' }, undefined))
    expect(f.empty).toBe(false)
    await f.confirm(async (c) => judge(c, { status: 200, excerpt: "{}" }, undefined))
    expect(f.empty).toBe(true)
    expect(f.counts.fivehundred).toBe(0)
    expect(f.counts.unconfirmed).toBe(1)
    expect(f.unconfirmed[0]).toContain("status 503 no_available_target")
  })

  it("a 503 that shows again, a 500 and a crash stay findings", async () => {
    const f = new Findings()
    f.record(1, kase, judge(kase, { status: 503, excerpt: "{}" }, undefined))
    f.record(2, kase, judge(kase, { status: 500, excerpt: "{}" }, undefined))
    f.record(3, kase, judge(kase, { status: 200, excerpt: "{}" }, "TypeError: boom"))
    let replays = 0
    await f.confirm(async (c) => (replays++, judge(c, { status: 503, excerpt: "{}" }, undefined)))
    // Only the 503 is replayed, and once is enough to confirm it.
    expect(replays).toBe(1)
    expect([...f.all.keys()].map((k) => k.split(" · ")[0]).sort()).toEqual(["500", "5xx", "crash"])
    expect(f.counts.unconfirmed).toBe(0)
  })
})
