import Anthropic from "@anthropic-ai/sdk"
import * as Effect from "effect/Effect"
import OpenAI from "openai"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { AutoEngine } from "../src/services/routing/AutoEngine.js"
import { AUTO_CATEGORIES, AUTO_TIERS, AUTO_VARIANT_IDS } from "../src/services/routing/auto/variants.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * The routing engine end to end: real fake upstreams (one per connection, so each can fail on
 * its own), combos through the management API, auto ids, fusion, quota share, sessions.
 */
const ADMIN = "gwk_routing_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
const ups: Record<"a" | "b" | "c", FakeUpstream> = {} as never

const chat = (model: string, headers: Record<string, string> = {}, extra: Record<string, unknown> = {}) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }], ...extra }, headers })

const createCombo = (body: Record<string, unknown>) => call(`${gw.url}/api/combos`, { body, headers: admin })

const answeredBy = (res: { body: any }) => res.body.choices?.[0]?.message?.content as string | undefined

beforeAll(async () => {
  for (const name of ["a", "b", "c"] as const) ups[name] = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const name of ["a", "b", "c"] as const) {
    const res = await call(`${gw.url}/api/providers`, {
      body: {
        provider: "openai-compatible",
        name: `up-${name}`,
        baseUrl: ups[name].baseUrl("openai-chat"),
        defaultModel: "m1",
        models: ["m1", "m2"]
      },
      headers: admin
    })
    expect(res.status).toBe(201)
  }
})
afterAll(async () => {
  await gw?.close()
  for (const up of Object.values(ups)) await up?.close()
})
beforeEach(async () => {
  for (const [name, up] of Object.entries(ups)) {
    up.always({ content: `answer from ${name}` })
    up.requests.length = 0
    up.violations.length = 0
  }
  await gw.resetResilience()
  const list = await call(`${gw.url}/api/combos`, { headers: admin })
  for (const c of list.body.combos) await call(`${gw.url}/api/combos/${c.id}`, { method: "DELETE", headers: admin })
})

