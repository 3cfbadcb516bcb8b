import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  type DashboardGateway,
  expectAccessible,
  expectNoProblems,
  launchBrowser,
  login,
  openPage,
  PASSWORD,
  screenshot,
  startDashboardGateway
} from "./harness.js"

describe("dashboard: first run, login, logout", () => {
  let browser: Browser
  let gw: DashboardGateway
  beforeAll(async () => {
    browser = await launchBrowser()
    gw = await startDashboardGateway()
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
  })

  it("a new gateway asks for an admin password, then opens the overview with the next steps", async () => {
    const { page, problems, context } = await openPage(browser)
    await page.goto(`${gw.url}/dashboard/`)
    await page.getByRole("heading", { name: "Welcome: set the admin password" }).waitFor()
    await expectAccessible(page, "setup")
    await screenshot(page, "setup")
    await page.getByLabel("New admin password").fill(PASSWORD)
    await page.getByLabel("Repeat it").fill("something else")
    await page.getByRole("button", { name: "Set password and continue" }).click()
    await page.getByText("the two passwords differ").waitFor()
    await page.getByLabel("Repeat it").fill(PASSWORD)
    await page.getByRole("button", { name: "Set password and continue" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await page.getByRole("heading", { name: "Get started" }).waitFor()
    // The password now exists: the API says so, and setup cannot run twice.
    expect((await gw.admin("GET", "/api/init")).body.passwordSet).toBe(true)
    const again = await gw.admin("POST", "/api/auth/setup", { password: "another-password" })
    expect(again.status).toBe(409)
    expectNoProblems(problems)
    await context.close()
  })

  it("logs out, refuses a wrong password with the API's message, and logs in", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await page.getByRole("button", { name: "Log out" }).click()
    await page.getByRole("heading", { name: "Log in to the gateway" }).waitFor()
    await page.getByLabel("Admin password").fill("wrong-password")
    await page.getByRole("button", { name: "Log in" }).click()
    await page.getByRole("alert").waitFor()
    expect(await page.getByRole("alert").textContent()).toMatch(/password/i)
    await expectAccessible(page, "login")
    await screenshot(page, "login")
    await page.getByLabel("Admin password").fill(PASSWORD)
    await page.getByRole("button", { name: "Log in" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    // A 401 from the wrong password is expected; nothing else may fail.
    expectNoProblems(problems.filter((p) => !p.includes("401")))
    await context.close()
  })
})
