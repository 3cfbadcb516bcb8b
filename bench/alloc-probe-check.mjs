#!/usr/bin/env node
// Checks bench/alloc-probe.cjs against allocations of a known size, through the same preload,
// signals and file the harness uses: `node bench/alloc-probe-check.mjs` (about 15 s).
//
// A child process with the probe preloaded makes, inside a window, N one-byte strings of SIZE
// characters (Buffer#toString("latin1") of one buffer: each call allocates exactly one sequential
// string on the JS heap, 16 bytes of header + SIZE, rounded up to 8). Cases: garbage at once, many
// young GCs, strings kept alive (promoted: old-generation growth and full GCs), strings in the
// large-object space, strings made in a worker thread, and an HTTP server whose handler makes
// 10 KB of strings per request (the probe's request count must equal the requests sent, and the
// difference per request must read 10 KB). A second child without the request count says what
// counting costs per request. Each case prints measured ÷ expected; the check fails when one is
// off by more than 2% + 64 KB (the worker thread: 3%; HTTP: 5%).
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { createInterface } from "node:readline"
import { allocProbe, probeLaunch } from "./lib/allocProbe.mjs"

const CHILD = `
const http = require("node:http")
const { Worker } = require("node:worker_threads")
const make = (n, size, keep) => {
  const buf = Buffer.alloc(size, 97)
  const ring = new Array(16)
  for (let i = 0; i < n; i++) {
    const s = buf.toString("latin1")
    if (keep) keep[i] = s
    else ring[i & 15] = s
  }
}
const ring = new Array(16)
let kept = []
let server = null
let worker = null
const rl = require("node:readline").createInterface({ input: process.stdin })
rl.on("line", (line) => {
  const [cmd, a, b] = line.split(" ")
  const n = Number(a), size = Number(b)
  if (cmd === "alloc") make(n, size, null)
  if (cmd === "keep") make(n, size, kept.push(new Array(n)) && kept[kept.length - 1])
  if (cmd === "drop") kept = []
  if (cmd === "spawn") {
    worker = new Worker(\`const make = \${make.toString()}
      const { parentPort } = require("node:worker_threads")
      parentPort.on("message", ([n, size]) => { make(n, size, null); parentPort.postMessage("done") })
      parentPort.postMessage("up")\`, { eval: true })
    return worker.once("message", () => console.log("done"))
  }
  if (cmd === "worker") {
    worker.once("message", () => console.log("done"))
    return worker.postMessage([n, size])
  }
  if (cmd === "serve") {
    const buf = Buffer.alloc(1024 - 16, 97)
    server = http.createServer((req, res) => {
      for (let i = 0; i < size / 1024; i++) ring[i & 15] = buf.toString("latin1")
      req.resume()
      req.on("end", () => res.end("ok"))
    })
    server.keepAliveTimeout = 60_000
    return server.listen(0, "127.0.0.1", () => console.log("port " + server.address().port))
  }
  if (cmd === "unserve") return server.close(() => console.log("done")) && server.closeAllConnections()
  console.log("done")
})
`

const dir = mkdtempSync(path.join(os.tmpdir(), "alloc-probe-check-"))
const children = []
const startChild = async (name, extraEnv = {}) => {
  const file = path.join(dir, `${name}.json`)
  const { nodeArgs, env } = probeLaunch(file)
  const child = spawn(process.execPath, [...nodeArgs, "-e", CHILD], {
    env: { ...process.env, ...env, ...extraEnv },
    stdio: ["pipe", "pipe", "inherit"]
  })
  children.push(child)
  const waiting = []
  createInterface({ input: child.stdout }).on("line", (l) => waiting.shift()?.(l))
  const say = (cmd) =>
    new Promise((resolve) => {
      waiting.push(resolve)
      child.stdin.write(`${cmd}\n`)
    })
  const probe = allocProbe(child.pid, file)
  await probe.ready()
  // Warm the child's own path (readline, the loop), then measure windows with nothing in them
  // but one command read and answered: the least of three is subtracted from every case.
  for (let i = 0; i < 3; i++) await say("alloc 1000 1024")
  const empty = []
  for (let i = 0; i < 3; i++) {
    await probe.open()
    await say("alloc 0 0")
    empty.push((await probe.close()).bytes)
  }
  return { say, probe, overhead: Math.min(...empty), empty }
}
const str = (size) => Math.ceil((16 + size) / 8) * 8
const kb = (b) => (b / 1024).toFixed(1)

const failures = []
const verdict = (label, measured, expected, extra = "", tolerance = (e) => 0.02 * e + 65_536) => {
  const ok = Math.abs(measured - expected) <= tolerance(expected)
  if (!ok) failures.push(label)
  console.log(
    `${ok ? "ok  " : "FAIL"} ${label}: measured ${kb(measured)} KB, expected ${kb(expected)} KB (${(measured / expected).toFixed(3)}×)${extra}`
  )
}

