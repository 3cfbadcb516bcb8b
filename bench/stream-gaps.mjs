#!/usr/bin/env node
// The bench's 1000-stream row taken apart: where in a burst the longest gap falls, and what the
// gateway's and the mock's event loops did meanwhile. The row fails after the bench's other sections
// and passes alone (docs/performance.md, "2026-12-01"), so this first sends --minutes of the load
// those sections send (c=32 and c=64 JSON, 10 KB JSON, same-format burst streams, the three
// translated pairs, 16 paced streams, c=1), then --bursts bursts of 1000 paced streams (64 chunks
// 20 ms apart) opened at once, --wait-ms apart. Both processes carry loop-bins.cjs, which counts what
// their event loops did in bins of 5 ms while a burst runs.
//
//   npm run build && node bench/stream-gaps.mjs [--minutes 2] [--bursts 3] [--wait-ms 1000]
//                                              [--kinds json,json64,json10k,burst,translated,paced,c1]
//                                              [--gateway-env NAME=value ...] [--json <file>]
//
// For each burst it prints the longest gap between two chunks of a stream, when it ended (ms after
// the burst's start), how many streams had one over 50 ms in each 100 ms, TTFT, and for the longest
// gap: how many writes the mock (the upstream) and the gateway made to their clients in it, and the
// longest turn of each loop. --json writes the bins too. Gateway on core 0, this process and the
// mock on core 1, as the bench pins them.
import fs from "node:fs"
import http from "node:http"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import {
  addTranslationProviders,
  chatBody,
  launchGateway,
  prepareGateway,
  startMock,
  streamBody,
  translatedRequest
} from "./lib/targets.mjs"
import { latencyRun, manyStreams, sseOnce, streamComplete, throughputRun } from "./lib/load.mjs"
import { cleanup, pinSelf, registerTempDir, stopChildrenOnExit } from "./lib/proc.mjs"
import { summary } from "./lib/stats.mjs"
import { arg, gatewayEnv } from "./lib/args.mjs"

const benchDir = path.dirname(fileURLToPath(import.meta.url))
const rootDir = path.resolve(benchDir, "..")
const MINUTES = Number(arg("--minutes", 2))
const BURSTS = Number(arg("--bursts", 3))
const WAIT_MS = Number(arg("--wait-ms", 1000))
const KINDS = arg("--kinds", "json,json64,json10k,burst,translated,paced,c1").split(",")
const JSON_OUT = arg("--json", undefined)
const STREAMS = 1000
const GATEWAY_ENV = gatewayEnv(process.argv)
const KNOWN_KINDS = ["json", "json64", "json10k", "burst", "translated", "paced", "c1"]
const unknownKinds = KINDS.filter((k) => !KNOWN_KINDS.includes(k))
if (unknownKinds.length > 0) {
  console.error(`unknown --kinds ${unknownKinds.join(", ")} (known: ${KNOWN_KINDS.join(", ")})`)
  process.exit(2)
}

// The targets are stopped however this ends (an error, Ctrl-C).
stopChildrenOnExit()

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stream-gaps-"))
registerTempDir(dir)
const preload = (name) => ({ nodeArgs: ["--require", path.join(benchDir, "loop-bins.cjs")], env: { LOOP_BINS: path.join(dir, name) } })
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

pinSelf(1)
const mockProbe = preload("mock")
const mock = await startMock({ benchDir, core: 1, pin: true, probe: mockProbe })
const gatewayProbe = preload("gateway")
const gateway = await launchGateway(await prepareGateway({ rootDir, mock, core: 1, pin: true }), {
  rootDir,
  core: 0,
  pin: true,
  probe: { nodeArgs: gatewayProbe.nodeArgs, env: { ...GATEWAY_ENV, ...gatewayProbe.env } }
})
if (!gateway.ok) {
  console.error(gateway.error)
  await cleanup()
  process.exit(1)
}
await addTranslationProviders(gateway, mock)

const json = (model, connections, durationS) =>
  throughputRun(gateway.chatUrl, { headers: gateway.headers, body: chatBody(gateway.model(model)), connections, durationS })
const loads = {
  json: () => json("json-1k", 32, 5),
  json64: () => json("json-1k", 64, 5),
  json10k: () => json("json-10k", 32, 5),
  burst: () =>
    throughputRun(gateway.chatUrl, {
      headers: gateway.headers,
      body: streamBody(gateway.model("sse-burst")),
      connections: 32,
      durationS: 3
    }),
  translated: async () => {
    for (const pair of ["messages_chat", "responses_messages", "chat_generate"]) {
      const q = translatedRequest(gateway, pair)
      await throughputRun(q.url, { headers: q.headers, body: q.body, connections: 32, durationS: 3 })
    }
  },
  paced: () =>
    manyStreams(gateway.chatUrl, {
      headers: gateway.headers,
      body: streamBody(gateway.model("sse-paced")),
      n: 16,
      expectedChunks: 64,
      gapLimitMs: 500,
      sample: () => 0
    }),
  c1: () => latencyRun(gateway.chatUrl, { headers: gateway.headers, body: chatBody(gateway.model("json-1k")), durationMs: 1500 })
}
const loadStart = performance.now()
let passes = 0
do {
  for (const k of KINDS) await loads[k]()
  passes++
} while (performance.now() - loadStart < MINUTES * 60_000)
console.log(`load: ${passes} passes of ${KINDS.join(", ")} in ${((performance.now() - loadStart) / 60_000).toFixed(1)} min`)

/**
 * A recording's bins, once loop-bins.cjs has written them (it renames the whole file into place):
 * the columns' names, the rows ([bin start ms, ...counts]) and the recording's start (epoch ms).
 */
