#!/usr/bin/env node
// What policies cost on the request path: the same chat load (json-1k through the gateway, with
// two declared tools) with no policy, then with one policy of every rule kind and
// TOOL_POLICY_MODE=block (a denied tool removed per request), interleaved rounds in one run, one
// gateway; also a policy without tool rules (no audit row per request). Prints requests per second and p50/p99 latency per condition and
// the ratio to none.
//   node bench/policies.mjs [--seconds 4] [--rounds 2] [--concurrency 16]
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
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

const tool = (name) => ({ type: "function", function: { name, description: name, parameters: { type: "object", properties: {} } } })

const { agent, admin, load } = makeClosedLoop({ seconds: SECONDS, concurrency: CONCURRENCY })

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
    await admin(t, "POST", "/api/policies", {
      name: "bench",
      tools: { deny: ["shell_*"] },
      blockedTerms: ["project falcon"],
      maxTokens: 4096,
      models: { "*": ["*"] }
    })
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
    console.log(
      `| ${name} | ${c.rps.toFixed(0)} | ${c.p50.toFixed(2)} | ${c.p99.toFixed(2)} | ${(c.rps / none.rps).toFixed(3)} | ${xs.reduce((s, x) => s + x.errors, 0)} |`
    )
  }
} finally {
  agent.destroy()
  await cleanup()
}
