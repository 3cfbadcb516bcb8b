#!/usr/bin/env node
// What webhooks cost on the request path: the same chat load (json-1k through the gateway) with no
// webhook, then with one webhook subscribed to request.completed (a receiver on 127.0.0.1 answering
// 204, so every request is also one signed delivery), interleaved rounds in one run, one gateway.
// Prints requests per second and p50/p99 latency per condition, the ratio to none, and how many
// deliveries the receiver got.
//   node bench/webhooks.mjs [--seconds 4] [--rounds 2] [--concurrency 16]
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
import * as http from "node:http"
import { makeClosedLoop, numberArg } from "./lib/closedLoop.mjs"
import { cleanup } from "./lib/proc.mjs"
import { chatBody, startGateway, startMock } from "./lib/targets.mjs"
import path from "node:path"
import { fileURLToPath } from "node:url"


const SECONDS = numberArg("seconds", 4)
const ROUNDS = numberArg("rounds", 2)
const CONCURRENCY = numberArg("concurrency", 16)
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")


const { agent, admin, load } = makeClosedLoop({ seconds: SECONDS, concurrency: CONCURRENCY })

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
  const t = await startGateway({ rootDir, mock })
  if (!t.ok) throw new Error(t.error)
  const body = chatBody(t.model("json-1k"))
  await load(t, body) // warm-up
  const results = { none: [], "one webhook (request.completed)": [] }
  for (let r = 0; r < ROUNDS; r++) {
    results.none.push(await load(t, body))
    const res = await fetch(`${t.baseUrl}/api/webhooks`, { method: "POST", headers: t.adminHeaders, body: JSON.stringify({ url: hookUrl, events: ["request.completed"] }) })
    if (res.status !== 201) throw new Error(`POST /api/webhooks: ${res.status} ${await res.text()}`)
    const { id } = await res.json()
    results["one webhook (request.completed)"].push(await load(t, body))
    await admin(t, "DELETE", `/api/webhooks/${id}`)
  }
  const mean = (xs, k) => xs.reduce((s, x) => s + x[k], 0) / xs.length
  const none = { rps: mean(results.none, "rps"), p50: mean(results.none, "p50"), p99: mean(results.none, "p99") }
  console.log(`| condition | req/s | p50 ms | p99 ms | req/s vs none | errors |`)
  console.log(`|---|---|---|---|---|---|`)
  for (const [name, xs] of Object.entries(results)) {
    const c = { rps: mean(xs, "rps"), p50: mean(xs, "p50"), p99: mean(xs, "p99") }
    console.log(`| ${name} | ${c.rps.toFixed(0)} | ${c.p50.toFixed(2)} | ${c.p99.toFixed(2)} | ${(c.rps / none.rps).toFixed(3)} | ${xs.reduce((s, x) => s + x.errors, 0)} |`)
  }
  console.log(`deliveries received: ${received}`)
} finally {
  agent.destroy()
  receiver.closeAllConnections()
  receiver.close()
  await cleanup()
}