describe("a combo falls back on a retryable failure", () => {
  it("answers from the second target when the first answers 503, with X-Gateway-Fallback-Attempts: 1", async () => {
    expect((await createCombo({ name: "pair", strategy: "priority", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })).status).toBe(
      201
    )
    ups.a.always({ status: 503, errorMessage: "overloaded" })
    const res = await chat("pair")
    expect(res.status).toBe(200)
    expect(answeredBy(res)).toBe("answer from b")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(ups.a.requests.length).toBe(1)
    expect(ups.b.requests.length).toBe(1)
  })

  it("does the same for a stream through the openai SDK, and for a 429 (account limit) and a refused connection", async () => {
    await createCombo({ name: "pair", strategy: "priority", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    ups.a.always({ status: 429, headers: { "retry-after": "30" } })
    const { data, response } = await client.chat.completions
      .create({ model: "pair", messages: [{ role: "user", content: "hi" }], stream: true })
      .withResponse()
    let text = ""
    for await (const chunk of data) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("answer from b")
    expect(response.headers.get("x-gateway-fallback-attempts")).toBe("1")
    // up-a is cooling down now: the next request goes straight to up-b, no fallback needed.
    const next = await chat("pair")
    expect(answeredBy(next)).toBe("answer from b")
    expect(next.headers.get("x-gateway-fallback-attempts")).toBeNull()
    expect(ups.a.requests.length).toBe(1)
  })

  it("does not fall back on the client's own error (400), and keeps its status", async () => {
    await createCombo({ name: "pair", strategy: "priority", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    ups.a.always({ status: 400, errorMessage: "bad parameter" })
    const res = await chat("pair")
    expect(res.status).toBe(400)
    expect(res.body.error.message).toContain("bad parameter")
    expect(ups.b.requests.length).toBe(0)
  })

  it("answers the last error when every target fails, with the number of fallbacks", async () => {
    await createCombo({ name: "pair", strategy: "priority", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    ups.a.always({ status: 503 })
    ups.b.always({ status: 502, errorMessage: "bad gateway at b" })
    const res = await chat("pair")
    expect(res.status).toBe(502)
    expect(res.body.error.message).toContain("bad gateway at b")
    expect(res.headers.get("x-gateway-fallback-attempts")).toBe("1")
  })

  it("writes exactly one usage row per request, naming the target that answered", async () => {
    await createCombo({ name: "pair", strategy: "priority", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    ups.a.always({ status: 503 })
    const res = await chat("pair")
    await gw.usageWritten()
    const rows = queryDb(gw.dataDir, "SELECT model, status, connection_id FROM usage WHERE request_id = ?", [
      res.headers.get("x-gateway-request-id")
    ])
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ model: "m1", status: 200 })
  })
})

describe("/api/combos", () => {
  it("creates, lists, reads, updates and deletes combos, and lists them in /v1/models", async () => {
    const created = await createCombo({
      name: "Team",
      strategy: "round-robin",
      targets: [{ model: "up-a/m1" }, { model: "up-b/m1", weight: 2 }],
      description: "two"
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ name: "Team", strategy: "round-robin", enabled: true, description: "two" })
    expect((await call(`${gw.url}/api/combos`, { headers: admin })).body.combos.map((c: any) => c.name)).toEqual(["Team"])
    expect((await call(`${gw.url}/api/combos/team`, { headers: admin })).body.id).toBe(created.body.id)
    const put = await call(`${gw.url}/api/combos/${created.body.id}`, { method: "PUT", body: { strategy: "priority" }, headers: admin })
    expect(put.body.strategy).toBe("priority")
    const patch = await call(`${gw.url}/api/combos/Team`, { method: "PATCH", body: { enabled: false }, headers: admin })
    expect(patch.body.enabled).toBe(false)
    expect((await chat("Team")).status).toBe(404)
    await call(`${gw.url}/api/combos/Team`, { method: "PATCH", body: { enabled: true }, headers: admin })
    const models = await call(`${gw.url}/v1/models`)
    const listed = models.body.data.find((m: any) => m.id === "Team")
    expect(listed).toMatchObject({ owned_by: "gateway" })
    expect(listed.context_length).toBeGreaterThan(0)
    const removed = await call(`${gw.url}/api/combos/Team`, { method: "DELETE", headers: admin })
    expect(removed.body.removed.name).toBe("Team")
    expect((await call(`${gw.url}/api/combos/Team`, { headers: admin })).status).toBe(404)
  })

  it("refuses bad combos with a 400 naming the problem", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ name: "x", strategy: "fastest", targets: [{ model: "up-a/m1" }] }, /strategy must be one of: priority, weighted/],
      [{ name: "x", strategy: "priority", targets: [] }, /needs at least one target/],
      [{ name: "x", strategy: "priority" }, /needs at least one target/],
      [{ name: "a/b", strategy: "priority", targets: [{ model: "up-a/m1" }] }, /no '\/'/],
      [{ name: "auto", strategy: "auto" }, /reserved/],
      [{ name: "x", strategy: "auto", config: { routerStrategy: "nope" } }, /routerStrategy 'nope' is not registered/],
      [{ name: "x", strategy: "auto", config: { auto: { weights: { speed: 1 } } } }, /unknown factor 'speed'/],
      [{ name: "x", strategy: "auto", config: { modePack: "turbo" } }, /modePack 'turbo' is unknown/],
      [
        { name: "x", strategy: "priority", targets: [{ model: "up-a/m1" }], config: { routerStrategy: "cost" } },
        /apply to strategy auto only/
      ],
      [{ name: "x", strategy: "fusion", targets: [{ model: "up-a/m1" }], config: { fusionTuning: { minPanel: 0 } } }, /minPanel/],
      [{ name: "x", strategy: "priority", targets: [{ model: "up-a/m1" }], config: { judge: "y" } }, /judge/],
      [{ name: "x", strategy: "weighted", targets: [{ model: "up-a/m1", weight: -1 }] }, /weight/]
    ]
    for (const [body, message] of cases) {
      const res = await createCombo(body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.message, JSON.stringify(body)).toMatch(message)
    }
    await createCombo({ name: "dup", strategy: "priority", targets: [{ model: "up-a/m1" }] })
    const dup = await createCombo({ name: "DUP", strategy: "priority", targets: [{ model: "up-a/m1" }] })
    expect(dup.status).toBe(409)
    expect((await call(`${gw.url}/api/combos`)).status).toBe(401)
  })

  it("GET /api/combos/auto lists every auto variant with its pool, context_length and max_output_tokens never 0", async () => {
    const res = await call(`${gw.url}/api/combos/auto`, { headers: admin })
    expect(res.status).toBe(200)
    expect(res.body.variants.map((v: any) => v.id)).toEqual([...AUTO_VARIANT_IDS])
    for (const v of res.body.variants) {
      expect(v.pool.map((p: any) => p.model).sort()).toEqual(["up-a/m1", "up-b/m1", "up-c/m1"])
      expect(v.context_length).toBeGreaterThan(0)
      expect(v.max_output_tokens).toBeGreaterThan(0)
    }
    expect(res.body.variants.find((v: any) => v.id === "auto/smart").explorationRate).toBe(0.1)
    expect(res.body.variants.find((v: any) => v.id === "auto/cheap").routerStrategy).toBe("cost")
  })
})

describe("auto models", () => {
  it("auto, every variant and every category:tier resolve against the connected providers", async () => {
    const ids = [...AUTO_VARIANT_IDS, ...AUTO_CATEGORIES.flatMap((c) => [`auto/${c}`, ...AUTO_TIERS.map((t) => `auto/${c}:${t}`)])]
    for (const id of ids) {
      const res = await chat(id)
      expect(res.status, id).toBe(200)
      expect(answeredBy(res), id).toMatch(/^answer from [abc]$/)
    }
  })

  it("rejects an auto id that is not one, with a 400 listing the forms", async () => {
    for (const id of ["auto/turbo", "auto/coding:ultra", "auto/"]) {
      const res = await chat(id)
      expect(res.status, id).toBe(400)
      expect(res.body.error.message).toContain("auto/<variant>")
    }
  })

  it("routes around a provider whose connection fails, and lists auto ids in /v1/models", async () => {
    ups.a.always({ status: 503 })
    ups.b.always({ status: 503 })
    for (let i = 0; i < 5; i++) {
      const res = await chat("auto")
      expect(res.status).toBe(200)
      expect(answeredBy(res)).toBe("answer from c")
    }
    const models = (await call(`${gw.url}/v1/models`)).body.data.map((m: any) => m.id)
    expect(models).toEqual(
      expect.arrayContaining(["auto", "auto/coding", "auto/fast", "auto/cheap", "auto/offline", "auto/smart", "auto/lkgp"])
    )
  })

  it("uses a registered custom router strategy named in a combo's config (and the legacy location)", async () => {
    await gw.run(
      Effect.flatMap(AutoEngine, (e) =>
        Effect.sync(() =>
          e.register({
            name: "always-c",
            description: "Picks connection up-c",
            select: (pool) => {
              const e = pool.find((p) => p.candidate.connection.name === "up-c") ?? pool[0]!
              return {
                provider: e.provider,
                model: e.model,
                key: e.candidate.key,
                strategy: "always-c",
                reason: "test",
                candidatesConsidered: pool.length,
                score: 1
              }
            }
          })
        )
      )
    )
    expect(
      (await createCombo({ name: "custom", strategy: "auto", config: { routerStrategy: "always-c", explorationRate: 0 } })).status
    ).toBe(201)
    expect(
      (await createCombo({ name: "legacy", strategy: "auto", config: { auto: { routerStrategy: "always-c" }, explorationRate: 0 } })).status
    ).toBe(201)
    for (const name of ["custom", "legacy"]) for (let i = 0; i < 5; i++) expect(answeredBy(await chat(name))).toBe("answer from c")
  })

  it("filters by X-Gateway-Budget and restricts to the candidate pool", async () => {
    await createCombo({ name: "only-b", strategy: "auto", config: { auto: { candidatePool: ["up-b"] }, explorationRate: 0 } })
    for (let i = 0; i < 3; i++)
      expect(answeredBy(await chat("only-b", { "x-gateway-budget": "0.5", "x-gateway-mode": "cheap" }))).toBe("answer from b")
    // Unknown header values are ignored, never rejected.
    expect((await chat("only-b", { "x-gateway-budget": "lots", "x-gateway-mode": "warp" })).status).toBe(200)
  })
})

describe("sessions", () => {
  it("echoes X-Session-Id as X-Gateway-Session-Id and keeps the session on one target", async () => {
    await createCombo({ name: "rr", strategy: "round-robin", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }, { model: "up-c/m1" }] })
    const first = await chat("rr", { "x-session-id": "sess-1" })
    expect(first.headers.get("x-gateway-session-id")).toBe("sess-1")
    const who = answeredBy(first)
    for (let i = 0; i < 4; i++) expect(answeredBy(await chat("rr", { "x-session-id": "sess-1" }))).toBe(who)
    // The underscore form works on direct HTTP too.
    const underscore = await chat("rr", { x_session_id: "sess-2" })
    expect(underscore.headers.get("x-gateway-session-id")).toBe("sess-2")
    // Without a session, round robin rotates.
    const seen = new Set<string>()
    for (let i = 0; i < 3; i++) seen.add(answeredBy(await chat("rr"))!)
    expect(seen.size).toBe(3)
  })

  it("context-relay keeps a session on its target until it is exhausted, then relays to the next", async () => {
    await createCombo({ name: "relay", strategy: "context-relay", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    expect(answeredBy(await chat("relay", { "x-session-id": "s" }))).toBe("answer from a")
    ups.a.always({ status: 429, errorMessage: "You exceeded your daily limit" })
    expect(answeredBy(await chat("relay", { "x-session-id": "s" }))).toBe("answer from b")
    ups.a.always({ content: "answer from a" })
    // Still on b: the leg moved.
    expect(answeredBy(await chat("relay", { "x-session-id": "s" }))).toBe("answer from b")
  })
})

describe("combo strategies end to end", () => {
  it("round-robin rotates, weighted honours weights, least-used evens out, lkgp sticks to the last good", async () => {
    await createCombo({ name: "rr", strategy: "round-robin", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    const rr = [] as Array<string | undefined>
    for (let i = 0; i < 4; i++) rr.push(answeredBy(await chat("rr")))
    expect(rr).toEqual(["answer from a", "answer from b", "answer from a", "answer from b"])

    await createCombo({
      name: "w",
      strategy: "weighted",
      targets: [
        { model: "up-a/m1", weight: 0 },
        { model: "up-b/m1", weight: 1 }
      ]
    })
    for (let i = 0; i < 4; i++) expect(answeredBy(await chat("w"))).toBe("answer from b")

    await createCombo({ name: "lu", strategy: "least-used", targets: [{ model: "up-a/m2" }, { model: "up-b/m2" }] })
    const lu = new Map<string, number>()
    for (let i = 0; i < 6; i++) {
      const a = answeredBy(await chat("lu"))!
      lu.set(a, (lu.get(a) ?? 0) + 1)
    }
    expect([...lu.values()]).toEqual([3, 3])

    await createCombo({ name: "good", strategy: "lkgp", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    ups.a.always({ status: 500 })
    expect(answeredBy(await chat("good"))).toBe("answer from b")
    ups.a.always({ content: "answer from a" })
    expect(answeredBy(await chat("good"))).toBe("answer from b")
  })

  it("an Anthropic client gets a combo's answer in its own format", async () => {
    await createCombo({ name: "pair", strategy: "priority", targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }] })
    ups.a.always({ status: 503 })
    const client = new Anthropic({ baseURL: gw.url, apiKey: "x", maxRetries: 0 })
    const msg = await client.messages.create({ model: "pair", max_tokens: 50, messages: [{ role: "user", content: "hi" }] })
    expect(msg.content[0]).toMatchObject({ type: "text", text: "answer from b" })
  })
})

describe("fusion", () => {
  it("asks the panel in parallel without tools, then the judge with the client's tools and sources", async () => {
    await createCombo({
      name: "council",
      strategy: "fusion",
      targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }],
      config: { judgeModel: "up-c/m1" }
    })
    ups.c.always({ content: "the synthesis" })
    const tools = [
      {
        type: "function",
        function: { name: "lookup", description: "Look up", parameters: { type: "object", properties: { q: { type: "string" } } } }
      }
    ]
    const res = await chat("council", {}, { tools })
    expect(res.status).toBe(200)
    expect(answeredBy(res)).toBe("the synthesis")
    for (const panel of [ups.a, ups.b]) {
      expect(panel.requests).toHaveLength(1)
      expect(panel.requests[0]!.body.tools).toBeUndefined()
      expect(panel.requests[0]!.body.stream).toBeFalsy()
    }
    const judged = ups.c.requests[0]!.body
    expect(judged.tools).toHaveLength(1)
    const system = judged.messages
      .filter((m: any) => m.role === "system")
      .map((m: any) => (typeof m.content === "string" ? m.content : m.content.map((p: any) => p.text).join("")))
      .join("\n")
    expect(system).toContain("answer from a")
    expect(system).toContain("answer from b")
    expect(system).toMatch(/<source 1>/)
    expect(system).not.toContain("up-a")
  })

  it("keeps the client's stream flag for the judge", async () => {
    await createCombo({
      name: "council",
      strategy: "fusion",
      targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }],
      config: { judgeModel: "up-c/m1" }
    })
    ups.c.always({ content: "streamed synthesis", chunks: 3 })
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "x", maxRetries: 0 })
    const stream = await client.chat.completions.create({ model: "council", messages: [{ role: "user", content: "hi" }], stream: true })
    let text = ""
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ""
    expect(text).toBe("streamed synthesis")
    expect(ups.c.requests[0]!.body.stream).toBe(true)
  })

  it("returns the one survivor directly, and answers 503 when no panel member answers", async () => {
    await createCombo({
      name: "council",
      strategy: "fusion",
      targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }],
      config: { judgeModel: "up-c/m1" }
    })
    ups.b.always({ status: 500 })
    const one = await chat("council")
    expect(answeredBy(one)).toBe("answer from a")
    expect(ups.c.requests).toHaveLength(0)
    // up-b's 500 put it in cooldown: forget it, so that both panel members are asked again.
    await gw.resetResilience()
    ups.a.always({ status: 500 })
    const none = await chat("council")
    expect(none.status).toBe(503)
    expect(none.body.error.message).toContain("no answer")
  })

  it("waits for stragglers only for the grace period once minPanel answers are in", async () => {
    await createCombo({
      name: "council",
      strategy: "fusion",
      targets: [{ model: "up-a/m1" }, { model: "up-b/m1" }, { model: "up-c/m2" }],
      config: { judgeModel: "up-a/m2", fusionTuning: { minPanel: 2, stragglerGraceMs: 100, panelHardTimeoutMs: 5000 } }
    })
    ups.c.always({ content: "straggler answer", delayMs: 3000 })
    const started = Date.now()
    const res = await chat("council")
    expect(res.status).toBe(200)
    expect(Date.now() - started).toBeLessThan(2500)
    const judged = ups.a.requests.find((r) => r.body.model === "m2")!.body
    const system = JSON.stringify(judged.messages)
    expect(system).not.toContain("straggler answer")
  })

  it("a single-model panel answers directly with the client's request", async () => {
    await createCombo({ name: "solo", strategy: "fusion", targets: [{ model: "up-b/m1" }] })
    const res = await chat("solo")
    expect(answeredBy(res)).toBe("answer from b")
    expect(ups.b.requests).toHaveLength(1)
  })
})

