import * as path from "node:path"
import type { Browser } from "playwright-core"
import { startAuthServer, startResourceServer } from "../support/mcpOAuthServers.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
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

// The MCP servers page, driven through the browser: register the reference "everything" MCP
// server over stdio with the page's form, see it become ready, allow its echo tool with the
// switch, call echo from the call form (a malformed JSON argument is refused before anything is
// sent), edit the server without its masked env value being replaced, disable it and remove it.
// gw.admin only checks.

const EVERYTHING = path.resolve(__dirname, "../../node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const SECRET = "sk-e2e-env-secret-0123456789abcdef"

describe("dashboard: MCP servers", () => {
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

  it("adds a stdio server, allows echo with its switch, calls it, keeps the masked secret on edit, disables and removes it", async () => {
    const { page, problems, context } = await openPage(browser)
    await login(page, gw.url)
    await goTo(page, "MCP servers")
    await page.getByText("No MCP servers yet").waitFor()

    // Added through the form: a stdio command, its arguments one a line, an env secret.
    await page.getByRole("button", { name: "Add a server" }).click()
    const add = page.getByRole("dialog").getByRole("form", { name: "Add an MCP server" })
    await add.getByLabel("Name", { exact: true }).fill("everything")
    expect(await add.getByLabel("Transport").inputValue()).toBe("stdio")
    await add.getByLabel("Command", { exact: true }).fill(process.execPath)
    await add.getByLabel("Arguments", { exact: true }).fill(`${EVERYTHING}\nstdio`)
    await add.getByLabel("Environment").fill(`EV_TOKEN=${SECRET}`)
    await add.getByRole("button", { name: "Add server" }).click()
    await page.getByText("everything added").waitFor()
    expect(await page.getByRole("dialog").count()).toBe(0)

    const created = (await gw.admin("GET", "/api/mcp/servers/everything")).body
    expect(created).toMatchObject({ transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"], allowedTools: [] })
    expect(created.env.EV_TOKEN).not.toBe(SECRET)

    // The page follows its health until it is ready and lists what the server offers.
    await page.locator('[data-health="ready"]').waitFor({ timeout: 45_000 })
    const echo = page.getByRole("switch", { name: "Allow echo", exact: true })
    await echo.waitFor()
    expect(await echo.isChecked()).toBe(false)
    // The secret never reaches the page: the listing masks it.
    expect(await page.content()).not.toContain(SECRET)

    // Allowed with its switch: the list replaced by ["echo"].
    await echo.check()
    await page.getByText("everything: echo allowed").waitFor()
    expect((await gw.admin("GET", "/api/mcp/servers/everything")).body.allowedTools).toEqual(["echo"])
    const offerings = (await gw.admin("GET", "/api/mcp/servers/everything/tools")).body.offerings as Array<{
      name: string
      allowed: boolean
    }>
    expect(offerings.filter((o) => o.allowed).map((o) => o.name)).toEqual(["echo"])
    expect(await echo.isChecked()).toBe(true)

    // A call: malformed JSON is refused by the form, nothing sent.
    const callForm = page.getByRole("form", { name: "Call a tool of everything" })
    await callForm.getByLabel("Tool", { exact: true }).selectOption("echo")
    const args = callForm.getByLabel("Arguments (JSON)")
    await args.fill('{"message": ')
    await callForm.getByRole("button", { name: "Call" }).click()
    await page.locator("[data-args-error]", { hasText: "not valid JSON" }).waitFor()
    expect(await page.locator("[data-call-result]").count()).toBe(0)
    await args.fill("[1, 2]")
    await callForm.getByRole("button", { name: "Call" }).click()
    await page.locator("[data-args-error]", { hasText: "must be a JSON object" }).waitFor()

    await args.fill('{"message": "hello from the dashboard"}')
    await callForm.getByRole("button", { name: "Call" }).click()
    const result = page.locator("[data-call-result]")
    await result.locator("[data-content-text]", { hasText: "Echo: hello from the dashboard" }).waitFor()
    expect(await page.locator("[data-args-error]").count()).toBe(0)
    await result.getByText("Raw JSON").click()
    expect(JSON.parse(await result.locator("[data-raw]").innerText())).toEqual({
      content: [{ type: "text", text: "Echo: hello from the dashboard" }]
    })
    await expectAccessible(page, "mcp servers")
    await screenshot(page, "mcp-servers")

    // A tool's own failure (isError) is shown as one: echo without its message.
    await args.fill("{}")
    await callForm.getByRole("button", { name: "Call" }).click()
    await result.getByText("the tool reported an error").waitFor()
    expect(await result.locator("[data-content-text]").innerText()).toContain("message")

    // Edited: the env value comes masked and goes back unchanged; the process keeps its secret.
    const before = (await gw.admin("GET", "/api/mcp/servers/everything")).body
    await page.getByRole("button", { name: "Edit everything" }).click()
    const dialog = page.getByRole("dialog")
    const env = dialog.getByLabel("Environment")
    expect(await env.inputValue()).toBe(`EV_TOKEN=${before.env.EV_TOKEN}`)
    await dialog.getByLabel("Call time limit (ms)").fill("1000")
    await dialog.getByRole("button", { name: "Save" }).click()
    await page.getByText("everything saved").waitFor()
    const after = (await gw.admin("GET", "/api/mcp/servers/everything")).body
    expect(after).toMatchObject({ timeoutMs: 1000, env: before.env, args: before.args })
    // Same connection (its fingerprint includes env): not restarted, and the secret is what was stored.
    expect(after.health).toMatchObject({ state: "ready", pid: before.health.pid, restarts: before.health.restarts })
    await callForm.getByLabel("Tool", { exact: true }).selectOption("get-env")
    await args.fill("{}")
    await callForm.getByRole("button", { name: "Call" }).click()
    await result.locator("[data-content-text]", { hasText: "EV_TOKEN" }).waitFor()
    expect(JSON.parse(await result.locator("[data-content-text]").first().innerText()).EV_TOKEN).toBe(SECRET)

    // A call that fails at the gateway (past the 1 s limit just set: 502) is shown with the API's message.
    await callForm.getByLabel("Tool", { exact: true }).selectOption("trigger-long-running-operation")
    await args.fill('{"duration": 3, "steps": 1}')
    await callForm.getByRole("button", { name: "Call" }).click()
    const failed = page.locator("[data-call-error]")
    await failed.waitFor()
    expect(await failed.innerText()).toMatch(/trigger-long-running-operation failed — HTTP 502: /)
    expect(await result.count()).toBe(0)

    // Disabled with its switch, then removed after the confirmation.
    await page.getByRole("switch", { name: "everything enabled" }).uncheck()
    await page.locator('[data-health="disabled"]').waitFor()
    expect((await gw.admin("GET", "/api/mcp/servers/everything")).body.enabled).toBe(false)
    await page.getByRole("button", { name: "Remove everything" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Remove" }).click()
    await page.getByText("No MCP servers yet").waitFor()
    expect((await gw.admin("GET", "/api/mcp/servers")).body.servers).toEqual([])

    // An http server that cannot be reached: its header secret masked, its state and reason shown.
    await page.getByRole("button", { name: "Add a server" }).click()
    await add.getByLabel("Name", { exact: true }).fill("remote")
    await add.getByLabel("Transport").selectOption("http")
    expect(await add.getByLabel("Command", { exact: true }).count()).toBe(0)
    await add.getByLabel("URL").fill("http://127.0.0.1:9/mcp")
    await add.getByLabel("Headers").fill(`Authorization=Bearer ${SECRET}`)
    await add.getByRole("button", { name: "Add server" }).click()
    await page.getByText("remote added").waitFor()
    const row = page.getByRole("row").filter({ has: page.locator('[data-server="remote"]') })
    await row.locator("[data-reason]").waitFor({ timeout: 30_000 })
    expect(await row.locator("[data-health]").getAttribute("data-health")).toMatch(/^(restarting|failed)$/)
    const remote = (await gw.admin("GET", "/api/mcp/servers/remote")).body
    expect(remote).toMatchObject({ transport: "http", url: "http://127.0.0.1:9/mcp", command: null })
    expect(remote.headers.Authorization).not.toContain(SECRET)
    expect(await page.content()).not.toContain(SECRET)
    await screenshot(page, "mcp-servers-unreachable")
    await page.getByRole("button", { name: "Remove remote" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Remove" }).click()
    await page.getByText("No MCP servers yet").waitFor()

    // The one failed request is the time-out above, which the page showed (the browser logs it too).
    const timedOut = (p: string) =>
      p === "HTTP 502: POST /api/mcp/servers/everything/call" || /^console error: Failed to load resource: .*502/.test(p)
    expect(problems.filter((p) => p.startsWith("HTTP 502"))).toHaveLength(1)
    expectNoProblems(problems.filter((p) => !timedOut(p)))
    await context.close()
  })

  it("signs in to a remote server that asks for OAuth from the page: Sign in opens the authorization server, its redirect comes back, the server is ready", async () => {
    const as = await startAuthServer()
    const rs = await startResourceServer({ validAccess: as.validAccess, url: () => as.url })
    const { page, problems, context } = await openPage(browser)
    try {
      expect(
        (await gw.admin("POST", "/api/mcp/servers", { name: "locked", transport: "http", url: `${rs.state.url}/mcp`, allowedTools: ["*"] }))
          .status
      ).toBe(201)
      await login(page, gw.url)
      await goTo(page, "MCP servers")
      const row = page.getByRole("row").filter({ has: page.locator('[data-server="locked"]') })
      await row.locator('[data-health="needs-auth"]').waitFor({ timeout: 30_000 })
      // The authorization server auto-approves: the new tab goes there and straight back to the gateway's callback.
      const [tab] = await Promise.all([context.waitForEvent("page"), page.getByRole("button", { name: "Sign in to locked" }).click()])
      await tab.waitForURL((u) => u.pathname === "/api/mcp/oauth/callback", { timeout: 15_000 })
      await row.locator('[data-health="ready"]').waitFor({ timeout: 30_000 })
      await page.getByRole("button", { name: "Sign out of locked" }).waitFor()
      const view = (await gw.admin("GET", "/api/mcp/servers/locked")).body
      expect(view.oauth).toMatchObject({ signedIn: true })
      expect(as.get().codeGrants).toBe(1)
      await screenshot(page, "mcp-servers-signed-in")
      // Signed out: back to needs-auth, with Sign in offered again.
      await page.getByRole("button", { name: "Sign out of locked" }).click()
      await row.locator('[data-health="needs-auth"]').waitFor({ timeout: 30_000 })
      await page.getByRole("button", { name: "Sign in to locked" }).waitFor()
      await tab.close()
      expectNoProblems(problems)
    } finally {
      await gw.admin("DELETE", "/api/mcp/servers/locked")
      await context.close()
      await rs.close()
      await as.close()
    }
  })
})
