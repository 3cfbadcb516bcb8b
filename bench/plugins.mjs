#!/usr/bin/env node
// What plugins cost on the request path: the same chat load (json-1k through the gateway) with no
// plugin, with a plugin installed but disabled (nothing registered: must equal none), and with one
// trivial onRequest plugin (an IPC round trip to its process and a QuickJS call per request),
// interleaved rounds in one run, one gateway. Prints requests per second and p50/p99 latency per
// condition, the ratio to none, and the p50 the plugin adds.
//   node bench/plugins.mjs [--seconds 4] [--rounds 3] [--concurrency 1]
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
import { mkdtempSync, writeFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { makeClosedLoop, numberArg } from "./lib/closedLoop.mjs"
import { cleanup } from "./lib/proc.mjs"
import { chatBody, startGateway, startMock } from "./lib/targets.mjs"

const SECONDS = numberArg("seconds", 4)
const ROUNDS = numberArg("rounds", 3)
const CONCURRENCY = numberArg("concurrency", 1)
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")

const plugin = mkdtempSync(path.join(os.tmpdir(), "bench-plugin-"))
writeFileSync(path.join(plugin, "plugin.json"), JSON.stringify({ name: "bench-trivial", version: "1.0.0", main: "index.mjs" }))
writeFileSync(
  path.join(plugin, "index.mjs"),
  `import { definePlugin } from "gateway/plugin-sdk"\nexport default definePlugin({ name: "bench-trivial", onRequest() {} })\n`
)

const { agent, admin, load } = makeClosedLoop({ seconds: SECONDS, concurrency: CONCURRENCY })

try {
  const mock = await startMock({ benchDir })
  const t = await startGateway({ rootDir, mock })
  if (!t.ok) throw new Error(t.error)
  const body = chatBody(t.model("json-1k"))
  await load(t, body) // warm-up
  // Each condition says how to get to it from any other; the order rotates each round, so none
  // always follows the same one.
  let installed = false
  const ensure = async (want) => {
    if (want === "absent") {
      if (installed) await admin(t, "DELETE", "/api/plugins/bench-trivial")
      installed = false
      return
    }
    if (!installed) await admin(t, "POST", "/api/plugins", { path: plugin })
    installed = true
    await admin(t, "POST", `/api/plugins/bench-trivial/${want === "enabled" ? "enable" : "disable"}`)
  }
  const conditions = [
    ["none", "absent"],
    ["installed, disabled", "disabled"],
    ["one trivial onRequest", "enabled"]
  ]
  const results = Object.fromEntries(conditions.map(([name]) => [name, []]))
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < conditions.length; i++) {
      const [name, want] = conditions[(i + r) % conditions.length]
      await ensure(want)
      await load(t, body) // settle after the change (a process started or stopped)
      results[name].push(await load(t, body))
    }
  }
  const mean = (xs, k) => xs.reduce((s, x) => s + x[k], 0) / xs.length
  const none = { rps: mean(results.none, "rps"), p50: mean(results.none, "p50"), p99: mean(results.none, "p99") }
  console.log(`c=${CONCURRENCY}, ${ROUNDS} rounds of ${SECONDS} s`)
  console.log(`| condition | req/s | p50 ms | p99 ms | req/s vs none | p50 added ms | errors |`)
  console.log(`|---|---|---|---|---|---|---|`)
  for (const [name, xs] of Object.entries(results)) {
    const c = { rps: mean(xs, "rps"), p50: mean(xs, "p50"), p99: mean(xs, "p99") }
    console.log(
      `| ${name} | ${c.rps.toFixed(0)} | ${c.p50.toFixed(3)} | ${c.p99.toFixed(3)} | ${(c.rps / none.rps).toFixed(3)} | ${(c.p50 - none.p50).toFixed(3)} | ${xs.reduce((s, x) => s + x.errors, 0)} |`
    )
  }
} finally {
  agent.destroy()
  await cleanup()
}
