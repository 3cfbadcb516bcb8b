import OpenAI from "openai"
import type { Browser, Page } from "playwright-core"
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

// The state of long agent sessions on the dashboard, through the browser: the requests parked until
// an upstream's quota resets (Resilience, docs/resilience.md "Waiting out a quota") and the prompt
// cache's hit ratio (Usage & cost, docs/routing.md "Prompt-cache affinity"). The traffic goes through
// the built gateway with the official OpenAI SDK; gw.admin arranges and checks, never does what a
// test proves.

const QUEUED = "e2e-waits"
const WARM = "e2e-warm"

describe("dashboard: the quota queue and the prompt cache's hit ratio", () => {
  let browser: Browser
  let gw: DashboardGateway
  let quota: FakeUpstream
  let caching: FakeUpstream
  let page: Page
  let problems: string[]
  let close: () => Promise<void>
  const seen = new Set<string>()

  beforeAll(async () => {
    quota = (await FakeUpstream.start()).always({ content: "served after the reset" })
    // A provider's prompt cache: a prefix (system prompt and first message) it served before is
    // answered with 900 of its 1,000 input tokens cached.
    caching = (await FakeUpstream.start()).script((r: Recorded) => {
      const prefix = JSON.stringify(r.body?.messages?.slice(0, 2))
      const warm = seen.has(prefix)
      seen.add(prefix)
      return {
        body: {
          id: "chatcmpl-warm",
          object: "chat.completion",
          created: 1,
          model: "m1",
          choices: [{ index: 0, message: { role: "assistant", content: "reviewed" }, finish_reason: "stop" }],
          usage: {
            prompt_tokens: 1000,
            completion_tokens: 10,
            total_tokens: 1010,
            prompt_tokens_details: { cached_tokens: warm ? 900 : 0 }
          }
        }
      }
    })
    browser = await launchBrowser()
    gw = await startDashboardGateway({ password: PASSWORD })
    for (const [name, up] of [
      ["limited", quota],
      ["warm-acct", caching]
    ] as const) {
      const made = await gw.admin("POST", "/api/providers", {
        provider: "openai-compatible",
        name,
        baseUrl: up.baseUrl("openai-chat"),
        apiKey: `sk-${name}-e2e`,
        models: ["m1"],
        defaultModel: "m1"
      })
      expect(made.status).toBe(201)
    }
    const waits = await gw.admin("POST", "/api/combos", {
      name: QUEUED,
      strategy: "priority",
      targets: [{ model: "limited/m1" }],
      config: { maxQueueWaitSeconds: 60 }
    })
    expect(waits.status).toBe(201)
    const warm = await gw.admin("POST", "/api/combos", { name: WARM, strategy: "priority", targets: [{ model: "warm-acct/m1" }] })
    expect(warm.status).toBe(201)
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
    await quota?.close()
    await caching?.close()
  })

  const sdk = () => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: gw.adminKey, maxRetries: 0, timeout: 60_000 })

  it("Resilience shows a request parked until the quota resets, then counts it served; the queue's bound is set there", async () => {
    await goTo(page, "Resilience")
    const section = page.getByRole("table", { name: "Requests waiting for a quota to reset" })
    await page.getByText("Nothing is waiting").waitFor()
    await expectAccessible(page, "resilience (queue empty)")

    // Every target out of quota for a few seconds: the combo's requests wait instead of failing.
    quota.next({ status: 429, headers: { "retry-after": "8" }, errorMessage: "Rate limit reached for requests" })
    const answer = sdk().chat.completions.create({ model: QUEUED, messages: [{ role: "user", content: "wait for me" }] })

    // The page (refreshed every 5 s) shows the parked request under its combo.
    const row = section.getByRole("row").filter({ hasText: QUEUED })
    await row.waitFor({ timeout: 15_000 })
    expect(await row.textContent()).toMatch(/in \d/)
    await page.getByText(/1 of at most 100 parked/).waitFor()
    await expectAccessible(page, "resilience (a request parked)")
    await screenshot(page, "resilience-quota-queue")

    const done = await answer
    expect(done.choices[0]!.message.content).toBe("served after the reset")
    expect(quota.requests).toHaveLength(2)
    await row.waitFor({ state: "detached", timeout: 15_000 })
    await page.getByText(/1 served after\s+waiting/).waitFor({ timeout: 15_000 })

    // The bound, set through the form.
    await page.getByLabel("Most requests parked at once").fill("7")
    await page.getByRole("button", { name: "Save settings" }).click()
    await page.getByText("Resilience settings saved").waitFor()
    expect((await gw.admin("GET", "/api/resilience")).body.settings.quotaQueue).toEqual({ maxParked: 7 })
    await page.getByText(/0 of at most 7 parked/).waitFor({ timeout: 15_000 })
    expectNoProblems(problems)
  })

  it("Usage & cost shows the prompt cache's hit ratio by connection, by combo asked for and by key", async () => {
    // One conversation of three turns: the first is cold, the next two read 900 of 1,000 tokens from the cache.
    const messages: Array<OpenAI.Chat.ChatCompletionMessageParam> = [
      { role: "system", content: "You review pull requests." },
      { role: "user", content: "Here is a long pull request to review." }
    ]
    for (let turn = 0; turn < 3; turn++) {
      const r = await sdk().chat.completions.create({ model: WARM, messages })
      messages.push({ role: "assistant", content: r.choices[0]!.message.content ?? "" }, { role: "user", content: "and then?" })
    }
    // 1,800 cached of 3,000 input tokens: 60.0 %. The rows are written in the background.
    const history = async () => (await gw.admin("GET", "/api/usage/history?from=0&groupBy=requestedModel")).body.rows as Array<any>
    for (let i = 0; i < 100 && !(await history()).some((r) => r.key === WARM && r.tokensIn === 3000); i++)
      await new Promise((resolve) => setTimeout(resolve, 100))

    await goTo(page, "Usage & cost")
    const byCombo = page.getByRole("table", { name: "Prompt cache by model or combo asked for" })
    const comboRow = byCombo.getByRole("row").filter({ hasText: WARM })
    await comboRow.waitFor()
    expect(await comboRow.textContent()).toContain("60.0%")
    const byConnection = page.getByRole("table", { name: "Prompt cache by connection" })
    const connectionRow = byConnection.getByRole("row").filter({ hasText: "warm-acct" })
    await connectionRow.waitFor()
    expect(await connectionRow.textContent()).toContain("60.0%")
    // The key also made the first test's request (11 input tokens, none cached): 1,800 of 3,011.
    const keyRow = page.getByRole("table", { name: "Prompt cache by api key" }).getByRole("row").filter({ hasText: "e2e-checks" })
    await keyRow.waitFor()
    expect(await keyRow.textContent()).toContain("1,800")
    expect(await keyRow.textContent()).toContain("59.8%")
    await expectAccessible(page, "usage (prompt cache)")
    await screenshot(page, "usage-prompt-cache")
    expectNoProblems(problems)
  })
})
