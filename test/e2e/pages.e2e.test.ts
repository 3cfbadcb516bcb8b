import { readFileSync } from "node:fs"
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

// Every page of the navigation on a fresh gateway (the empty states a new user sees first), on
// a wide screen and a phone: it opens by its own URL and from the menu, has its heading, passes
// the accessibility check, and nothing fails in the browser. The page list is the app's own
// registry (web/src/pages.ts), so a new page is covered without touching this test.

const PAGES = [
  ...readFileSync(new URL("../../web/src/pages.ts", import.meta.url), "utf8").matchAll(/\{ path: "([^"]+)", title: "([^"]+)"/g)
].map((m) => ({
  path: m[1]!,
  title: m[2]!
}))
// Code run in the page is given as strings: the test project has Node's types, not the DOM's.
const slug = (p: string) => (p === "/" ? "overview" : p.slice(1).replace(/\//g, "-"))

describe("every dashboard page, empty", () => {
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

  it("the registry lists the pages the issue names", () => {
    expect(PAGES.map((p) => p.title)).toEqual(
      expect.arrayContaining([
        "Overview",
        "Providers",
        "Combos",
        "API keys",
        "Usage & cost",
        "Request log",
        "Resilience",
        "Cache",
        "Settings",
        "Feature flags",
        "Webhooks",
        "Guardrails & audit",
        "Backups",
        "Coding tools",
        "Skills",
        "Compression",
        "Models & aliases",
        "Plugins",
        "Playground",
        "Tunnels"
      ])
    )
  })

  for (const viewport of [
    { name: "desktop", width: 1366, height: 900 },
    { name: "phone", width: 390, height: 844 }
  ]) {
    it(`on a ${viewport.name} screen each page opens by URL, has its heading, is accessible, and shows no errors`, async () => {
      const { page, problems, context } = await openPage(browser, { viewport })
      await login(page, gw.url)
      for (const entry of PAGES) {
        await page.goto(`${gw.url}/dashboard${entry.path === "/" ? "/" : entry.path}`)
        await page.getByRole("heading", { level: 1, name: entry.title }).waitFor()
        // Data loaded (or its empty state): no "Loading…" left.
        await expect.poll(() => page.locator("[aria-busy='true']").count(), { timeout: 10_000 }).toBe(0)
        await expectAccessible(page, `${entry.title} (${viewport.name})`)
        await screenshot(page, `empty-${slug(entry.path)}-${viewport.name}`)
      }
      expectNoProblems(problems)
      await context.close()
    })
  }

  it("the phone menu opens, lists every page, and navigates", async () => {
    const { page, problems, context } = await openPage(browser, { viewport: { width: 390, height: 844 } })
    await login(page, gw.url)
    const nav = page.getByRole("navigation", { name: "Dashboard" })
    expect(await nav.isVisible()).toBe(false)
    const toggle = page.getByRole("button", { name: "Menu" })
    expect(await toggle.getAttribute("aria-expanded")).toBe("false")
    await toggle.click()
    expect(await toggle.getAttribute("aria-expanded")).toBe("true")
    for (const entry of PAGES) expect(await nav.getByRole("link", { name: entry.title, exact: true }).isVisible()).toBe(true)
    await screenshot(page, "phone-menu")
    await nav.getByRole("link", { name: "Webhooks", exact: true }).click()
    await page.getByRole("heading", { level: 1, name: "Webhooks" }).waitFor()
    // The menu closes after choosing.
    expect(await nav.isVisible()).toBe(false)
    expectNoProblems(problems)
    await context.close()
  })

  it("works from the keyboard: skip link first, the menu by Tab and Enter, back and forward", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await page.goto(`${gw.url}/dashboard/`)
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await page.keyboard.press("Tab")
    expect(await page.evaluate("document.activeElement?.textContent")).toBe("Skip to content")
    await page.keyboard.press("Enter")
    expect(await page.evaluate("location.hash")).toBe("#main")
    // Tab until the "API keys" link has focus, then Enter opens it.
    await page.goto(`${gw.url}/dashboard/`)
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    let found = false
    for (let i = 0; i < 40 && !found; i++) {
      await page.keyboard.press("Tab")
      found = (await page.evaluate("document.activeElement?.textContent")) === "API keys"
    }
    expect(found).toBe(true)
    // The focused link shows a focus ring (not removed by the stylesheet).
    expect(await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")).not.toBe("none")
    await page.keyboard.press("Enter")
    await page.getByRole("heading", { level: 1, name: "API keys" }).waitFor()
    expect(new URL(page.url()).pathname).toBe("/dashboard/keys")
    await page.goBack()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await page.goForward()
    await page.getByRole("heading", { level: 1, name: "API keys" }).waitFor()
    expectNoProblems(problems)
    await context.close()
  })

  it("an unknown page says so and links back; the app's files come with the CSP and cache rules", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    const res = await page.goto(`${gw.url}/dashboard/no-such-page`)
    expect(res?.headers()["content-security-policy"]).toContain("default-src 'self'")
    expect(res?.headers()["cache-control"]).toBe("no-cache")
    await page.getByRole("heading", { level: 1, name: "Page not found" }).waitFor()
    await page.getByRole("link", { name: "Go to the overview" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    const scripts = await (page.evaluate("[...document.querySelectorAll('script[src]')].map((s) => s.src)") as Promise<string[]>)
    expect(scripts.length).toBeGreaterThan(0)
    for (const src of scripts) {
      expect(new URL(src).origin).toBe(new URL(gw.url).origin)
      const asset = await fetch(src)
      expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable")
    }
    expectNoProblems(problems)
    await context.close()
  })
})
