import { readFileSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import path from "node:path"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { tempDir } from "../support/gateway.js"
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

// The traffic inspector's page (docs/inspector.md) through the browser: a chat completion through
// the gateway shows up live in the list, its detail shows the conversation as chat bubbles, the
// filters and the HAR export agree, a session records it, a replay appears as its own entry, the
// capture modes start the HTTP proxy (whose traffic is listed too), and a full buffer stays a
// handful of rows in the DOM. The provider, the key and the requests are arranged outside the
// browser (that is not what this proves). Everything the capture modes may touch is a temp file.

const INGEST = "inspector-e2e-ingest-token-0123456789"
const QUESTION = "What is the capital of France?"
const ANSWER = "Paris is the capital of France."
const hostsFile = path.join(tempDir("gw-e2e-hosts-"), "hosts")
writeFileSync(hostsFile, "127.0.0.1 localhost\n")

describe("dashboard: the traffic inspector", () => {
  let browser: Browser
  let gw: DashboardGateway
  let upstream: FakeUpstream
  let page: Page
  let problems: string[]
  let close: () => Promise<void>
  let key = ""

  /** A chat completion with the inference key, through the connection to the fake upstream. */
  const chat = async (content: string, stream = false) => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "fake/m1",
        stream,
        messages: [
          { role: "system", content: "Answer in one sentence." },
          { role: "user", content }
        ]
      })
    })
    expect(res.status).toBe(200)
    return res.text()
  }
  const ingest = async (body: Record<string, unknown>) => {
    const res = await fetch(`${gw.url}/api/tools/traffic-inspector/internal/ingest`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-inspector-ingest-token": INGEST },
      body: JSON.stringify(body)
    })
    expect(res.status).toBe(201)
    await res.arrayBuffer()
  }
  const list = () => page.getByRole("table", { name: "Intercepted requests" })
  const details = () => page.getByRole("region", { name: "Request details" })
  /** The rows the list has in the DOM now (the virtualised window, not the whole buffer). */
  const domRows = () => page.locator(".insp-body > [role='row']")

  beforeAll(async () => {
    upstream = (await FakeUpstream.start()).always({ content: ANSWER })
    browser = await launchBrowser()
    gw = await startDashboardGateway({
      password: PASSWORD,
      env: {
        GATEWAY_HOSTS_FILE: hostsFile,
        INSPECTOR_HTTP_PROXY_PORT: "0",
        INSPECTOR_MITM_PORT: "0",
        INSPECTOR_SYSTEM_PROXY_HOME: tempDir("gw-e2e-home-"),
        INSPECTOR_INTERNAL_INGEST_TOKEN: INGEST
      }
    })
    const made = await gw.admin("POST", "/api/providers", {
      provider: "openai-compatible",
      name: "fake",
      baseUrl: upstream.baseUrl("openai-chat"),
      apiKey: "sk-upstream-e2e",
      models: ["m1"],
      defaultModel: "m1"
    })
    expect(made.status, JSON.stringify(made.body)).toBe(201)
    const created = await gw.admin("POST", "/api/keys", { name: "inspector-client" })
    expect(created.status).toBe(201)
    key = created.body.secret
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

  it("opens from the navigation, empty, with its live feed connected", async () => {
    await goTo(page, "Inspector")
    await page.getByText("live", { exact: true }).waitFor()
    await page.getByText("No requests captured yet").waitFor()
    // The capture modes and sessions have loaded (no "Loading…" left).
    await page.getByRole("group", { name: "HTTP proxy" }).waitFor()
    // The transparent mode shows its state from its own route (never started here: it would change this machine's firewall).
    const transparent = page.getByRole("group", { name: "Transparent capture" })
    await transparent.getByRole("button", { name: "Start transparent capture…" }).waitFor()
    const tproxy = (await gw.admin("GET", "/api/tools/agent-bridge/tproxy")).body as { available: boolean; reason: string | null }
    expect(await transparent.getByText(tproxy.available ? "off" : "unavailable", { exact: true }).count()).toBe(1)
    if (!tproxy.available) await transparent.getByText(`Not available here: ${tproxy.reason}`).waitFor()
    await page.getByText("No sessions yet").waitFor()
    await expect.poll(() => page.locator("[aria-busy='true']").count()).toBe(0)
    await expectAccessible(page, "inspector (empty)")
    expectNoProblems(problems)
  })

  it("lists a chat completion live, without a reload, with its status, model and tokens", async () => {
    await page.evaluate("window.inspectorE2e = 'same page'")
    // Streamed: the inspector merges the answer's events into the conversation (the detail's bubbles below).
    expect(await chat(QUESTION, true)).toContain("data: ")
    const row = list().getByRole("row", { name: /fake\/m1/ })
    await row.waitFor()
    await row.getByText("200", { exact: true }).waitFor()
    const text = (await row.textContent()) ?? ""
    expect(text).toContain("agent-bridge")
    expect(text).toContain("POST")
    expect(text).toContain("/v1/chat/completions")
    expect(text).toContain("llm")
    // The fake upstream's usage: 11 in, 7 out.
    expect(text).toContain("11 / 7")
    expect(await page.evaluate("window.inspectorE2e")).toBe("same page")
    expectNoProblems(problems)
  })

  it("opens its detail: the conversation as bubbles, the LLM metadata, headers, bodies and a note", async () => {
    await list()
      .getByRole("row", { name: /fake\/m1/ })
      .getByRole("button", { name: /details of POST/ })
      .click()
    const pane = details()
    const conversation = pane.getByRole("list", { name: "Conversation" })
    await conversation.getByText(QUESTION).waitFor()
    await conversation.getByText(ANSWER).waitFor()
    expect(await pane.locator(".insp-user").textContent()).toContain(QUESTION)
    expect(await pane.locator(".insp-assistant").textContent()).toContain(ANSWER)
    expect(await pane.locator(".insp-system").textContent()).toContain("Answer in one sentence.")
    await pane.getByText("LLM call").waitFor()
    expect(await pane.locator(".insp-facts").nth(1).textContent()).toContain("fake/m1")
    await pane.getByText("Cost (estimate)").waitFor()
    // Headers and bodies: the request's JSON pretty-printed, the client's key masked.
    await pane.getByText("Headers", { exact: true }).click()
    const headers = pane.getByRole("table", { name: "Request headers" })
    await headers.getByText("content-type", { exact: true }).waitFor()
    expect(await headers.textContent()).not.toContain(key)
    await pane.getByText("Bodies", { exact: true }).click()
    expect(await pane.locator(".insp-more .insp-body-view pre").first().textContent()).toContain('"model": "fake/m1"')
    await pane.getByText(/Attempt 1: openai-compatible/).waitFor()
    // A note on the entry (PUT requests/{id}/annotation).
    await pane.getByLabel("Note").fill("checked by the e2e test")
    await pane.getByRole("button", { name: "Save note" }).click()
    await page.getByText("Note saved").waitFor()
    const listed = await gw.admin("GET", "/api/tools/traffic-inspector/requests?profile=llm")
    expect(listed.body.requests[0].annotation).toBe("checked by the e2e test")
    await expectAccessible(page, "inspector details")
    expectNoProblems(problems)
  })

  it("filters to LLM calls (an app request drops out) and exports the same list as HAR", async () => {
    await ingest({ source: "http-proxy", method: "GET", url: "https://app.example.com/api/items", status: 200, responseBody: "[]" })
    const app = list().getByRole("row", { name: /app\.example\.com/ })
    await app.waitFor()
    await page.getByLabel("LLM only").check()
    await app.waitFor({ state: "detached" })
    await list()
      .getByRole("row", { name: /fake\/m1/ })
      .waitFor()
    const href = await page.getByRole("link", { name: "Download HAR" }).getAttribute("href")
    expect(href).toContain("profile=llm")
    expect(await page.getByRole("link", { name: "Download HAR" }).getAttribute("download")).toBe("inspector.har")
    const har = await page.request.get(`${gw.url}${href}`)
    expect(har.status()).toBe(200)
    const entries = (await har.json()).log.entries as Array<{ request: { url: string } }>
    expect(entries.map((e) => new URL(e.request.url).pathname)).toEqual(["/v1/chat/completions"])
    // Status and host filters too; then back to everything.
    await page.getByLabel("Status").selectOption("4xx")
    await page.getByText("No request matches these filters").waitFor()
    await page.getByLabel("Status").selectOption("")
    await page.getByLabel("LLM only").uncheck()
    await page.getByLabel("Host", { exact: true }).fill("example.com")
    await app.waitFor()
    expect(await domRows().count()).toBe(1)
    await page.getByLabel("Host", { exact: true }).fill("")
    await expect.poll(() => domRows().count()).toBe(2)
    expectNoProblems(problems)
  })

  it("records a session: one request while it records, stopped, listed with count 1, viewed, exported", async () => {
    await page.getByLabel("Session name").fill("e2e session")
    await page.getByRole("button", { name: "Record", exact: true }).click()
    const sessions = page.getByRole("table", { name: "Sessions" })
    const row = sessions.getByRole("row", { name: /e2e session/ })
    await row.getByText("recording", { exact: true }).waitFor()
    JSON.parse(await chat("And the capital of Italy?"))
    await expect
      .poll(() =>
        list()
          .getByRole("row", { name: /fake\/m1/ })
          .count()
      )
      .toBe(2)
    await expect
      .poll(
        async () =>
          (await list()
            .getByRole("row", { name: /fake\/m1/ })
            .first()
            .textContent()) ?? ""
      )
      .toContain("200")
    await page.getByRole("button", { name: "Stop e2e session" }).click()
    await row.getByText("saved", { exact: true }).waitFor()
    expect(((await row.getByRole("cell").nth(3).textContent()) ?? "").trim()).toBe("1")
    const api = await gw.admin("GET", "/api/tools/traffic-inspector/sessions")
    expect(api.body.sessions).toMatchObject([{ name: "e2e session", state: "saved", count: 1 }])
    const id = api.body.sessions[0].id as string
    expect(await page.getByRole("link", { name: "HAR of e2e session" }).getAttribute("href")).toBe(
      `/api/tools/traffic-inspector/sessions/${id}/export.har`
    )
    expect(await page.getByRole("link", { name: "JSONL of e2e session" }).getAttribute("href")).toBe(
      `/api/tools/traffic-inspector/sessions/${id}/export?format=jsonl`
    )
    // Its view: only what it recorded; "Back to live" returns to the buffer.
    await page.getByRole("button", { name: "View e2e session" }).click()
    const recorded = page.getByRole("table", { name: "Requests of session e2e session" })
    await recorded.waitFor()
    await expect.poll(() => domRows().count()).toBe(1)
    await recorded
      .getByRole("row", { name: /fake\/m1/ })
      .getByRole("button")
      .click()
    await details().getByRole("list", { name: "Conversation" }).getByText("And the capital of Italy?").waitFor()
    await page.getByRole("button", { name: "Back to live" }).click()
    await list().waitFor()
    await expect.poll(() => domRows().count()).toBe(3)
    expectNoProblems(problems)
  })

  it("replays a request: the result, and the replay's own entry in the list", async () => {
    const before = upstream.requests.length
    await list()
      .getByRole("row", { name: /fake\/m1/ })
      .last()
      .getByRole("button")
      .click()
    const pane = details()
    await pane.getByRole("list", { name: "Conversation" }).getByText(QUESTION).waitFor()
    await pane.getByRole("button", { name: "Replay", exact: true }).click()
    await pane.getByText("Replayed:").waitFor()
    expect(upstream.requests.length).toBe(before + 1)
    const replayRow = list().getByRole("row", { name: /replay/ })
    await replayRow.waitFor()
    await replayRow.getByText("200", { exact: true }).waitFor()
    await pane.getByRole("button", { name: "Open the replay" }).click()
    await pane.getByText("Replay of").waitFor()
    await pane.getByRole("list", { name: "Conversation" }).getByText(QUESTION).waitFor()
    expectNoProblems(problems)
  })

  it("capture modes: the local CA's fingerprint, the HTTP proxy started (its traffic listed), TLS interception, a custom host", async () => {
    const ca = page.getByRole("group", { name: "Local CA" })
    // A fresh data directory has no CA until its first use.
    if (await ca.getByRole("button", { name: "Create the CA" }).isVisible()) await ca.getByRole("button", { name: "Create the CA" }).click()
    const fingerprint = ca.locator(".insp-fingerprint")
    await fingerprint.waitFor()
    expect(((await fingerprint.textContent()) ?? "").trim()).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/)
    expect(await ca.getByRole("link", { name: "Download ca.pem" }).getAttribute("href")).toBe("/api/tools/traffic-inspector/ca.pem")
    await ca.getByText(/NODE_EXTRA_CA_CERTS=/).waitFor()

    const proxy = page.getByRole("group", { name: "HTTP proxy" })
    await proxy.getByRole("button", { name: "Start HTTP proxy" }).click()
    await proxy.getByText("running", { exact: true }).waitFor()
    const url = ((await proxy.locator(".insp-proxy-url").textContent()) ?? "").trim()
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    // A plain HTTP request through it is listed as the proxy's.
    const proxied = await new Promise<number>((resolve, reject) => {
      const { port } = new URL(url)
      const req = http.request(
        {
          host: "127.0.0.1",
          port: Number(port),
          method: "GET",
          path: `${upstream.url}/proxied-by-e2e`,
          headers: { host: new URL(upstream.url).host }
        },
        (res) => {
          res.resume()
          res.on("end", () => resolve(res.statusCode ?? 0))
        }
      )
      req.on("error", reject)
      req.end()
    })
    expect(proxied).toBeGreaterThan(0)
    await list()
      .getByRole("row", { name: /proxied-by-e2e/ })
      .getByText("http-proxy")
      .waitFor()

    await proxy.getByLabel("TLS interception").check()
    await expect
      .poll(async () => (await gw.admin("GET", "/api/tools/traffic-inspector/capture-modes")).body.tlsIntercept.enabled)
      .toBe(true)
    await proxy.getByLabel("TLS interception").uncheck()
    await expect
      .poll(async () => (await gw.admin("GET", "/api/tools/traffic-inspector/capture-modes")).body.tlsIntercept.enabled)
      .toBe(false)

    const hosts = page.getByRole("group", { name: "Custom hosts" })
    await hosts.getByLabel("Host name").fill("api.inspector-e2e.test")
    await hosts.getByRole("button", { name: "Add host" }).click()
    const hostRow = hosts.getByRole("table", { name: "Custom hosts" }).getByRole("row", { name: /api\.inspector-e2e\.test/ })
    await hostRow.waitFor()
    expect(readFileSync(hostsFile, "utf8")).toContain("api.inspector-e2e.test")
    await hostRow.getByLabel("Capture api.inspector-e2e.test").uncheck()
    await expect.poll(() => readFileSync(hostsFile, "utf8").includes("api.inspector-e2e.test")).toBe(false)
    await hosts.getByRole("button", { name: "Remove api.inspector-e2e.test" }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Remove host" }).click()
    await hostRow.waitFor({ state: "detached" })
    expect(readFileSync(hostsFile, "utf8")).toContain("127.0.0.1 localhost")
    expect(readFileSync(hostsFile, "utf8")).not.toContain("api.inspector-e2e.test")

    await expectAccessible(page, "inspector with traffic")
    await screenshot(page, "inspector")
    await proxy.getByRole("button", { name: "Stop HTTP proxy" }).click()
    await proxy.getByText("stopped", { exact: true }).waitFor()
    expectNoProblems(problems)
  })

  it("keeps a full buffer to a window of rows in the DOM, scrolls to its oldest, and clears", async () => {
    // Batches arrive in any order inside themselves: the newest is ingested alone, last.
    for (let i = 0; i < 999; i += 50) {
      const size = Math.min(50, 999 - i)
      await Promise.all(
        Array.from({ length: size }, (_, j) =>
          ingest({ source: "http-proxy", method: "GET", url: `http://bulk.example.com/item/${i + j}`, status: 200 })
        )
      )
    }
    await ingest({ source: "http-proxy", method: "GET", url: "http://bulk.example.com/item/999", status: 200 })
    await page.getByText("1,000 requests (buffer of 1,000)").waitFor()
    const rendered = await domRows().count()
    expect(rendered).toBeGreaterThan(5)
    expect(rendered).toBeLessThan(40)
    // The newest first: the last one ingested is on top.
    expect(await domRows().first().textContent()).toContain("/item/999")
    await page.evaluate("document.querySelector('.insp-list').scrollTop = 1e9")
    await expect.poll(() => domRows().last().getAttribute("aria-rowindex")).toBe("1001")
    expect(await domRows().count()).toBeLessThan(40)
    await page.getByRole("button", { name: "Clear", exact: true }).click()
    await page.getByRole("dialog").getByRole("button", { name: "Clear buffer" }).click()
    await page.getByText("No requests captured yet").waitFor()
    expect((await gw.admin("GET", "/api/tools/traffic-inspector/requests")).body.total).toBe(0)
    expectNoProblems(problems)
  })

  it("fits a phone: the list scrolls inside its own box, the page does not", async () => {
    await chat("one for the phone", true)
    const phone = await openPage(browser, { viewport: { width: 390, height: 844 } })
    try {
      await phone.page.goto(`${gw.url}/dashboard/inspector`)
      await phone.page.getByLabel("Admin password").fill(PASSWORD)
      await phone.page.getByRole("button", { name: "Log in" }).click()
      await phone.page.getByRole("heading", { level: 1, name: "Inspector" }).waitFor()
      await phone.page
        .getByRole("table", { name: "Intercepted requests" })
        .getByRole("row", { name: /fake\/m1/ })
        .waitFor()
      await expect.poll(() => phone.page.locator("[aria-busy='true']").count()).toBe(0)
      await expectAccessible(phone.page, "inspector (phone)")
      await screenshot(phone.page, "inspector-phone")
      expect(await phone.page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390)
      expectNoProblems(phone.problems)
    } finally {
      await phone.context.close()
    }
  })
})
