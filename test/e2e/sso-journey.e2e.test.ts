import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import OpenAI from "openai"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BIN, cleanEnv, runCli } from "../support/cli.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { type StartedOidcProvider, startOidcProvider } from "../support/oidcProvider.js"
import { tempDir } from "../support/gateway.js"
import { until } from "../support/until.js"
import { type DashboardGateway, expectNoProblems, launchBrowser, openPage, PASSWORD, startDashboardGateway } from "./harness.js"

// Teams and single sign-on as a user meets them, from outside: a real OpenID provider
// (oidc-provider) on 127.0.0.1, the built gateway as a process, headless Chromium for every
// sign-in, OpenAI's own client for inference and the built `gateway` CLI for `gateway login`.
// The admin arranges (provider, teams, prices, a team budget) through the management API with
// an admin key; everything the test proves is done by the signed-in people themselves.

// One request of the fake upstream's default usage (11 in, 7 out) at these prices costs 0.25 USD.
const PRICE = { input: 10_000, output: 20_000 }

const ACCOUNTS = {
  alice: { email: "alice@example.test", name: "Alice Example", groups: ["engineering"] },
  tara: { email: "tara@example.test", name: "Tara Lead", groups: ["eng-leads"] },
  victor: { email: "victor@example.test", name: "Victor Viewer", groups: ["auditors"] }
}

