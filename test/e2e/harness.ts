import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { expect } from "vitest"
import { runCli, startServerProcess, type ServerProcess } from "../support/cli.js"
import { tempDir } from "../support/gateway.js"

// Shared by the dashboard's end-to-end tests: the browser, a gateway process, login, screenshots
// and the accessibility check.

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
/** Screenshots of every page, kept by CI as artifacts. */
export const ARTIFACTS = path.join(ROOT, ".ci/artifacts/dashboard")
export const PASSWORD = "dashboard-e2e-password"

/** Debian's Chromium (apt-get install chromium), or CHROMIUM_PATH. No download, ever. */
export const chromiumPath = (): string => {
  const candidates = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"].filter((p): p is string => !!p)
  const found = candidates.find((p) => existsSync(p))
  if (!found)
    throw new Error(
      "Chromium is not installed: the dashboard's end-to-end tests need it (Debian: `apt-get install chromium`, or set CHROMIUM_PATH)"
    )
  return found
}

/**
 * Launches headless Chromium with the flags this machine needs: no sandbox as root, and nothing
 * that reaches for the network by itself (the machine's network is closed).
 */
export const launchBrowser = (): Promise<Browser> =>
  chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-default-apps",
      "--disable-extensions"
    ]
  })

export interface DashboardGateway {
  readonly url: string
  readonly dataDir: string
  readonly adminKey: string
  readonly server: ServerProcess
  /** The management API with the admin key (for arranging and checking, never for what the test proves). */
  readonly admin: (method: string, p: string, body?: unknown) => Promise<{ status: number; body: any }>
  readonly stop: () => Promise<void>
}

/**
 * A gateway process on a free port with its own data directory: an admin key for the test's own
 * arranging and checking, requireLogin on, and no admin password, so the dashboard starts with
 * first-run setup; `password` sets one at start (INITIAL_PASSWORD). The live port is a free one.
 */
export const startDashboardGateway = async (
  options: { readonly env?: Record<string, string>; readonly password?: string } = {}
): Promise<DashboardGateway> => {
  const dataDir = tempDir("gw-e2e-")
  // The test's own admin key, made on the database before the server starts (`gateway keys add`).
  const made = await runCli(["keys", "add", "--scope", "admin", "--name", "e2e-checks", "--json"], { DATA_DIR: dataDir })
  if (made.code !== 0) throw new Error(`gateway keys add failed: ${made.stderr}`)
  const ADMIN_KEY = JSON.parse(made.stdout).secret as string
  const server = await startServerProcess({
    DATA_DIR: dataDir,
    GATEWAY_LIVE_WS_PORT: "0",
    ...(options.password ? { INITIAL_PASSWORD: options.password } : {}),
    ...options.env
  })
  const admin = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(server.url + p, {
      method,
      headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body)
    })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {}
    return { status: res.status, body: parsed as any }
  }
  const r = await admin("PUT", "/api/settings/require-login", { requireLogin: true })
  if (r.status !== 200) throw new Error(`could not turn requireLogin on: ${r.status} ${JSON.stringify(r.body)}`)
  return { url: server.url, dataDir, adminKey: ADMIN_KEY, server, admin, stop: async () => void (await server.stop()) }
}

/**
 * A browser page that fails the test on what a user would see as broken: an uncaught error, a
 * console error (a CSP violation is one), a failed request to the gateway.
 */
