#!/usr/bin/env node
// What webhooks cost on the request path: the same chat load (json-1k through the gateway) with no
// webhook, then with one webhook subscribed to request.completed (a receiver on 127.0.0.1 answering
// 204, so every request is also one signed delivery), interleaved rounds in one run, one gateway.
// Prints requests per second and p50/p99 latency per condition, the ratio to none, the gateway
// process's CPU time per request (from /proc: steadier than req/s on a machine shared with other
// work, whose share is printed too), and how many deliveries the receiver got.
//   node bench/webhooks.mjs [--seconds 4] [--rounds 2] [--concurrency 16] [--base <commit>]
// --base <commit>: also build and measure that commit (lib/baseBuild.mjs), interleaved with this
// tree, each build's ratios against its own "none".
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
import * as http from "node:http"
import { makeClosedLoop, numberArg } from "./lib/closedLoop.mjs"
import { buildBase } from "./lib/baseBuild.mjs"
import { cleanup, cpuSeconds, cpuSnapshot, foreignSince } from "./lib/proc.mjs"
import { chatBody, startGateway, startMock } from "./lib/targets.mjs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const SECONDS = numberArg("seconds", 4)
const ROUNDS = numberArg("rounds", 2)
const CONCURRENCY = numberArg("concurrency", 16)
const baseAt = process.argv.indexOf("--base")
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")
const base = baseAt > 0 ? buildBase(rootDir, process.argv[baseAt + 1], "webhooks-bench-base-") : undefined

const { agent, admin, load: closedLoop } = makeClosedLoop({ seconds: SECONDS, concurrency: CONCURRENCY })
/** One closed-loop round, plus the gateway's CPU ms per request and other processes' share of the machine. */
const load = async (t, body) => {
  const cpu = cpuSeconds(t.pid)
  const snap = cpuSnapshot()
  const r = await closedLoop(t, body)
  return { ...r, cpuMs: ((cpuSeconds(t.pid) - cpu) * 1000) / Math.max(1, r.rps * SECONDS), foreign: foreignSince(snap) ?? 0 }
}

let received = 0
const receiver = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    received++
    res.writeHead(204).end()
  })
})
try {
  await new Promise((r) => receiver.listen(0, "127.0.0.1", r))
  const hookUrl = `http://127.0.0.1:${receiver.address().port}/hook`
  const mock = await startMock({ benchDir })
  const builds = [["this tree", rootDir], ...(base ? [[`base ${process.argv[baseAt + 1].slice(0, 10)}`, base.dir]] : [])]
  const targets = []
  for (const [label, dir] of builds) {
    const t = await startGateway({ rootDir: dir, mock, name: `gateway (${label})` })
    if (!t.ok) throw new Error(`${label}: ${t.error}`)
    const body = chatBody(t.model("json-1k"))
    await load(t, body) // warm-up
    targets.push({ label, t, body, none: [], hook: [] })
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const x of targets) {
      x.none.push(await load(x.t, x.body))
      const res = await fetch(`${x.t.baseUrl}/api/webhooks`, {
        method: "POST",
        headers: x.t.adminHeaders,
        body: JSON.stringify({ url: hookUrl, events: ["request.completed"] })
      })
      if (res.status !== 201) throw new Error(`POST /api/webhooks: ${res.status} ${await res.text()}`)
      const { id } = await res.json()
      x.hook.push(await load(x.t, x.body))
      await admin(x.t, "DELETE", `/api/webhooks/${id}`)
    }
  }
  const mean = (xs, k) => xs.reduce((s, x) => s + x[k], 0) / xs.length
  console.log(`| build | condition | req/s | p50 ms | p99 ms | req/s vs none | gateway CPU ms/req | CPU vs none | other load | errors |`)
  console.log(`|---|---|---|---|---|---|---|---|---|---|`)
  for (const x of targets) {
    const none = mean(x.none, "rps")
    const noneCpu = mean(x.none, "cpuMs")
    for (const [name, xs] of [
      ["none", x.none],
      ["one webhook (request.completed)", x.hook]
    ]) {
      const cells = [
        mean(xs, "rps").toFixed(0),
        mean(xs, "p50").toFixed(2),
        mean(xs, "p99").toFixed(2),
        (mean(xs, "rps") / none).toFixed(3),
        mean(xs, "cpuMs").toFixed(3),
        (mean(xs, "cpuMs") / noneCpu).toFixed(3),
        `${(mean(xs, "foreign") * 100).toFixed(0)}%`
      ]
      console.log(`| ${x.label} | ${name} | ${cells.join(" | ")} | ${xs.reduce((s, y) => s + y.errors, 0)} |`)
    }
  }
  console.log(`deliveries received: ${received}`)
} finally {
  agent.destroy()
  receiver.closeAllConnections()
  receiver.close()
  await cleanup()
  base?.remove()
}
