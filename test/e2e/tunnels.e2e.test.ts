import * as fs from "node:fs"
import * as path from "node:path"
import { createRequire } from "node:module"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { tempDir } from "../support/gateway.js"
import { meshCli, tokenAgent } from "../support/tunnelStandins.js"
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

// The Tunnels page, driven through the browser only, against stand-ins of the vendors' programs
// (test/support/tunnelStandins.ts; a quick-tunnel helper written here): start the quick tunnel and
// read its address (copied with the button, and from the QR code decoded off the screen), start
// the token tunnel with an authtoken typed in, walk the mesh funnel from "not allowed on the
// network" to running, and see the topbar say a tunnel is open. gw.admin only checks.

/** A quick-tunnel helper that prints its address and registers, like the real one. */
const quickHelper = (dir: string) => {
  const file = path.join(dir, "fake-cloudflared")
  fs.writeFileSync(
    file,
    `#!${process.execPath}
const log = (m) => process.stderr.write(new Date().toISOString() + " INF " + m + "\\n")
log("|  https://bright-meadow-lake.trycloudflare.com  |")
setTimeout(() => log("Registered tunnel connection connIndex=0 connection=abc event=0 ip=127.0.0.1 location=test protocol=http2"), 100)
setInterval(() => {}, 1000)
`,
    { mode: 0o755 }
  )
  return file
}

/** jsQR 1.4.0, a QR decoder in plain JavaScript (CommonJS). */
const jsQR = createRequire(import.meta.url)("jsqr") as (data: Uint8ClampedArray, width: number, height: number) => { data: string } | null

/** In the page: the QR code's SVG drawn on a canvas, its pixels answered. */
const QR_PIXELS = `(async () => {
  const svg = document.querySelector("[data-qr] svg")
  const img = new Image()
  img.src = "data:image/svg+xml;base64," + btoa(new XMLSerializer().serializeToString(svg))
  await img.decode()
  const size = 400
  const canvas = document.createElement("canvas")
  canvas.width = size
  canvas.height = size
  const ctx = canvas.getContext("2d")
  ctx.fillStyle = "#fff"
  ctx.fillRect(0, 0, size, size)
  ctx.drawImage(img, 0, 0, size, size)
  return { size, data: Array.from(ctx.getImageData(0, 0, size, size).data) }
})()`

/** The QR code on the page, decoded from its pixels (drawn on a canvas in the page, read by jsQR here). */
const readQr = async (page: Page): Promise<string | undefined> => {
  const pixels = (await page.evaluate(QR_PIXELS)) as { size: number; data: Array<number> }
  return jsQR(Uint8ClampedArray.from(pixels.data), pixels.size, pixels.size)?.data
}

describe("dashboard: tunnels", () => {
  let browser: Browser
  let gw: DashboardGateway
  let mesh: ReturnType<typeof meshCli>
  let agent: ReturnType<typeof tokenAgent>
  beforeAll(async () => {
    const dir = tempDir("gw-e2e-tunnels-")
    mesh = meshCli(dir)
    mesh.install()
    mesh.set("daemon")
    mesh.set("login")
    agent = tokenAgent(dir)
    browser = await launchBrowser()
    gw = await startDashboardGateway({
      password: PASSWORD,
      env: { QUICK_TUNNEL_BIN: quickHelper(dir), TOKEN_TUNNEL_BIN: agent.file, MESH_TUNNEL_BIN: mesh.bin }
    })
  })
  afterAll(async () => {
    await browser?.close()
    await gw?.stop()
  })

  it("starts each backend from the page: the address with a copy button and a QR code once registered; the topbar says a tunnel is open", async () => {
    const { page, problems, context } = await openPage(browser)
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: gw.url })
    await login(page, gw.url)
    await goTo(page, "Tunnels")
    const quick = page.locator("section.card", { has: page.getByRole("heading", { name: "Quick tunnel" }) })
    const token = page.locator("section.card", { has: page.getByRole("heading", { name: "Token tunnel" }) })
    const meshCard = page.locator("section.card", { has: page.getByRole("heading", { name: "Mesh funnel" }) })
    await quick.getByText("stopped").waitFor()
    expect(await page.locator(".tunnel-open").count()).toBe(0)

    // Quick tunnel: started, the address appears once registered, copied with the button, scanned from the QR code.
    await quick.getByRole("button", { name: "Start" }).click()
    await quick.locator("[data-public-url]").waitFor()
    expect(await quick.locator("[data-public-url]").textContent()).toBe("https://bright-meadow-lake.trycloudflare.com")
    await quick.getByRole("button", { name: "Copy the API base URL" }).click()
    await page.getByText("Copied").first().waitFor()
    expect(await page.evaluate("navigator.clipboard.readText()")).toBe("https://bright-meadow-lake.trycloudflare.com/v1")
    expect(await readQr(page)).toBe("https://bright-meadow-lake.trycloudflare.com/v1")
    await page.locator(".tunnel-open", { hasText: "Tunnel open" }).waitFor({ timeout: 15_000 })
    expect((await gw.admin("GET", "/api/tunnels/quick")).body).toMatchObject({
      phase: "running",
      publicUrl: "https://bright-meadow-lake.trycloudflare.com"
    })
    await expectAccessible(page, "tunnels")
    await screenshot(page, "tunnels")

    // Token tunnel: needs an authtoken; typed in, stored (never shown back), running.
    await token.getByText("needs auth").waitFor()
    await token.getByLabel("Authtoken").fill("2page_typed_authtoken_123")
    await token.getByRole("button", { name: "Start" }).click()
    await token.locator("[data-public-url]", { hasText: "https://calm-otter-1.ngrok-free.app" }).waitFor()
    expect(agent.runs()[0]!.authtoken).toBe("2page_typed_authtoken_123")
    expect(await page.content()).not.toContain("2page_typed_authtoken_123")

    // Mesh funnel: the setup steps say what is there; not allowed on the network → the link to allow it; allowed → running.
    await meshCard.locator("[data-step=install]", { hasText: "installed" }).waitFor()
    await meshCard.locator("[data-step=login]", { hasText: "box.tail1234.ts.net" }).waitFor()
    await meshCard.getByLabel("Local port (optional)").fill("8080")
    await meshCard.getByRole("button", { name: "Start the funnel" }).click()
    await meshCard.locator("[data-enable-url]").waitFor()
    expect(await meshCard.locator("[data-enable-url]").getAttribute("href")).toBe("https://login.tailscale.com/f/funnel?node=n123")
    mesh.set("allowed")
    await meshCard.locator("[data-public-url]", { hasText: "https://box.tail1234.ts.net/" }).waitFor()
    expect(mesh.funnelRuns()[0]!.args).toEqual(["funnel", "http://127.0.0.1:8080"])

    // All stopped from the page: the topbar notice goes.
    await quick.getByRole("button", { name: "Stop" }).click()
    await token.getByRole("button", { name: "Stop" }).click()
    await meshCard.getByRole("button", { name: "Stop" }).click()
    await quick.getByText("stopped").waitFor()
    await meshCard.locator("[data-public-url]").waitFor({ state: "detached" })
    await page.locator(".tunnel-open").waitFor({ state: "detached", timeout: 15_000 })
    for (const kind of ["quick", "token", "mesh"]) expect((await gw.admin("GET", `/api/tunnels/${kind}`)).body.running).toBe(false)
    expectNoProblems(problems)
    await context.close()
  })
})
