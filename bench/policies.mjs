#!/usr/bin/env node
// What policies cost on the request path: the same chat load (json-1k through the gateway, with
// two declared tools) with no policy, then with one policy of every rule kind and
// TOOL_POLICY_MODE=block (a denied tool removed per request), interleaved rounds in one run, one
// gateway; also a policy without tool rules (no audit row per request). Prints requests per second and p50/p99 latency per condition and the ratio to none.
//   node bench/policies.mjs [--seconds 4] [--rounds 2] [--concurrency 16]
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
import * as http from "node:http"
import { cleanup } from "./lib/proc.mjs"
import { chatBody, startGateway, startMock } from "./lib/targets.mjs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : dflt
}
const SECONDS = arg("seconds", 4)
const ROUNDS = arg("rounds", 2)
const CONCURRENCY = arg("concurrency", 16)
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")

const tool = (name) => ({ type: "function", function: { name, description: name, parameters: { type: "object", properties: {} } } })

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY })
const post = (url, headers, body) =>
  new Promise((resolve, reject) => {
    const u = new URL(url)
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: "POST", headers: { ...headers, "content-length": Buffer.byteLength(body) }, agent }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode))
    })
    req.on("error", reject)
    req.end(body)
  })
const admin = async (t, method, p, body) => {
  const res = await fetch(`${t.baseUrl}${p}`, { method, headers: t.adminHeaders, body: body === undefined ? undefined : JSON.stringify(body) })
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`)
}

const load = async (t, body) => {
  const latencies = []
  const until = Date.now() + SECONDS * 1000
  let errors = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const started = process.hrtime.bigint()
        const status = await post(t.chatUrl, t.headers, body)
        if (status !== 200) errors++
        latencies.push(Number(process.hrtime.bigint() - started) / 1e6)
      }
    })
  )
  latencies.sort((a, b) => a - b)
  return { rps: latencies.length / SECONDS, p50: latencies[Math.floor(latencies.length * 0.5)], p99: latencies[Math.floor(latencies.length * 0.99)], errors }
}

try {
  const mock = await startMock({ benchDir })
  const t = await startGateway({ rootDir, mock })
  if (!t.ok) throw new Error(t.error)
  const body = chatBody(t.model("json-1k"), { tools: [tool("shell_exec"), tool("read_file")] })
  await load(t, body) // warm-up
  const results = { none: [], "policy, no tool action": [], policy: [] }
  for (let r = 0; r < ROUNDS; r++) {
    results.none.push(await load(t, body))
    await admin(t, "POST", "/api/policies", { name: "bench", blockedTerms: ["project falcon"], maxTokens: 4096, models: { "*": ["*"] } })
    results["policy, no tool action"].push(await load(t, body))
    await admin(t, "DELETE", "/api/policies/bench")
    await admin(t, "POST", "/api/policies", { name: "bench", tools: { deny: ["shell_*"] }, blockedTerms: ["project falcon"], maxTokens: 4096, models: { "*": ["*"] } })
    await admin(t, "PUT", "/api/settings/feature-flags", { key: "TOOL_POLICY_MODE", value: "block" })
    results.policy.push(await load(t, body))
    await admin(t, "DELETE", "/api/policies/bench")
  }
  const mean = (xs, k) => xs.reduce((s, x) => s + x[k], 0) / xs.length
  const none = { rps: mean(results.none, "rps"), p50: mean(results.none, "p50"), p99: mean(results.none, "p99") }
  console.log(`| condition | req/s | p50 ms | p99 ms | req/s vs none | errors |`)
  console.log(`|---|---|---|---|---|---|`)
  for (const [name, xs] of Object.entries(results)) {
    const c = { rps: mean(xs, "rps"), p50: mean(xs, "p50"), p99: mean(xs, "p99") }
    console.log(`| ${name} | ${c.rps.toFixed(0)} | ${c.p50.toFixed(2)} | ${c.p99.toFixed(2)} | ${(c.rps / none.rps).toFixed(3)} | ${xs.reduce((s, x) => s + x.errors, 0)} |`)
  }
} finally {
  agent.destroy()
  await cleanup()
}
