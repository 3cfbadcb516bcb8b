import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { FakeUpstream } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"

/**
 * Evals (docs/guardrails.md, "Evals"): eval sets with every grader, run against two models
 * through the gateway (the fake upstream answers per model), scored per model and case with
 * latency and cost; the usage rows show the calls went through the inference path. The CLI is
 * spawned against the same gateway (`npm run build` first).
 */
const ADMIN = "gwk_evals_admin_key_0123456789abcdefgh"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let upstream: FakeUpstream
let adminKeyId: string

const SET = {
  name: "capitals",
  cases: [
    { id: "exact", prompt: "Capital of France? One word.", grader: { type: "exact", expected: "paris", caseSensitive: false } },
    { id: "contains", prompt: "Say something about Paris.", grader: { type: "contains", expected: "paris" } },
    { id: "regex", prompt: "Give a year.", grader: { type: "regex", pattern: "^\\d{4}$" } },
    {
      id: "json",
      prompt: "JSON please",
      grader: { type: "json-schema", schema: { type: "object", required: ["city"], properties: { city: { type: "string" } } } }
    },
    { id: "judge", prompt: "Explain gravity.", grader: { type: "judge", model: "up/judge", rubric: "Mentions mass." } }
  ]
}

/** The good model answers each case right, the bad one wrong; the judge scores 8. */
const answer = (model: string, prompt: string): string => {
  if (model === "judge") return "Score: 8"
  const good = model === "good"
  if (prompt.startsWith("Capital")) return good ? "Paris" : "Lyon"
  if (prompt.startsWith("Say")) return good ? "Paris is big" : "It is big"
  if (prompt.startsWith("Give")) return good ? "1999" : "the year 1999"
  if (prompt.startsWith("JSON")) return good ? '{"city":"Paris"}' : '{"town":"Paris"}'
  return "Because of mass."
}

const waitForRun = async (evalId: string, runId: string) => {
  for (const until = Date.now() + 15_000; Date.now() < until; ) {
    const r = await call(`${gw.url}/api/evals/${evalId}/runs/${runId}`, { headers: admin })
    if (r.body.status === "completed" || r.body.status === "failed") return r.body
    await new Promise((res) => setTimeout(res, 50))
  }
  throw new Error("the run did not finish")
}

