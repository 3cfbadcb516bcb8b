import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { runCli } from "./support/cli.js"
import { FakeUpstream, type Recorded, type Reply } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Shadow traffic (docs/shadow.md): a combo's `config.shadow` sends a sample of its requests to
 * a candidate model too, after the primary's answer has gone out and without touching it; the
 * pairs are stored and compared, and `GET /api/shadow/report` (and `gateway shadow report`)
 * says how the candidate does on the team's own traffic.
 */
const ADMIN = "gwk_shadow_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream
/** What the candidate (the Anthropic connection) answers, per request text. */
let candidate: (r: Recorded) => Reply

const userText = (r: Recorded): string => JSON.stringify(r.body?.messages ?? r.body?.contents ?? "")

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai-compatible", name: "prim", baseUrl: up.baseUrl("openai-chat"), models: ["m1", "judge-1"] })
  await add({ provider: "anthropic", name: "cand", apiKey: "sk-ant-upstream", baseUrl: up.baseUrl("anthropic"), models: ["claude-x"] })
  // The first shadow combo registers the sampling within a second (docs/shadow.md).
  await newTeam()
  await new Promise((res) => setTimeout(res, 1500))
  up.script((r) => {
    if (r.family === "anthropic") return candidate(r)
    // The judge: it prefers the answer that says 4.
    if (r.body?.model === "judge-1") {
      const prompt = String(r.body.messages[0].content)
      const a = prompt.slice(prompt.indexOf("Answer A:"), prompt.indexOf("Answer B:")).includes("is 4")
      const b = prompt.slice(prompt.indexOf("Answer B:")).includes("is 4")
      return { content: a && b ? "TIE" : a ? "A" : "B" }
    }
    return { content: "The answer is 4." }
  })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

const settings = (patch: Record<string, unknown>) => call(`${gw.url}/api/settings`, { method: "PATCH", body: patch, headers: admin })

/** This test's combo: the primary, shadowed by the candidate on every request. */
let team = ""
let teams = 0
const newTeam = async () => {
  team = `team-${++teams}`
  const combo = await call(`${gw.url}/api/combos`, {
    headers: admin,
    body: {
      name: team,
      strategy: "priority",
      targets: [{ model: "prim/m1" }],
      config: { shadow: [{ model: "cand/claude-x", sampleRate: 1 }] }
    }
  })
  expect(combo.status, combo.text).toBe(201)
}

const reportNow = async () => {
  const r = await call(`${gw.url}/api/shadow/report?combo=${team}`, { headers: admin })
  expect(r.status, r.text).toBe(200)
  return r.body
}

/** The report, once it holds `pairs` pairs (and failures) for the candidate. */
const reportWith = async (pairs: number) => {
  for (let i = 0; i < 100; i++) {
    const r = await call(`${gw.url}/api/shadow/report?combo=${team}`, { headers: admin })
    expect(r.status, r.text).toBe(200)
    const t = r.body.targets.find((x: any) => x.shadowModel === "cand/claude-x")
    if (t && t.pairs + t.failed >= pairs) return r.body
    await new Promise((res) => setTimeout(res, 100))
  }
  throw new Error("the shadow pairs did not arrive")
}

const ask = (text: string, stream = false) =>
  call(`${gw.url}/v1/chat/completions`, { body: { model: team, stream, messages: [{ role: "user", content: text }] } })

beforeEach(async () => {
  await newTeam()
  up.requests.length = 0
  candidate = (r) => ({ content: userText(r).includes("two plus two") ? "the answer is 4" : "The answer is 5." })
  expect((await settings({ shadowOptions: { budgetUsdPerDay: 1, concurrency: 4, judgeModel: null } })).status).toBe(200)
})

