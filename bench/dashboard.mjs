#!/usr/bin/env node
// `node bench/dashboard.mjs [--runs N] [--screenshot <file.png>]`: how fast the dashboard's pages
// load on loopback, in Debian's Chromium (playwright-core, /usr/bin/chromium or CHROMIUM_PATH),
// and how large its files are.
// A gateway (bin/gateway, a fresh DATA_DIR, an openai-compatible provider on bench/mock-upstream.mjs,
// 200 requests of traffic so the usage and log pages have rows) is started; after logging in,
// each page of the navigation (web/src/pages.ts) is opened N times (default 5) by its URL in a
// new browser context (a cold cache: every file downloaded) and once more warm, timed from
// navigation start to its heading visible with no "Loading…" left. Prints median and max per page
// and the built files' sizes (dist/web/assets.json). `--screenshot` saves the Overview with live
// traffic (the README's picture). Needs `npm run build`.
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import { median } from "./lib/stats.mjs"
import { arg } from "./lib/args.mjs"

const BENCH = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(BENCH, "..")
const BIN = path.join(ROOT, "bin/gateway")
const runs = Number(arg("--runs", 5))
const shot = arg("--screenshot", undefined)
const say = (m) => console.error(`[dashboard] ${m}`)
const PASSWORD = "bench-dashboard-password"

const executablePath = [process.env.CHROMIUM_PATH, "/usr/bin/chromium"].find((p) => p && existsSync(p))
if (!executablePath) throw new Error("Chromium is not installed (Debian: apt-get install chromium)")

const started = (cmd, args, env, pattern) =>
  new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    const on = (c) => {
      out += c
      const m = pattern.exec(out)
      if (m) resolve({ child, match: m })
    }
    child.stdout.on("data", on)
    child.stderr.on("data", on)
    child.on("exit", (code) => reject(new Error(`${cmd} exited ${code}: ${out}`)))
  })

const dataDir = mkdtempSync(path.join(os.tmpdir(), "bench-dashboard-"))
const env = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: dataDir,
  DATA_DIR: dataDir,
  GATEWAY_ENV_FILE: path.join(dataDir, ".env"),
  NO_COLOR: "1",
  LOG_FORMAT: "json",
  INITIAL_PASSWORD: PASSWORD,
  GATEWAY_LIVE_WS_PORT: "0"
}
const upstream = await started(process.execPath, [path.join(BENCH, "mock-upstream.mjs")], env, /listening (\d+)/)
const up = `http://127.0.0.1:${upstream.match[1]}/v1`
const made = spawnSync(process.execPath, [BIN, "keys", "add", "--scope", "admin", "--name", "bench", "--json"], { env, encoding: "utf8" })
if (made.status !== 0) throw new Error(made.stderr)
const ADMIN = JSON.parse(made.stdout).secret
const gateway = await started(process.execPath, [BIN, "--port", "0"], env, /listening on (http:\/\/[^ "]+)/)
const base = gateway.match[1]
const api = async (method, p, body) => {
  const res = await fetch(base + p, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  return { status: res.status, body: await res.json().catch(() => undefined) }
}
const provider = await api("POST", "/api/providers", {
  provider: "openai-compatible",
  name: "mock",
  baseUrl: up,
  apiKey: "sk-up",
  defaultModel: "json-1k"
})
if (provider.status !== 201) throw new Error(`provider: ${provider.status} ${JSON.stringify(provider.body)}`)
const chat = (model) =>
  fetch(`${base}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }] })
  }).then((r) => r.text())
// Successes only: a 500 would cool the connection down and turn the requests after it into 503s.
for (let i = 0; i < 200; i++) await chat(i % 3 === 0 ? "mock/delay-20" : "mock/json-1k")
say(`gateway ${base}, 200 requests of traffic`)

const PAGES = [...readFileSync(path.join(ROOT, "web/src/pages.ts"), "utf8").matchAll(/\{ path: "([^"]+)", title: "([^"]+)"/g)].map((m) => ({
  path: m[1],
  title: m[2]
}))
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync"
  ]
})
const newLoggedIn = async () => {
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } })
  const page = await context.newPage()
  await page.goto(`${base}/dashboard/`)
  await page.getByLabel("Admin password").fill(PASSWORD)
  await page.getByRole("button", { name: "Log in" }).click()
  await page.getByRole("link", { name: "Gateway", exact: true }).waitFor()
  return { context, page }
}
const timeLoad = async (page, entry) => {
  const t0 = performance.now()
  await page.goto(`${base}/dashboard${entry.path}`)
  await page
    .getByRole("heading", { level: 1, name: entry.title })
    .waitFor({ timeout: 10_000 })
    .catch(async (e) => {
      throw new Error(`${entry.title}: ${e.message}\n${(await page.textContent("body"))?.slice(0, 500)}`)
    })
  await page.waitForFunction(() => !document.querySelector("[aria-busy='true']"))
  return performance.now() - t0
}

const rows = []
for (const entry of PAGES) {
  const cold = []
  for (let i = 0; i < runs; i++) {
    // A new context has an empty HTTP cache: the page and every file it needs are downloaded
    // (the login page shares the entry files, so the cache is cleared after it over CDP).
    const { context, page } = await newLoggedIn()
    const cdp = await context.newCDPSession(page)
    await cdp.send("Network.clearBrowserCache")
    cold.push(await timeLoad(page, entry))
    await context.close()
  }
  const { context, page } = await newLoggedIn()
  await timeLoad(page, entry)
  const warm = await timeLoad(page, entry)
  await context.close()
  rows.push({
    page: entry.title,
    coldMedianMs: Math.round(median(cold)),
    coldMaxMs: Math.round(Math.max(...cold)),
    warmMs: Math.round(warm)
  })
}

if (shot) {
  const { context, page } = await newLoggedIn()
  await page.goto(`${base}/dashboard/`)
  await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
  for (let i = 0; i < 12; i++) await chat(i % 4 === 0 ? "mock/delay-20" : "mock/json-1k")
  await chat("mock/fail-500")
  await page.waitForTimeout(500)
  await page.screenshot({ path: path.resolve(shot) })
  await context.close()
  say(`screenshot ${shot}`)
}

await browser.close()
gateway.child.kill("SIGTERM")
upstream.child.kill("SIGTERM")

const assets = JSON.parse(readFileSync(path.join(ROOT, "dist/web/assets.json"), "utf8"))
console.log(`\n| page | cold median (ms) | cold max (ms) | warm (ms) |\n|---|---:|---:|---:|`)
for (const r of rows) console.log(`| ${r.page} | ${r.coldMedianMs} | ${r.coldMaxMs} | ${r.warmMs} |`)
console.log(
  `\nbuilt files: ${assets.files.length}, ${(assets.total.bytes / 1024).toFixed(1)} KiB, ${(assets.total.gzip / 1024).toFixed(1)} KiB gzip; load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`
)
