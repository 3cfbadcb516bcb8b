import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { runCli } from "./support/cli.js"
import { FakeUpstream, type Recorded, type Reply } from "./support/fakeUpstream.js"
import { call, startGateway, tempDir, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * The live compatibility matrix (docs/compat.md): the recorded requests of the supported clients
 * (SDKs and coding agents, from test/fixtures/clients) sent through the running gateway to each
 * model against fake upstreams, each answer checked as its client needs it; costs known before
 * running and capped; a failing cell's exchange one call away.
 */
const ADMIN = "gwk_compat_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway
let up: FakeUpstream

const said = (r: Recorded) => JSON.stringify(r.body ?? {})
const PARIS = JSON.stringify({ city: "Paris", population: 2100000, landmarks: ["Eiffel Tower", "Louvre", "Notre-Dame"] })

beforeAll(async () => {
  up = await FakeUpstream.start()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  for (const body of [
    { provider: "openai-compatible", name: "good", baseUrl: up.baseUrl("openai-chat"), models: ["m1", "no-tools"] },
    { provider: "anthropic", name: "cand", apiKey: "sk-ant-upstream", baseUrl: up.baseUrl("anthropic"), models: ["claude-x"] }
  ]) {
    const res = await call(`${gw.url}/api/providers`, { body, headers: admin })
    expect(res.status, res.text).toBe(201)
  }
  // m1 and the candidate do what each request asks; no-tools refuses any request with tools, as such models do.
  up.script((r): Reply => {
    const text = said(r)
    if (r.body?.model === "no-tools" && Array.isArray(r.body?.tools) && r.body.tools.length > 0)
      return { status: 400, body: { error: { message: "tools are not supported by this model", type: "invalid_request_error" } } }
    if (text.includes("USE_TOOL")) return { toolCalls: [{ name: "get_weather", arguments: JSON.stringify({ location: "Paris" }) }] }
    if (text.includes("as JSON")) return { content: PARIS }
    return { content: "Red. Hello there." }
  })
  const price = await call(`${gw.url}/api/pricing`, {
    method: "PUT",
    body: { provider: "openai-compatible", model: "m1", input: 1, output: 2 },
    headers: admin
  })
  expect(price.status, price.text).toBe(200)
})
afterAll(async () => {
  await gw?.close()
  await up?.close()
})

const cellsOf = (matrix: any, model: string) => matrix.cells.filter((c: any) => c.model === model)

/** Reads the matrix of `models` until the run `id` has ended. */
const ended = async (url: string, id: string, models: ReadonlyArray<string>) => {
  for (let i = 0; i < 300; i++) {
    const res = await call(`${url}/api/compat?models=${encodeURIComponent(models.join(","))}`, { headers: admin })
    expect(res.status, res.text).toBe(200)
    if (res.body.run?.id === id && res.body.run.state !== "running") return res.body
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`run ${id} did not end`)
}

/** Starts a run (202, in the background) and answers its matrix once it has ended. */
const runMatrix = async (body: { models: Array<string> } & Record<string, unknown>) => {
  const res = await call(`${gw.url}/api/compat/run`, { body, headers: admin })
  expect(res.status, res.text).toBe(202)
  expect(res.body.run).toMatchObject({ state: "running", finishedAt: null })
  return ended(gw.url, res.body.run.id, body.models)
}

describe("the compatibility matrix", () => {
  it("GET /api/compat: every recorded client shape against the configured models, with what running it would cost, before any run", async () => {
    const res = await call(`${gw.url}/api/compat`, { headers: admin })
    expect(res.status, res.text).toBe(200)
    const m = res.body
    expect(m.models).toEqual(["good/m1", "good/no-tools", "cand/claude-x"])
    expect(m.run).toBeNull()
    const clients = new Set(m.cases.map((c: any) => c.client))
    for (const c of [
      "OpenAI SDK (chat)",
      "OpenAI SDK (responses)",
      "Anthropic SDK",
      "Google GenAI SDK",
      "Ollama SDK",
      "Claude Code",
      "Codex",
      "Gemini CLI",
      "opencode",
      "Qwen Code",
      "Kilo"
    ])
      expect(clients.has(c), c).toBe(true)
    const capabilities = new Set(m.cases.map((c: any) => c.capability))
    expect(capabilities).toEqual(new Set(["text", "streaming", "tools", "tool-round-trip", "structured-output", "reasoning", "images"]))
    expect(m.cells).toHaveLength(m.cases.length * 3)
    expect(new Set(m.cells.map((c: any) => c.status))).toEqual(new Set(["not-run"]))
    // Priced: m1 ($1 in, $2 out per 1M tokens); the others have no price and say so.
    const claudeCode = m.cases.find((c: any) => c.id === "claude-code.tool-round-trip")
    expect(claudeCode.inputTokens).toBeGreaterThan(10_000)
    // Claude Code thinks: its budget capped at 1024 tokens, and 1024 after it.
    expect(claudeCode.maxOutputTokens).toBe(2048)
    const cell = m.cells.find((c: any) => c.case === "claude-code.tool-round-trip" && c.model === "good/m1")
    expect(cell.estimatedUsd).toBeCloseTo((claudeCode.inputTokens * 1 + 2048 * 2) / 1e6, 9)
    expect(m.estimate.perModel["good/m1"]).toBeGreaterThan(0)
    expect(m.estimate.totalUsd).toBeCloseTo(m.estimate.perModel["good/m1"], 9)
    expect(m.estimate.unpriced).toEqual(["good/no-tools", "cand/claude-x"])
    expect(m.estimate.perModel["cand/claude-x"]).toBeNull()
  })

  it("a run: each client's request through the gateway, translated, its answer checked; a model without tools fails the tool cases, the exchange one call away", async () => {
    const before = up.requests.length
    const models = ["good/m1", "good/no-tools", "cand/claude-x"]
    const res = await call(`${gw.url}/api/compat/run`, { body: { models, budgetUsd: 10 }, headers: admin })
    // Accepted: the run goes on in the gateway, its cells pending until answered.
    expect(res.status, res.text).toBe(202)
    expect(res.body.run).toMatchObject({ state: "running", finishedAt: null, total: res.body.cases.length * 3, budgetUsd: 10 })
    expect(res.body.run.done).toBeLessThan(res.body.run.total)
    expect(res.body.cells.some((c: any) => c.status === "pending")).toBe(true)
    expect(res.body.cells.every((c: any) => ["pending", "pass", "fail"].includes(c.status))).toBe(true)
    // One run at a time.
    const second = await call(`${gw.url}/api/compat/run`, { body: { models: ["good/m1"] }, headers: admin })
    expect(second.status, second.text).toBe(409)
    expect(second.body.message).toContain("a compatibility run is under way")
    const m = await ended(gw.url, res.body.run.id, models)
    const failing = (model: string) => cellsOf(m, model).filter((c: any) => c.status !== "pass")
    expect(failing("good/m1"), JSON.stringify(failing("good/m1"))).toEqual([])
    expect(failing("cand/claude-x"), JSON.stringify(failing("cand/claude-x"))).toEqual([])
    const broken = failing("good/no-tools")
    // Every case whose request carries tools: the SDKs' tool calls and the agents' round trips.
    expect(broken.map((c: any) => c.case).sort()).toEqual(
      [
        "anthropic-sdk.tools",
        "claude-code.tool-round-trip",
        "codex.tool-round-trip",
        "gemini-cli.tool-round-trip",
        "google-genai.tools",
        "kilo.tool-round-trip",
        "ollama.tools",
        "openai-sdk.chat.tools",
        "openai-sdk.responses.tools",
        "opencode.tool-round-trip",
        "qwen-code.tool-round-trip"
      ].sort()
    )
    for (const c of broken) expect(c.reason).toContain("tools are not supported by this model")
    expect(m.run).toMatchObject({
      state: "done",
      done: m.cells.length,
      total: m.cells.length,
      failed: broken.length,
      skipped: 0,
      passed: m.cells.length - broken.length,
      budgetUsd: 10
    })
    expect(Date.parse(m.run.finishedAt)).toBeGreaterThanOrEqual(Date.parse(m.run.startedAt))
    expect(m.run.spentUsd).toBeGreaterThan(0)
    // Each cell was a request of its own through the gateway, in the upstream's format.
    expect(up.requests.length - before).toBe(m.cells.length)

    // The failing exchange: the client's request as sent (the model replaced, the answer capped) and the answer.
    const cell = broken.find((c: any) => c.case === "claude-code.tool-round-trip")
    const x = await call(`${gw.url}/api/compat/exchanges/${cell.exchangeId}`, { headers: admin })
    expect(x.status, x.text).toBe(200)
    expect(x.body).toMatchObject({ case: "claude-code.tool-round-trip", model: "good/no-tools", status: "fail", answer: { status: 400 } })
    expect(x.body.request.path).toBe("/v1/messages?beta=true")
    expect(x.body.request.headers["user-agent"]).toMatch(/^claude-cli\//)
    expect(x.body.request.headers.authorization).toBeUndefined()
    expect(x.body.request.body.model).toBe("good/no-tools")
    expect(x.body.request.body.max_tokens).toBe(2048)
    expect(x.body.request.body.thinking.budget_tokens).toBe(1024)
    expect(x.body.request.body.tools.length).toBeGreaterThan(0)
    expect(x.body.answer.body).toContain("tools are not supported")

    // The matrix keeps the last run.
    const again = await call(`${gw.url}/api/compat`, { headers: admin })
    expect(again.body.run).toEqual(m.run)
    expect(cellsOf(again.body, "good/no-tools").filter((c: any) => c.status === "fail")).toHaveLength(broken.length)
  })

  it("stops at its budget: what is left is skipped, not sent", async () => {
    const before = up.requests.length
    const m = await runMatrix({ models: ["good/m1"], budgetUsd: 0.000001, concurrency: 1 })
    const cells = m.cells
    expect(cells.filter((c: any) => c.status === "pass")).toHaveLength(1)
    expect(cells.filter((c: any) => c.status === "skipped")).toHaveLength(cells.length - 1)
    expect(cells.find((c: any) => c.status === "skipped").reason).toContain("budget")
    expect(up.requests.length - before).toBe(1)
    expect(m.run.skipped).toBe(cells.length - 1)
  })

  it("a run the gateway stops in the middle reads as interrupted from the next gateway on the database, its unanswered cells not run", async () => {
    const dataDir = tempDir()
    const slowUp = await FakeUpstream.start()
    slowUp.always({ content: "slow", delayMs: 400 })
    let first: TestGateway | undefined = await startGateway({ dataDir })
    let next: TestGateway | undefined
    try {
      await first.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      const added = await call(`${first.url}/api/providers`, {
        body: { provider: "openai-compatible", name: "slow", baseUrl: slowUp.baseUrl("openai-chat"), models: ["m1"] },
        headers: admin
      })
      expect(added.status, added.text).toBe(201)
      const res = await call(`${first.url}/api/compat/run`, { body: { models: ["slow/m1"], concurrency: 1 }, headers: admin })
      expect(res.status, res.text).toBe(202)
      // Its progress is kept as it goes: a cell or two answered, then the gateway stops.
      await until(
        "a cell is answered",
        async () => ((await call(`${first!.url}/api/compat`, { headers: admin })).body.run.done >= 1 ? true : undefined),
        10_000
      )
      await first.close()
      first = undefined
      next = await startGateway({ dataDir })
      const after = await call(`${next.url}/api/compat`, { headers: admin })
      expect(after.status, after.text).toBe(200)
      expect(after.body.run).toMatchObject({ id: res.body.run.id, state: "interrupted" })
      expect(after.body.run.done).toBeGreaterThanOrEqual(1)
      expect(after.body.run.done).toBeLessThan(after.body.run.total)
      expect(after.body.cells.filter((c: any) => c.status === "pending")).toEqual([])
      expect(after.body.cells.filter((c: any) => c.status === "not-run").length).toBe(after.body.run.total - after.body.run.done)
      // And a new run may start.
      slowUp.always({ content: "quick" })
      const again = await call(`${next.url}/api/compat/run`, {
        body: { models: ["slow/m1"], cases: ["openai-sdk.chat.text"] },
        headers: admin
      })
      expect(again.status, again.text).toBe(202)
      const done = await ended(next.url, again.body.run.id, ["slow/m1"])
      expect(done.run).toMatchObject({ state: "done", passed: 1, total: 1 })
    } finally {
      await first?.close()
      await next?.close()
      await slowUp.close()
    }
  })

  it("refuses what it cannot run, with a clear 4xx", async () => {
    const cases: Array<[string, string, unknown, number, string]> = [
      ["POST", "/api/compat/run", { models: [] }, 400, "models must name at least one model"],
      ["POST", "/api/compat/run", { cases: ["nope"] }, 400, "no such case: nope"],
      ["POST", "/api/compat/run", { budgetUsd: -1 }, 400, "budgetUsd must be between 0 and 1000"],
      ["POST", "/api/compat/run", { concurrency: 99 }, 400, "concurrency must be an integer between 1 and 16"],
      ["GET", "/api/compat/exchanges/cx_nope", undefined, 404, "no exchange cx_nope"]
    ]
    for (const [method, path, body, status, message] of cases) {
      const res = await call(`${gw.url}${path}`, { method, headers: admin, ...(body !== undefined ? { body } : {}) })
      expect(res.status, path).toBe(status)
      expect(res.body.message).toContain(message)
    }
    expect((await call(`${gw.url}/api/compat`)).status).toBe(401)
  })

  it("gateway doctor --clients shows the cost first, runs with --yes, prints the matrix, and exits 1 on a failing cell", async () => {
    const env = { GATEWAY_API_KEY: ADMIN, DATA_DIR: tempDir() }
    const before = up.requests.length
    const plan = await runCli(["doctor", "--clients", "--model", "good/m1", "--url", gw.url], env)
    expect(plan.code, plan.stderr).toBe(0)
    expect(plan.stdout).toMatch(/would cost at most \$0\.\d+/)
    // A model without a price: the cost is not known, and says so rather than "$0".
    const unpriced = await runCli(["doctor", "--clients", "--model", "good/no-tools", "--url", gw.url], env)
    expect(unpriced.code, unpriced.stderr).toBe(0)
    expect(unpriced.stdout).toContain("no price is known for good/no-tools")
    expect(unpriced.stdout).not.toContain("at most $0.000000")
    expect(plan.stdout).toContain("--yes")
    // Shown, not run.
    expect(up.requests.length).toBe(before)

    const ok = await runCli(
      [
        "doctor",
        "--clients",
        "--model",
        "good/m1",
        "--case",
        "claude-code.tool-round-trip",
        "--case",
        "openai-sdk.chat.text",
        "--yes",
        "--url",
        gw.url
      ],
      env
    )
    expect(ok.code, ok.stderr + ok.stdout).toBe(0)
    expect(ok.stdout).toMatch(/claude-code\.tool-round-trip\s+PASS/)

    const bad = await runCli(
      ["doctor", "--clients", "--model", "good/no-tools", "--case", "openai-sdk.chat.tools", "--yes", "--url", gw.url],
      env
    )
    expect(bad.code).toBe(1)
    expect(bad.stdout).toMatch(/openai-sdk\.chat\.tools\s+FAIL/)
    expect(bad.stdout).toContain("tools are not supported by this model")
    expect(bad.stdout).toMatch(/\/api\/compat\/exchanges\/cx_/)
    const json = await runCli(
      ["doctor", "--clients", "--model", "good/m1", "--case", "openai-sdk.chat.text", "--yes", "--json", "--url", gw.url],
      env
    )
    expect(json.code, json.stderr).toBe(0)
    expect(JSON.parse(json.stdout).cells[0]).toMatchObject({ case: "openai-sdk.chat.text", model: "good/m1", status: "pass" })
  })

  it("the shipped cases are what the recorded fixtures give (scripts/compat-cases.mjs --check)", async () => {
    const { execFileSync } = await import("node:child_process")
    expect(execFileSync(process.execPath, ["scripts/compat-cases.mjs", "--check"], { encoding: "utf8" })).toContain("up to date")
  })
})
