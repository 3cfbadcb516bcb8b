#!/usr/bin/env node
// Where a stream's first byte goes, through direct (the mock), the floor and the gateway: the
// bench's paced TTFT row taken apart. A mock upstream (in a worker thread of this process, on the
// load's core) stamps each request's arrival and its first write; the client stamps its send, the
// answer's head and its first byte; a probe preloaded into the floor and the gateway
// (first-byte-probe.cjs) stamps the phases inside them. All clocks are this machine's
// (`performance.timeOrigin + performance.now()` in each thread; the probe's phases are relative to
// the request's head, so they need none).
//
//   npm run build && node bench/first-byte.mjs [--rounds 3] [--seconds 3] [--warm 5] [--c1] [--json <file>]
//                                              [--gateway-env NAME=value ...] [--gateway-node-arg FLAG ...]
//                                              [--perf [Hz]]
//
// Load: as the TTFT row, 16 clients each sending one paced stream after another (64 chunks 20 ms
// apart), their starts spread over 1280 ms, for --seconds a round; the targets take turns, each
// --rounds times. --warm N first sends N seconds of c=32 burst streams to the floor and the gateway
// (the bench's earlier sections have run when its TTFT row runs). --c1 instead sends 1,500 burst
// streams one after another per round (the first 300 not counted): the same requests warm, back to
// back. Targets on core 0, this process (client and mock) on core 1, as the bench pins them.
//
// --perf [Hz] (default 20000; needs linux perf) records the gateway's threads with `perf record -k
// mono -g` from before the warm-up to the end (node's JIT functions named by
// --perf-basic-prof-only-functions), then prints what its main thread ran inside the probe's
// windows of the measured streams (lib/perfWindows.mjs): the head's callback, the admission from
// the body's end to the upstream request, undici's dispatch up to its write (`sent` is stamped as
// undici is about to write, from the check phase on a kept-alive socket), the write and the wait
// for the upstream's head (what else the main thread ran meanwhile), and the upstream's head to
// the answer's first write. V8's own profiler cannot show these on a pinned gateway: its sampling
// thread shares the core and samples only while the main thread sleeps.
import fs from "node:fs"
import http from "node:http"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { Worker } from "node:worker_threads"
import { launchGateway, prepareGateway, startFloor } from "./lib/targets.mjs"
import { spawn, spawnSync } from "node:child_process"
import { cleanup, pinSelf, registerTempDir, stopChildrenOnExit } from "./lib/proc.mjs"
import { perfWindows, perfWindowsText } from "./lib/perfWindows.mjs"
import { median } from "./lib/stats.mjs"
import { arg, gatewayEnv } from "./lib/args.mjs"

const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")
const PROBE = path.join(benchDir, "first-byte-probe.cjs")
const ROUNDS = Number(arg("--rounds", 3))
const SECONDS = Number(arg("--seconds", 3))
const WARM = Number(arg("--warm", 0))
const C1 = process.argv.includes("--c1")
const JSON_OUT = arg("--json", undefined)
const PERF_HZ = process.argv.includes("--perf") ? Number(/^\d+$/.test(arg("--perf", "")) ? arg("--perf") : 20000) : undefined
if (PERF_HZ !== undefined && spawnSync("perf", ["--version"]).status !== 0) {
  console.error("--perf needs linux perf on the PATH (Debian: apt-get install linux-perf)")
  process.exit(2)
}
/** --gateway-env NAME=value, repeatable: set in the gateway's environment (one arm of a setting's A/B: run once per value). */
const GATEWAY_ENV = gatewayEnv(process.argv)

/** --gateway-node-arg FLAG, repeatable: a node or V8 flag for the gateway's process (one arm of a flag's A/B). */
const GATEWAY_NODE_ARGS = process.argv.flatMap((a, i) => (process.argv[i - 1] === "--gateway-node-arg" ? [a] : []))

