import { readFileSync } from "node:fs"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { ProviderBrowser, type StartedOidcProvider, startOidcProvider } from "../support/oidcProvider.js"
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

// People and teams through the browser: users and teams made, changed and deleted on the People &
// teams page; usage of keys owned by users of two teams shown by team and by user on Usage & cost,
// narrowed to one team, and downloaded as CSV; each key's owner on API keys; and a member, signed
// in through single sign-on, creating their own key. The provider, the keys' requests and the
// member's sign-in are arranged outside the browser (that is not what this proves).

// One request of the fake upstream's default usage (11 in, 7 out) at these prices costs
// 11 × 10000 / 1e6 + 7 × 20000 / 1e6 = 0.25 USD.
const PRICE = { input: 10_000, output: 20_000 }

describe("dashboard: people, teams, and usage by team and user", () => {
  let browser: Browser
  let gw: DashboardGateway
  let upstream: FakeUpstream
  let op: StartedOidcProvider
  let page: Page
  let problems: string[]
  let close: () => Promise<void>
  const ids: Record<string, string> = {}

  const chat = (secret: string) =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "fake/m1", messages: [{ role: "user", content: "hi" }] })
    })

  beforeAll(async () => {
    upstream = (await FakeUpstream.start()).always({ content: "hello" })
    op = await startOidcProvider()
    browser = await launchBrowser()
    gw = await startDashboardGateway({ password: PASSWORD })
    const made = await gw.admin("POST", "/api/providers", {
      provider: "openai-compatible",
      name: "fake",
      baseUrl: upstream.baseUrl("openai-chat"),
      apiKey: "sk-upstream-e2e",
      models: ["m1"],
      defaultModel: "m1"
    })
    expect(made.status).toBe(201)
    expect((await gw.admin("PUT", "/api/pricing", { provider: "openai-compatible", model: "m1", ...PRICE })).status).toBe(200)
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
    await op?.close()
  })

  it("creates teams and users, changes a role and a team role, removes a member and deletes a user", async () => {
    await goTo(page, "People & teams")
    await expectAccessible(page, "people (first visit)")
    for (const team of ["Red", "Blue"]) {
      await page.getByLabel("Team name").fill(team)
      await page.getByRole("button", { name: "Create team" }).click()
      await page
        .getByRole("table", { name: "Teams" })
        .getByRole("row", { name: new RegExp(team) })
        .waitFor()
    }
    const teams = (await gw.admin("GET", "/api/teams")).body.teams as Array<{ id: string; name: string }>
    ids.red = teams.find((t) => t.name === "Red")!.id
    ids.blue = teams.find((t) => t.name === "Blue")!.id

    const addUser = async (email: string, name: string, team: string) => {
      const form = page.getByRole("form", { name: "Add a user" })
      await form.getByLabel("Email").fill(email)
      await form.getByLabel("Name").fill(name)
      await form.getByLabel("Team").selectOption({ label: team })
      await form.getByRole("button", { name: "Add user" }).click()
      await page
        .getByRole("table", { name: "Users" })
        .getByRole("row", { name: new RegExp(email) })
        .waitFor()
    }
    await addUser("rita@example.test", "Rita", "Red")
    await addUser("boris@example.test", "Boris", "Blue")
    await addUser("temp@example.test", "Temp", "Red")
    const users = (await gw.admin("GET", "/api/users")).body.users as Array<{ id: string; email: string; role: string; teams: any[] }>
    for (const u of users) ids[u.email] = u.id
    expect(users.find((u) => u.email === "rita@example.test")).toMatchObject({
      role: "member",
      teams: [{ teamId: ids.red, role: "member" }]
    })

    // A role changed in place.
    await page.getByLabel("Role of boris@example.test").selectOption("viewer")
    await page.getByText("boris@example.test is now viewer").waitFor()
    expect((await gw.admin("GET", "/api/users")).body.users.find((u: any) => u.email === "boris@example.test").role).toBe("viewer")

    // Red's members: Temp made team-admin of Red, then removed from it.
    await page.getByRole("table", { name: "Teams" }).getByRole("row", { name: /Red/ }).getByRole("button", { name: "Members" }).click()
    const dialog = page.getByRole("dialog", { name: "Members of Red" })
    await dialog
      .getByRole("table", { name: "Members of Red" })
      .getByRole("row", { name: /temp@example.test/ })
      .waitFor()
    await expectAccessible(page, "team members")
    await screenshot(page, "team-members")
    await dialog.getByLabel("Team role of temp@example.test").selectOption("team-admin")
    await page.getByText("temp@example.test is now team-admin of Red").waitFor()
    expect((await gw.admin("GET", `/api/teams/${ids.red}/members`)).body.members).toContainEqual(
      expect.objectContaining({ userId: ids["temp@example.test"], role: "team-admin" })
    )
    await dialog
      .getByRole("row", { name: /temp@example.test/ })
      .getByRole("button", { name: "Remove" })
      .click()
    await page.getByText("temp@example.test left Red").waitFor()
    expect((await gw.admin("GET", `/api/teams/${ids.red}/members`)).body.members.map((m: any) => m.userId)).toEqual([
      ids["rita@example.test"]
    ])
    // Boris joins Red too, as a member, from the same dialog.
    await dialog.getByLabel("User").selectOption({ label: "Boris (boris@example.test)" })
    await dialog.getByRole("button", { name: "Add member" }).click()
    await dialog.getByRole("row", { name: /boris@example.test/ }).waitFor()
    await dialog.getByRole("button", { name: "Close" }).click()

    // Temp is deleted.
    await page
      .getByRole("table", { name: "Users" })
      .getByRole("row", { name: /temp@example.test/ })
      .getByRole("button", { name: "Delete" })
      .click()
    await page.getByRole("dialog", { name: "Delete user" }).getByRole("button", { name: "Delete user" }).click()
    await page.getByText("User deleted").waitFor()
    expect((await gw.admin("GET", "/api/users")).body.users.map((u: any) => u.email)).not.toContain("temp@example.test")
    await expectAccessible(page, "people")
    await screenshot(page, "people")
    expectNoProblems(problems)
  })

  it("shows each key's owner, and usage by team and by user, narrowed to one team, as CSV too", async () => {
    // Rita's key (Red), Boris's key (Blue and Red), the Blue team's own key: 2 + 1 + 1 requests.
    const key = async (name: string, owner: Record<string, string>) => {
      const r = await gw.admin("POST", "/api/keys", { name, ...owner })
      expect(r.status).toBe(201)
      return r.body.secret as string
    }
    const rita = await key("rita-laptop", { userId: ids["rita@example.test"]! })
    const boris = await key("boris-ci", { userId: ids["boris@example.test"]! })
    const blue = await key("blue-shared", { teamId: ids.blue! })
    for (const secret of [rita, rita, boris, blue]) expect((await chat(secret)).status).toBe(200)

    await goTo(page, "API keys")
    const keys = page.getByRole("table", { name: "API keys" })
    await keys
      .getByRole("row", { name: /rita-laptop/ })
      .getByText("Rita", { exact: true })
      .waitFor()
    await keys
      .getByRole("row", { name: /blue-shared/ })
      .getByText("team Blue")
      .waitFor()

    await goTo(page, "Usage & cost")
    const byTeam = page.getByRole("table", { name: "Usage by team" })
    // Red: Rita 2 + Boris 1 (a member of both); Blue: Boris 1 + its own key 1.
    await byTeam.getByRole("row", { name: /Red\s+3\b/ }).waitFor()
    await byTeam
      .getByRole("row", { name: /Blue\s+2\b/ })
      .getByText("$0.50")
      .waitFor()
    await page
      .getByRole("table", { name: "Usage by user" })
      .getByRole("row", { name: /Rita\s+2\b/ })
      .waitFor()
    await page.getByRole("figure", { name: "Cost by team" }).getByText("Red").waitFor()
    await expectAccessible(page, "usage by team and user")
    await screenshot(page, "usage-by-team")

    // The CSV of the teams, as downloaded.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "CSV by team" }).click()])
    const csv = readFileSync((await download.path())!, "utf8")
    expect(download.suggestedFilename()).toMatch(/^usage-.*-by-team\.csv$/)
    const red = csv.split("\r\n").find((l) => l.startsWith(`${ids.red},Red,`))
    expect(red?.split(",").slice(0, 4)).toEqual([ids.red, "Red", "3", "0"])

    // A team's name narrows the page to it, in the URL.
    await byTeam.getByRole("link", { name: "Blue" }).click()
    await page.waitForURL(new RegExp(`team=${ids.blue}`))
    await page
      .getByRole("table", { name: "Usage by user" })
      .getByRole("row", { name: /Boris\s+1\b/ })
      .waitFor()
    // The narrowed usage replaces the whole range's: Rita (of Red only) leaves the table once it has loaded.
    await page.getByRole("table", { name: "Usage by user" }).getByRole("row", { name: /Rita/ }).waitFor({ state: "detached" })
    expect(await page.getByRole("table", { name: "Usage by user" }).getByRole("row", { name: /Rita/ }).count()).toBe(0)
    expectNoProblems(problems)
  })

  it("a member signed in through single sign-on creates their own key on the API keys page", async () => {
    const callback = `${gw.url}/api/auth/oidc/corp/callback`
    op.redirectUris.push(callback)
    const configured = await gw.admin("POST", "/api/auth/oidc/config/providers", {
      id: "corp",
      name: "Corp SSO",
      issuer: op.issuer,
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      scopes: ["openid", "profile", "email", "groups"],
      mappings: [{ group: "engineering", team: "Red", role: "member" }]
    })
    expect(configured.status).toBe(201)
    // alice (groups: engineering) signs in at the provider; the gateway's callback sets her session.
    const start = await fetch(`${gw.url}/api/auth/oidc/corp/login`, { redirect: "manual" })
    const back = await new ProviderBrowser().signIn(start.headers.get("location")!, "alice", callback)
    const done = await fetch(back, { redirect: "manual", headers: { accept: "text/html" } })
    const session = done.headers
      .getSetCookie()
      .map((c) => /^gw_session=([^;]*)/.exec(c)?.[1])
      .find((v) => v !== undefined)
    expect(session).toBeTruthy()

    const member = await openPage(browser)
    try {
      const url = new URL(gw.url)
      await member.context.addCookies([
        { name: "gw_session", value: session!, domain: url.hostname, path: "/", httpOnly: true, sameSite: "Strict" }
      ])
      await member.page.goto(`${gw.url}/dashboard/keys`)
      await member.page.getByRole("heading", { level: 1, name: "API keys" }).waitFor()
      // A member makes keys for themselves only: no owner to choose.
      expect(await member.page.getByLabel("Owner").count()).toBe(0)
      await member.page.getByLabel("Key name").fill("alice-own")
      await member.page.getByRole("button", { name: "Create key" }).click()
      await member.page.locator("[data-secret]").waitFor()
      await member.page
        .getByRole("table", { name: "API keys" })
        .getByRole("row", { name: /alice-own/ })
        .waitFor()
      await expectAccessible(member.page, "keys (member)")
      await screenshot(member.page, "keys-member")
      const alice = (await gw.admin("GET", "/api/users")).body.users.find((u: any) => u.email === "alice@example.test")
      const made = (await gw.admin("GET", "/api/keys")).body.keys.find((k: any) => k.name === "alice-own")
      expect(made).toMatchObject({ userId: alice.id, teamId: null })
      // The member sees their own keys, not the others'.
      expect(await member.page.getByRole("row", { name: /rita-laptop/ }).count()).toBe(0)
      expectNoProblems(member.problems)
    } finally {
      await member.context.close()
    }
  })
})
