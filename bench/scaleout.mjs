#!/usr/bin/env node
// `node bench/scaleout.mjs [--rounds N] [--duration S] [--connections C]`: throughput of the
// gateway as one instance, as two instances behind a round-robin balancer, and as
// `gateway --workers 2`, side by side (docs/performance.md, "Scale-out").
//
// - one instance: `gateway` on a prepared DATA_DIR (SQLite), as in the main harness;
// - two instances: two `gateway` processes on the same DATA_DIR (one SQLite file), or on
//   GATEWAY_BENCH_DATABASE_URL / REDIS_URL when those are set (passed as DATABASE_URL / REDIS_URL),
//   behind nginx (`/usr/sbin/nginx` or `nginx` on PATH: `upstream` round robin, keep-alive to the
//   instances) or, without nginx, a small Node TCP round robin (one instance per client connection);
//   the output says which;
// - workers: `gateway --workers 2` on the same DATA_DIR.
// Each is measured with autocannon (c=32 by default, JSON 1 KB chat completions against the mock
// upstream, 5 s after a 2 s warm-up), interleaved for N rounds (default 3); the table gives the
// median req/s (min–max) and the ratio to one instance. Nothing is pinned: scale-out is about
// using both cores (the mock and the load generator share them, so read ratios, not absolutes).
// Needs `npm run build` and bench/'s dependencies (`npm install --prefix bench`, as run.mjs does).
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import net from "node:net"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { throughputRun, waitFor200 } from "./lib/load.mjs"
import { cleanup, freePort, registerTempDir, spawnChild } from "./lib/proc.mjs"
import { median } from "./lib/stats.mjs"
import { chatBody, prepareGateway, startMock } from "./lib/targets.mjs"

const BENCH = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(BENCH, "..")
const arg = (name, dflt) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt)
const rounds = arg("--rounds", 3)
const durationS = arg("--duration", 5)
const connections = arg("--connections", 32)
const say = (m) => console.error(`[scaleout] ${m}`)

const nginxBin = () => {
  for (const p of ["/usr/sbin/nginx", "/usr/bin/nginx"]) if (existsSync(p)) return p
  const w = spawnSync("sh", ["-c", "command -v nginx"], { encoding: "utf8" })
  return w.status === 0 && w.stdout.trim() ? w.stdout.trim() : undefined
}

/** A TCP round robin on 127.0.0.1: each client connection goes to the next backend port. */
const tcpRoundRobin = async (ports) => {
  let next = 0
  const server = net.createServer((client) => {
    const port = ports[next++ % ports.length]
    const backend = net.connect(port, "127.0.0.1")
    client.pipe(backend).pipe(client)
    const close = () => {
      client.destroy()
      backend.destroy()
    }
    client.on("error", close)
    backend.on("error", close)
  })
  const port = await freePort()
  await new Promise((r) => server.listen(port, "127.0.0.1", r))
  return { port, kind: "a Node TCP round robin (no nginx found)", stop: async () => server.close() }
}

const nginxRoundRobin = async (bin, ports) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "scaleout-nginx-"))
  registerTempDir(dir)
  const port = await freePort()
  const conf = path.join(dir, "nginx.conf")
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream gateways { ${ports.map((p) => `server 127.0.0.1:${p};`).join(" ")} keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass http://gateways; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; }
  }
}
`
  )
  const proc = spawnChild({ name: "nginx", cmd: bin, args: ["-c", conf, "-p", dir], env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } })
  return { port, kind: `nginx (${bin}, round robin, keep-alive upstream)`, stop: () => proc.stop() }
}

const mock = await startMock({ benchDir: BENCH, pin: false })
const prep = await prepareGateway({ rootDir: ROOT, mock, pin: false })
const external = {
  ...(process.env.GATEWAY_BENCH_DATABASE_URL ? { DATABASE_URL: process.env.GATEWAY_BENCH_DATABASE_URL } : {}),
  ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {})
}
const store = external.DATABASE_URL ? "PostgreSQL (GATEWAY_BENCH_DATABASE_URL)" : "one SQLite file"
const sharedState = external.REDIS_URL ? "Redis (REDIS_URL)" : "none between instances (no REDIS_URL); IPC between workers"

const launch = async (name, args = [], env = {}) => {
  const port = await freePort()
  const proc = spawnChild({
    name,
    cmd: process.execPath,
    args: [path.join(ROOT, "bin/gateway"), "--port", String(port), ...args],
    env: { ...prep.env, HOST: "127.0.0.1", ...env }
  })
  const url = `http://127.0.0.1:${port}/v1/chat/completions`
  const probe = {
    headers: { "content-type": "application/json", authorization: `Bearer ${prep.secret}` },
    body: chatBody("openai-compatible/json-1k")
  }
  await waitFor200(url, probe, { since: proc.spawnedAt, alive: proc.alive, timeoutMs: 60_000 })
  return { port, proc }
}

const headers = { "content-type": "application/json", authorization: `Bearer ${prep.secret}` }
const body = chatBody("openai-compatible/json-1k")
const results = { one: [], two: [], workers: [] }
let balancerKind = ""
try {
  say(
    `load average before: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} on ${os.availableParallelism()} cores`
  )
  const one = await launch("one", [], external)
  const a = await launch("two-a", [], external)
  const b = await launch("two-b", [], external)
  const nginx = nginxBin()
  const balancer = nginx ? await nginxRoundRobin(nginx, [a.port, b.port]) : await tcpRoundRobin([a.port, b.port])
  balancerKind = balancer.kind
  const workers = await launch("workers", ["--workers", "2"], external)
  const targets = { one: one.port, two: balancer.port, workers: workers.port }
  for (const [k, port] of Object.entries(targets)) {
    await waitFor200(`http://127.0.0.1:${port}/v1/chat/completions`, { headers, body }, { since: performance.now(), timeoutMs: 30_000 })
    await throughputRun(`http://127.0.0.1:${port}/v1/chat/completions`, { headers, body, connections, durationS: 2 })
    say(`warmed up ${k}`)
  }
  for (let r = 0; r < rounds; r++) {
    for (const [k, port] of Object.entries(targets)) {
      const res = await throughputRun(`http://127.0.0.1:${port}/v1/chat/completions`, { headers, body, connections, durationS })
      if (res.non2xx || res.errors) say(`${k}: ${res.non2xx} non-2xx, ${res.errors} errors`)
      results[k].push(res.rps)
      say(`round ${r + 1} ${k}: ${Math.round(res.rps)} req/s`)
    }
  }
  await balancer.stop()
} finally {
  say(
    `load average after: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`
  )
  await cleanup()
}
const fmt = (xs) => `${Math.round(median(xs))} (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))})`
const base = median(results.one)
console.log(
  `Store: ${store}; shared state: ${sharedState}; balancer for two instances: ${balancerKind}. c=${connections}, JSON 1 KB, ${durationS} s × ${rounds} rounds.`
)
console.log("")
console.log("| | req/s, median (min–max) | ÷ one instance |")
console.log("|---|---:|---:|")
console.log(`| one instance | ${fmt(results.one)} | 1.00× |`)
console.log(`| two instances behind the balancer | ${fmt(results.two)} | ${(median(results.two) / base).toFixed(2)}× |`)
console.log(`| gateway --workers 2 | ${fmt(results.workers)} | ${(median(results.workers) / base).toFixed(2)}× |`)
process.exit(0)
