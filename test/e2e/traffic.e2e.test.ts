import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream } from "../support/fakeUpstream.js"
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

// The traffic pages (Combos, API keys, Usage & cost, Request log) through the browser: a key and
// a weighted combo are made in the UI, one chat completion goes through the gateway with them, and
// the request shows up in the live feed, the usage totals and the request log. The provider, its
// price and the request itself are arranged outside the browser (that is not what this proves).

const COMBO = "e2e-mix"
// One request of the fake upstream's default usage (11 in, 7 out) at these prices costs
// 11 × 10000 / 1e6 + 7 × 20000 / 1e6 = 0.11 + 0.14 = 0.25 USD.
const PRICE = { input: 10_000, output: 20_000 }

describe("dashboard: combos, keys, usage and the request log", () => {
  let browser: Browser
  let gw: DashboardGateway
  let upstream: FakeUpstream
  let page: Page
  let problems: string[]
  let close: () => Promise<void>
  let secret = ""

  beforeAll(async () => {
    upstream = (await FakeUpstream.start()).always({ content: "hello through the combo" })
    browser = await launchBrowser()
    gw = await startDashboardGateway({ password: PASSWORD })
    const made = await gw.admin("POST", "/api/providers", {
      provider: "openai-compatible",
      name: "fake",
      baseUrl: upstream.baseUrl("openai-chat"),
      apiKey: "sk-upstream-e2e",
      models: ["m1", "m2"],
      defaultModel: "m1"
    })
    expect(made.status).toBe(201)
    for (const model of ["m1", "m2"]) {
      const priced = await gw.admin("PUT", "/api/pricing", { provider: "openai-compatible", model, ...PRICE })
      expect(priced.status).toBe(200)
    }
    const opened = await openPage(browser)
    page = opened.page
    problems = opened.problems
    close = () => opened.context.close()
    await login(page, gw.url)
  })
  afterAll(async () => {
    await close?.()
    await browser?.close()
    await gw?.stop()
    await upstream?.close()
  })

  it("shows the empty states first", async () => {
    await goTo(page, "Combos")
    await page.getByText("No combos yet").waitFor()
    await expectAccessible(page, "combos (empty)")
    await goTo(page, "Request log")
    await page.getByText("No requests yet").waitFor()
    await expectAccessible(page, "request log (empty)")
    await goTo(page, "Usage & cost")
    await page.getByText("No requests in this range").waitFor()
    await expectAccessible(page, "usage (empty)")
    expectNoProblems(problems)
  })

  it("creates an API key and shows its secret once", async () => {
    await goTo(page, "API keys")
    await page.getByLabel("Key name").fill("e2e-client")
    await page.getByLabel("Requests per minute").first().fill("600")
    await page.getByRole("button", { name: "Create key" }).click()
    const box = page.locator("[data-secret]")
    await box.waitFor()
    secret = ((await box.textContent()) ?? "").trim()
    expect(secret.length).toBeGreaterThanOrEqual(16)
    const row = page.getByRole("table", { name: "API keys" }).getByRole("row", { name: /e2e-client/ })
    await row.waitFor()
    // Masked in the list: the full secret is only in the one-time box.
    expect(await row.textContent()).not.toContain(secret)
    expect(await row.textContent()).toContain("600 rpm")
    const keys = await gw.admin("GET", "/api/keys")
    expect(keys.body.keys.map((k: { name: string; rpm: number | null }) => [k.name, k.rpm])).toContainEqual(["e2e-client", 600])
    expectNoProblems(problems)
  })

  it("creates a weighted combo over the provider's models", async () => {
    await goTo(page, "Combos")
    await page.getByRole("button", { name: "New combo" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByLabel("Combo name").fill(COMBO)
    await dialog.getByLabel("Strategy", { exact: true }).selectOption("weighted")
    await dialog.getByLabel("Target 1 model").fill("fake/m1")
    await dialog.getByLabel("Target 1 weight").fill("3")
    await dialog.getByRole("button", { name: "Add target" }).click()
    await dialog.getByLabel("Target 2 model").fill("fake/m2")
    await dialog.getByLabel("Target 2 weight").fill("1")
    // The target hint shows each target's share of first picks.
    await dialog.getByText("75 % of requests first").waitFor()
    await expectAccessible(page, "combo editor")
    await screenshot(page, "combos-editor")
    await dialog.getByRole("button", { name: "Create combo" }).click()
    await page.getByRole("row", { name: new RegExp(COMBO) }).waitFor()
    const saved = await gw.admin("GET", `/api/combos/${COMBO}`)
    expect(saved.status).toBe(200)
    expect(saved.body.strategy).toBe("weighted")
    expect(saved.body.targets).toEqual([
      { model: "fake/m1", weight: 3 },
      { model: "fake/m2", weight: 1 }
    ])
    expectNoProblems(problems)
  })

  it("sees a request with the new key to the combo in the live feed", async () => {
    await goTo(page, "Overview")
    await page.getByText("live", { exact: true }).waitFor()
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: COMBO, messages: [{ role: "user", content: "hi" }] })
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as {
      choices: Array<{ message: { content: string } }>
      usage: { prompt_tokens: number; completion_tokens: number }
    }
    expect(body.choices[0]!.message.content).toBe("hello through the combo")
    expect(body.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7 })
    const feed = page.getByRole("list", { name: "Live events" })
    await feed.getByText("request.completed").first().waitFor()
    expect(await feed.textContent()).toMatch(/m[12] via openai-compatible · 200 · 11 in \/ 7 out/)
    await expectAccessible(page, "overview with a request")
    await screenshot(page, "overview-traffic")
    expectNoProblems(problems)
  })

  it("counts it on the usage page: one request, 11 + 7 tokens, 0.25 USD", async () => {
    await goTo(page, "Usage & cost")
    const totals = page.getByLabel("Totals for the range")
    await totals.getByText("$0.25").waitFor()
    const stat = async (label: string) => (await totals.locator(".stat", { hasText: label }).locator(".stat-value").textContent())?.trim()
    expect(await stat("Requests")).toBe("1")
    expect(await stat("Tokens in")).toBe("11")
    expect(await stat("Tokens out")).toBe("7")
    expect(await stat("Cost")).toBe("$0.25")
    // The charts are drawn (canvas) and the rankings name the key and the provider.
    await page.locator(".chart-canvas canvas").first().waitFor()
    await page.getByRole("figure", { name: "Requests by key" }).getByText("e2e-client").waitFor()
    await page.getByRole("figure", { name: "Requests by provider" }).getByText("openai-compatible").waitFor()
    await page.getByRole("table", { name: "Latency by provider" }).getByText("openai-compatible").waitFor()
    // A range in the URL: 24 hours by the hour.
    await page.getByLabel("Range", { exact: true }).selectOption("24h")
    await page.getByText("Requests per hour").waitFor()
    expect(page.url()).toContain("/usage?range=24h")
    await totals.getByText("$0.25").waitFor()
    await expectAccessible(page, "usage")
    await screenshot(page, "usage")
    expectNoProblems(problems)
  })

  it("finds it in the request log by model, opens its details, and keeps the filter in the URL", async () => {
    await goTo(page, "Request log")
    await page.getByLabel("Model").fill(COMBO)
    await page.getByRole("button", { name: "Search" }).click()
    await page.waitForURL(/\/logs\?model=e2e-mix/)
    const row = page.getByRole("row", { name: new RegExp(`${COMBO} →`) })
    await row.waitFor()
    expect(await page.getByRole("table", { name: "Request log" }).locator("tbody tr").count()).toBe(1)
    expect(await row.textContent()).toContain("e2e-client")
    await expectAccessible(page, "request log")
    await screenshot(page, "logs")
    await row.getByRole("button", { name: /details of request/ }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByText("This connection").waitFor()
    await dialog.getByText("$0.25").first().waitFor()
    expect(await dialog.textContent()).toContain(COMBO)
    await expectAccessible(page, "request details")
    await screenshot(page, "logs-details")
    // The details link to the request itself: the dialog closes on the new filter.
    await dialog.getByRole("link", { name: "Link to this request" }).click()
    await dialog.waitFor({ state: "hidden" })
    await page.waitForURL(/\/logs\?requestId=req_/)
    await page.getByRole("row", { name: new RegExp(`${COMBO} →`) }).waitFor()
    // A shared link opens the same filtered view; a filter that matches nothing says so.
    await page.goto(`${gw.url}/dashboard/logs?model=no-such-model`)
    await page.getByText("No request matches these filters").waitFor()
    expect(await page.getByLabel("Model").inputValue()).toBe("no-such-model")
    await page.goto(`${gw.url}/dashboard/logs?status=error`)
    await page.getByText("No request matches these filters").waitFor()
    await page.goto(`${gw.url}/dashboard/logs?status=ok&model=${COMBO}`)
    await page.getByRole("row", { name: new RegExp(`${COMBO} →`) }).waitFor()
    expectNoProblems(problems)
  })

  it("sets a budget on the key and shows its spend", async () => {
    await goTo(page, "API keys")
    await page.getByRole("button", { name: "Budget of e2e-client" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByLabel("Monthly limit (USD)").fill("5")
    await dialog.getByRole("button", { name: "Save budget" }).click()
    await dialog.waitFor({ state: "hidden" })
    const budgets = page.getByRole("table", { name: "Budgets" })
    await budgets.getByRole("row", { name: /e2e-client/ }).waitFor()
    expect(await budgets.getByRole("row", { name: /e2e-client/ }).textContent()).toContain("$0.25 / $5.00")
    // The key's own row shows the spend too.
    const keyRow = page.getByRole("table", { name: "API keys" }).getByRole("row", { name: /e2e-client/ })
    await keyRow.getByText("$0.25 / $5.00 monthly").waitFor()
    const api = await gw.admin("GET", "/api/usage/budget")
    expect(api.body.budgets).toHaveLength(1)
    expect(api.body.budgets[0]).toMatchObject({ monthlyLimitUsd: 5, spentUsd: 0.25 })
    await expectAccessible(page, "keys")
    await screenshot(page, "keys")
    expectNoProblems(problems)
  })

  it("edits the key: pauses it with a new expiry, then enables it again", async () => {
    await goTo(page, "API keys")
    const row = page.getByRole("table", { name: "API keys" }).getByRole("row", { name: /e2e-client/ })
    await page.getByRole("button", { name: "Edit e2e-client" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByLabel("Enabled").uncheck()
    await dialog.getByLabel("Expires").fill("2099-01-02T03:04")
    await dialog.getByRole("button", { name: "Save", exact: true }).click()
    await dialog.waitFor({ state: "hidden" })
    await row.getByText("disabled", { exact: true }).waitFor()
    const paused = (await gw.admin("GET", "/api/keys")).body.keys.find((k: { name: string }) => k.name === "e2e-client")
    expect(paused).toMatchObject({ enabled: false, rpm: 600 })
    expect(paused.expiresAt).toMatch(/^2099-01-0[12]T/)
    await page.getByRole("button", { name: "Enable e2e-client" }).click()
    await row.getByText("active", { exact: true }).waitFor()
    expect((await gw.admin("GET", "/api/keys")).body.keys.find((k: { name: string }) => k.name === "e2e-client").enabled).toBe(true)
    expectNoProblems(problems)
  })

  it("switches the combo to another strategy and back, keeping the weights", async () => {
    await goTo(page, "Combos")
    const edit = async (strategy: string) => {
      await page.getByRole("button", { name: `Edit ${COMBO}`, exact: true }).click()
      const dialog = page.getByRole("dialog")
      await dialog.getByLabel("Strategy", { exact: true }).selectOption(strategy)
      // cost-optimized ranks by price: each target shows the price it is ranked by (the override above).
      if (strategy === "cost-optimized") await dialog.getByText("blended $14000.00 per 1M tokens (in $10000, out $20000)").first().waitFor()
      await dialog.getByRole("button", { name: "Save combo" }).click()
      await dialog.waitFor({ state: "hidden" })
      await page
        .getByRole("row", { name: new RegExp(COMBO) })
        .getByText(strategy, { exact: true })
        .waitFor()
    }
    await edit("cost-optimized")
    expect((await gw.admin("GET", `/api/combos/${COMBO}`)).body.strategy).toBe("cost-optimized")
    await edit("weighted")
    const back = await gw.admin("GET", `/api/combos/${COMBO}`)
    expect(back.body.strategy).toBe("weighted")
    expect(back.body.targets).toEqual([
      { model: "fake/m1", weight: 3 },
      { model: "fake/m2", weight: 1 }
    ])
    // The raw JSON view saves too (PATCH), and a broken JSON is refused with a message.
    await page.getByRole("button", { name: `Edit ${COMBO} as JSON` }).click()
    const json = page.getByRole("dialog").getByLabel("Combo as JSON")
    const current = JSON.parse(await json.inputValue())
    expect(current).toMatchObject({ name: COMBO, strategy: "weighted" })
    await json.fill("{ not json")
    await page.getByRole("dialog").getByRole("button", { name: "Save JSON" }).click()
    await page.getByText(/not valid JSON/).waitFor()
    await json.fill(JSON.stringify({ ...current, description: "two models, 3:1" }))
    await page.getByRole("dialog").getByRole("button", { name: "Save JSON" }).click()
    await page.getByRole("dialog").waitFor({ state: "hidden" })
    expect((await gw.admin("GET", `/api/combos/${COMBO}`)).body).toMatchObject({ description: "two models, 3:1", strategy: "weighted" })
    // An auto combo: the scorer's router strategy, pack and weights are form fields.
    await page.getByRole("button", { name: "Tune an auto combo" }).click()
    const dialog = page.getByRole("dialog")
    await dialog.getByLabel("Router strategy").selectOption("sla-aware")
    await dialog.getByLabel("Weight pack").selectOption("cost-saver")
    await dialog.getByLabel("latencyInv").fill("0.5")
    await dialog.getByLabel("Target p95 latency (ms)").fill("2000")
    await expectAccessible(page, "auto combo editor")
    await screenshot(page, "combos-auto-editor")
    await dialog.getByRole("button", { name: "Create combo" }).click()
    await page
      .getByRole("row", { name: /my-auto/ })
      .getByText("router sla-aware · pack cost-saver · 1 weight(s) set")
      .waitFor()
    const auto = await gw.admin("GET", "/api/combos/my-auto")
    expect(auto.body).toMatchObject({
      strategy: "auto",
      config: { routerStrategy: "sla-aware", modePack: "cost-saver", auto: { weights: { latencyInv: 0.5 } }, slaTargetP95Ms: 2000 }
    })
    await page.getByRole("table", { name: "Auto model variants" }).getByText("auto/coding").waitFor()
    await expectAccessible(page, "combos")
    await screenshot(page, "combos")
    expectNoProblems(problems)
  })

  it("fits a phone: Usage and API keys", async () => {
    const phone = await openPage(browser, { viewport: { width: 390, height: 844 } })
    try {
      // login() waits for the navigation, which a phone keeps behind the Menu button.
      await phone.page.goto(`${gw.url}/dashboard/`)
      await phone.page.getByLabel("Admin password").fill(PASSWORD)
      await phone.page.getByRole("button", { name: "Log in" }).click()
      await phone.page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
      await goTo(phone.page, "Usage & cost")
      await phone.page.getByLabel("Totals for the range").getByText("$0.25").waitFor()
      await expectAccessible(phone.page, "usage (phone)")
      await screenshot(phone.page, "usage-phone")
      await goTo(phone.page, "API keys")
      await phone.page.getByRole("table", { name: "API keys" }).getByText("e2e-client").waitFor()
      await expectAccessible(phone.page, "keys (phone)")
      await screenshot(phone.page, "keys-phone")
      // Nothing is wider than the screen.
      expect(await phone.page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390)
      expectNoProblems(phone.problems)
    } finally {
      await phone.context.close()
    }
  })

  it("pages older requests in the request log with nextBefore", async () => {
    // 55 more requests (the request log pages by 50); without the key, whose $5 budget would stop them at 20.
    for (let i = 0; i < 55; i++) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: COMBO, messages: [{ role: "user", content: `hi ${i}` }] })
      })
      expect(res.status).toBe(200)
      await res.arrayBuffer()
    }
    await goTo(page, "Request log")
    const rows = page.getByRole("table", { name: "Request log" }).locator("tbody tr")
    await page.getByRole("button", { name: "Load older requests" }).waitFor()
    expect(await rows.count()).toBe(50)
    await page.getByRole("button", { name: "Load older requests" }).click()
    await page.getByRole("button", { name: "Load older requests" }).waitFor({ state: "detached" })
    expect(await rows.count()).toBe(56)
    expectNoProblems(problems)
  })
  it("caps the key with a token limit in the UI: the limit is enforced, shows its use, and is removed", async () => {
    await goTo(page, "API keys")
    const form = page.getByRole("form", { name: "Add a token limit" })
    await form.getByLabel("Limit for key").selectOption({ label: "e2e-client" })
    await form.getByLabel("Max tokens").fill("20")
    await form.getByLabel("Per").selectOption("hour")
    await form.getByRole("button", { name: "Add token limit" }).click()
    const limits = page.getByRole("table", { name: "Token limits" })
    await limits.getByRole("row", { name: /e2e-client/ }).waitFor()
    const [limit] = (await gw.admin("GET", "/api/usage/token-limits")).body.limits
    expect(limit).toMatchObject({ scope: "global", maxTokens: 20, window: "hour" })
    // 18 tokens per request (11 + 7): the requests of this hour reach the cap, then the key is refused.
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: COMBO, messages: [{ role: "user", content: "hi" }] })
      })
      statuses.push(res.status)
      await res.arrayBuffer()
    }
    expect(statuses).toContain(429)
    await page.reload()
    await page.getByRole("heading", { level: 1, name: "API keys" }).waitFor()
    const row = limits.getByRole("row", { name: /e2e-client/ })
    await row.getByText(/\/ 20 per hour/).waitFor()
    expect(Number(((await row.textContent()) ?? "").match(/(\d+) \/ 20 per hour/)?.[1])).toBeGreaterThanOrEqual(18)
    await row.getByRole("button", { name: /Remove token limit/ }).click()
    await limits.waitFor({ state: "detached" })
    expect((await gw.admin("GET", "/api/usage/token-limits")).body.limits).toEqual([])
    // The refusals were the gateway's answers to the test's own requests, not the page's.
    expectNoProblems(problems)
  })
})
