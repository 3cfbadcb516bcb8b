#!/usr/bin/env node
// One core, one gateway process or two: what the `--workers 2` pinned row's shortfall is made of.
// Three sides on the target core (core 0), the mock and the load on core 1, as the bench pins them:
//   one      one gateway process, c=32 JSON 1 KB (the row's baseline);
//   two      two independent one-process gateways (each its own data dir), c=16 each at once: two
//            processes sharing a core, without node's cluster, its primary or a shared database;
//   workers  `gateway --workers 2`, c=32 (the row itself).
// If `two` falls as far below `one` as `workers` does, the shortfall is the core's sharing (two
// heaps, two sets of JIT code and threads taking turns in one core's caches), not the cluster's
// machinery. Before each round every side is topped up to as many requests per process as the side
// furthest ahead (V8 keeps optimizing for minutes: a warm process against cold ones reads as a
// cost of the second process); rounds alternate the sides' order.
//
//   npm run build && node bench/core-sharing.mjs [--rounds 6] [--seconds 4] [--warm 12] [--json <file>]
//
// Printed per round and side: req/s, CPU µs a request (every process of the side, from /proc), and
// the main threads' context switches per 1000 requests (voluntary: the loop went idle; involuntary:
// preempted). The medians end the run. Needs taskset (util-linux) and two cores.
import fs from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { throughputRun } from "./lib/load.mjs"
import { cleanup, pinSelf, processTree, stopChildrenOnExit, familyCpuSeconds } from "./lib/proc.mjs"
import { median } from "./lib/stats.mjs"
import { chatBody, launchGateway, prepareGateway, startMock } from "./lib/targets.mjs"
import { arg } from "./lib/args.mjs"

const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")
const ROUNDS = Number(arg("--rounds", 6))
const SECONDS = Number(arg("--seconds", 4))
const WARM = Number(arg("--warm", 12))
const JSON_OUT = arg("--json", undefined)
const CORE_TARGET = 0
const CORE_LOAD = 1

if (os.availableParallelism() < 2) {
  console.error("core-sharing.mjs needs two cores: the gateways on one, the mock and the load on the other")
  process.exit(2)
}
stopChildrenOnExit()
if (!pinSelf(CORE_LOAD)) {
  console.error("core-sharing.mjs: taskset failed (Debian: apt-get install util-linux)")
  process.exit(2)
}

/** The main thread's [voluntary, involuntary] context switches (null when the process is gone). */
const switches = (pid) => {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
    return [Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)[1]), Number(/\nnonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)[1])]
  } catch {
    return null
  }
}

const mock = await startMock({ benchDir, core: CORE_LOAD, pin: true })
if (!mock.ok) throw new Error(`mock: ${mock.error}`)
const gateway = async (name, gatewayArgs = []) => {
  const prep = await prepareGateway({ rootDir, mock, core: CORE_LOAD, pin: true })
  const g = await launchGateway(prep, { rootDir, core: CORE_TARGET, pin: true, gatewayArgs, name })
  if (!g.ok) throw new Error(`${name}: ${g.error}`)
  return g
}
// A side: its gateways, the connections each takes, and how many processes serve (for the top-up).
const sides = {
  one: { parts: [{ g: await gateway("one"), connections: 32 }], processes: 1 },
  two: {
    parts: [
      { g: await gateway("two-a"), connections: 16 },
      { g: await gateway("two-b"), connections: 16 }
    ],
    processes: 2
  },
  workers: { parts: [{ g: await gateway("workers", ["--workers", "2"]), connections: 32 }], processes: 2 }
}
for (const side of Object.values(sides)) side.served = 0

const load = (side, opts) =>
  Promise.all(
    side.parts.map(({ g, connections }) =>
      throughputRun(g.chatUrl, { headers: g.headers, body: chatBody(g.model("json-1k")), connections, ...opts })
    )
  ).then((rs) => {
    const ok = rs.reduce((sum, r) => sum + r.ok, 0)
    side.served += ok
    return ok
  })

/** One measured run of a side: req/s, CPU µs a request over all its processes, main threads' switches per 1000 requests. */
const timed = async (side) => {
  const pids = side.parts.flatMap(({ g }) => processTree(g.pid))
  const cpu0 = side.parts.map(({ g }) => familyCpuSeconds(g.pid))
  const sw0 = pids.map(switches)
  const started = performance.now()
  const ok = await load(side, { durationS: SECONDS })
  const seconds = (performance.now() - started) / 1000
  const cpu = side.parts.reduce((sum, { g }, i) => sum + (familyCpuSeconds(g.pid) - cpu0[i]), 0)
  const sw = pids.map(switches).reduce((acc, s, i) => (s && sw0[i] ? [acc[0] + s[0] - sw0[i][0], acc[1] + s[1] - sw0[i][1]] : acc), [0, 0])
  return { rps: ok / seconds, cpuUs: (cpu * 1e6) / ok, voluntary: (sw[0] * 1000) / ok, involuntary: (sw[1] * 1000) / ok }
}

// Warm-up: every side to WARM seconds' worth of the one process's requests per process.
for (const side of Object.values(sides)) await load(side, { durationS: 2 })
const perProcess = () => Math.max(...Object.values(sides).map((s) => s.served / s.processes))
const topUp = async (side, mark) => {
  const missing = Math.round(mark * side.processes - side.served)
  if (missing >= 32) await load(side, { amount: Math.max(32, Math.round(missing / side.parts.length)) })
}
const warmMark = (sides.one.served / 2) * WARM
for (const side of Object.values(sides)) await topUp(side, warmMark)

const results = Object.fromEntries(Object.keys(sides).map((k) => [k, []]))
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? Object.keys(sides) : Object.keys(sides).reverse()
  const line = []
  // One mark a round: the side furthest ahead when the round starts (the harness's workers section does the same).
  const mark = perProcess()
  for (const key of order) {
    await topUp(sides[key], mark)
    const r = await timed(sides[key])
    results[key].push(r)
    line.push(`${key} ${r.rps.toFixed(0)} req/s, ${r.cpuUs.toFixed(0)} µs, switches ${r.voluntary.toFixed(0)}/${r.involuntary.toFixed(0)}`)
  }
  console.log(`round ${round + 1}: ${line.join("; ")}`)
}

const summary = Object.fromEntries(
  Object.entries(results).map(([key, rs]) => [
    key,
    {
      rps: median(rs.map((r) => r.rps)),
      cpuUs: median(rs.map((r) => r.cpuUs)),
      voluntaryPer1000: median(rs.map((r) => r.voluntary)),
      involuntaryPer1000: median(rs.map((r) => r.involuntary))
    }
  ])
)
console.log(
  "\n| side | req/s (median) | ÷ one | CPU µs a request | ÷ one | main threads' switches per 1000 requests (voluntary / involuntary) |"
)
console.log("|---|---:|---:|---:|---:|---:|")
for (const [key, s] of Object.entries(summary))
  console.log(
    `| ${key} | ${s.rps.toFixed(0)} | ${(s.rps / summary.one.rps).toFixed(2)}× | ${s.cpuUs.toFixed(0)} | ${(s.cpuUs / summary.one.cpuUs).toFixed(2)}× | ${s.voluntaryPer1000.toFixed(0)} / ${s.involuntaryPer1000.toFixed(0)} |`
  )
if (JSON_OUT) fs.writeFileSync(JSON_OUT, `${JSON.stringify({ rounds: ROUNDS, seconds: SECONDS, warm: WARM, results, summary }, null, 2)}\n`)
await cleanup()
process.exit(0)
