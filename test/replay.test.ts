import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { queryDb } from "./support/db.js"
import { FakeUpstream, type Recorded } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Replay (docs/replay.md): a recorded inspector session, usage-log requests whose bodies were
 * kept, or a JSONL file, sent again to candidate models through the gateway, compared with the
 * recorded answers (or the first model's), within a concurrency and a budget, reported as
 * shadow traffic is.
 */
const ADMIN = "gwk_replay_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }
const T = "/api/tools/traffic-inspector"

let gw: TestGateway
let up: FakeUpstream

const userText = (r: Recorded): string => JSON.stringify(r.body?.messages ?? r.body?.contents ?? r.body?.input ?? "")

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai-compatible", name: "prim", baseUrl: up.baseUrl("openai-chat"), models: ["m1", "m2"] })
  await add({ provider: "anthropic", name: "cand", apiKey: "sk-ant-upstream", baseUrl: up.baseUrl("anthropic"), models: ["claude-x"] })
  up.script((r) => {
    // The candidate agrees on "two plus two" only; m2 always says 5.
    if (r.family === "anthropic") return { content: userText(r).includes("two plus two") ? "the answer is 4" : "The answer is 5." }
    if (r.body?.model === "m2") return { content: "The answer is 5." }
    return { content: "The answer is 4." }
  })
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

/** The job once it is no longer running. */
const finished = async (id: string) => {
  for (let i = 0; i < 200; i++) {
    const r = await call(`${gw.url}/api/replay/${id}`, { headers: admin })
    expect(r.status, r.text).toBe(200)
    if (r.body.state !== "running") return r.body
    await new Promise((res) => setTimeout(res, 50))
  }
  throw new Error(`replay ${id} did not finish`)
}

const replay = (body: unknown) => call(`${gw.url}/api/replay`, { body, headers: admin })

/** A recorded session: two chat requests (one streamed), one Messages request, and a model listing (not an LLM call). */
const recordSession = async () => {
  const started = await call(`${gw.url}${T}/sessions`, { body: { name: "team traffic" }, headers: admin })
  expect(started.status, started.text).toBe(201)
  const ids: Array<string> = []
  const chat = await call(`${gw.url}/v1/chat/completions`, {
    body: { model: "prim/m1", messages: [{ role: "user", content: "two plus two?" }] }
  })
  expect(chat.status, chat.text).toBe(200)
  ids.push(chat.headers.get("x-gateway-request-id")!)
  const streamed = await call(`${gw.url}/v1/chat/completions`, {
    body: { model: "prim/m1", stream: true, messages: [{ role: "user", content: "three plus one?" }] }
  })
  expect(streamed.status).toBe(200)
  ids.push(streamed.headers.get("x-gateway-request-id")!)
  const messages = await call(`${gw.url}/v1/messages`, {
    body: { model: "prim/m1", max_tokens: 64, messages: [{ role: "user", content: "two plus two, in words?" }] }
  })
  expect(messages.status, messages.text).toBe(200)
  ids.push(messages.headers.get("x-gateway-request-id")!)
  expect((await call(`${gw.url}/v1/models`, { method: "GET" })).status).toBe(200)
  // The entries are complete once the answers ended; the stop saves them.
  await new Promise((res) => setTimeout(res, 100))
  const stopped = await call(`${gw.url}${T}/sessions/${started.body.id}`, { method: "PATCH", body: { action: "stop" }, headers: admin })
  expect(stopped.status, stopped.text).toBe(200)
  expect(stopped.body.count).toBe(4)
  return { sessionId: started.body.id as string, requestIds: ids }
}

describe("replay", () => {
  it("a recorded session against a candidate: each LLM request sent again, translated, compared with the recorded answer, reported", async () => {
    const { sessionId } = await recordSession()
    const before = up.requestsOf("anthropic").length
    const started = await replay({ source: { sessionId }, models: ["cand/claude-x"], concurrency: 2, budgetUsd: 1 })
    expect(started.status, started.text).toBe(202)
    expect(started.body).toMatchObject({
      state: "running",
      source: `session:${sessionId}`,
      models: ["cand/claude-x"],
      requests: 4,
      replayable: 3,
      baseline: "recorded"
    })
    expect(started.body.id).toMatch(/^rpl_[0-9a-f]{12}$/)
    const job = await finished(started.body.id)
    expect(job).toMatchObject({ state: "done", calls: { total: 3, done: 3, failed: 0 }, skipped: { not_replayable: 1 } })
    expect(job.finishedAt).not.toBeNull()
    const t = job.report.targets[0]
    expect(job.report.scope).toBe(`replay:${job.id}`)
    expect(t).toMatchObject({ shadowModel: "cand/claude-x", pairs: 3, failed: 0, exactAgreement: 0 })
    // "The answer is 4." and "the answer is 4" agree once normalized (the two "two plus two" questions).
    expect(t.normalizedAgreement).toBeCloseTo(2 / 3)
    expect(t.worst.map((w: any) => w.shadow)).toEqual(["The answer is 5."])
    expect(t.worst[0].primary).toBe("The answer is 4.")
    expect(t.latencyDeltaMs.n).toBe(3)
    // The candidate got each request in its own format, with the recorded messages.
    const atCandidate = up.requestsOf("anthropic").slice(before).map(userText)
    expect(atCandidate).toHaveLength(3)
    for (const q of ["two plus two?", "three plus one?", "two plus two, in words?"])
      expect(atCandidate.some((m) => m.includes(q))).toBe(true)
    // Each replay call is a request of its own: routed, priced, counted.
    let rows: Array<any> = []
    for (let i = 0; i < 50 && rows.length < 3; i++) {
      rows = queryDb(gw.dataDir, "SELECT model, status FROM usage WHERE request_id LIKE ?", `replay_${job.id}_%`)
      if (rows.length < 3) await new Promise((res) => setTimeout(res, 50))
    }
    expect(rows).toHaveLength(3)
    expect(new Set(rows.map((r: any) => r.model))).toEqual(new Set(["claude-x"]))
  })

  it("usage-log requests whose bodies were kept; an unknown id and a request whose body was not kept are left out, saying why", async () => {
    const { requestIds } = await recordSession()
    // Nobody looks and nothing records: this request's body is not kept.
    const unkept = await call(`${gw.url}/v1/chat/completions`, {
      body: { model: "prim/m1", messages: [{ role: "user", content: "unseen?" }] }
    })
    expect(unkept.status).toBe(200)
    const started = await replay({
      source: { usageIds: [...requestIds, unkept.headers.get("x-gateway-request-id"), "req_does_not_exist"] },
      models: ["prim/m2"]
    })
    expect(started.status, started.text).toBe(202)
    const job = await finished(started.body.id)
    expect(job).toMatchObject({
      requests: 5,
      replayable: 3,
      calls: { total: 3, done: 3, failed: 0 },
      skipped: { body_not_kept: 1, not_found: 1 }
    })
    expect(job.notes.join("\n")).toContain("req_does_not_exist")
    expect(job.report.targets[0]).toMatchObject({ shadowModel: "prim/m2", pairs: 3, normalizedAgreement: 0 })
  })

  it("a JSONL file: a session's export, or request lines without answers (the first model answers as the baseline); a bad line is refused with its number", async () => {
    const { sessionId } = await recordSession()
    const exported = await call(`${gw.url}${T}/sessions/${sessionId}/export?format=jsonl`, { method: "GET", headers: admin })
    expect(exported.status).toBe(200)
    const fromExport = await replay({ source: { jsonl: exported.text }, models: ["cand/claude-x"] })
    expect(fromExport.status, fromExport.text).toBe(202)
    expect(await finished(fromExport.body.id)).toMatchObject({
      source: "jsonl:4",
      replayable: 3,
      baseline: "recorded",
      calls: { done: 3, failed: 0 }
    })

    const lines = [
      JSON.stringify({ model: "x", messages: [{ role: "user", content: "two plus two?" }] }),
      "",
      JSON.stringify({
        path: "/v1/messages",
        body: { model: "x", max_tokens: 32, messages: [{ role: "user", content: "and three plus one?" }] }
      })
    ].join("\n")
    const bare = await replay({ source: { jsonl: lines }, models: ["prim/m1", "prim/m2", "cand/claude-x"] })
    expect(bare.status, bare.text).toBe(202)
    const job = await finished(bare.body.id)
    expect(job).toMatchObject({ baseline: "first-model", replayable: 2, calls: { total: 4, done: 4, failed: 0 } })
    const byModel = Object.fromEntries(job.report.targets.map((t: any) => [t.shadowModel, t]))
    expect(Object.keys(byModel).sort()).toEqual(["cand/claude-x", "prim/m2"])
    expect(byModel["prim/m2"].normalizedAgreement).toBe(0)
    expect(byModel["cand/claude-x"].normalizedAgreement).toBe(0.5)

    const bad = await replay({ source: { jsonl: `${lines}\n{not json` }, models: ["prim/m1", "prim/m2"] })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toContain("source.jsonl line 4 is not JSON")
    const oneModel = await replay({ source: { jsonl: lines }, models: ["prim/m2"] })
    expect(oneModel.status).toBe(400)
    expect(oneModel.body.message).toContain("name at least two models")
  })

  it("stops at its budget: what is left is skipped, nothing is sent", async () => {
    const { sessionId } = await recordSession()
    const before = up.requests.length
    const started = await replay({ source: { sessionId }, models: ["cand/claude-x"], budgetUsd: 0 })
    expect(started.status).toBe(202)
    const job = await finished(started.body.id)
    expect(job).toMatchObject({ calls: { total: 3, done: 0 }, skipped: { budget: 3 }, spentUsd: 0 })
    expect(up.requests.length).toBe(before)
  })

  it("refuses what it cannot run, with a clear 4xx", async () => {
    const cases: Array<[unknown, number, string]> = [
      [{ source: { sessionId: "ses_a", jsonl: "{}" }, models: ["m"] }, 400, "exactly one of sessionId, usageIds or jsonl"],
      [{ source: {}, models: ["m"] }, 400, "exactly one of sessionId, usageIds or jsonl"],
      [{ source: { sessionId: "ses_a" }, models: [] }, 400, "models must name at least one candidate model"],
      [{ source: { sessionId: "ses_a" }, models: ["m"], concurrency: 0 }, 400, "concurrency must be an integer between 1 and 16"],
      [{ source: { sessionId: "ses_a" }, models: ["m"], budgetUsd: -1 }, 400, "budgetUsd must be between 0 and 100000"],
      [{ source: { sessionId: "ses_a" }, models: ["m"], extra: 1 }, 400, "extra"],
      [{ source: { sessionId: "ses_missing" }, models: ["m"] }, 404, "no inspector session ses_missing"]
    ]
    for (const [body, status, message] of cases) {
      const res = await replay(body)
      expect(res.status, JSON.stringify(body)).toBe(status)
      expect(res.body.message, JSON.stringify(body)).toContain(message)
    }
    const missing = await call(`${gw.url}/api/replay/rpl_000000000000`, { headers: admin })
    expect(missing.status).toBe(404)
    expect(missing.body.message).toContain("no replay rpl_000000000000")
    expect((await call(`${gw.url}/api/replay/rpl_000000000000`)).status).toBe(401)
  })

  it("gateway replay --session runs it and prints the report; --jsonl reads a file; a missing source is refused", async () => {
    const { sessionId } = await recordSession()
    const env = { GATEWAY_API_KEY: ADMIN, DATA_DIR: tempDir() }
    const out = await runCli(["replay", "--session", sessionId, "--model", "cand/claude-x", "--url", gw.url], env)
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout).toContain("replay report for rpl_")
    expect(out.stdout).toContain("cand/claude-x")
    expect(out.stdout).toContain("compared with: the recorded answers")
    expect(out.stderr).toMatch(/3\/3 calls/)

    const dir = tempDir()
    const file = path.join(dir, "requests.jsonl")
    fs.writeFileSync(file, `${JSON.stringify({ messages: [{ role: "user", content: "two plus two?" }] })}\n`)
    const json = await runCli(["replay", "--jsonl", file, "--model", "prim/m1", "--model", "prim/m2", "--json", "--url", gw.url], env)
    expect(json.code, json.stderr).toBe(0)
    const job = JSON.parse(json.stdout)
    expect(job).toMatchObject({ state: "done", baseline: "first-model", calls: { total: 1, done: 1 } })
    expect(job.report.targets[0].shadowModel).toBe("prim/m2")

    const none = await runCli(["replay", "--model", "m", "--url", gw.url], env)
    expect(none.code).not.toBe(0)
    expect(none.stderr).toContain("exactly one source")
  })
})