describe("a combo's shadow target", () => {
  it("gets the same request, translated, after the primary answered; the pairs are compared and reported", async () => {
    const questions = ["two plus two?", "two plus two, again?", "three plus one?", "what is two plus three?"]
    for (const [i, q] of questions.entries()) {
      const res = await ask(q, i % 2 === 1)
      expect(res.status, res.text).toBe(200)
      // The client's answer is the primary's, untouched.
      const text =
        i % 2 === 1
          ? res.text
              .split("\n")
              .filter((l) => l.startsWith("data: {"))
              .map((l) => JSON.parse(l.slice(6)).choices?.[0]?.delta?.content ?? "")
              .join("")
          : res.body.choices[0].message.content
      expect(text).toBe("The answer is 4.")
      if (i % 2 === 0) expect(res.headers.get("x-gateway-model")).toBe("m1")
    }
    const report = await reportWith(questions.length)
    const t = report.targets[0]
    expect(t.pairs).toBe(4)
    expect(t.failed).toBe(0)
    // "The answer is 4." against "the answer is 4": equal once normalized, not exactly.
    expect(t.exactAgreement).toBe(0)
    expect(t.normalizedAgreement).toBe(0.5)
    expect(t.toolAgreement).toBeNull()
    expect(t.latencyDeltaMs.n).toBe(4)
    expect(t.latencyDeltaMs.low).toBeLessThanOrEqual(t.latencyDeltaMs.mean)
    expect(t.latencyDeltaMs.high).toBeGreaterThanOrEqual(t.latencyDeltaMs.mean)
    expect(t.worst.map((w: any) => w.shadow)).toEqual(["The answer is 5.", "The answer is 5."])
    expect(t.worst[0].primary).toBe("The answer is 4.")
    // The candidate got each question in its own format, with the client's messages.
    const atCandidate = up.requestsOf("anthropic").map((r) => userText(r))
    expect(atCandidate).toHaveLength(4)
    for (const q of questions) expect(atCandidate.some((m) => m.includes(q))).toBe(true)
    // A shadow call is a request of its own (priced, counted), never shadowed itself.
    const rows = queryDb(gw.dataDir, "SELECT model FROM usage WHERE request_id LIKE ? ESCAPE '!'", "%!_shadow!_%")
    expect(rows.length).toBeGreaterThanOrEqual(questions.length)
    expect(new Set(rows.map((r: any) => r.model))).toEqual(new Set(["claude-x"]))
  })

  it("never delays the primary: a slow candidate's pair arrives after the client has its answer", async () => {
    candidate = () => ({ content: "slow", delayMs: 1500 })
    const started = Date.now()
    const res = await ask("quick?")
    expect(res.status).toBe(200)
    expect(Date.now() - started).toBeLessThan(1000)
    expect((await reportNow()).targets).toEqual([])
    const report = await reportWith(1)
    expect(report.targets[0].latencyDeltaMs.mean).toBeGreaterThan(1000)
  })

  it("a judge model, when set, gives its preference through the gateway (order drawn at random, counted from the candidate's side)", async () => {
    expect((await settings({ shadowOptions: { judgeModel: "prim/judge-1" } })).status).toBe(200)
    for (const q of ["two plus two?", "three plus one?", "one plus three?"]) expect((await ask(q)).status).toBe(200)
    const report = await reportWith(3)
    const t = report.targets[0]
    for (let i = 0; i < 50 && t.judge.judged < 3; i++) await new Promise((res) => setTimeout(res, 50))
    const judged = (await reportNow()).targets[0].judge
    // The candidate says 4 only for "two plus two" (a tie: both say 4); elsewhere the judge picks the primary's 4, wherever it is shown.
    expect(judged.judged).toBe(3)
    expect(judged).toEqual({ judged: 3, wins: 0, ties: 1, losses: 2 })
    const judgeRows = queryDb(gw.dataDir, "SELECT model FROM usage WHERE request_id LIKE ? ESCAPE '!'", "%!_judge!_%")
    expect(judgeRows.length).toBeGreaterThanOrEqual(3)
  })

  it("stops at its own budget for the day, and skips what finds no free slot", async () => {
    expect((await settings({ shadowOptions: { budgetUsdPerDay: 0 } })).status).toBe(200)
    expect((await ask("two plus two?")).status).toBe(200)
    await new Promise((res) => setTimeout(res, 300))
    expect(up.requestsOf("anthropic")).toHaveLength(0)
    const report = await reportNow()
    expect(report.skipped.budget).toBeGreaterThanOrEqual(1)

    expect((await settings({ shadowOptions: { budgetUsdPerDay: 1, concurrency: 1 } })).status).toBe(200)
    candidate = () => ({ content: "slow", delayMs: 800 })
    const answers = await Promise.all([ask("a?"), ask("b?"), ask("c?")])
    for (const a of answers) expect(a.status).toBe(200)
    await reportWith(1)
    const after = await reportNow()
    expect(after.skipped.concurrency).toBeGreaterThanOrEqual(1)
  })

  it("gateway shadow report prints the comparison; a bad --days is refused", async () => {
    expect((await ask("two plus two?")).status).toBe(200)
    await reportWith(1)
    const env = { GATEWAY_API_KEY: ADMIN, DATA_DIR: tempDir() }
    const out = await runCli(["shadow", "report", team, "--url", gw.url], env)
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout).toContain("cand/claude-x")
    expect(out.stdout).toMatch(/NORMALIZED/)
    const json = await runCli(["shadow", "report", team, "--url", gw.url, "--json"], env)
    expect(JSON.parse(json.stdout).targets[0].pairs).toBe(1)
    const bad = await runCli(["shadow", "report", team, "--days", "0", "--url", gw.url], env)
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("--days")
  })

  it("a key's shadow field: its requests are shadowed (scope key:<id>) where no combo says otherwise; null removes it", async () => {
    const created = await call(`${gw.url}/api/keys`, {
      body: { name: "team-a", shadow: [{ model: "cand/claude-x", sampleRate: 1 }] },
      headers: admin
    })
    expect(created.status, created.text).toBe(201)
    expect(created.body.shadow).toEqual([{ model: "cand/claude-x", sampleRate: 1 }])
    // The sampling is registered within a second of the first shadowed key.
    await new Promise((res) => setTimeout(res, 1500))
    const asKey = { authorization: `Bearer ${created.body.secret}` }
    for (const q of ["two plus two?", "three plus one?"]) {
      const res = await call(`${gw.url}/v1/chat/completions`, {
        body: { model: "prim/m1", messages: [{ role: "user", content: q }] },
        headers: asKey
      })
      expect(res.status, res.text).toBe(200)
    }
    const scope = `key:${created.body.id}`
    let report: any
    for (let i = 0; i < 100; i++) {
      report = (await call(`${gw.url}/api/shadow/report?combo=${scope}`, { headers: admin })).body
      if ((report.targets[0]?.pairs ?? 0) >= 2) break
      await new Promise((res) => setTimeout(res, 100))
    }
    expect(report.targets[0]).toMatchObject({ shadowModel: "cand/claude-x", pairs: 2, normalizedAgreement: 0.5 })
    // The combo's own shadow targets come first: a combo request of this key is reported under the combo.
    expect(
      (
        await call(`${gw.url}/v1/chat/completions`, {
          body: { model: team, messages: [{ role: "user", content: "two plus two?" }] },
          headers: asKey
        })
      ).status
    ).toBe(200)
    await reportWith(1)

    const cleared = await call(`${gw.url}/api/keys/${created.body.id}`, { method: "PATCH", body: { shadow: null }, headers: admin })
    expect(cleared.status, cleared.text).toBe(200)
    expect(cleared.body.shadow).toEqual([])
    const keys = (await call(`${gw.url}/api/keys`, { headers: admin })).body.keys
    expect(keys.find((k: any) => k.id === created.body.id).shadow).toEqual([])
    const bad = await call(`${gw.url}/api/keys/${created.body.id}`, {
      method: "PATCH",
      body: { shadow: [{ model: "cand/claude-x", sampleRate: 3 }] },
      headers: admin
    })
    expect(bad.status).toBe(400)
    expect(bad.text).toContain("sampleRate must be a fraction between 0 and 1")
  })

  it("gateway keys shadow sets, shows and removes a key's shadow targets; a bad target is refused naming the flag", async () => {
    const env = { DATA_DIR: tempDir() }
    const added = await runCli(["keys", "add", "--name", "team-b", "--json"], env)
    expect(added.code, added.stderr).toBe(0)
    const set = await runCli(["keys", "shadow", "team-b", "--target", "cand/claude-x=0.25", "--target", "prim/m1=1", "--json"], env)
    expect(set.code, set.stderr).toBe(0)
    expect(JSON.parse(set.stdout).shadow).toEqual([
      { model: "cand/claude-x", sampleRate: 0.25 },
      { model: "prim/m1", sampleRate: 1 }
    ])
    const shown = await runCli(["keys", "shadow", "team-b"], env)
    expect(shown.stdout).toContain("shadow cand/claude-x (0.25), prim/m1 (1); report: gateway shadow report key:key_")
    const bad = await runCli(["keys", "shadow", "team-b", "--target", "cand/claude-x=2"], env)
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("--target: ")
    expect(bad.stderr).toContain("sampleRate must be a fraction between 0 and 1")
    const shapeless = await runCli(["keys", "shadow", "team-b", "--target", "cand/claude-x"], env)
    expect(shapeless.stderr).toContain("expected <model>=<sampleRate>")
    const removed = await runCli(["keys", "shadow", "team-b", "--none"], env)
    expect(removed.stdout).toContain("no shadow targets")
  })

  it("refuses a bad shadow field on a combo with a clear message", async () => {
    const res = await call(`${gw.url}/api/combos`, {
      headers: admin,
      body: {
        name: "bad-shadow",
        strategy: "priority",
        targets: [{ model: "prim/m1" }],
        config: { shadow: [{ model: "cand/claude-x", sampleRate: 2 }] }
      }
    })
    expect(res.status).toBe(400)
    expect(res.text).toContain("sampleRate must be a fraction between 0 and 1")
  })
})
