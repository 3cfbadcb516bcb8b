#!/usr/bin/env node
// `node bench/design-floors.mjs [--rounds N] [--secs S]`: where the gateway's CPU per request
// goes, by design layer. Next to the floor (raw node:http pass-through) and the gateway, two
// reference proxies with no gateway logic at all:
//   undici   the gateway's transport: node:http server, its undici client, the body parsed and
//            re-serialised, a JSON answer parsed (bench/floors/undici-proxy.mjs);
//   effect   the same with each request an Effect fiber, run the way the gateway's server runs
//            it (bench/floors/effect-proxy.mjs).
// So `effect` is the least an Effect-per-request gateway can cost here, and gateway − effect is
// what the gateway's own work (auth, routing, resilience, accounting, usage rows) costs.
// Measured like the harness: targets on core 0, mock upstream and load on core 1 (taskset),
// interleaved rounds of c=32 JSON 1 KB and c=32 SSE bursts; req/s and the target's own CPU
// time per answer (all its threads, from /proc). Needs `npm run build` and bench/node_modules.
import * as path from "node:path"
import { mkdirSync, writeFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { throughputRun } from "./lib/load.mjs"
import { cleanup, cpuSeconds, pinSelf, spawnChild, tasksetAvailable, waitForLine } from "./lib/proc.mjs"
import { median } from "./lib/stats.mjs"
import { chatBody, launchGateway, prepareGateway, startFloor, startMock, streamBody } from "./lib/targets.mjs"

const BENCH = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(BENCH, "..")
const arg = (name, dflt) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt)
const rounds = arg("--rounds", 5)
const secs = arg("--secs", 3)
const say = (m) => console.error(`[design-floors] ${m}`)

const startProxy = async (name, file, mock, pin) => {
  const proc = spawnChild({
    name,
    cmd: process.execPath,
    args: [path.join(BENCH, "floors", file), "--upstream", mock.baseUrl],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    core: 0,
    pin
  })
  const m = await waitForLine(proc, /listening (\d+)/)
  return {
    name,
    pid: proc.pid,
    chatUrl: `http://127.0.0.1:${m[1]}/v1/chat/completions`,
    headers: { "content-type": "application/json", authorization: "Bearer sk-bench" },
    model: (x) => x
  }
}

const range = (xs) => `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}`
let failed = false
try {
  const pin = tasksetAvailable()
  if (pin) pinSelf(1)
  else say("taskset not available: processes share all cores (figures are noisier)")
  const mock = await startMock({ benchDir: BENCH, core: 1, pin })
  const floor = await startFloor({ benchDir: BENCH, core: 0, pin, mock })
  if (!floor.ok) throw new Error(`floor: ${floor.error}`)
  const gateway = await launchGateway(await prepareGateway({ rootDir: ROOT, mock, core: 1, pin }), { rootDir: ROOT, core: 0, pin })
  if (!gateway.ok) throw new Error(`gateway: ${gateway.error}`)
  const targets = [
    { ...floor, name: "floor (node:http pass-through)" },
    await startProxy("undici (gateway transport, no logic)", "undici-proxy.mjs", mock, pin),
    await startProxy("effect (+ an Effect fiber per request)", "effect-proxy.mjs", mock, pin),
    { ...gateway, name: "gateway" }
  ]
  const kinds = { json: (t) => chatBody(t.model("json-1k")), sse: (t) => streamBody(t.model("sse-burst")) }
  const measure = async (t, kind, durationS) => {
    const before = cpuSeconds(t.pid)
    const r = await throughputRun(t.chatUrl, { headers: t.headers, body: kinds[kind](t), connections: 32, durationS })
    const cpu = cpuSeconds(t.pid) - before
    if (r.non2xx || r.errors || r.ok === 0) throw new Error(`${t.name} ${kind}: ${r.ok} 2xx, ${r.non2xx} non-2xx, ${r.errors} errors`)
    return { rps: r.rps, cpuUs: (cpu * 1e6) / r.ok }
  }
  say(`warming up, then ${rounds} interleaved rounds of ${secs} s per target and kind`)
  for (const t of targets) for (const kind of Object.keys(kinds)) await measure(t, kind, 3)
  for (const t of targets) t.runs = { json: [], sse: [] }
  for (let r = 0; r < rounds; r++) {
    for (const t of targets) for (const kind of Object.keys(kinds)) t.runs[kind].push(await measure(t, kind, secs))
    say(`round ${r + 1}/${rounds} done`)
  }
  const stat = (t, kind, key) => median(t.runs[kind].map((x) => x[key]))
  const base = targets[0]
  const out = [
    `| c=32 | JSON 1 KB req/s | CPU µs per request | ÷ floor (req/s) | SSE burst streams/s | CPU µs per stream | ÷ floor (streams/s) |`,
    `|---|---:|---:|---:|---:|---:|---:|`
  ]
  for (const t of targets) {
    const cell = (kind) => [
      `${Math.round(stat(t, kind, "rps"))} (${range(t.runs[kind].map((x) => x.rps))})`,
      `${Math.round(stat(t, kind, "cpuUs"))} (${range(t.runs[kind].map((x) => x.cpuUs))})`,
      `${(stat(t, kind, "rps") / stat(base, kind, "rps")).toFixed(2)}×`
    ]
    out.push(`| ${t.name} | ${[...cell("json"), ...cell("sse")].join(" | ")} |`)
  }
  console.log(out.join("\n"))
  const dir = path.join(BENCH, "results")
  mkdirSync(dir, { recursive: true })
  const file = path.join(
    dir,
    `design-floors-${new Date()
      .toISOString()
      .replace(/:/g, "-")
      .replace(/\.\d+Z$/, "Z")}.json`
  )
  writeFileSync(
    file,
    JSON.stringify(
      { rounds, secs, pinned: pin, node: process.version, targets: targets.map((t) => ({ name: t.name, runs: t.runs })) },
      null,
      2
    )
  )
  say(`written ${path.relative(ROOT, file)}`)
} catch (e) {
  failed = true
  say(`failed: ${e.message}`)
} finally {
  await cleanup()
}
process.exit(failed ? 1 : 0)
