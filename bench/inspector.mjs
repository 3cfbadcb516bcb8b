// The traffic inspector's own costs (docs/inspector.md, "Limits and memory"), on the built
// gateway (`npm run build` first): run with `node --expose-gc bench/inspector.mjs`.
//
// 1. CPU per request of the agent-bridge's recording (begin + end of one entry) with nobody
//    watching, next to the same with a feed subscriber and 1 KB bodies: µs per request, and the
//    ratio of the two in the same run.
// 2. Memory: the JS heap after a forced GC, before and after pushing 20,000 requests with 256 KB
//    bodies each way through a 1000-entry buffer with the default 256 MB body budget: the heap
//    must stay near the bound however many requests pass.
import { makeInspector } from "../dist/services/inspector/buffer.js"
import { inspectorDefaults } from "../dist/services/inspector/InspectorConfig.js"

if (typeof globalThis.gc !== "function") {
  console.error("run with: node --expose-gc bench/inspector.mjs")
  process.exit(2)
}
const gc = globalThis.gc
const mb = (n) => (n / 1024 / 1024).toFixed(1)

const headers = {
  host: "127.0.0.1:20128",
  "user-agent": "OpenAI/JS 5.0.0",
  authorization: "Bearer gwk_abcdefghijklmnopqrstuvwxyz0123",
  "content-type": "application/json",
  "content-length": "123",
  accept: "application/json",
  "x-stainless-lang": "js",
  "x-stainless-os": "Linux",
  connection: "keep-alive"
}
const answerHeaders = {
  "content-type": "application/json",
  "x-gateway-request-id": "req_abc",
  "x-gateway-provider": "openai-compatible",
  "x-gateway-model": "m1"
}

const perRequest = (core, n, body) => {
  const t = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    const id = core.sink.begin({
      source: "agent-bridge",
      method: "POST",
      url: "http://127.0.0.1:20128/v1/chat/completions",
      headers,
      requestId: `req_${i}`,
      ...(body ? { body } : {})
    })
    core.sink.end(id, { status: 200, headers: answerHeaders, ...(body ? { body } : { bodySize: 0 }) })
  }
  return Number(process.hrtime.bigint() - t) / 1000 / n
}

const N = 100_000
const idle = makeInspector({ config: inspectorDefaults("/tmp/unused") })
const watched = makeInspector({ config: inspectorDefaults("/tmp/unused") })
watched.subscribe(() => {})
const small = Buffer.from(JSON.stringify({ model: "m1", messages: [{ role: "user", content: "x".repeat(900) }] }))
const rows = []
for (let round = 0; round < 3; round++) {
  const a = perRequest(idle, N)
  const b = perRequest(watched, N, small)
  rows.push([a, b])
}
const median = (xs) => xs.slice().sort((x, y) => x - y)[Math.floor(xs.length / 2)]
const idleUs = median(rows.map((r) => r[0]))
const watchedUs = median(rows.map((r) => r[1]))
console.log("## Traffic inspector\n")
console.log("| Measure | Value |\n|---|---:|")
console.log(`| agent-bridge recording, nobody watching (µs per request, median of 3 × ${N}) | ${idleUs.toFixed(1)} |`)
console.log(`| with a feed subscriber and 1 KB bodies (µs per request) | ${watchedUs.toFixed(1)} |`)
console.log(`| ratio watched ÷ idle | ${(watchedUs / idleUs).toFixed(2)}× |`)

gc()
const before = process.memoryUsage().heapUsed
const big = Buffer.from(JSON.stringify({ model: "m1", messages: [{ role: "user", content: "y".repeat(256 * 1024) }] }))
const mem = makeInspector({ config: inspectorDefaults("/tmp/unused") })
mem.subscribe(() => {})
const peaks = []
for (let i = 0; i < 20_000; i++) {
  const id = mem.sink.begin({ source: "http-proxy", method: "POST", url: "https://api.openai.com/v1/chat/completions", headers, body: big })
  mem.sink.end(id, { status: 200, headers: answerHeaders, body: big })
  if (i % 5000 === 4999) {
    gc()
    peaks.push(process.memoryUsage().heapUsed - before)
  }
}
const m = mem.memory()
console.log(`| heap growth after 5k / 10k / 15k / 20k requests with 2 × 256 KB bodies (MB) | ${peaks.map(mb).join(" / ")} |`)
console.log(`| bodies kept (MB, the budget is ${mb(m.maxBodyBytes)}) | ${mb(m.bodyBytes)} |`)
console.log(`| entries kept | ${m.entries} of ${m.bufferSize} |`)
