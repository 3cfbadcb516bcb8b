import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream, type Recorded } from "../support/fakeUpstream.js"
import {
  type DashboardGateway,
  expectAccessible,
  expectNoProblems,
  goTo,
  launchBrowser,
  login,
  openPage,
  PASSWORD,
  screenshot,
  startDashboardGateway
} from "./harness.js"

// The Shadow traffic page (docs/shadow.md), read in the browser: a combo whose shadow target
// answered a sample of its requests, the charts of how it compares, the worst disagreements.
// Then replay (docs/replay.md): a saved inspector session replayed against the candidate from the
// inspector's session list. The admin key arranges the combo and sends the traffic; what the page
// shows is the check.

describe("dashboard: switching models with evidence (shadow traffic, replay, compatibility, structured outputs, reasoning state)", () => {
  let browser: Browser
  let gw: DashboardGateway
  let up: FakeUpstream

  beforeAll(async () => {
    browser = await launchBrowser()
    gw = await startDashboardGateway({ password: PASSWORD })
    up = await FakeUpstream.start()
    const said = (r: Recorded) => JSON.stringify(r.body?.messages ?? "")
    up.script((r) =>
      r.family === "anthropic" ? { content: said(r).includes("capital") ? "paris." : "I would rather not say." } : { content: "Paris." }
    )
    for (const body of [
      { provider: "openai-compatible", name: "prim", baseUrl: up.baseUrl("openai-chat"), models: ["m1"] },
      { provider: "anthropic", name: "cand", apiKey: "sk-ant-upstream", baseUrl: up.baseUrl("anthropic"), models: ["claude-x"] }
    ])
      expect((await gw.admin("POST", "/api/providers", body)).status).toBe(201)
    const combo = await gw.admin("POST", "/api/combos", {
      name: "team",
      strategy: "priority",
      targets: [{ model: "prim/m1" }],
      config: { shadow: [{ model: "cand/claude-x", sampleRate: 1 }] }
    })
    expect(combo.status).toBe(201)
    // The sampling is registered within a second of the first shadow combo.
    await new Promise((r) => setTimeout(r, 1500))
    for (const q of ["the capital of France?", "the capital of France, again?", "what is the weather?"]) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.adminKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "team", messages: [{ role: "user", content: q }] })
      })
      expect(res.status).toBe(200)
    }
    for (let i = 0; i < 100; i++) {
      const r = await gw.admin("GET", "/api/shadow/report?combo=team")
      if (r.body.targets?.[0]?.pairs === 3) break
      await new Promise((res) => setTimeout(res, 100))
    }
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await up?.close()
  })

  it("shows each shadow target's agreement, deltas and worst disagreements", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Shadow traffic")
    const card = page.locator("section.card", { has: page.getByRole("heading", { name: "cand/claude-x" }) })
    await card.waitFor()
    // Two of three answers agree with the primary once normalized ("Paris." / "paris.").
    await card.getByRole("img", { name: /Agreement with the primary: exact 0%, normalized 67%/ }).waitFor()
    await card.getByRole("img", { name: /Latency, candidate − primary \(95%\): mean/ }).waitFor()
    const worst = card.getByRole("row").filter({ hasText: "I would rather not say." })
    expect(await worst.count()).toBe(1)
    expect(await worst.textContent()).toContain("Paris.")
    await page.getByLabel("Period").selectOption("1")
    await card.getByRole("img", { name: /normalized 67%/ }).waitFor()
    await expectAccessible(page, "shadow")
    await screenshot(page, "shadow")
    expectNoProblems(problems)
    await context.close()
  })

  it("replays a saved inspector session against a candidate from the session list, and shows the report", async () => {
    const started = await gw.admin("POST", "/api/tools/traffic-inspector/sessions", { name: "to replay" })
    expect(started.status).toBe(201)
    for (const q of ["the capital of France?", "what is the weather?"]) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.adminKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "prim/m1", messages: [{ role: "user", content: q }] })
      })
      expect(res.status).toBe(200)
    }
    expect((await gw.admin("PATCH", `/api/tools/traffic-inspector/sessions/${started.body.id}`, { action: "stop" })).status).toBe(200)

    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Inspector")
    await page.getByRole("button", { name: "Replay to replay" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByLabel("Candidate models").fill("cand/claude-x")
    await dialog.getByRole("button", { name: "Start replay" }).click()
    const card = dialog.locator("section.card", { has: page.getByRole("heading", { name: "cand/claude-x" }) })
    // "Paris." against "paris.": one of two agrees once normalized.
    await card.getByRole("img", { name: /Agreement with the recorded answer: exact 0%, normalized 50%/ }).waitFor()
    await dialog.getByText("done").first().waitFor()
    await expectAccessible(page, "replay")
    await screenshot(page, "replay")
    expectNoProblems(problems)
    await context.close()
  })

  it("the client compatibility page: the cost first, a run, and a failing cell's exchange one click away", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Client compatibility")
    await page.getByLabel("Models", { exact: true }).fill("prim/m1")
    await page.getByRole("button", { name: "Show" }).click()
    await page.getByText("Running every cell costs at most").waitFor()
    await page.getByRole("button", { name: "Run against 1 model" }).click()
    // The stand-in answers text only: the text cases pass, the tool-call cases fail.
    const passed = page.getByRole("button", { name: "Claude Code, tool-round-trip, on prim/m1: pass" })
    await passed.waitFor()
    // The run goes on in the gateway; the page reads it until it has ended.
    await page.getByText("Last run", { exact: true }).waitFor()
    expect(await page.getByLabel(/on prim\/m1: pending$/).count()).toBe(0)
    expect(await page.getByLabel(/on prim\/m1: (pass|fail)$/).count()).toBeGreaterThan(20)
    await page.getByRole("button", { name: "OpenAI SDK (chat), tools, on prim/m1: fail" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByText("no tool call: the request asks for one").waitFor()
    await dialog.getByText("POST /v1/chat/completions").waitFor()
    await expectAccessible(page, "compat")
    await screenshot(page, "compat")
    expectNoProblems(problems)
    await context.close()
  })

  it("a key's shadow targets: set on the API keys page, its report picked on the Shadow traffic page", async () => {
    const created = await gw.admin("POST", "/api/keys", { name: "team-k" })
    expect(created.status).toBe(201)
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "API keys")
    await page.getByRole("button", { name: "Edit team-k" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByLabel("Shadow targets").fill("cand/claude-x=0.5")
    await dialog.getByRole("button", { name: "Save" }).click()
    await page.getByRole("row").filter({ hasText: "team-k" }).getByText("cand/claude-x (0.5)").waitFor()
    await goTo(page, "Shadow traffic")
    await page.getByLabel("Combo or key").selectOption({ label: "key team-k → cand/claude-x" })
    await page.getByText("No pairs yet").waitFor()
    await expectAccessible(page, "shadow-key")
    expectNoProblems(problems)
    await context.close()
  })

  it("the inspector shows a structured-output answer's verdict: the stand-in's prose against a JSON Schema is invalid, after its one repair", async () => {
    expect(
      (
        await gw.admin("POST", "/api/providers", {
          provider: "openai-compatible",
          name: "schema",
          baseUrl: up.baseUrl("openai-chat"),
          models: ["s1"]
        })
      ).status
    ).toBe(201)
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Inspector")
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "schema/s1",
        messages: [{ role: "user", content: "the capital of France, as JSON" }],
        response_format: {
          type: "json_schema",
          json_schema: { name: "city", schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }
        }
      })
    })
    expect(res.status).toBe(200)
    expect(res.headers.get("x-gateway-schema")).toBe("invalid")
    await page
      .getByRole("table", { name: "Intercepted requests" })
      .getByRole("row", { name: /schema\/s1/ })
      .getByRole("button", { name: /details of POST/ })
      .click()
    const facts = page.getByRole("region", { name: "Request details" }).locator(".insp-facts").nth(1)
    await facts.getByText("Structured output").waitFor()
    expect(await facts.textContent()).toContain("invalid")
    expectNoProblems(problems)
    await context.close()
  })

  it("the inspector says what an attempt did with the reasoning state: thinking turned off for a tool turn a model without thinking answered", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Inspector")
    // The page's feed is connected: bodies are kept, the upstream's too.
    await page.getByText("live", { exact: true }).waitFor()
    const res = await fetch(`${gw.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "cand/claude-x",
        max_tokens: 4096,
        thinking: { type: "enabled", budget_tokens: 2048 },
        tools: [
          {
            name: "read_file",
            description: "Reads a file",
            input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
          }
        ],
        messages: [
          { role: "user", content: "read a.txt" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "read_file", input: { path: "a.txt" } }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "hello" }] }
        ]
      })
    })
    expect(res.status).toBe(200)
    await page
      .getByRole("table", { name: "Intercepted requests" })
      .getByRole("row", { name: /cand\/claude-x/ })
      .first()
      .getByRole("button", { name: /details of POST/ })
      .click()
    const pane = page.getByRole("region", { name: "Request details" })
    await pane.getByText("Reasoning state: Thinking was turned off for this attempt").waitFor()
    await expectAccessible(page, "reasoning-state")
    expectNoProblems(problems)
    await context.close()
  })
})