const clock = () => performance.timeOrigin + performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// The mock: paced streams (the first chunk at once, then one every 20 ms), or the whole burst in
// one write when the request's id says so; it reports each request's arrival and first write.
const MOCK = `
const http = require("node:http")
const { parentPort } = require("node:worker_threads")
const clock = () => performance.timeOrigin + performance.now()
const chunk = (i) => "data: " + JSON.stringify({ id: "chatcmpl-first-byte", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: i === 0 ? { role: "assistant", content: "tok0" } : { content: " tok" + i }, finish_reason: i === 63 ? "stop" : null }] }) + "\\n\\n"
const TAIL = 'data: {"id":"chatcmpl-first-byte","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":64,"total_tokens":65}}\\n\\ndata: [DONE]\\n\\n'
const server = http.createServer((req, res) => {
  let body = ""
  req.on("data", (d) => (body += d))
  req.on("end", () => {
    const arrived = clock()
    let parsed = {}
    try { parsed = JSON.parse(body) } catch {}
    if (!parsed.stream) {
      res.setHeader("content-type", "application/json")
      res.end(JSON.stringify({ id: "c", object: "chat.completion", created: 1, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
      return
    }
    const id = String(parsed.user ?? "")
    res.writeHead(200, { "content-type": "text/event-stream" })
    const first = clock()
    if (id.includes(":burst:")) {
      let all = ""
      for (let i = 0; i < 64; i++) all += chunk(i)
      res.end(all + TAIL)
    } else {
      res.write(chunk(0))
      let i = 1
      const t = setInterval(() => {
        if (i < 64) res.write(chunk(i++))
        else {
          clearInterval(t)
          res.end(TAIL)
        }
      }, 20)
    }
    parentPort.postMessage({ id, arrived, first })
  })
})
server.keepAliveTimeout = 65000
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ port: server.address().port }))
`

// The targets are stopped however this ends (an error, Ctrl-C).
stopChildrenOnExit()

pinSelf(1)
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "first-byte-"))
registerTempDir(tmp)
const mockWorker = new Worker(MOCK, { eval: true })
const upstreamSeen = new Map()
const port = await new Promise((resolve, reject) => {
  mockWorker.on("error", reject)
  mockWorker.on("message", (m) => (m.port ? resolve(m.port) : upstreamSeen.set(m.id, m)))
})
const mock = { baseUrl: `http://127.0.0.1:${port}` }
const probe = (name, env = {}) => ({
  nodeArgs: ["--require", PROBE],
  env: { ...env, FIRST_BYTE_PROBE_OUT: path.join(tmp, `${name}.json`) }
})
const floor = await startFloor({ benchDir, core: 0, pin: true, mock, probe: probe("floor") })
const prep = await prepareGateway({ rootDir, mock, core: 1, pin: true })
const gateway = await launchGateway(prep, {
  rootDir,
  core: 0,
  pin: true,
  extraNodeArgs: [...GATEWAY_NODE_ARGS, ...(PERF_HZ === undefined ? [] : ["--perf-basic-prof-only-functions"])],
  probe: probe("gateway", GATEWAY_ENV)
})
for (const t of [floor, gateway]) if (!t.ok) throw new Error(`${t.name}: ${t.error}`)
const perfData = path.join(tmp, "gateway.perf.data")
const perfRecord =
  PERF_HZ === undefined
    ? undefined
    : spawn("perf", ["record", "-k", "mono", "-F", String(PERF_HZ), "-g", "-p", String(gateway.pid), "-o", perfData], { stdio: "ignore" })
/** The gateway's rows of the measured streams, for --perf. */
const perfRows = []
const targets = [
  { name: "direct", url: `${mock.baseUrl}/v1/chat/completions`, headers: {}, model: "m" },
  { name: "floor", url: floor.chatUrl, headers: {}, model: "m", pid: floor.pid },
  { name: "gateway", url: gateway.chatUrl, headers: gateway.headers, model: "openai-compatible/m", pid: gateway.pid }
]

