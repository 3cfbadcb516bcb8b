#!/usr/bin/env node
// What observability costs on the request path: the same chat load (json-1k through the gateway)
// against gateways that differ only in it, interleaved rounds in one run:
//   - "tracing off": this build, no OTEL_* variables (metrics are still kept for GET /metrics);
//   - "tracing on": this build exporting spans and metrics over OTLP (http/protobuf) to a sink on
//     127.0.0.1 that answers 200, every request sampled;
//   - "base" (with --base <dir>): another build of the gateway (e.g. the commit before
//     observability, extracted and built there) with no OTEL_* variables.
// Prints requests per second, p50/p99 and CPU per request of each, and the ratios to "tracing off".
//   node bench/observability.mjs [--seconds 4] [--rounds 3] [--concurrency 16] [--base /tmp/base]
// Needs dist/ (npm run build). Everything listens on 127.0.0.1.
import * as http from "node:http"
import { readFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { makeClosedLoop, numberArg } from "./lib/closedLoop.mjs"
import { cleanup } from "./lib/proc.mjs"
import { chatBody, launchGateway, prepareGateway, startMock } from "./lib/targets.mjs"

const SECONDS = numberArg("seconds", 4)
const ROUNDS = numberArg("rounds", 3)
const CONCURRENCY = numberArg("concurrency", 16)
const baseAt = process.argv.indexOf("--base")
const BASE = baseAt > 0 ? path.resolve(process.argv[baseAt + 1]) : undefined
const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")

const { agent, load } = makeClosedLoop({ seconds: SECONDS, concurrency: CONCURRENCY })

/** CPU seconds (user + system) of a process so far, from /proc. */
const cpuSeconds = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

let exported = 0
const sink = http.createServer((req, res) => {
  req.resume()
  req.on("end", () => {
    exported++
    res.writeHead(200, { "content-type": "application/x-protobuf" }).end()
  })
})
try {
  await new Promise((r) => sink.listen(0, "127.0.0.1", r))
  const mock = await startMock({ benchDir })
  const launch = async (name, root, env = {}) => {
    const prep = await prepareGateway({ rootDir: root, mock })
    if (prep instanceof Error) throw prep
    Object.assign(prep.env, env)
    const t = await launchGateway(prep, { rootDir: root, name })
    if (!t.ok) throw new Error(`${name}: ${t.error}`)
    return t
  }
  const targets = [
    await launch("tracing off", rootDir),
    await launch("tracing on", rootDir, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.address().port}`,
      OTEL_SERVICE_NAME: "bench"
    }),
    ...(BASE ? [await launch("base", BASE)] : [])
  ]
  const body = (t) => chatBody(t.model("json-1k"))
  for (const t of targets) await load(t, body(t)) // warm-up
  const results = Object.fromEntries(targets.map((t) => [t.name, []]))
  for (let r = 0; r < ROUNDS; r++) {
    for (const t of targets) {
      const before = cpuSeconds(t.pid)
      const m = await load(t, body(t))
      m.cpuUs = ((cpuSeconds(t.pid) - before) * 1e6) / (m.rps * SECONDS)
      results[t.name].push(m)
    }
  }
  const median = (xs, k) => xs.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  const row = (xs) => ({ rps: median(xs, "rps"), p50: median(xs, "p50"), p99: median(xs, "p99"), cpuUs: median(xs, "cpuUs") })
  const off = row(results["tracing off"])
  console.log(`c=${CONCURRENCY}, ${ROUNDS} interleaved rounds of ${SECONDS} s, medians`)
  console.log(`| condition | req/s | p50 ms | p99 ms | CPU µs/request | req/s ÷ tracing off | CPU ÷ tracing off | errors |`)
  console.log(`|---|---:|---:|---:|---:|---:|---:|---:|`)
  for (const [name, xs] of Object.entries(results)) {
    const c = row(xs)
    console.log(
      `| ${name} | ${c.rps.toFixed(0)} | ${c.p50.toFixed(2)} | ${c.p99.toFixed(2)} | ${c.cpuUs.toFixed(0)} | ${(c.rps / off.rps).toFixed(3)} | ${(c.cpuUs / off.cpuUs).toFixed(3)} | ${xs.reduce((s, x) => s + x.errors, 0)} |`
    )
  }
  console.log(`OTLP posts received by the sink: ${exported}`)
} finally {
  agent.destroy()
  sink.closeAllConnections()
  sink.close()
  await cleanup()
}
