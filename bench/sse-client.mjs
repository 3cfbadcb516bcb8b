#!/usr/bin/env node
// The SSE client of the benchmark: time to first token (TTFT) and inter-chunk gaps of OpenAI
// chat-completion streams, read with a raw node:http request the way a client reads them.
// Used by the harness; also runs on its own against any target:
//   node bench/sse-client.mjs http://127.0.0.1:<port>/v1/chat/completions [--model sse-paced]
//        [--concurrency 16] [--seconds 3] [--header "name: value"]...
import * as http from "node:http"
import { pathToFileURL } from "node:url"
import { summary } from "./lib/stats.mjs"

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * One SSE request, read as a client would. Content chunks are `data:` events whose JSON carries
 * a non-empty `content`; TTFT is the time from before the request to the first one, gaps the
 * time between consecutive ones (events read together get a gap of 0, as the client sees them).
 */
export const sseOnce = (url, { headers, body, agent, timeoutMs = 60_000, keepGaps = true }) =>
  new Promise((resolve) => {
    const t0 = performance.now()
    const payload = Buffer.from(body)
    const r = {
      status: 0,
      headersMs: null,
      ttft: null,
      chunks: 0,
      gaps: keepGaps ? [] : null,
      maxGap: 0,
      done: false,
      usage: false,
      error: null,
      ms: 0
    }
    let last = 0
    let buf = ""
    const onEvent = (ev, now) => {
      // An event is one or more lines; only `data:` lines count, comments (`: ...`) are skipped.
      let data = ""
      for (const line of ev.split("\n")) if (line.startsWith("data:")) data += line.slice(line[5] === " " ? 6 : 5)
      if (data === "") return
      if (data === "[DONE]") {
        r.done = true
        return
      }
      const i = data.indexOf('"content":"')
      if (i !== -1 && data[i + 11] !== '"') {
        if (r.ttft === null) r.ttft = now - t0
        else {
          const g = now - last
          if (r.gaps) r.gaps.push(g)
          if (g > r.maxGap) r.maxGap = g
        }
        last = now
        r.chunks++
      }
      if (data.includes('"usage":{')) r.usage = true
    }
    const req = http.request(url, { method: "POST", agent, headers: { ...headers, "content-length": payload.length } }, (res) => {
      r.status = res.statusCode
      r.headersMs = performance.now() - t0
      res.setEncoding("utf8")
      res.on("data", (s) => {
        const now = performance.now()
        buf += s.includes("\r") ? s.replace(/\r\n/g, "\n") : s
        let idx
        while ((idx = buf.indexOf("\n\n")) !== -1) {
          onEvent(buf.slice(0, idx), now)
          buf = buf.slice(idx + 2)
        }
      })
      res.on("end", () => {
        r.ms = performance.now() - t0
        if (buf.trim()) onEvent(buf, performance.now())
        resolve(r)
      })
      res.on("error", (e) => {
        r.error = e.message
        r.ms = performance.now() - t0
        resolve(r)
      })
    })
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`stream timeout after ${timeoutMs} ms`)))
    req.on("error", (e) => {
      r.error = e.message
      r.ms = performance.now() - t0
      resolve(r)
    })
    req.end(payload)
  })

/** Whether a stream delivered everything: 200, `expected` content chunks and [DONE]. */
export const streamComplete = (r, expected) => r.status === 200 && !r.error && r.done && r.chunks === expected

/**
 * `concurrency` workers each opening paced streams one after another for `durationMs`
 * (a stream that started finishes; every worker runs at least one). Worker starts are spread
 * over `spreadMs` (about one stream's length), so stream starts are spread evenly in time and
 * TTFT is not measured on a thundering herd. TTFT and gaps over all complete streams.
 */