/** One stream: the client's send, the answer's head and first byte, on `agent`. */
const stream = (target, agent, id) =>
  new Promise((resolve) => {
    const body = JSON.stringify({
      model: target.model,
      user: id,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true }
    })
    const sent = clock()
    const req = http.request(
      target.url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", ...target.headers, "x-first-byte-id": id, "content-length": Buffer.byteLength(body) }
      },
      (res) => {
        const head = clock()
        let first
        res.on("data", () => {
          first ??= clock()
        })
        res.on("end", () => resolve({ id, sent, head, first, status: res.statusCode }))
        // Cut before its end: counted as failed (status 0), never waited for.
        res.on("error", () => resolve({ id, sent, status: 0 }))
        res.on("close", () => resolve({ id, sent, head, first, status: res.complete ? res.statusCode : 0 }))
      }
    )
    req.on("error", () => resolve({ id, sent, status: 0 }))
    req.end(body)
  })

const minorFaults = (pid) => {
  try {
    return Number(fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[7])
  } catch {
    return undefined
  }
}

/** The probe's rows of `target` so far (its file rewritten on SIGUSR2). */
const probeRows = async (target) => {
  if (target.pid === undefined) return new Map()
  const file = path.join(tmp, `${target.name}.json`)
  fs.rmSync(file, { force: true })
  process.kill(target.pid, "SIGUSR2")
  for (let i = 0; i < 200 && !fs.existsSync(file); i++) await sleep(10)
  return new Map(JSON.parse(fs.readFileSync(file, "utf8")).map((r) => [r.id, r]))
}

if (WARM > 0) {
  for (const target of targets.slice(1)) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 })
    const end = performance.now() + WARM * 1000
    let n = 0
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (performance.now() < end) await stream(target, agent, `${target.name}:burst:warm:${n++}`)
      })
    )
    agent.destroy()
    await probeRows(target)
  }
}

const samples = Object.fromEntries(targets.map((t) => [t.name, []]))
const faults = Object.fromEntries(targets.map((t) => [t.name, []]))
for (let round = 0; round < ROUNDS; round++) {
  for (const target of targets) {
    const runs = []
    const faults0 = target.pid === undefined ? undefined : minorFaults(target.pid)
    if (C1) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      for (let n = 0; n < 1500; n++) {
        const r = await stream(target, agent, `${target.name}:burst:${round}:${n}`)
        if (n >= 300) runs.push(r)
      }
      agent.destroy()
    } else {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
      const end = performance.now() + SECONDS * 1000
      await Promise.all(
        Array.from({ length: 16 }, async (_, k) => {
          await sleep((k * 1280) / 16)
          for (let n = 0; performance.now() < end; n++) runs.push(await stream(target, agent, `${target.name}:paced:${round}:${k}:${n}`))
        })
      )
      agent.destroy()
    }
    await sleep(100)
    const inside = await probeRows(target)
    if (target.name === "gateway") for (const row of inside.values()) perfRows.push(row)
    const faults1 = target.pid === undefined ? undefined : minorFaults(target.pid)
    if (faults0 !== undefined && faults1 !== undefined) faults[target.name].push((faults1 - faults0) / runs.length)
    for (const r of runs) {
      const up = upstreamSeen.get(r.id)
      upstreamSeen.delete(r.id)
      if (r.status !== 200 || r.first === undefined || up === undefined) continue
      const row = inside.get(r.id)
      // The head on the machine's clock: the client's send to it, and the upstream request's head
      // written to its arrival (for the floor, from the request made: node's client has no channel
      // for the write, which comes with the body's first chunk once a socket is assigned).
      const written = row === undefined ? undefined : row.at + (row.sent ?? row.up)
      samples[target.name].push({
        toHead: row === undefined ? undefined : row.at - r.sent,
        upstreamTrip: written === undefined || Number.isNaN(written) ? undefined : up.arrived - written,
        // The upstream's first write to its head in the gateway (undici's channel; the floor's client has none), and on to the client.
        answerIn: row?.upHead === undefined ? undefined : row.at + row.upHead - up.first,
        answerOut: row?.upHead === undefined ? undefined : r.first - (row.at + row.upHead),
        headers: r.head - r.sent,
        ttft: r.first - r.sent,
        // A connection's first stream (each round opens new connections, after the target sat idle
        // through the others' rounds: the bench's TTFT row is mostly such streams) and the later ones.
        ttftFirst: r.id.endsWith(":0") ? r.first - r.sent : undefined,
        ttftLater: r.id.endsWith(":0") ? undefined : r.first - r.sent,
        toUpstream: up.arrived - r.sent,
        fromUpstream: r.first - up.first,
        ...Object.fromEntries(["sync", "bodyEnd", "check", "up", "sent", "upHead", "out"].map((k) => [k, row?.[k]])),
        // From the upstream request's head written to the upstream's head: the event loop's idle
        // time in it (waiting for the upstream) and the rest (the target at work).
        upWaitIdle: row?.upHead === undefined || row.sent === undefined ? undefined : row.upHeadIdle - row.sentIdle,
        upWaitBusy:
          row?.upHead === undefined || row.sent === undefined ? undefined : row.upHead - row.sent - (row.upHeadIdle - row.sentIdle),
        // The body's end to the upstream request made: time the event loop sat idle in it.
        admissionIdle: row?.up === undefined || row.bodyEnd === undefined ? undefined : row.upIdle - row.bodyEndIdle,
        // The answer's first write to the client's first byte: the client's wake and read.
        toClient: row?.out === undefined ? undefined : r.first - (row.at + row.out)
      })
    }
  }
}

