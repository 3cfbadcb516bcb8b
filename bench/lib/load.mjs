// Load generators: autocannon for throughput and a small node:http client for latency at
// concurrency 1. The SSE client (TTFT, inter-chunk gaps, many streams) is ../sse-client.mjs.
import autocannon from "autocannon"
import * as http from "node:http"
import { summary } from "./stats.mjs"

export { manyStreams, sseOnce, sseRun, streamComplete } from "../sse-client.mjs"

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** One request; resolves with { status, headers, body (string), ms } or { error }. */
export const request = (url, { method = "POST", headers = {}, body, agent, timeoutMs = 10_000 } = {}) =>
  new Promise((resolve) => {
    const t0 = performance.now()
    const payload = body === undefined ? undefined : Buffer.from(body)
    const req = http.request(
      url,
      { method, agent, headers: payload ? { ...headers, "content-length": payload.length } : headers },
      (res) => {
        const parts = []
        res.on("data", (c) => parts.push(c))
        res.on("end", () =>
          resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString("utf8"), ms: performance.now() - t0 })
        )
        res.on("error", (error) => resolve({ error, ms: performance.now() - t0 }))
      }
    )
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)))
    req.on("error", (error) => resolve({ error, ms: performance.now() - t0 }))
    req.end(payload)
  })

/**
 * Polls `url` with the request until it answers 200; resolves with the time since `since`
 * (performance.now() at spawn). Connection refused is retried every `everyMs`.
 */
export const waitFor200 = async (url, opts, { since, timeoutMs = 30_000, everyMs = 5, alive = () => true } = {}) => {
  const agent = new http.Agent({ keepAlive: false })
  const deadline = performance.now() + timeoutMs
  let last
  while (performance.now() < deadline) {
    if (!alive()) throw new Error("the process exited before answering 200")
    last = await request(url, { ...opts, agent, timeoutMs: 5_000 })
    if (last.status === 200) {
      agent.destroy()
      return performance.now() - since
    }
    await sleep(everyMs)
  }
  agent.destroy()
  throw new Error(`no 200 within ${timeoutMs} ms (last: ${last?.error?.message ?? `${last?.status} ${String(last?.body).slice(0, 300)}`})`)
}

/**
 * Sequential requests (concurrency 1) over one keep-alive connection for `durationMs`.
 * Latency is measured from before `request()` to the end of the body, in ms (hrtime resolution).
 * `check(res)` may return a label counted in `checks` (e.g. whether a header was present).
 */
export const latencyRun = async (url, { headers, body, durationMs, check, keepSamples = false }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const lat = []
  const checks = {}
  let errors = 0
  const statuses = {}
  const end = performance.now() + durationMs
  while (performance.now() < end) {
    const r = await request(url, { headers, body, agent })
    if (r.error || r.status !== 200) {
      errors++
      const k = r.error ? (r.error.code ?? r.error.message) : String(r.status)
      statuses[k] = (statuses[k] ?? 0) + 1
      if (errors > 50 && lat.length === 0) break
      continue
    }
    lat.push(r.ms)
    if (check) {
      const label = check(r)
      checks[label] = (checks[label] ?? 0) + 1
    }
  }
  agent.destroy()
  return { ...latencySummary(lat, errors, statuses, checks), ...(keepSamples ? { samples: lat } : {}) }
}

/** A c=1 run's figures from its latencies (ms), failed requests by reason and check labels. */
export const latencySummary = (lat, errors, failures, checks) => {
  const s = summary(lat)
  return { n: s.n, p50: s.p50, p90: s.p90, p99: s.p99, max: s.max, mean: s.mean, errors, failures, checks }
}

/**
 * autocannon at `connections` for `durationS` seconds, or for `amount` requests when given.
 * Throughput counts 2xx answers only: rps = 2xx / duration. Latency percentiles are autocannon's
 * (ms). autocannon stops on its sample tick, so durations are rounded up to the 250 ms `sampleInt`
 * (it reports the real one).
 */
export const throughputRun = (url, { headers, body, connections, durationS, amount, onResponse }) =>
  new Promise((resolve, reject) => {
    const inst = autocannon(
      {
        url,
        method: "POST",
        headers,
        body,
        connections,
        ...(amount ? { amount } : { duration: durationS }),
        pipelining: 1,
        timeout: 20,
        sampleInt: 250
      },
      (err, r) => {
        if (err) return reject(err)
        const ok = r["2xx"] ?? 0
        resolve({
          rps: ok / r.duration,
          ok,
          non2xx: r.non2xx ?? 0,
          errors: r.errors ?? 0,
          timeouts: r.timeouts ?? 0,
          durationS: r.duration,
          latencyP50: r.latency?.p50 ?? null,
          latencyP99: r.latency?.p99 ?? null,
          statusCodeStats: r.statusCodeStats
        })
      }
    )
    if (onResponse) inst.on("response", onResponse)
  })

/**
 * Exactly `requests` requests over `connections` keep-alive connections, each connection sending
 * the next one when its last was answered, every answer awaited: none is cut at the end, as the
 * last ones of a timed autocannon run are (the allocation windows count per request).
 */
export const countedRun = async (url, { headers, body, connections, requests }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  let next = 0
  let ok = 0
  let non2xx = 0
  let errors = 0
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < requests) {
        next++
        const r = await request(url, { headers, body, agent, timeoutMs: 20_000 })
        if (r.error) errors++
        else if (r.status >= 200 && r.status < 300) ok++
        else non2xx++
      }
    })
  )
  const ms = performance.now() - t0
  agent.destroy()
  return { ok, non2xx, errors, ms, rps: (1000 * ok) / ms }
}
