import * as path from "node:path"
import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type DashboardGateway,
  expectAccessible,
  expectNoProblems,
  goTo,
  holdGets,
  launchBrowser,
  login,
  openPage,
  PASSWORD,
  screenshot,
  startDashboardGateway
} from "./harness.js"

// The Plugins page, driven through the browser only: install an example plugin from its folder,
// edit its settings in the form generated from its configSchema (a value out of its range is
// refused by the form), disable it and remove it. gw.admin only checks.

const EXAMPLE = path.resolve(__dirname, "../../examples/plugins/rate-rule-blocker")

describe("dashboard: plugins", () => {
  let browser: Browser
  let gw: DashboardGateway
  beforeAll(async () => {
    browser = await launchBrowser()
    gw = await startDashboardGateway({ password: PASSWORD })
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
  })

  it("installs a plugin from a folder, edits its settings from its configSchema, disables and removes it", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "Plugins")
    await page.getByText("No plugins installed").waitFor()

    await page.getByLabel("Folder or .tgz on the server").fill(EXAMPLE)
    await page.getByLabel("Enable now").check()
    await page.getByRole("button", { name: "Install" }).click()
    const card = page.locator('[data-plugin="rate-rule-blocker"]')
    await card.locator("[data-state]", { hasText: "running" }).waitFor()
    expect((await gw.admin("GET", "/api/plugins/rate-rule-blocker")).body).toMatchObject({ enabled: true, state: "running" })

    // The form has one control per configSchema field, with the field's description as its hint.
    const perMinute = card.getByLabel("perMinute")
    expect(await perMinute.inputValue()).toBe("60")
    expect(await card.getByText("Requests a minute per API key").count()).toBe(1)
    await expectAccessible(page, "plugins")
    await screenshot(page, "plugins")

    // The list reloads after a save; that reload is held here until the user has typed again, so
    // it lands on a form being edited: what the user typed stays (it was reset to the saved value).
    const reload = await holdGets(page, /\/api\/plugins$/)
    await perMinute.fill("5")
    await card.getByLabel("modelPrefix").fill("gpt-")
    await card.getByRole("button", { name: "Save settings" }).click()
    await page.getByText("rate-rule-blocker: settings saved").waitFor()
    expect((await gw.admin("GET", "/api/plugins/rate-rule-blocker")).body.config).toMatchObject({ perMinute: 5, modelPrefix: "gpt-" })

    // A value below the field's min: the form (min/max from configSchema) refuses it, nothing is sent.
    await perMinute.fill("-3")
    await reload.release()
    expect(await perMinute.inputValue()).toBe("-3")
    expect(await card.getByLabel("modelPrefix").inputValue()).toBe("gpt-")
    await card.getByRole("button", { name: "Save settings" }).click()
    expect(await perMinute.evaluate((el) => (el as unknown as { validity: { rangeUnderflow: boolean } }).validity.rangeUnderflow)).toBe(
      true
    )
    expect((await gw.admin("GET", "/api/plugins/rate-rule-blocker")).body.config.perMinute).toBe(5)
    await perMinute.fill("5")

    await page.getByRole("button", { name: "Disable", exact: true }).click()
    await card.locator("[data-state]", { hasText: "stopped" }).waitFor()
    expect((await gw.admin("GET", "/api/plugins/rate-rule-blocker")).body).toMatchObject({ enabled: false, state: "stopped" })

    await page.getByRole("button", { name: "Remove" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Remove" }).click()
    await page.getByText("No plugins installed").waitFor()
    expect((await gw.admin("GET", "/api/plugins")).body.plugins).toEqual([])
    expectNoProblems(problems)
    await context.close()
  })
})