const COLUMNS = [
  ["streams", null],
  ["client send → upstream", "toUpstream"],
  ["client send → the target's head", "toHead"],
  ["upstream head written → its arrival", "upstreamTrip"],
  ["upstream's first write → client", "fromUpstream"],
  ["upstream's first write → its head in the target", "answerIn"],
  ["the upstream's head in the target → client's first byte", "answerOut"],
  ["answer's head", "headers"],
  ["first byte (TTFT)", "ttft"],
  ["first byte: a connection's first stream", "ttftFirst"],
  ["first byte: its later streams", "ttftLater"],
  ["in: head → its callback and ticks done", "sync"],
  ["in: → body end", "bodyEnd"],
  ["in: → upstream request made", "up"],
  ["in: → its head written", "sent"],
  ["in: → the upstream's head", "upHead"],
  ["in: body end → upstream request made: of it idle", "admissionIdle"],
  ["in: its head written → the upstream's head: idle (waiting)", "upWaitIdle"],
  ["in: its head written → the upstream's head: busy", "upWaitBusy"],
  ["in: → turn's I/O done", "check"],
  ["in: → the answer's first write", "out"],
  ["the answer's first write → client's first byte", "toClient"],
  ["page faults a stream", null]
]
const result = {}
for (const t of targets) {
  const s = samples[t.name]
  result[t.name] = Object.fromEntries(
    COLUMNS.map(([label, key]) => [
      label,
      key === null ? (label === "streams" ? s.length : median(faults[t.name])) : median(s.map((x) => x[key]))
    ])
  )
}
const fmt = (v) => (v === undefined || v === null ? "–" : Number.isInteger(v) ? String(v) : v.toFixed(3))
console.log(
  `\n${C1 ? "c=1 burst streams, back to back" : `16 paced streams, ${SECONDS} s a round`}, ${ROUNDS} rounds${WARM ? `, ${WARM} s of burst first` : ""}; medians in ms (in: inside the target, from the request's head)\n`
)
console.log(`| | ${targets.map((t) => t.name).join(" | ")} |`)
console.log(`|---|${targets.map(() => "---:").join("|")}|`)
for (const [label] of COLUMNS) console.log(`| ${label} | ${targets.map((t) => fmt(result[t.name][label])).join(" | ")} |`)
if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify({ rounds: ROUNDS, seconds: SECONDS, warm: WARM, c1: C1, result }, null, 2))
if (perfRecord !== undefined) {
  perfRecord.kill("SIGINT")
  await new Promise((resolve) => perfRecord.on("exit", resolve))
  const analysis = await perfWindows({
    data: perfData,
    tid: gateway.pid,
    rows: perfRows,
    windows: [
      ["head", "sync"],
      ["bodyEnd", "up"],
      ["up", "sent"],
      ["sent", "upHead"],
      ["upHead", "out"]
    ]
  })
  console.log(`\n## The gateway's main thread inside the windows (perf at ${PERF_HZ} Hz asked)\n`)
  console.log(perfWindowsText(analysis))
}
await mockWorker.terminate()
await cleanup()
process.exit(0)