describe("teams and single sign-on, end to end", () => {
  let browser: Browser
  let gw: DashboardGateway
  let op: StartedOidcProvider
  let upstream: FakeUpstream
  const teams: Record<string, string> = {}
  let aliceSecret = ""

  /** The session's view (user, role, CSRF token) as the signed-in browser reads it. */
  const sessionOf = async (context: BrowserContext) => (await (await context.request.get(`${gw.url}/api/auth/session`)).json()) as any

  /** A management call made by the signed-in browser (its cookie and CSRF token), as the dashboard makes it. */
  const asBrowser = async (context: BrowserContext, method: string, p: string, body?: unknown) => {
    const { csrfToken } = await sessionOf(context)
    const res = await context.request.fetch(`${gw.url}${p}`, {
      method,
      headers: { "x-csrf-token": csrfToken, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { data: JSON.stringify(body) })
    })
    return { status: res.status(), body: (await res.json().catch(() => undefined)) as any }
  }

  /** Signs `login` in from the dashboard's login page: the provider's button, the provider's own form, back on the overview. */
  const signIn = async (login: keyof typeof ACCOUNTS): Promise<{ context: BrowserContext; page: Page; problems: string[] }> => {
    const opened = await openPage(browser)
    await opened.page.goto(`${gw.url}/dashboard/`)
    await opened.page.getByRole("link", { name: "Sign in with Corp SSO" }).click()
    await opened.page.waitForURL((u) => u.origin === op.issuer)
    await opened.page.locator('input[name="login"]').fill(login)
    await opened.page.locator('input[name="password"]').fill("any")
    await opened.page.locator('button[type="submit"]').click()
    // The dashboard's shell (its banner) replaces the login page, on the gateway's own origin.
    await opened.page.getByRole("link", { name: "Gateway", exact: true }).waitFor()
    expect(new URL(opened.page.url()).origin).toBe(gw.url)
    // The provider's development pages load fonts from the internet (closed here): not the gateway's problems.
    opened.problems.splice(0, opened.problems.length)
    return opened
  }

  beforeAll(async () => {
    upstream = (await FakeUpstream.start()).always({ content: "hello" })
    op = await startOidcProvider({ accounts: ACCOUNTS })
    browser = await launchBrowser()
    gw = await startDashboardGateway({ password: PASSWORD })
    op.redirectUris.push(`${gw.url}/api/auth/oidc/corp/callback`)
    const provider = await gw.admin("POST", "/api/providers", {
      provider: "openai-compatible",
      name: "fake",
      baseUrl: upstream.baseUrl("openai-chat"),
      apiKey: "sk-upstream-e2e",
      models: ["m1"],
      defaultModel: "m1"
    })
    expect(provider.status).toBe(201)
    expect((await gw.admin("PUT", "/api/pricing", { provider: "openai-compatible", model: "m1", ...PRICE })).status).toBe(200)
    for (const name of ["Engineering", "Sales"]) {
      const made = await gw.admin("POST", "/api/teams", { name })
      expect(made.status).toBe(201)
      teams[name] = made.body.id
    }
    // The path for configuring a provider.
    const configured = await gw.admin("POST", "/api/auth/oidc/providers", {
      id: "corp",
      name: "Corp SSO",
      issuer: op.issuer,
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      scopes: ["openid", "profile", "email", "groups"],
      groupsClaim: "groups",
      mappings: [
        { group: "engineering", team: "Engineering", role: "member" },
        { group: "eng-leads", team: "Engineering", role: "team-admin" },
        { group: "auditors", role: "viewer" }
      ]
    })
    expect(configured.status).toBe(201)
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
    await upstream?.close()
    await op?.close()
  })

  it("a member signs in, is made in the team their group names, makes their own key, and is refused past the team's budget with level team", async () => {
    const alice = await signIn("alice")
    try {
      const session = await sessionOf(alice.context)
      expect(session).toMatchObject({
        authenticated: true,
        role: "member",
        user: { email: "alice@example.test", teamIds: [teams.Engineering] }
      })
      const made = (await gw.admin("GET", "/api/users")).body.users.find((u: any) => u.email === "alice@example.test")
      expect(made).toMatchObject({ role: "member", teams: [{ teamId: teams.Engineering, role: "member" }] })

      // Her own key, from the API keys page.
      await alice.page.goto(`${gw.url}/dashboard/keys`)
      await alice.page.getByRole("heading", { level: 1, name: "API keys" }).waitFor()
      await alice.page.getByLabel("Key name").fill("alice-laptop")
      await alice.page.getByRole("button", { name: "Create key" }).click()
      aliceSecret = ((await alice.page.locator("[data-secret]").textContent()) ?? "").trim()
      expect(aliceSecret).toMatch(/^gwk_/)
      expectNoProblems(alice.problems)
    } finally {
      await alice.context.close()
    }

    // The team's budget: one request (0.25 USD) starts below 0.2 USD of spend, the next does not.
    const budget = await gw.admin("POST", "/api/usage/budget", { teamId: teams.Engineering, dailyLimitUsd: 0.2 })
    expect(budget.status).toBe(200)
    const client = new OpenAI({ apiKey: aliceSecret, baseURL: `${gw.url}/v1`, maxRetries: 0 })
    const first = await client.chat.completions.create({ model: "fake/m1", messages: [{ role: "user", content: "hi" }] })
    expect(first.choices[0]?.message.content).toBe("hello")
    await until(
      "the team's spend counts the first request",
      async () => ((await gw.admin("GET", `/api/usage/budget?teamId=${teams.Engineering}`)).body.budgets[0]?.spentUsd ?? 0) > 0
    )
    const refused = await client.chat.completions.create({ model: "fake/m1", messages: [{ role: "user", content: "again" }] }).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(refused).toBeInstanceOf(OpenAI.APIError)
    const error = refused as InstanceType<typeof OpenAI.APIError>
    expect(error.status).toBe(429)
    expect(error.error).toMatchObject({ code: "budget_exhausted", level: "team" })
  })

  it("a team admin cannot touch another team; a viewer cannot write", async () => {
    const tara = await signIn("tara")
    try {
      expect(await sessionOf(tara.context)).toMatchObject({ role: "team-admin", user: { teamAdminOf: [teams.Engineering] } })
      const alice = (await gw.admin("GET", "/api/users")).body.users.find((u: any) => u.email === "alice@example.test")
      // Another team: its members, its budget, the team itself.
      expect(
        (await asBrowser(tara.context, "POST", `/api/teams/${teams.Sales}/members`, { userId: alice.id, role: "member" })).status
      ).toBe(403)
      expect((await asBrowser(tara.context, "POST", "/api/usage/budget", { teamId: teams.Sales, dailyLimitUsd: 1 })).status).toBe(403)
      expect((await asBrowser(tara.context, "PATCH", `/api/teams/${teams.Sales}`, { name: "Mine now" })).status).toBe(403)
      // Their own team's limits are theirs to set, within the level above.
      expect((await asBrowser(tara.context, "POST", "/api/usage/budget", { teamId: teams.Engineering, dailyLimitUsd: 0.1 })).status).toBe(
        200
      )
    } finally {
      await tara.context.close()
    }

    const victor = await signIn("victor")
    try {
      expect(await sessionOf(victor.context)).toMatchObject({ role: "viewer" })
      expect((await asBrowser(victor.context, "GET", "/api/keys")).status).toBe(200)
      expect((await asBrowser(victor.context, "POST", "/api/keys", { name: "viewer-key" })).status).toBe(403)
      expect((await asBrowser(victor.context, "POST", "/api/teams", { name: "Viewers" })).status).toBe(403)
      // The dashboard hides what a viewer cannot do.
      await victor.page.goto(`${gw.url}/dashboard/keys`)
      await victor.page.getByRole("heading", { level: 1, name: "API keys" }).waitFor()
      await victor.page.waitForLoadState("networkidle")
      expect(await victor.page.getByRole("button", { name: "Create key" }).count()).toBe(0)
      expectNoProblems(victor.problems)
    } finally {
      await victor.context.close()
    }
  })

  it("sign-out ends the session: the cookie it had no longer reaches the management API", async () => {
    const alice = await signIn("alice")
    try {
      const cookie = (await alice.context.cookies(gw.url)).find((c) => c.name === "gw_session")!.value
      expect((await fetch(`${gw.url}/api/keys`, { headers: { cookie: `gw_session=${cookie}` } })).status).toBe(200)
      await alice.page.getByRole("button", { name: "Log out" }).click()
      await alice.page.getByRole("heading", { name: "Log in to the gateway" }).waitFor()
      expect((await sessionOf(alice.context)).authenticated).toBe(false)
      expect((await fetch(`${gw.url}/api/keys`, { headers: { cookie: `gw_session=${cookie}` } })).status).toBe(401)
    } finally {
      await alice.context.close()
    }
  })

  it("gateway login signs the CLI in through the device grant, approved in the browser, and the member makes a key with it", async () => {
    const configDir = tempDir("gw-sso-journey-cli-")
    const env = { GATEWAY_CONFIG_DIR: configDir, GATEWAY_NO_BROWSER: "1" }
    const child = spawn(process.execPath, [BIN, "login", "--url", gw.url, "--provider", "corp"], {
      env: cleanEnv(env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
    try {
      await until("gateway login shows the device code", () => /on any device/.test(stderr), 30_000)
      const [, address, code] = /open (\S+) on any device.*\(code (\S+),/.exec(stderr)!
      const { context, page } = await openPage(browser)
      try {
        await page.goto(address!)
        // The provider's device pages: the code (prefilled or typed), its sign-in, its confirmation.
        for (let step = 0; step < 10; step++) {
          const text = (await page.textContent("body")) ?? ""
          if (/success|signed in|continue on your device|close this window/i.test(text) && !(await page.locator("form").count())) break
          if (await page.locator('input[name="login"]:visible').count()) {
            await page.locator('input[name="login"]').fill("alice")
            await page.locator('input[name="password"]').fill("any")
          } else if (await page.locator('input[name="user_code"]:visible').count()) {
            await page.locator('input[name="user_code"]').fill(code!)
          }
          await Promise.all([page.waitForLoadState("domcontentloaded"), page.locator('button[type="submit"]:visible').first().click()])
          await page.waitForLoadState("networkidle")
        }
      } finally {
        await context.close()
      }
      expect(await exited).toBe(0)
    } finally {
      child.kill()
    }
    expect(stdout).toMatch(/signed in to .* as alice@example\.test \(member\) through Corp SSO/)
    const sessions = path.join(configDir, "sessions.json")
    expect(fs.statSync(sessions).mode & 0o777).toBe(0o600)

    // The CLI's remote command uses the kept session: the key is Alice's, made without an admin key.
    const added = await runCli(["keys", "add", "--url", gw.url, "--name", "alice-cli", "--json"], env)
    expect(added.code, added.stderr).toBe(0)
    const key = JSON.parse(added.stdout)
    const alice = (await gw.admin("GET", "/api/users")).body.users.find((u: any) => u.email === "alice@example.test")
    expect(key).toMatchObject({ name: "alice-cli", userId: alice.id })
    expect(key.secret).toMatch(/^gwk_/)
  })
})
