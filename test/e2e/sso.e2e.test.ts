import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type StartedOidcProvider, startOidcProvider } from "../support/oidcProvider.js"
import {
  type DashboardGateway,
  expectAccessible,
  expectNoProblems,
  launchBrowser,
  openPage,
  PASSWORD,
  screenshot,
  startDashboardGateway
} from "./harness.js"

describe("dashboard: single sign-on", () => {
  let browser: Browser
  let gw: DashboardGateway
  let op: StartedOidcProvider
  beforeAll(async () => {
    browser = await launchBrowser()
    op = await startOidcProvider()
    gw = await startDashboardGateway({ password: PASSWORD })
    op.redirectUris.push(`${gw.url}/api/auth/oidc/corp/callback`)
    const created = await gw.admin("POST", "/api/auth/oidc/config/providers", {
      id: "corp",
      name: "Corp SSO",
      issuer: op.issuer,
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      scopes: ["openid", "profile", "email", "groups"],
      mappings: [
        { group: "gateway-admins", role: "admin" },
        { group: "engineering", role: "member" }
      ]
    })
    expect(created.status).toBe(201)
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await op?.close()
  })

  /** The gateway's own problems only: the provider's development pages load fonts from the internet, which is closed here. */
  const ours = (problems: ReadonlyArray<string>) => problems.filter((p) => !p.includes("fonts.googleapis.com") && !p.includes(op.issuer))

  it("the login page lists the providers; a click signs in at the provider and comes back to the dashboard; Log out ends it", async () => {
    const { page, problems, context } = await openPage(browser)
    await page.goto(`${gw.url}/dashboard/`)
    await page.getByRole("heading", { name: "Log in to the gateway" }).waitFor()
    const button = page.getByRole("link", { name: "Sign in with Corp SSO" })
    await button.waitFor()
    await page.getByLabel("Admin password").waitFor()
    await expectAccessible(page, "login with single sign-on")
    await screenshot(page, "login-sso")

    await button.click()
    // The provider's own sign-in page (oidc-provider's development pages), on its own origin.
    await page.waitForURL((u) => u.origin === op.issuer)
    await page.locator('input[name="login"]').fill("bob")
    await page.locator('input[name="password"]').fill("any")
    await page.locator('button[type="submit"]').click()
    await page.getByRole("link", { name: "Gateway", exact: true }).waitFor()
    expect(new URL(page.url()).origin).toBe(gw.url)
    // What the provider's own pages logged (their fonts from the internet, their favicon) is not the dashboard's.
    problems.splice(0, problems.length, ...ours(problems).filter((p) => !p.startsWith("console error: Failed to load resource")))
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    await page.waitForLoadState("networkidle")
    const session = (await (await context.request.get(`${gw.url}/api/auth/session`)).json()) as { authenticated: boolean }
    expect(session.authenticated).toBe(true)

    await page.getByRole("button", { name: "Log out" }).click()
    await page.getByRole("heading", { name: "Log in to the gateway" }).waitFor()
    const after = (await (await context.request.get(`${gw.url}/api/auth/session`)).json()) as { authenticated: boolean }
    expect(after.authenticated).toBe(false)
    expectNoProblems(ours(problems))
    await context.close()
  })

  it("with password sign-in turned off, the login page offers single sign-on only", async () => {
    const off = await gw.admin("PUT", "/api/auth/password-login", { enabled: false })
    expect(off.status).toBe(200)
    try {
      const { page, problems, context } = await openPage(browser)
      await page.goto(`${gw.url}/dashboard/`)
      await page.getByText("Password sign-in is turned off on this gateway").waitFor()
      expect(await page.getByLabel("Admin password").count()).toBe(0)
      await page.getByRole("link", { name: "Sign in with Corp SSO" }).waitFor()
      await screenshot(page, "login-sso-only")
      expectNoProblems(ours(problems))
      await context.close()
    } finally {
      await gw.admin("PUT", "/api/auth/password-login", { enabled: true })
    }
  })

  it("a user whose groups map to nothing sees why, on a page of the gateway", async () => {
    const { page, context } = await openPage(browser)
    await page.goto(`${gw.url}/api/auth/oidc/corp/login`)
    await page.waitForURL((u) => u.origin === op.issuer)
    await page.locator('input[name="login"]').fill("carol")
    await page.locator('input[name="password"]').fill("any")
    await page.locator('button[type="submit"]').click()
    await page.getByRole("heading", { name: "Sign-in refused" }).waitFor()
    expect(await page.textContent("body")).toContain("sales")
    await context.close()
  })
})