beforeAll(async () => {
  upstream = await FakeUpstream.start()
  upstream.script((req) => {
    const messages = req.body?.messages ?? []
    const last = messages[messages.length - 1]?.content ?? ""
    return { content: answer(req.body.model, typeof last === "string" ? last : ""), usage: { input: 100, output: 10 } }
  })
  gw = await startGateway()
  adminKeyId = (await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))).id
  expect(
    (
      await call(`${gw.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "up", baseUrl: upstream.baseUrl("openai-chat"), defaultModel: "good" },
        headers: admin
      })
    ).status
  ).toBe(201)
  expect(
    (
      await call(`${gw.url}/api/pricing`, {
        method: "PUT",
        body: { provider: "openai-compatible", model: "good", input: 1, output: 2 },
        headers: admin
      })
    ).status
  ).toBe(200)
})

afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

describe("/api/evals", () => {
  it("refuses malformed sets with a 400 naming the field", async () => {
    const noCases = await call(`${gw.url}/api/evals`, { body: { name: "x", cases: [] }, headers: admin })
    expect(noCases.status).toBe(400)
    expect(noCases.body.message).toContain("cases")
    const badRegex = await call(`${gw.url}/api/evals`, {
      body: { name: "x", cases: [{ prompt: "p", grader: { type: "regex", pattern: "(" } }] },
      headers: admin
    })
    expect(badRegex.status).toBe(400)
    expect(badRegex.body.message).toContain("cases[0].grader.pattern")
    const badGrader = await call(`${gw.url}/api/evals`, {
      body: { name: "x", cases: [{ prompt: "p", grader: { type: "vibes" } }] },
      headers: admin
    })
    expect(badGrader.status).toBe(400)
    expect(badGrader.body.message).toContain("grader")
    expect((await call(`${gw.url}/api/evals/nope`, { headers: admin })).status).toBe(404)
  })

  it("runs a set against two models through the gateway: score, latency and cost per model and per case", async () => {
    const created = await call(`${gw.url}/api/evals`, { body: SET, headers: admin })
    expect(created.status).toBe(201)
    const id = created.body.id
    expect((await call(`${gw.url}/api/evals`, { headers: admin })).body.evals.map((e: any) => e.id)).toContain(id)
    const noModels = await call(`${gw.url}/api/evals/${id}/runs`, { body: { models: [] }, headers: admin })
    expect(noModels.status).toBe(400)
    expect(noModels.body.message).toContain("models")

    const started = await call(`${gw.url}/api/evals/${id}/runs`, { body: { models: ["up/good", "up/bad"] }, headers: admin })
    expect(started.status).toBe(202)
    expect(started.body.status).toBe("queued")
    const run = await waitForRun(id, started.body.id)
    expect(run.status).toBe("completed")
    const [good, bad] = run.results
    expect(good).toMatchObject({ model: "up/good", passed: 5, total: 5 })
    expect(good.score).toBeCloseTo((1 + 1 + 1 + 1 + 0.8) / 5)
    expect(bad).toMatchObject({ model: "up/bad", passed: 1, total: 5 })
    expect(bad.cases.find((c: any) => c.caseId === "json").reason).toContain("missing property 'city'")
    expect(bad.cases.find((c: any) => c.caseId === "regex").reason).toContain("does not match")
    expect(good.cases.find((c: any) => c.caseId === "judge")).toMatchObject({ score: 0.8, reason: "judge up/judge: 8/10" })
    for (const c of good.cases) expect(c.latencyMs).toBeGreaterThanOrEqual(0)
    // Priced model: 100 input tokens at $1/M and 10 output at $2/M per call.
    expect(good.cases.find((c: any) => c.caseId === "exact").costUsd).toBeCloseTo(0.00012, 8)
    expect(good.costUsd).toBeGreaterThan(0)
    expect(bad.costUsd).toBe(0)

    // Through the gateway: the upstream saw the models, and each call has a usage row for the admin key.
    expect(new Set(upstream.requests.map((r) => r.body.model))).toEqual(new Set(["good", "bad", "judge"]))
    const detail = await call(`${gw.url}/api/evals/${id}`, { headers: admin })
    expect(detail.body.runs.map((r: any) => r.id)).toEqual([started.body.id])
    for (const until = Date.now() + 5000; Date.now() < until; ) {
      const logs = await call(`${gw.url}/api/usage/logs?apiKeyId=${adminKeyId}&limit=100`, { headers: admin })
      if (logs.status === 200 && JSON.stringify(logs.body).split('"chat.completions"').length - 1 >= 12) return
      await new Promise((res) => setTimeout(res, 50))
    }
    throw new Error("the eval's calls have no usage rows")
  })
})

describe("gateway eval (CLI)", () => {
  it("creates a set from a JSON file, runs it against models, shows the results", async () => {
    const env = { GATEWAY_API_KEY: ADMIN, DATA_DIR: tempDir() }
    const file = path.join(tempDir(), "set.json")
    fs.writeFileSync(file, JSON.stringify({ ...SET, name: "cli-set" }))
    const created = await runCli(["eval", "create", file, "--url", gw.url, "--json"], env)
    expect(created.code, created.stderr).toBe(0)
    const id = JSON.parse(created.stdout).id
    const listed = await runCli(["eval", "list", "--url", gw.url], env)
    expect(listed.stdout).toContain("cli-set")
    const ran = await runCli(["eval", "run", id, "--models", "up/good,up/bad", "--url", gw.url], env)
    expect(ran.code, ran.stderr).toBe(0)
    expect(ran.stdout).toMatch(/completed/)
    expect(ran.stdout).toMatch(/up\/good\s+0\.960\s+5\/5/)
    expect(ran.stdout).toMatch(/up\/bad\s+0\.160\s+1\/5/)
    const shown = await runCli(["eval", "show", id, "--url", gw.url], env)
    expect(shown.stdout).toContain("completed")
    const bad = await runCli(["eval", "create", path.join(tempDir(), "missing.json"), "--url", gw.url], env)
    expect(bad.code).not.toBe(0)
  })
})
