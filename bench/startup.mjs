#!/usr/bin/env node
// `node bench/startup.mjs [--runs N] [--workers N] [--cpu-prof]`: server start-up, spawn → first
// 200. Each round spawns, in turn, `node -e 0` (the cost of starting Node at all, to its exit) and
// `PORT=<free> node bin/gateway` on one prepared DATA_DIR (set up once, unmeasured, so the
// database exists and is migrated, as on every start but the first), then polls
// GET /api/health/ping every 5 ms until it answers 200, and stops the gateway (SIGTERM).
// Prints median and min–max of N rounds (default 9) after one warm-up round, and the load average
// (other work on the machine slows every figure). `--workers N` starts `gateway --workers N`
// (first 200 from any worker). `--cpu-prof` writes one CPU profile of a start to
// bench/results/profiles/ (node --cpu-prof; the gateway stops once it answered).
// Needs `npm run build`.
import { spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import http from "node:http"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { median } from "./lib/stats.mjs"
import { arg } from "./lib/args.mjs"

const BENCH = path.dirname(fileURLToPath(import.meta.url))
const BIN = path.resolve(BENCH, "../bin/gateway")
const runs = Number(arg("--runs", 9))
const workers = arg("--workers", undefined)
const profile = process.argv.includes("--cpu-prof")
const say = (m) => console.error(`[startup] ${m}`)

const dataDir = mkdtempSync(path.join(os.tmpdir(), "startup-"))
const env = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: dataDir,
  DATA_DIR: dataDir,
  GATEWAY_ENV_FILE: path.join(dataDir, ".env"),
  NO_COLOR: "1",
  LOG_LEVEL: "warning",
  GATEWAY_API_KEY: "sk-startup-admin-0123456789abcdef"
}
const setup = spawnSync(
  process.execPath,
  [
    BIN,
    "setup",
    "--non-interactive",
    "--add-provider",
    "--provider",
    "openai-compatible",
    "--provider-base-url",
    "http://127.0.0.1:9/v1",
    "--api-key",
    "sk-up",
    "--default-model",
    "m1"
  ],
  { env, encoding: "utf8" }
)
if (setup.status !== 0) throw new Error(`gateway setup failed: ${setup.stderr}`)

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })

const ping = (port) =>
  new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/api/health/ping", agent: false }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode))
    })
    req.on("error", () => resolve(0))
  })

const nodeBaseline = () => {
  const t0 = performance.now()
  spawnSync(process.execPath, ["-e", "0"])
  return performance.now() - t0
}

const startOnce = async (nodeArgs = []) => {
  const port = await freePort()
  // The port by PORT, not --port: `gateway` with no argument is how a service starts it. Both run
  // the server from its code cache (docs/ARCHITECTURE.md); `--workers` runs the CLI's chunks.
  const args = [...nodeArgs, BIN, ...(workers ? ["--workers", workers] : [])]
  const t0 = performance.now()
  const child = spawn(process.execPath, args, {
    env: { ...env, HOST: "127.0.0.1", PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"]
  })
  let err = ""
  child.stderr.on("data", (c) => (err += c))
  let exited = false
  const gone = new Promise((r) => child.once("exit", () => ((exited = true), r())))
  for (;;) {
    if (exited) throw new Error(`gateway exited before answering: ${err}`)
    if ((await ping(port)) === 200) break
    await new Promise((r) => setTimeout(r, 5))
  }
  const ms = performance.now() - t0
  child.kill("SIGTERM")
  await gone
  return ms
}

say(
  `load average before: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} on ${os.availableParallelism()} cores`
)
await startOnce()
nodeBaseline()
const base = []
const gw = []
for (let i = 0; i < runs; i++) {
  base.push(nodeBaseline())
  gw.push(await startOnce())
}
const fmt = (xs) => `${Math.round(median(xs))} ms (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))})`
console.log(`| | median (min–max) of ${runs} |`)
console.log(`|---|---:|`)
console.log(`| node -e 0 | ${fmt(base)} |`)
console.log(`| gateway${workers ? ` --workers ${workers}` : ""}: spawn → first 200 of /api/health/ping | ${fmt(gw)} |`)
say(
  `load average after: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`
)
if (profile) {
  const dir = path.join(BENCH, "results/profiles")
  mkdirSync(dir, { recursive: true })
  await startOnce(["--cpu-prof", `--cpu-prof-dir=${dir}`, "--cpu-prof-name=startup.cpuprofile"])
  say(`CPU profile of one start: ${path.join(dir, "startup.cpuprofile")}`)
}
rmSync(dataDir, { recursive: true, force: true })
