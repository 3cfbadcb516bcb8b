#!/usr/bin/env node
// What compression and context injection cost on the request path: the same chat load (json-1k
// through the gateway) with the hook not registered (compression disabled, no injection budget),
// registered with nothing to do (the defaults: on, nothing chosen), compressing every request with
// the default combo (json, rtk, whitespace: the prompt has no tool result, so the walk and the
// engines' checks are the cost), and with one memory entry injected. Interleaved rounds, one
// gateway. Prints requests per second and p50/p99 latency per condition and the ratio to "off".
//   node bench/compression.mjs [--seconds 4] [--rounds 2] [--concurrency 16] [--stream]
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
import { makeClosedLoop, numberArg } from "./lib/closedLoop.mjs"
import { cleanup } from "./lib/proc.mjs"
import { chatBody, startGateway, startMock, streamBody } from "./lib/targets.mjs"
import path from "node:path"
import { fileURLToPath } from "node:url"

const SECONDS = numberArg("seconds", 4)
const ROUNDS = numberArg("rounds", 2)
const CONCURRENCY = numberArg("concurrency", 16)
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")

const { agent, admin, load } = makeClosedLoop({ seconds: SECONDS, concurrency: CONCURRENCY })

try {
  const mock = await startMock({ benchDir })
  const t = await startGateway({ rootDir, mock })
  if (!t.ok) throw new Error(t.error)
  const body = process.argv.includes("--stream") ? streamBody(t.model("sse-burst")) : chatBody(t.model("json-1k"))
  await load(t, body) // warm-up
  const conditions = {
    off: async () => admin(t, "PUT", "/api/settings/compression", { enabled: false, injectionMaxTokens: 0 }),
    "on, nothing chosen": async () => admin(t, "PUT", "/api/settings/compression", {}),
    "default combo": async () => admin(t, "PUT", "/api/settings/compression", { compressByDefault: true }),
    "one memory entry": async () => {
      await admin(t, "PUT", "/api/settings/compression", {})
      const m = await admin(t, "POST", "/api/context/memory", { text: "The repository uses pnpm and TypeScript strict mode." })
      return async () => admin(t, "DELETE", `/api/context/memory/${m.id}`)
    }
  }
  const results = Object.fromEntries(Object.keys(conditions).map((k) => [k, []]))
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, set] of Object.entries(conditions)) {
      const undo = await set()
      // A change reaches the request path at once (this process wrote it).
      results[name].push(await load(t, body))
      if (typeof undo === "function") await undo()
    }
  }
  const mean = (xs, k) => xs.reduce((s, x) => s + x[k], 0) / xs.length
  const off = { rps: mean(results.off, "rps") }
  console.log(`| condition | req/s | p50 ms | p99 ms | req/s vs off | errors |`)
  console.log(`|---|---|---|---|---|---|`)
  for (const [name, xs] of Object.entries(results)) {
    const c = { rps: mean(xs, "rps"), p50: mean(xs, "p50"), p99: mean(xs, "p99") }
    console.log(
      `| ${name} | ${c.rps.toFixed(0)} | ${c.p50.toFixed(2)} | ${c.p99.toFixed(2)} | ${(c.rps / off.rps).toFixed(3)} | ${xs.reduce((s, x) => s + x.errors, 0)} |`
    )
  }
} finally {
  agent.destroy()
  await cleanup()
}