export const sseRun = async (url, { headers, body, concurrency, durationMs, expectedChunks, spreadMs = 1_280 }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const ttft = []
  const headersMs = []
  const gaps = []
  let streams = 0
  let incomplete = 0
  const failures = []
  const end = performance.now() + durationMs
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      await sleep((w * spreadMs) / concurrency)
      do {
        const r = await sseOnce(url, { headers, body, agent })
        streams++
        if (!streamComplete(r, expectedChunks)) {
          incomplete++
          if (failures.length < 5) failures.push({ status: r.status, chunks: r.chunks, done: r.done, error: r.error })
          if (r.status !== 200) await sleep(50)
          continue
        }
        ttft.push(r.ttft)
        headersMs.push(r.headersMs)
        for (const g of r.gaps) gaps.push(g)
      } while (performance.now() < end)
    })
  )
  agent.destroy()
  const t = summary(ttft)
  const g = summary(gaps)
  return {
    streams,
    incomplete,
    failures,
    ttftP50: t.p50,
    ttftP99: t.p99,
    headersP50: summary(headersMs).p50,
    gapP50: g.p50,
    gapP99: g.p99,
    gapMax: g.max,
    gapCount: g.n
  }
}

/**
 * Opens `n` paced streams at once and waits for all of them. While they run, `sample()` is
 * called every `sampleMs` (for the target's RSS). Reports completions, the largest gap, and
 * the streams whose largest gap exceeded `gapLimitMs`.
 */
export const manyStreams = async (url, { headers, body, n, expectedChunks, gapLimitMs, sample, sampleMs = 50 }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: n + 16, maxFreeSockets: n + 16 })
  const samples = []
  const timer = setInterval(() => samples.push(sample()), sampleMs)
  const t0 = performance.now()
  const results = await Promise.all(
    Array.from({ length: n }, () => sseOnce(url, { headers, body, agent, keepGaps: false, timeoutMs: 120_000 }))
  )
  const wallMs = performance.now() - t0
  clearInterval(timer)
  samples.push(sample())
  agent.destroy()
  const complete = results.filter((r) => streamComplete(r, expectedChunks))
  const maxGaps = results.map((r) => r.maxGap)
  const ttfts = results.filter((r) => r.ttft !== null).map((r) => r.ttft)
  const errors = {}
  for (const r of results) {
    if (streamComplete(r, expectedChunks)) continue
    const k = r.error ?? (r.status !== 200 ? `status ${r.status}` : `${r.chunks} chunks${r.done ? "" : ", no [DONE]"}`)
    errors[k] = (errors[k] ?? 0) + 1
  }
  return {
    n,
    complete: complete.length,
    stalled: results.filter((r) => r.maxGap > gapLimitMs).length,
    maxGapMs: Math.max(0, ...maxGaps),
    maxGapP99: summary(maxGaps).p99,
    ttftP50: summary(ttfts).p50,
    ttftMax: summary(ttfts).max,
    wallMs,
    errors,
    samples
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2)
  const url = args.find((a) => a.startsWith("http://"))
  const opt = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt)
  if (!url) {
    console.error(
      "usage: node bench/sse-client.mjs <url of /v1/chat/completions> [--model sse-paced] [--concurrency 16] [--seconds 3] [--chunks 64] [--header 'name: value']..."
    )
    process.exit(2)
  }
  const headers = { "content-type": "application/json", authorization: "Bearer sk-bench" }
  args.forEach((a, i) => {
    if (a === "--header") {
      const [k, ...v] = args[i + 1].split(":")
      headers[k.trim().toLowerCase()] = v.join(":").trim()
    }
  })
  const body = JSON.stringify({
    model: opt("--model", "sse-paced"),
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: "hi" }]
  })
  const res = await sseRun(url, {
    headers,
    body,
    concurrency: Number(opt("--concurrency", "16")),
    durationMs: Number(opt("--seconds", "3")) * 1000,
    expectedChunks: Number(opt("--chunks", "64"))
  })
  console.log(JSON.stringify(res, null, 2))
}
