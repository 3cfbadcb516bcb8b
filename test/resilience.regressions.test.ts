import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { RoutingMemory } from "../src/services/routing/RoutingMemory.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Defects found in review of the routing and resilience layers, one test each: slots, probes and
 * in-flight counts released on every path; no second try of a target that just failed; early
 * stream errors fall back; a slow reader is not the upstream's fault; usage rows stay right when
 * the client leaves; fusion keeps the panel's work; bounded memory; combo ids.
 */
const ADMIN = "gwk_regress_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let a: FakeUpstream
let b: FakeUpstream

const chat = (model: string, signal?: AbortSignal, extra: Record<string, unknown> = {}) =>
  fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], ...extra }),
    ...(signal ? { signal } : {})
  })
const status = () => call(`${gw.url}/api/resilience`, { headers: admin }).then((r) => r.body)
const rows = async (id: string | null) => {
  await gw.usageWritten()
  return queryDb(gw.dataDir, "SELECT status, connection_id, endpoint, error FROM usage WHERE request_id = ? ORDER BY id", id)
}
const settle = () => new Promise((r) => setTimeout(r, 150))

beforeAll(async () => {
  a = await FakeUpstream.start()
  b = await FakeUpstream.start()
  gw = await startGateway({ timeouts: { firstContentMs: 1000, idleMs: 1000, headersMs: 3000, streamHeadersMs: 3000 } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = (body: Record<string, unknown>) => call(`${gw.url}/api/providers`, { body, headers: admin })
  expect(
    (
      await add({
        provider: "openai-compatible",
        name: "ca",
        baseUrl: a.baseUrl("openai-chat"),
        defaultModel: "m1",
        models: ["m2"],
        priority: 1
      })
    ).status
  ).toBe(201)
  expect(
    (await add({ provider: "anthropic", name: "cb", apiKey: "sk", baseUrl: b.baseUrl("anthropic"), defaultModel: "m1", priority: 2 }))
      .status
  ).toBe(201)
})
afterAll(async () => {
  await gw?.close()
  await a?.close()
  await b?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  a.always({ content: "from a" })
  b.always({ content: "from b" })
  a.requests.length = 0
  b.requests.length = 0
  const list = await call(`${gw.url}/api/combos`, { headers: admin })
  for (const c of list.body.combos) await call(`${gw.url}/api/combos/${c.id}`, { method: "DELETE", headers: admin })
})

describe("attempt resources are released on every path", () => {
  it("a client that leaves while waiting for a quota-share slot leaves no request counted in flight", async () => {
    await call(`${gw.url}/api/providers/ca`, { method: "PUT", body: { max_concurrent: 1 }, headers: admin })
    try {
      a.always({ content: "slow", delayMs: 600 })
      const first = chat("qtSd/g/ca/m1")
      await settle()
      const ctl = new AbortController()
      const waiting = chat("qtSd/g/ca/m1", ctl.signal).catch(() => "aborted")
      await settle()
      ctl.abort()
      expect(await waiting).toBe("aborted")
      expect((await first).status).toBe(200)
      await settle()
      expect((await status()).connections.find((c: any) => c.name === "ca").inFlight).toBe(0)
      // And quota share still uses the connection.
      a.always({ content: "from a" })
      expect((await chat("qtSd/g/ca/m1")).status).toBe(200)
    } finally {
      await call(`${gw.url}/api/providers/ca`, { method: "PUT", body: { max_concurrent: null }, headers: admin })
    }
  })

  it("a candidate skipped as misconfigured gives back the half-open probe, so its healthy sibling is tried", async () => {
    const add = await call(`${gw.url}/api/providers`, {
      body: {
        provider: "openai-compatible",
        name: "broken",
        baseUrl: a.baseUrl("openai-chat"),
        apiKey: "sk-1",
        defaultModel: "m1",
        priority: 0
      },
      headers: admin
    })
    expect(add.status).toBe(201)
    try {
      // Each 503 also cools "ca" down: a 1 ms cooldown lets the second one reach the upstream.
      await call(`${gw.url}/api/resilience`, {
        method: "PATCH",
        body: {
          providerBreaker: { apikey: { degradationThreshold: 1, failureThreshold: 2, resetTimeoutMs: 300 } },
          connectionCooldown: { apiKeyBaseMs: 1, maxCooldownMs: 1 }
        },
        headers: admin
      })
      a.always({ status: 503 })
      await chat("ca/m1")
      await new Promise((r) => setTimeout(r, 5))
      await chat("ca/m1")
      expect((await status()).breakers.find((x: any) => x.provider === "openai-compatible").state).toBe("OPEN")
      // The stored key of "broken" can no longer be decrypted.
      const db = new Database(path.join(gw.dataDir, "gateway.db"))
      db.prepare("UPDATE connections SET api_key_enc = 'v1:garbage', updated_at = updated_at + 1 WHERE name = 'broken'").run()
      db.close()
      await new Promise((r) => setTimeout(r, 1300))
      a.always({ content: "from a" })
      const res = await chat("openai-compatible/m1")
      expect(res.status).toBe(200)
      expect(await res.text()).toContain("from a")
      expect((await status()).breakers.find((x: any) => x.provider === "openai-compatible").state).toBe("CLOSED")
    } finally {
      await call(`${gw.url}/api/resilience`, {
        method: "PATCH",
        body: {
          providerBreaker: { apikey: { degradationThreshold: 7, failureThreshold: 12, resetTimeoutMs: 30_000 } },
          connectionCooldown: { apiKeyBaseMs: 3000, maxCooldownMs: 300_000 }
        },
        headers: admin
      })
      await call(`${gw.url}/api/providers/broken`, { method: "DELETE", headers: admin })
    }
  })
})

describe("one request never tries a target again after it failed", () => {
  it("skips repeated and newly cooling-down targets within the request", async () => {
    await call(`${gw.url}/api/combos`, {
      body: {
        name: "rep",
        strategy: "priority",
        targets: [{ model: "ca/m1" }, { model: "ca/m2" }, { model: "ca/m1" }, { model: "cb/m1" }]
      },
      headers: admin
    })
    a.always({ status: 429, headers: { "retry-after": "30" } })
    const res = await chat("rep")
    expect(res.status).toBe(200)
    expect(await res.text()).toContain("from b")
    expect(a.requests).toHaveLength(1)
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
  })
})

describe("streams", () => {
  it("an Anthropic stream that errors after content_block_start but before any text falls back", async () => {
    await call(`${gw.url}/api/combos`, {
      body: { name: "anth-first", strategy: "priority", targets: [{ model: "cb/m1" }, { model: "ca/m1" }] },
      headers: admin
    })
    b.always({ content: "never", streamErrorAfterChunks: 3, errorMessage: "Overloaded" })
    const res = await chat("anth-first", undefined, { stream: true })
    const text = (await res.text())
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? "")
      .join("")
    expect(res.status).toBe(200)
    expect(text).toBe("from a")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
  })

  it("a client that stops reading is not counted against the upstream (no stall, no breaker failure)", async () => {
    a.always({ content: "x".repeat(8_000_000), chunks: 2000 })
    const u = new URL(gw.url)
    await new Promise<void>((resolve) => {
      const req = http.request(
        { host: u.hostname, port: u.port, path: "/v1/chat/completions", method: "POST", headers: { "content-type": "application/json" } },
        (res) => {
          res.pause()
          setTimeout(() => {
            req.destroy()
            resolve()
          }, 2500)
        }
      )
      req.end(JSON.stringify({ model: "ca/m1", stream: true, messages: [{ role: "user", content: "hi" }] }))
    })
    await settle()
    const s = await status()
    expect(s.breakers.find((x: any) => x.provider === "openai-compatible")?.consecutiveFailures ?? 0).toBe(0)
    expect(gw.logs.some((l) => /stalled: nothing for/.test(l.message))).toBe(false)
  })
})

describe("usage rows when the client leaves", () => {
  it("a client leaving during the fallback attempt records 499 on the target being tried", async () => {
    await call(`${gw.url}/api/combos`, {
      body: { name: "pair", strategy: "priority", targets: [{ model: "ca/m1" }, { model: "cb/m1" }] },
      headers: admin
    })
    a.always({ status: 503, errorMessage: "a is overloaded" })
    b.always({ content: "slow", delayMs: 1500 })
    const ctl = new AbortController()
    const pending = chat("pair", ctl.signal).catch(() => undefined)
    // The fallback attempt is under way: b has the request (and answers only after 1.5 s).
    await expect.poll(() => b.requests.length, { timeout: 5_000 }).toBe(1)
    ctl.abort()
    await pending
    await gw.usageWritten()
    const last = queryDb(
      gw.dataDir,
      "SELECT status, connection_id, error FROM usage WHERE endpoint = 'chat.completions' ORDER BY id DESC LIMIT 1"
    )[0]!
    const cb = (await call(`${gw.url}/api/providers/cb`, { headers: admin })).body.id
    expect(last).toMatchObject({ status: 499, connection_id: cb })
  })
})

describe("fusion keeps the panel's work", () => {
  it("answers with the panel's first answer when the judge fails, and records a row for a cut-off straggler", async () => {
    await call(`${gw.url}/api/combos`, {
      body: {
        name: "council",
        strategy: "fusion",
        targets: [{ model: "ca/m1" }, { model: "cb/m1" }, { model: "ca/m2" }],
        config: { judgeModel: "cb/m1", fusionTuning: { minPanel: 2, stragglerGraceMs: 50, panelHardTimeoutMs: 3000 } }
      },
      headers: admin
    })
    // Panel: ca/m1 and cb/m1 answer, ca/m2 is slow (cut off); the judge (cb) fails.
    a.script((r) => (r.body.model === "m2" ? { content: "late", delayMs: 1500 } : { content: "panel a" }))
    b.script((r) => (JSON.stringify(r.body).includes("<source 1>") ? { status: 500 } : { content: "panel b" }))
    const res = await chat("council")
    expect(res.status).toBe(200)
    const body = (await res.json()) as any
    expect(body.choices[0].message.content).toBe("panel a")
    const requestId = res.headers.get("x-gateway-request-id")
    const panelStatuses = async () =>
      (await rows(requestId))
        .filter((r: any) => r.endpoint === "chat.completions:fusion-panel")
        .map((r: any) => r.status)
        .sort()
    // The rows are written behind the answer: polled, not read once after a fixed wait.
    await expect.poll(panelStatuses, { timeout: 10_000 }).toEqual([200, 200, 499])
    const panel = await rows(requestId)
    expect(panel.filter((r: any) => r.endpoint === "chat.completions")).toHaveLength(1)
  })
})

describe("bounded memory and combo ids", () => {
  it("quota-share credit counters per group stay bounded whatever model ids clients send", async () => {
    const memory = await gw.run(RoutingMemory)
    const d = memory.deficits("bounded-group")
    for (let i = 0; i < 5000; i++) d.set(`conn/model-${i}`, i)
    expect(d.size).toBeLessThanOrEqual(1000)
  })

  it("a combo id may not be another combo's name, and a name may not be another combo's id", async () => {
    expect(
      (await call(`${gw.url}/api/combos`, { body: { name: "x1", strategy: "priority", targets: [{ model: "ca/m1" }] }, headers: admin }))
        .status
    ).toBe(201)
    const clash = await call(`${gw.url}/api/combos`, {
      body: { id: "x1", name: "x7", strategy: "priority", targets: [{ model: "ca/m1" }] },
      headers: admin
    })
    expect(clash.status).toBe(409)
    const withId = await call(`${gw.url}/api/combos`, {
      body: { id: "cid9", name: "x8", strategy: "priority", targets: [{ model: "ca/m1" }] },
      headers: admin
    })
    expect(withId.status).toBe(201)
    const nameIsId = await call(`${gw.url}/api/combos`, {
      body: { name: "cid9", strategy: "priority", targets: [{ model: "ca/m1" }] },
      headers: admin
    })
    expect(nameIsId.status).toBe(409)
  })
})
