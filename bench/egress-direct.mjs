#!/usr/bin/env node
// What a connection WITHOUT a proxy pays for upstream proxy support (docs/egress.md): the
// gateway built from this tree against the gateway built from a base commit (default: the
// merge base with main), same machine, same run, same mock upstream, rounds interleaved.
// Each round: sequential non-streamed chat (json-1k) over one keep-alive connection.
//
//   node bench/egress-direct.mjs [--base <commit>] [--seconds 5] [--rounds 3]
//
// Prints p50/p90/mean per gateway and the ratio this-tree / base (1.00: no extra cost).
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { buildBase, mergeBase } from "./lib/baseBuild.mjs"
import { latencyRun } from "./lib/load.mjs"
import { cleanup } from "./lib/proc.mjs"
import { chatBody, startGateway, startMock } from "./lib/targets.mjs"

const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.dirname(benchDir)
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : fallback
}
const base = arg("base", mergeBase(rootDir))
const seconds = Number(arg("seconds", "5"))
const rounds = Number(arg("rounds", "3"))

const built = buildBase(rootDir, base, "egress-bench-base-")
const baseDir = built.dir
try {
  const mock = await startMock({ benchDir, core: undefined, pin: false })
  const gateways = {
    base: await startGateway({ rootDir: baseDir, mock, pin: false, name: "base" }),
    egress: await startGateway({ rootDir, mock, pin: false, name: "egress" })
  }
  for (const [k, t] of Object.entries(gateways)) if (!t.ok) throw new Error(`${k}: ${t.error}`)
  const results = { base: [], egress: [] }
  // Warm-up, then interleaved rounds (the order alternates so neither always runs first).
  for (const t of Object.values(gateways))
    await latencyRun(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-1k")), durationMs: 1000 })
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? ["base", "egress"] : ["egress", "base"]
    for (const k of order) {
      const t = gateways[k]
      const run = await latencyRun(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-1k")), durationMs: seconds * 1000 })
      if (run.errors > 0) throw new Error(`${k}: ${run.errors} errors (${JSON.stringify(run.failures)})`)
      results[k].push(run)
      process.stderr.write(`round ${r + 1} ${k}: n=${run.n} p50=${run.p50.toFixed(3)} ms\n`)
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  const row = (k) => ({
    p50: median(results[k].map((x) => x.p50)),
    p90: median(results[k].map((x) => x.p90)),
    mean: median(results[k].map((x) => x.mean)),
    n: results[k].reduce((s, x) => s + x.n, 0)
  })
  const b = row("base")
  const e = row("egress")
  console.log(`| gateway | requests | p50 ms | p90 ms | mean ms |`)
  console.log(`|---|---|---|---|---|`)
  console.log(`| base ${base.slice(0, 10)} | ${b.n} | ${b.p50.toFixed(3)} | ${b.p90.toFixed(3)} | ${b.mean.toFixed(3)} |`)
  console.log(`| this tree (egress) | ${e.n} | ${e.p50.toFixed(3)} | ${e.p90.toFixed(3)} | ${e.mean.toFixed(3)} |`)
  console.log(`| ratio egress/base | | ${(e.p50 / b.p50).toFixed(3)} | ${(e.p90 / b.p90).toFixed(3)} | ${(e.mean / b.mean).toFixed(3)} |`)
} finally {
  await cleanup()
  built.remove()
}
