#!/usr/bin/env node
// Effect instructions per request: a deterministic figure (unlike timings) for how much Effect
// runtime work the hot path does. Starts the mock upstream and the gateway (production build,
// this preload counting the runtime's ops), warms up, then sends N sequential requests of each
// kind and divides. The usage writer's work is counted too; it batches rows by time, so the
// figure moves by a few percent between runs (a change of 10+ is real).
//
//   npm run build && node bench/effect-ops.mjs [--n 1000]
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import http from "node:http"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { chatBody, launchGateway, prepareGateway, startMock, streamBody } from "./lib/targets.mjs"
import { request } from "./lib/load.mjs"
import { cleanup } from "./lib/proc.mjs"

const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")
const argN = process.argv.indexOf("--n")
const N = argN > 0 ? Number(process.argv[argN + 1]) : 1000
const out = path.join(mkdtempSync(path.join(os.tmpdir(), "effect-ops-")), "ops.json")

const snapshot = async (pid) => {
  process.kill(pid, "SIGUSR2")
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 20))
    try {
      return JSON.parse(readFileSync(out, "utf8"))
    } catch {}
  }
  throw new Error("the gateway wrote no counts")
}

try {
  const mock = await startMock({ benchDir, pin: false })
  const prep = await prepareGateway({ rootDir, mock, pin: false })
  prep.env.EFFECT_OPS_OUT = out
  const gw = await launchGateway(prep, {
    rootDir,
    pin: false,
    extraNodeArgs: ["--import", path.join(benchDir, "lib/effect-ops-preload.mjs")]
  })
  if (!gw.ok) throw new Error(gw.error)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const kinds = [
    ["JSON 1 KB, non-streamed", chatBody(gw.model("json-1k"))],
    ["SSE, 64 chunks at once", streamBody(gw.model("sse-burst"))]
  ]
  const rows = []
  for (const [label, body] of kinds) {
    for (let i = 0; i < 300; i++) await request(gw.chatUrl, { headers: gw.headers, body, agent })
    rmSync(out, { force: true })
    process.kill(gw.pid, "SIGUSR1")
    await new Promise((r) => setTimeout(r, 50))
    let failed = 0
    for (let i = 0; i < N; i++) {
      const r = await request(gw.chatUrl, { headers: gw.headers, body, agent })
      if (r.status !== 200) failed++
    }
    const c = await snapshot(gw.pid)
    rmSync(out, { force: true })
    // A preload that counted nothing would print zeros that look like a result.
    if (!c.patched || c.ops === 0)
      throw new Error("effect-ops: the preload found no Effect fiber to count (bench/lib/effect-ops-preload.mjs)")
    rows.push({
      label,
      opsPerRequest: c.ops / N,
      fibersPerRequest: c.fibers / N,
      failed,
      byOp: Object.fromEntries(Object.entries(c.byOp).map(([k, v]) => [k, +(v / N).toFixed(1)]))
    })
  }
  agent.destroy()
  console.log(`| Request (${N} sequential) | Effect ops per request | fibers per request |`)
  console.log("|---|---:|---:|")
  for (const r of rows)
    console.log(
      `| ${r.label}${r.failed ? ` (${r.failed} failed)` : ""} | ${r.opsPerRequest.toFixed(0)} | ${r.fibersPerRequest.toFixed(2)} |`
    )
  for (const r of rows)
    console.error(
      `${r.label}: ${Object.entries(r.byOp)
        .filter(([, v]) => v > 0)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${v}`)
        .join(", ")}`
    )
} finally {
  await cleanup()
  rmSync(path.dirname(out), { recursive: true, force: true })
}
process.exit(0)
