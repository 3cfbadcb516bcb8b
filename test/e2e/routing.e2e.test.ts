import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeOAuth } from "../support/fakeOAuth.js"
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

// The routing pages of the dashboard (Providers, Models & aliases, Resilience, Cache), driven
// through the browser only; the admin key arranges traffic and checks what the API holds.

const SECRET = "sk-routing-e2e-secret-0123456789"

describe("dashboard: providers, models, resilience, cache", () => {
  let browser: Browser
  let gw: DashboardGateway
  let good: FakeUpstream
  let refusing: FakeUpstream
  let failing: FakeUpstream
  let oauth: FakeOAuth

  beforeAll(async () => {
    browser = await launchBrowser()
    // qwen's device flow against a fake authorization server on 127.0.0.1.
    oauth = await FakeOAuth.start()
    gw = await startDashboardGateway({
      password: PASSWORD,
      env: { GATEWAY_OAUTH_QWEN_TOKEN_URL: `${oauth.url}/token`, GATEWAY_OAUTH_QWEN_DEVICE_AUTHORIZATION_URL: `${oauth.url}/device/code` }
    })
    good = (await FakeUpstream.start()).always({ content: "hello from the fake" })
    refusing = (await FakeUpstream.start()).always({ status: 401, errorMessage: "Incorrect API key provided (fake upstream)" })
    failing = (await FakeUpstream.start()).always({ status: 500, errorMessage: "fake upstream is broken" })
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await Promise.all([good?.close(), refusing?.close(), failing?.close(), oauth?.close()])
  })

  const row = (page: Page, text: string) => page.getByRole("row").filter({ hasText: text })

  const addProvider = async (page: Page, fields: { name: string; baseUrl: string; apiKey: string; defaultModel: string }) => {
    await page.getByRole("button", { name: "Add provider" }).click()
    const dialog = page.getByRole("dialog", { name: "Add a provider" })
    await dialog.waitFor()
    expect(await dialog.getByLabel("Provider", { exact: true }).inputValue()).toBe("openai-compatible")
    await dialog.getByLabel("Name").fill(fields.name)
    await dialog.getByLabel("Base URL").fill(fields.baseUrl)
    await dialog.getByLabel("API key").fill(fields.apiKey)
    await dialog.getByLabel("Default model").fill(fields.defaultModel)
    await dialog.getByRole("button", { name: "Add provider" }).click()
    await dialog.waitFor({ state: "hidden" })
    await row(page, fields.name).first().waitFor()
  }

  it("adds a provider, tests it, edits it, disables and enables it, shows a failing test's error, deletes one", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Providers")
    // Empty state: what to do first.
    await page.getByText("No providers yet").waitFor()
    await expectAccessible(page, "providers (empty)")
    await screenshot(page, "providers-empty")

    // Add: the credential check in the dialog first, then save.
    await page.getByRole("button", { name: "Add provider" }).click()
    const dialog = page.getByRole("dialog", { name: "Add a provider" })
    await dialog.getByLabel("Base URL").fill(good.baseUrl("openai-chat"))
    await dialog.getByLabel("API key").fill(SECRET)
    await dialog.getByRole("button", { name: "Check credentials" }).click()
    await dialog.getByRole("status").filter({ hasText: "works" }).waitFor()
    await expectAccessible(page, "providers (add dialog)")
    await dialog.getByRole("button", { name: "Close" }).click()
    await addProvider(page, { name: "fakeup", baseUrl: good.baseUrl("openai-chat"), apiKey: SECRET, defaultModel: "m1" })

    // The key is masked in the page, never whole.
    const fakeRow = row(page, "fakeup")
    expect(await page.content()).not.toContain(SECRET)
    expect(await fakeRow.textContent()).toMatch(/sk-r.*…|\*\*\*\*/)

    // Test: the page says it works, and the fake upstream saw the request with the key.
    const before = good.requests.length
    await page.getByRole("button", { name: "Test fakeup" }).click()
    const result = page.getByRole("status", { name: "Test result for fakeup" })
    await result.filter({ hasText: "fakeup works" }).waitFor()
    expect(await result.textContent()).toContain("HTTP 200")
    const seen = good.requests.slice(before)
    expect(seen.some((r) => r.path === "/v1/models" && r.headers.authorization === `Bearer ${SECRET}`)).toBe(true)
    await fakeRow.getByText("active").waitFor()

    // Edit: a new default model, shown in the list and stored.
    await page.getByRole("button", { name: "Edit fakeup" }).click()
    const edit = page.getByRole("dialog", { name: "Edit fakeup" })
    await edit.getByLabel("Default model").fill("m2")
    await edit.getByRole("button", { name: "Save" }).click()
    await edit.waitFor({ state: "hidden" })
    await fakeRow.getByRole("cell", { name: "m2", exact: true }).waitFor()
    // An edit of the default model alone keeps the test status.
    await fakeRow.getByText("active").waitFor()
    const stored = (await gw.admin("GET", "/api/providers")).body.connections.find((c: any) => c.name === "fakeup")
    expect(stored.defaultModel).toBe("m2")
    expect(stored.hasApiKey).toBe(true)

    // Disable, then enable again.
    await page.getByRole("button", { name: "Disable fakeup" }).click()
    await fakeRow.getByText("disabled", { exact: true }).waitFor()
    expect((await gw.admin("GET", `/api/providers/${stored.id}`)).body.enabled).toBe(false)
    await page.getByRole("button", { name: "Enable fakeup" }).click()
    await page.getByRole("button", { name: "Disable fakeup" }).waitFor()
    expect((await gw.admin("GET", `/api/providers/${stored.id}`)).body.enabled).toBe(true)

    // Its models, from the upstream's list.
    await page.getByRole("button", { name: "Models of fakeup" }).click()
    const models = page.getByRole("dialog", { name: "Models of fakeup" })
    await models.getByText(/As the upstream lists them|From the catalog/).waitFor()
    await expectAccessible(page, "providers (models dialog)")
    await page.keyboard.press("Escape")
    await models.waitFor({ state: "hidden" })

    // A provider whose upstream refuses the key: the test fails with the API's own message.
    await addProvider(page, { name: "badkey", baseUrl: refusing.baseUrl("openai-chat"), apiKey: "sk-wrong-key-000000", defaultModel: "m1" })
    await page.getByRole("button", { name: "Test badkey" }).click()
    const bad = page.getByRole("status", { name: "Test result for badkey" })
    await bad.filter({ hasText: "badkey failed" }).waitFor()
    const badId = (await gw.admin("GET", "/api/providers")).body.connections.find((c: any) => c.name === "badkey").id
    const apiSays = (await gw.admin("POST", `/api/providers/${badId}/test`)).body
    expect(apiSays.ok).toBe(false)
    expect(apiSays.error).toBeTruthy()
    expect(await bad.textContent()).toContain(apiSays.error)
    expect(await bad.textContent()).toContain("HTTP 401")

    await expectAccessible(page, "providers")
    await screenshot(page, "providers")

    // Delete, after confirming.
    await page.getByRole("button", { name: "Delete badkey" }).click()
    const confirm = page.getByRole("dialog", { name: "Delete this provider?" })
    await confirm.getByRole("button", { name: "Delete badkey" }).click()
    await confirm.waitFor({ state: "hidden" })
    await page.getByRole("button", { name: "Test badkey" }).waitFor({ state: "detached" })
    expect((await gw.admin("GET", "/api/providers")).body.connections.map((c: any) => c.name)).toEqual(["fakeup"])

    expectNoProblems(problems)
    await context.close()
  })

  it("Providers at phone size", async () => {
    const { page, problems, context } = await openPage(browser, { viewport: { width: 390, height: 844 } })
    // The harness's login waits for the navigation, which a phone keeps behind the Menu button.
    await page.goto(`${gw.url}/dashboard/`)
    await page.getByLabel("Admin password").fill(PASSWORD)
    await page.getByRole("button", { name: "Log in" }).click()
    await page.getByRole("button", { name: "Menu" }).waitFor()
    await goTo(page, "Providers")
    await row(page, "fakeup").first().waitFor()
    await expectAccessible(page, "providers (phone)")
    await screenshot(page, "providers-phone")
    expectNoProblems(problems)
    await context.close()
  })

  it("OAuth: the device flow shows the code, completes by polling, and the sign-in is revoked", async () => {
    oauth.deviceInterval = 1
    oauth.deviceScript = ["authorization_pending", "authorization_pending"]
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Providers")
    await page.getByLabel("Account", { exact: true }).selectOption("qwen")
    await page.getByText("No qwen account connected").waitFor()
    await page.getByLabel("Connection name").fill("qwen1")
    await page.getByRole("button", { name: "Connect" }).click()
    const flow = page.getByRole("region", { name: "Finish the sign-in" })
    await flow.getByText("ABCD-1234").waitFor()
    expect(await flow.getByRole("link").getAttribute("href")).toBe(`${oauth.url}/device?user_code=ABCD-1234`)
    await expectAccessible(page, "providers (device code)")
    await screenshot(page, "providers-oauth-device")
    // The page polls until the authorization server says yes; the connection is then listed.
    await flow.waitFor({ state: "detached", timeout: 15_000 })
    const oauthRow = page.getByRole("table", { name: "OAuth connections of qwen" }).getByRole("row").filter({ hasText: "qwen1" })
    await oauthRow.getByText("active").waitFor()
    expect(await oauthRow.textContent()).toContain("dev@example.test")
    await page
      .getByRole("table", { name: "Provider connections" })
      .getByRole("row")
      .filter({ hasText: "qwen1" })
      .getByText("OAuth")
      .waitFor()
    expect(oauth.deviceScript).toEqual([])

    await page.getByRole("button", { name: "Revoke qwen1" }).click()
    await page.getByRole("dialog", { name: "Revoke this sign-in?" }).getByRole("button", { name: "Revoke qwen1" }).click()
    await page.getByText("No qwen account connected").waitFor()
    expect((await gw.admin("GET", "/api/providers")).body.connections.map((c: any) => c.name)).not.toContain("qwen1")
    expectNoProblems(problems)
    await context.close()
  })

  it("Provider nodes: added, tested (models imported) and deleted", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Providers")
    await page.getByText("No provider nodes").waitFor()
    await page.getByRole("button", { name: "Add node" }).click()
    const add = page.getByRole("dialog", { name: "Add a provider node" })
    await add.getByLabel("Node id").fill("mynode")
    await add.getByLabel("Display name").fill("My node")
    await add.getByLabel("Family").selectOption("openai-chat")
    await add.getByLabel("Node base URL").fill(good.baseUrl("openai-chat"))
    await add.getByRole("button", { name: "Add node" }).click()
    await add.waitFor({ state: "hidden" })
    const nodeRow = page.getByRole("table", { name: "Provider nodes" }).getByRole("row").filter({ hasText: "My node" })
    await nodeRow.waitFor()

    const before = good.requests.length
    await page.getByRole("button", { name: "Test node My node" }).click()
    const tester = page.getByRole("dialog", { name: "Test node My node" })
    await tester.getByLabel("Import the models it lists").check()
    await tester.getByRole("button", { name: "Run test" }).click()
    await tester.getByRole("status").filter({ hasText: "The node answers" }).waitFor()
    expect(good.requests.slice(before).some((r) => r.path === "/v1/models")).toBe(true)
    await expectAccessible(page, "providers (node test)")
    await page.keyboard.press("Escape")
    const stored = (await gw.admin("GET", "/api/provider-nodes/mynode")).body
    expect(stored.models.length).toBeGreaterThan(0)
    await nodeRow.getByRole("cell", { name: String(stored.models.length), exact: true }).waitFor()

    await page.getByRole("button", { name: "Delete node My node" }).click()
    await page.getByRole("dialog", { name: "Delete this node?" }).getByRole("button", { name: "Delete My node" }).click()
    await page.getByText("No provider nodes").waitFor()
    expect((await gw.admin("GET", "/api/provider-nodes/mynode")).status).toBe(404)
    expectNoProblems(problems)
    await context.close()
  })

  it("Models & aliases: the catalog searches, an alias is created and listed", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Models & aliases")
    await page.getByRole("checkbox", { name: "Every provider (not only connected ones)" }).check()
    await page.getByLabel("Search models").fill("gpt-4o")
    await page.getByRole("table", { name: "Model catalog" }).getByText("openai/gpt-4o", { exact: true }).first().waitFor()
    const rows = await page.getByRole("table", { name: "Model catalog" }).getByRole("row").allTextContents()
    expect(rows.slice(1).every((r) => r.toLowerCase().includes("gpt-4o"))).toBe(true)
    await expectAccessible(page, "models (catalog)")
    await screenshot(page, "models")

    await page.getByRole("button", { name: "Aliases" }).click()
    await page.getByLabel("Alias", { exact: true }).fill("fast")
    await page.getByLabel("Target model").fill("fakeup/m2")
    await page.getByRole("button", { name: "Save alias" }).click()
    await page.getByRole("table", { name: "Model aliases" }).getByRole("row").filter({ hasText: "fakeup/m2" }).waitFor()
    const aliases = (await gw.admin("GET", "/api/models/alias")).body.aliases
    expect(aliases).toContainEqual(expect.objectContaining({ alias: "fast", target: "fakeup/m2", source: "user" }))
    await expectAccessible(page, "models (aliases)")
    await screenshot(page, "models-aliases")

    // A custom model for the connection, listed and then in the catalog.
    await page.getByRole("button", { name: "Custom models" }).click()
    await page.getByLabel("Provider or connection").fill("fakeup")
    await page.getByLabel("Model id").fill("m3")
    await page.getByLabel("Context window (tokens)").fill("32000")
    await page.getByRole("button", { name: "Add model" }).click()
    await page.getByRole("table", { name: "Custom models" }).getByRole("row").filter({ hasText: "fakeup/m3" }).waitFor()
    expect((await gw.admin("GET", "/api/provider-models")).body.models).toContainEqual(
      expect.objectContaining({ provider: "fakeup", model: "m3", contextLength: 32000 })
    )
    await expectAccessible(page, "models (custom)")

    // A price override: set, listed as an override, removed.
    await page.getByRole("button", { name: "Price overrides" }).click()
    await page.getByText("No overrides").waitFor()
    await page.getByLabel("Price provider").fill("openai")
    await page.getByLabel("Price model").fill("gpt-4o-mini")
    await page.getByLabel("Input", { exact: true }).fill("1.5")
    await page.getByLabel("Output", { exact: true }).fill("3")
    await page.getByRole("button", { name: "Save price" }).click()
    const priceRow = page.getByRole("table", { name: "Prices" }).getByRole("row").filter({ hasText: "openai/gpt-4o-mini" })
    await priceRow.getByText("$1.50").waitFor()
    const price = ((await gw.admin("GET", "/api/pricing")).body.prices as any[]).find(
      (p) => p.provider === "openai" && p.model === "gpt-4o-mini"
    )
    expect(price).toMatchObject({ input: 1.5, output: 3 })
    expect(price.source).toContain("override")
    await expectAccessible(page, "models (prices)")
    await screenshot(page, "models-prices")
    await page.getByRole("button", { name: "Remove override of openai/gpt-4o-mini" }).click()
    await page.getByText("No overrides").waitFor()
    expectNoProblems(problems)
    await context.close()
  })

  it("Resilience: settings save; a failing upstream's breaker opens, is shown, and resetting it clears it", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Resilience")
    await page.getByText("No breakers yet").waitFor()
    await expectAccessible(page, "resilience (empty)")

    // Settings through the form: API-key breakers open at the first failure.
    await page.getByLabel("Failures to open (API key)").fill("1")
    await page.getByLabel("Failures to degrade (API key)").fill("1")
    await page.getByRole("button", { name: "Save settings" }).click()
    await page.getByText("Resilience settings saved").waitFor()
    expect((await gw.admin("GET", "/api/resilience")).body.settings.providerBreaker.apikey).toMatchObject({
      failureThreshold: 1,
      degradationThreshold: 1
    })

    // Arrange failing traffic: a connection whose upstream answers 500, called with the admin key.
    const made = await gw.admin("POST", "/api/providers", {
      provider: "openai-compatible",
      name: "flaky",
      baseUrl: failing.baseUrl("openai-chat"),
      apiKey: "sk-flaky-0000000000",
      defaultModel: "m1"
    })
    expect(made.status).toBe(201)
    const origin = new URL(failing.url).host
    const breakerOf = async () =>
      ((await gw.admin("GET", "/api/resilience")).body.breakers as any[]).find((b) => String(b.origin ?? "").includes(origin))
    const r = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "flaky/m1", messages: [{ role: "user", content: "hi" }] })
    })
    expect(r.status).toBeGreaterThanOrEqual(500)
    await r.text()
    expect(failing.requests.length).toBeGreaterThan(0)
    const breaker = await breakerOf()
    expect(breaker.state).toBe("OPEN")

    // The page (refreshed every 5 s) shows it open.
    const bRow = page.getByRole("table", { name: "Circuit breakers" }).getByRole("row").filter({ hasText: origin })
    await bRow.getByText("OPEN", { exact: true }).waitFor({ timeout: 15_000 })
    expect(await bRow.textContent()).toContain("500")
    await page
      .getByRole("table", { name: "Connection states" })
      .getByRole("row")
      .filter({ hasText: "flaky" })
      .getByText("fake upstream is broken")
      .waitFor()
    await expectAccessible(page, "resilience")
    await screenshot(page, "resilience")

    await page.getByRole("button", { name: `Reset ${breaker.key}` }).click()
    await page.getByText(/Reset 1 breaker/).waitFor()
    await bRow.waitFor({ state: "detached" })
    expect(await breakerOf()).toBeUndefined()

    expectNoProblems(problems)
    await context.close()
  })

  it("Cache: shows the statistics and clears them", async () => {
    // Arrange: the same deterministic request twice, the second served from the cache.
    for (let i = 0; i < 2; i++) {
      const r = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${gw.adminKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "fakeup/m2", temperature: 0, messages: [{ role: "user", content: "cache me" }] })
      })
      expect(r.status).toBe(200)
      await r.text()
    }
    const hits = (await gw.admin("GET", "/api/cache/stats")).body.semanticCache.hits
    expect(hits).toBeGreaterThanOrEqual(1)

    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Cache")
    const stats = page.getByLabel("Response cache statistics")
    const hitsStat = stats.locator(".stat").filter({ hasText: "Hits" })
    await hitsStat.getByText(String(hits), { exact: true }).waitFor()
    await expectAccessible(page, "cache")
    await screenshot(page, "cache")

    await page.getByRole("button", { name: "Clear cache" }).click()
    await page.getByRole("dialog", { name: "Clear the cache?" }).getByRole("button", { name: "Clear everything" }).click()
    await page.getByText(/Cache cleared: 1 in memory/).waitFor()
    await hitsStat.getByText("0", { exact: true }).waitFor()
    const after = (await gw.admin("GET", "/api/cache/stats")).body.semanticCache
    expect(after.hits).toBe(0)
    expect(after.memorySize).toBe(0)
    expectNoProblems(problems)
    await context.close()
  })
})