/** Requests over 8 keep-alive connections: 2000 to warm up, then 5000 in a window. */
const httpWindow = async ({ say, probe, overhead }, extra) => {
  const port = Number((await say(`serve 0 ${extra}`)).split(" ")[1])
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 })
  const send = (n) =>
    Promise.all(
      Array.from({ length: 8 }, async (_, k) => {
        for (let i = k; i < n; i += 8)
          await new Promise((resolve, reject) => {
            const req = http.request({ port, host: "127.0.0.1", method: "POST", path: "/", agent }, (res) =>
              res.resume().on("end", resolve)
            )
            req.on("error", reject)
            req.end("{}")
          })
      })
    )
  await send(2000)
  await probe.open()
  await send(5000)
  const h = await probe.close()
  agent.destroy()
  await say("unserve")
  return { perRequest: (h.bytes - overhead) / 5000, requests: h.requests, gcs: h.gcs }
}

try {
  const c = await startChild("counting")
  console.log(`     empty windows (one command read and answered; the least is subtracted below): ${c.empty.map(kb).join(", ")} KB`)
  for (const [label, cmd, n, size, expected] of [
    ["10,000 × 1 KB strings, garbage at once", "alloc", 10_000, 1024],
    ["100,000 × 1 KB strings (many young GCs)", "alloc", 100_000, 1024],
    ["1,000,000 × 100 B strings", "alloc", 1_000_000, 100],
    // + the array that keeps them (8 bytes an element, 16 of header, 32 for the JSArray)
    ["100,000 × 1 KB strings kept alive (promoted)", "keep", 100_000, 1024, 100_000 * (str(1024) + 8) + 48],
    ["200,000 × 1 KB strings kept alive (old generation grows)", "keep", 200_000, 1024, 200_000 * (str(1024) + 8) + 48],
    ["200 × 512 KB strings (large-object space)", "alloc", 200, 512 * 1024]
  ]) {
    await c.probe.open()
    await c.say(`${cmd} ${n} ${size}`)
    const r = await c.probe.close()
    verdict(label, r.bytes - c.overhead, expected ?? n * str(size), `; GCs ${JSON.stringify(r.gcs)}`)
  }
  await c.say("drop")
  await c.probe.open()
  await c.say("alloc 50000 1024")
  const dropped = await c.probe.close()
  verdict(
    "50,000 × 1 KB strings after dropping the 300 MB kept",
    dropped.bytes - c.overhead,
    50_000 * str(1024),
    `; GCs ${JSON.stringify(dropped.gcs)}`
  )

  // A worker thread (started before the window): its bytes come back in `threads`.
  await c.say("spawn")
  await c.say("worker 1000 1024")
  await c.probe.open()
  await c.say("worker 20000 1024")
  const w = await c.probe.close()
  const wb = w.threads.reduce((a, t) => a + t.bytes, 0)
  // (3%: the worker's own message handling and JIT are not subtracted)
  verdict(
    "20,000 × 1 KB strings in a worker thread (threads[])",
    wb,
    20_000 * str(1024),
    `; ${w.threads.length} thread(s) reported, main thread ${kb(w.bytes - c.overhead)} KB`,
    (e) => 0.03 * e + 65_536
  )

  // HTTP: 0 and 10 KB of strings per request, twice each, alternating; then without the count.
  const runs = { 0: [], 10240: [] }
  for (const extra of [0, 10240, 0, 10240]) {
    const h = await httpWindow(c, extra)
    if (h.requests.started !== 5000 || h.requests.finished !== 5000) failures.push(`HTTP request count ${JSON.stringify(h.requests)}`)
    runs[extra].push(h.perRequest)
    console.log(
      `     HTTP, handler +${extra / 1024} KB: ${kb(h.perRequest)} KB per request, requests ${JSON.stringify(h.requests)}, GCs ${JSON.stringify(h.gcs)}`
    )
  }
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length
  verdict(
    "HTTP: +10 KB of strings per request (difference per request)",
    mean(runs[10240]) - mean(runs[0]),
    10 * str(1024 - 16),
    "",
    (e) => 0.05 * e
  )
  const n = await startChild("not-counting", { BENCH_ALLOC_PROBE_REQUESTS: "0" })
  const plain = []
  for (let i = 0; i < 2; i++) plain.push((await httpWindow(n, 0)).perRequest)
  console.log(
    `     the request count's own cost: ${(mean(runs[0]) - mean(plain)).toFixed(0)} bytes per request (${kb(mean(runs[0]))} KB counting, ${kb(mean(plain))} KB not)`
  )
} catch (e) {
  failures.push(e.message)
  console.error(e)
} finally {
  for (const ch of children) ch.kill("SIGTERM")
  rmSync(dir, { recursive: true, force: true })
}
console.log(failures.length ? `FAILED: ${failures.join("; ")}` : "every case within its tolerance of the expected bytes")
process.exit(failures.length ? 1 : 0)