describe("quota share", () => {
  it("qtSd/<group>/<provider>/<model> spreads requests over the provider's connections", async () => {
    // Two more connections of one provider (an account pool), both on upstream a.
    for (const name of ["pool-1", "pool-2"]) {
      const res = await call(`${gw.url}/api/providers`, {
        body: { provider: "openai-compatible", name, baseUrl: ups.a.baseUrl("openai-chat"), defaultModel: "m1" },
        headers: admin
      })
      expect([201, 409]).toContain(res.status)
    }
    // openai-compatible is the provider of every connection: the pool is all five; count per connection via the usage rows.
    const ids: Array<string> = []
    for (let i = 0; i < 10; i++) {
      const res = await chat("qtSd/team/openai-compatible/m1")
      expect(res.status).toBe(200)
      ids.push(res.headers.get("x-gateway-request-id")!)
    }
    await gw.usageWritten()
    const rows = queryDb(
      gw.dataDir,
      `SELECT connection_id FROM usage WHERE request_id IN (${ids.map(() => "?").join(",")})`,
      ids
    ) as Array<{ connection_id: string }>
    const counts = new Map<string, number>()
    for (const r of rows) counts.set(r.connection_id, (counts.get(r.connection_id) ?? 0) + 1)
    expect(counts.size).toBe(5)
    expect([...counts.values()].every((n) => n === 2)).toBe(true)
    for (const name of ["pool-1", "pool-2"]) await call(`${gw.url}/api/providers/${name}`, { method: "DELETE", headers: admin })
  })
})