const readBins = async (file) => {
  for (let waited = 0; !fs.existsSync(file); waited += 20) {
    if (waited > 10_000) throw new Error(`${file}: no recording 10 s after the signal`)
    await sleep(20)
  }
  const [head, ...lines] = fs.readFileSync(file, "utf8").trim().split("\n")
  const columns = head.split(" ").slice(1)
  return { columns, rows: lines.map((l) => l.split(" ").map(Number)), startEpochMs: Number(fs.readFileSync(`${file}.start`, "utf8")) }
}

/** Sum of `column` and the longest turn (`longestTimerWaitMs`, a turn that ended in the window) over bins in [from, to). */
const inWindow = (bins, column, from, to) => {
  const c = bins.columns.indexOf(column) + 1
  const w = bins.columns.indexOf("longestTimerWaitMs") + 1
  let sum = 0
  let longest = 0
  for (const r of bins.rows) {
    // Every bin that overlaps the window.
    if (r[0] + 5 > from && r[0] < to) {
      sum += r[c]
      longest = Math.max(longest, r[w])
    }
  }
  return { sum, longest }
}

const results = []
const body = streamBody(gateway.model("sse-paced"))
for (let b = 0; b < BURSTS; b++) {
  await sleep(WAIT_MS)
  for (const f of [gatewayProbe.env.LOOP_BINS, mockProbe.env.LOOP_BINS]) fs.rmSync(f, { force: true })
  process.kill(gateway.pid, "SIGUSR2")
  process.kill(mock.pid, "SIGUSR2")
  await sleep(20)
  // Each stream's own start, after the burst's: a thousand requests are not sent in the same instant.
  const burstStart = performance.now()
  const agent = new http.Agent({ keepAlive: true, maxSockets: STREAMS + 16, maxFreeSockets: STREAMS + 16 })
  const streams = await Promise.all(
    Array.from({ length: STREAMS }, () => {
      const startedAt = performance.now() - burstStart
      return sseOnce(gateway.chatUrl, { headers: gateway.headers, body, agent, keepGaps: true, timeoutMs: 120_000 }).then((s) => ({
        ...s,
        startedAt
      }))
    })
  )
  agent.destroy()
  process.kill(gateway.pid, "SIGUSR2")
  process.kill(mock.pid, "SIGUSR2")
  // Each stream's longest gap and when it ended, ms after the burst's start.
  const gaps = streams.map((s) => {
    let at = s.startedAt + (s.ttft ?? 0)
    let gap = 0
    let endedAt = 0
    for (const g of s.gaps ?? []) {
      at += g
      if (g > gap) {
        gap = g
        endedAt = at
      }
    }
    return { gap, endedAt }
  })
  gaps.sort((x, y) => y.gap - x.gap)
  const over50 = {}
  for (const g of gaps) if (g.gap > 50) over50[Math.floor(g.endedAt / 100) * 100] = (over50[Math.floor(g.endedAt / 100) * 100] ?? 0) + 1
  const ttft = summary(streams.filter((s) => s.ttft !== null).map((s) => s.ttft))
  const complete = streams.filter((s) => streamComplete(s, 64)).length
  const worst = gaps[0]
  const gatewayBins = await readBins(gatewayProbe.env.LOOP_BINS)
  const mockBins = await readBins(mockProbe.env.LOOP_BINS)
  // The longest gap on each recording's clock: the burst started this long after that recording did.
  const burstEpoch = performance.timeOrigin + burstStart
  const window = (bins) => [worst.endedAt - worst.gap + burstEpoch - bins.startEpochMs, worst.endedAt + burstEpoch - bins.startEpochMs]
  const gw = inWindow(gatewayBins, "serverWrites", ...window(gatewayBins))
  const up = inWindow(mockBins, "serverWrites", ...window(mockBins))
  const r = {
    burst: b + 1,
    complete,
    maxGapMs: worst.gap,
    maxGapP99: gaps[Math.floor(STREAMS / 100)].gap,
    maxGapEndedAtMs: worst.endedAt,
    streamsOver50msBy100ms: over50,
    ttftP50: ttft.p50,
    ttftMax: ttft.max,
    inLongestGap: { gatewayWrites: gw.sum, gatewayLongestTurnMs: gw.longest, mockWrites: up.sum, mockLongestTurnMs: up.longest },
    longestTurnMs: { gateway: inWindow(gatewayBins, "turns", 0, Infinity).longest, mock: inWindow(mockBins, "turns", 0, Infinity).longest },
    bins: { columns: gatewayBins.columns, gateway: gatewayBins.rows, mock: mockBins.rows }
  }
  results.push(r)
  const f = (x) => (x == null ? "–" : x.toFixed(0))
  console.log(
    `burst ${r.burst}: ${complete}/${STREAMS} complete; longest gap ${f(r.maxGapMs)} ms (p99 ${f(r.maxGapP99)}), ended ${f(r.maxGapEndedAtMs)} ms in; ` +
      `TTFT p50 ${f(r.ttftP50)}, max ${f(r.ttftMax)} ms\n` +
      `  streams with a gap over 50 ms, by when it ended (100 ms bins): ${JSON.stringify(over50)}\n` +
      `  in the longest gap: the mock wrote ${up.sum} times (its longest turn ${f(up.longest)} ms), the gateway ${gw.sum} times (its longest turn ${f(gw.longest)} ms); ` +
      `the burst's longest turn: gateway ${f(r.longestTurnMs.gateway)} ms, mock ${f(r.longestTurnMs.mock)} ms`
  )
}
if (JSON_OUT)
  fs.writeFileSync(JSON_OUT, `${JSON.stringify({ minutes: MINUTES, kinds: KINDS, gatewayEnv: GATEWAY_ENV, bursts: results }, null, 1)}\n`)
await cleanup()
process.exit(0)