export const openPage = async (
  browser: Browser,
  options: { readonly viewport?: { width: number; height: number } } = {}
): Promise<{ context: BrowserContext; page: Page; problems: string[] }> => {
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1366, height: 900 } })
  context.setDefaultTimeout(15_000)
  const page = await context.newPage()
  const problems: string[] = []
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`))
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`)
  })
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.request().method()} ${new URL(r.url()).pathname}`)
  })
  page.on("requestfailed", (r) => {
    // A WebSocket closed by navigation and aborted page loads are not failures of the dashboard.
    const failure = r.failure()?.errorText ?? ""
    if (!failure.includes("ERR_ABORTED")) problems.push(`request failed: ${r.method()} ${r.url()} ${failure}`)
  })
  return { context, page, problems }
}

/** Logs in through the login page. */
export const login = async (page: Page, url: string, password = PASSWORD) => {
  await page.goto(`${url}/dashboard/`)
  await page.getByLabel("Admin password").fill(password)
  await page.getByRole("button", { name: "Log in" }).click()
  // The shell (its banner, on every screen size) replaces the login form.
  await page.getByRole("link", { name: "Gateway", exact: true }).waitFor()
}

/** Opens a page of the dashboard from the navigation (as a user would) and waits for its heading. */
export const goTo = async (page: Page, title: string) => {
  const nav = page.getByRole("navigation", { name: "Dashboard" })
  if (!(await nav.isVisible())) await page.getByRole("button", { name: "Menu" }).click()
  await nav.getByRole("link", { name: title, exact: true }).click()
  await page.getByRole("heading", { level: 1, name: title }).waitFor()
}

/** Saves a full-page screenshot under .ci/artifacts/dashboard/<name>.png. */
export const screenshot = async (page: Page, name: string) => {
  mkdirSync(ARTIFACTS, { recursive: true })
  // Playwright's `style` option would be an inline style, which the dashboard's CSP refuses (and
  // the refusal is a console error): in a full-page picture the sticky top bar may sit mid-page.
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true })
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

export interface AxeViolation {
  readonly id: string
  readonly impact: string | null
  readonly help: string
  readonly nodes: ReadonlyArray<{ readonly target: ReadonlyArray<string> }>
}

/**
 * Runs axe-core (WCAG 2 A and AA rules) in the page; returns the serious and critical
 * violations. Injected through the DevTools protocol, so the page's CSP stays as served.
 */
export const accessibilityViolations = async (page: Page): Promise<ReadonlyArray<AxeViolation>> => {
  const loaded = await page.evaluate("typeof window.axe !== 'undefined'")
  if (!loaded) await page.evaluate(`${axeSource}\n;0`)
  const result = (await page.evaluate(
    `window.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] }, resultTypes: ["violations"] })`
  )) as { violations: AxeViolation[] }
  return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
}

export const expectAccessible = async (page: Page, where: string) => {
  const serious = await accessibilityViolations(page)
  expect(
    serious.map(
      (v) =>
        `${where}: ${v.id} (${v.impact}) ${v.help} at ${v.nodes
          .map((n) => n.target.join(" "))
          .slice(0, 3)
          .join(", ")}`
    )
  ).toEqual([])
}

/** No page errors, console errors or failed requests so far. */
export const expectNoProblems = (problems: ReadonlyArray<string>) =>
  expect(problems, `the page reported: ${problems.join(" | ")}`).toEqual([])

/**
 * Holds the page's GET requests to `url` until `release()`, to show what the page does when an
 * answer comes late. `release()` lets them go and resolves once every request held has been
 * answered and rendered (the answers read, then two frames and a task for the page's effects); it
 * fails if the page asked for nothing, since the test would then show nothing.
 */
export const holdGets = async (page: Page, url: RegExp): Promise<{ readonly release: () => Promise<void> }> => {
  let open = () => {}
  const held = new Promise<void>((r) => {
    open = r
  })
  const answered: Array<Promise<unknown>> = []
  await page.route(url, async (route) => {
    const request = route.request()
    if (request.method() === "GET") {
      answered.push(page.waitForResponse((r) => r.request() === request).then((r) => r.finished()))
      await held
    }
    await route.continue()
  })
  return {
    release: async () => {
      try {
        if (answered.length === 0) throw new Error(`the page asked for nothing matching ${url} while it was held`)
        open()
        await Promise.all(answered)
      } finally {
        open()
        await page.unroute(url)
      }
      await page.evaluate(() => {
        const frame = (globalThis as unknown as { requestAnimationFrame: (f: () => void) => void }).requestAnimationFrame
        return new Promise((r) => frame(() => frame(() => setTimeout(r, 50))))
      })
    }
  }
}
