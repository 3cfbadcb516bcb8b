import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { AutoEngine } from "../src/services/routing/AutoEngine.js"
import { eloToFitness, parseLeaderboard } from "../src/services/routing/auto/leaderboard.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * LEADERBOARD_ELO_SYNC_ENABLED (docs/feature-flags.md): a fake leaderboard on 127.0.0.1 raises model B
 * (built-in fitness low) far above model A (built-in high); with the sync on, `auto` moves to B; with
 * the flag off, `auto` stays on A and the leaderboard is never fetched.
 */
const ADMIN = "gwk_leaderboard_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const MODEL_A = "claude-3-opus" // built-in chat fitness 0.9
const MODEL_B = "llama-3-8b" // built-in chat fitness 0.66

const LEADERBOARD = {
  models: [
    { model: MODEL_B, elo: 1500 },
    { model: `openai-compatible/${MODEL_A}`, elo: 1000 },
    { model: MODEL_A, elo: 1000 },
    { elo: 2000 },
    { model: "x", elo: "high" }
  ]
}

const fetched: Array<string> = []
let server: http.Server
let boardUrl = ""
const ups: Record<"a" | "b", FakeUpstream> = {} as never
const gateways: Array<TestGateway> = []

const start = async (tag: string, env: Record<string, string>) => {
  const gw = await startGateway({
    env: { GATEWAY_LEADERBOARD_URL: `${boardUrl}?gw=${tag}`, GATEWAY_LEADERBOARD_SYNC_INTERVAL_SECONDS: "0.2", ...env }
  })
  gateways.push(gw)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const [name, model] of [
    ["a", MODEL_A],
    ["b", MODEL_B]
  ] as const) {
    const res = await call(`${gw.url}/api/providers`, {
      body: {
        provider: "openai-compatible",
        name: `up-${name}`,
        baseUrl: ups[name].baseUrl("openai-chat"),
        defaultModel: model,
        models: [model]
      },
      headers: admin
    })
    expect(res.status).toBe(201)
  }
  const combo = await call(`${gw.url}/api/combos`, {
    body: {
      name: BY_FITNESS,
      strategy: "auto",
      config: { routerStrategy: "rules", explorationRate: 0, auto: { weights: { taskFit: 1 } } }
    },
    headers: admin
  })
  expect(combo.status, JSON.stringify(combo.body)).toBe(201)
  return gw
}
// An auto combo that scores on task fit alone and never explores: what decides is the fitness
// table (built-in or synced), not latency noise or the 5% random exploration of bare `auto`.
const BY_FITNESS = "by-fitness"
const chat = (gw: TestGateway, model: string) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model, messages: [{ role: "user", content: "hi" }] } })
const answeredBy = (res: { body: any }) => res.body.choices?.[0]?.message?.content as string | undefined
const answersOf = async (gw: TestGateway) => {
  const out = new Set<string | undefined>()
  for (let i = 0; i < 3; i++) {
    const res = await chat(gw, BY_FITNESS)
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    out.add(answeredBy(res))
  }
  return [...out]
}
const snapshotSize = (gw: TestGateway) => gw.run(Effect.map(AutoEngine, (e) => e.leaderboard.size))

beforeAll(async () => {
  server = http.createServer((req, res) => {
    fetched.push(req.url ?? "")
    res.writeHead(200, { "content-type": "application/json" })
    res.end(JSON.stringify(LEADERBOARD))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  boardUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/leaderboard.json`
  for (const name of ["a", "b"] as const) {
    ups[name] = await FakeUpstream.start()
    ups[name].always({ content: `answer from ${name}` })
  }
})
afterAll(async () => {
  for (const gw of gateways) await gw.close()
  for (const up of Object.values(ups)) await up?.close()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

describe("parseLeaderboard", () => {
  it("accepts the object and the plain-array form, ignores bad entries, normalises ELO onto 0..1", () => {
    expect(parseLeaderboard(LEADERBOARD).map((e) => e.model)).toEqual([MODEL_B, `openai-compatible/${MODEL_A}`, MODEL_A])
    expect(parseLeaderboard([{ model: "M", elo: 1200 }, null, 3])).toEqual([{ model: "m", elo: 1200 }])
    expect(parseLeaderboard({ nope: [] })).toEqual([])
    expect([eloToFitness(900), eloToFitness(1250), eloToFitness(1600)]).toEqual([0, 0.5, 1])
  })
})

describe("LEADERBOARD_ELO_SYNC_ENABLED", () => {
  it("flag off: auto keeps the built-in choice (A) and the leaderboard is never fetched; flag on: auto moves to B", async () => {
    const off = await start("off", { LEADERBOARD_ELO_SYNC_ENABLED: "false" })
    const on = await start("on", {})
    // The flag-on gateway's rounds prove time has passed for the flag-off one's rounds too.
    await until("the flag-on gateway synced twice", () => fetched.filter((u) => u.includes("gw=on")).length >= 2)
    await until("the flag-on snapshot", async () => (await snapshotSize(on)) > 0)

    expect(await answersOf(off)).toEqual(["answer from a"])
    expect(await snapshotSize(off)).toBe(0)
    expect(await answersOf(on)).toEqual(["answer from b"])
    // Bare `auto` on the same gateways answers too (its choice also weighs cost, latency and exploration).
    expect((await chat(on, "auto")).status).toBe(200)

    expect(fetched.some((u) => u.includes("gw=off"))).toBe(false)
  })

  it("no GATEWAY_LEADERBOARD_URL: the job never runs", async () => {
    const before = fetched.length
    const gw = await startGateway({ env: { GATEWAY_LEADERBOARD_SYNC_INTERVAL_SECONDS: "0.2" } })
    gateways.push(gw)
    await until("another gateway's sync round", () => fetched.length >= before + 2)
    expect(await snapshotSize(gw)).toBe(0)
    expect(gw.logs.some((l) => l.message.startsWith("leaderboard sync"))).toBe(false)
  })
})
