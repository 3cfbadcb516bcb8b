#!/usr/bin/env node
// The benchmark harness. `npm run bench` (top level) runs it through bench/run.mjs, which first
// installs bench/'s dependencies and builds the gateway when needed. See bench/README.md.
//
// Targets, each its own process on 127.0.0.1:
//   direct   the load generator talks to the mock upstream itself (the reference)
//   floor    bench/floor-proxy.mjs, a ~40-line node:http pass-through proxy (the floor)
//   gateway  this project's production build, `node bin/gateway`
//   peer     Portkey's open-source gateway (@portkey-ai/gateway), or with --peer-gateway <dir>
//            another build of this gateway
// Progress goes to stderr; the markdown table to stdout; everything to bench/results/<time>.json.
import { execFileSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { allocProbe, probeLaunch } from "./lib/allocProbe.mjs"
import {
  countedRun,
  latencyRun,
  latencySummary,
  manyStreams,
  request,
  sseOnce,
  sseRun,
  streamComplete,
  throughputRun
} from "./lib/load.mjs"
import {
  cleanup,
  cleanupSync,
  connectionsByPid,
  cpuSeconds,
  cpuSnapshot,
  foreignSince,
  openFilesLimit,
  pinSelf,
  processTree,
  registerTempDir,
  rssBytes,
  tasksetAvailable,
  familyCpuSeconds
} from "./lib/proc.mjs"
import { topSelf } from "./lib/profile.mjs"
import { envPair } from "./lib/args.mjs"
import { allRatios, gatewayRatios, markdownTable, mb } from "./lib/report.mjs"
import { acrossRounds, freeCeiling, median, ratio, slope } from "./lib/stats.mjs"
import {
  addTranslationProviders,
  chatBody,
  launchGateway,
  peerEntry,
  prepareGateway,
  startFloor,
  startGateway,
  startMock,
  startPeer,
  streamBody,
  TRANSLATED,
  translatedRequest,
  verifyTarget
} from "./lib/targets.mjs"

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(BENCH_DIR, "..")
const ALL_TARGETS = ["direct", "floor", "gateway", "peer"]
const METRICS = [
  "latency",
  "throughput",
  "sse",
  "translated",
  "streams",
  "workers",
  "rss",
  "startup",
  "fallback",
  "cache",
  "shadow",
  "soak",
  "profile"
]
const CHUNKS = 64
const GAP_LIMIT_MS = 500
const T_START = performance.now()
const loadStart = os.loadavg()
const parallelism = os.availableParallelism?.() ?? null // before this process pins itself

// ---------------------------------------------------------------------------------------------
// Arguments

const usage = `usage: npm run bench -- [--quick] [--soak] [--profile] [--only <metrics>] [--targets <targets>]

  --quick              one short round of everything (a smoke check, well under a minute)
  --soak               add a 10-minute soak of the gateway under load (RSS sampled every second)
  --soak-minutes <n>   soak length in minutes (default 10)
  --profile            CPU-profile a separate gateway under each of c=32 JSON, the SSE burst and
                       the three translated bursts for ~15 s each and print
                       the top 25 self-time functions of each (profiles in bench/results/profiles/)
  --only <list>        run only these metrics: ${METRICS.join(",")}
                       (startup and idle RSS are always measured; soak and profile imply their flag)
  --targets <list>     targets to measure, from ${ALL_TARGETS.join(",")} (default all)
  --rounds <n>         override the number of interleaved rounds
  --gateway-env NAME=value
                       set in every gateway's environment, repeatable (one arm of a setting's A/B:
                       run once per value; the result file records it)
  --peer-gateway <dir> measure the gateway built in <dir> (a worktree of another commit, built) in
                       the peer's place, interleaved with this one: "gw ÷ peer" is then this
                       build against that one, in the same run
  --no-pin             do not pin processes to cores even when taskset is available
  --workers-max <n>    the workers section's curve: \`gateway --workers N\` on every core for N from 2
                       to n (default: the machine's cores): every N to 4, then powers of two and n,
                       at most 32 (the load's connections)
  --help               this text`

const parseArgs = (argv) => {
  const f = {
    quick: false,
    soak: false,
    profile: false,
    only: null,
    targets: [...ALL_TARGETS],
    rounds: null,
    pin: true,
    soakMinutes: 10,
    gatewayEnv: {},
    peerGateway: null,
    workersMax: Math.max(2, os.cpus().length)
  }
  const list = (v, allowed, flag) => {
    const items = String(v ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean)
    const bad = items.filter((i) => !allowed.includes(i))
    if (items.length === 0 || bad.length)
      throw new Error(`${flag}: unknown ${bad.join(", ") || "(empty)"}; choose from ${allowed.join(",")}`)
    return items
  }
  for (let i = 0; i < argv.length; i++) {
    const [a, inline] = argv[i].includes("=") ? argv[i].split(/=(.*)/s) : [argv[i], undefined]
    const value = () => inline ?? argv[++i]
    switch (a) {
      case "--quick":
        f.quick = true
        break
      case "--soak":
        f.soak = true
        break
      case "--profile":
        f.profile = true
        break
      case "--no-pin":
        f.pin = false
        break
      case "--only":
        f.only = new Set(list(value(), METRICS, "--only"))
        break
      case "--targets":
        f.targets = list(value(), ALL_TARGETS, "--targets")
        break
      case "--rounds":
        f.rounds = Math.max(1, Number.parseInt(value(), 10) || 1)
        break
      case "--gateway-env": {
        const [name, v] = envPair(String(value() ?? ""))
        f.gatewayEnv[name] = v
        break
      }
      case "--peer-gateway": {
        const given = String(value() ?? "")
        if (given === "") throw new Error("--peer-gateway: give the directory of the other build")
        const dir = path.resolve(given)
        if (!existsSync(path.join(dir, "bin/gateway")) || !existsSync(path.join(dir, "dist")))
          throw new Error(`--peer-gateway: ${dir} has no bin/gateway and dist/ (a worktree of the commit, built with npm run build)`)
        f.peerGateway = dir
        break
      }
      case "--workers-max": {
        const given = String(value() ?? "")
        if (!/^\d+$/.test(given) || Number(given) < 2) throw new Error("--workers-max: give a whole number of processes, 2 or more")
        f.workersMax = Number(given)
        break
      }
      case "--soak-minutes":
        f.soakMinutes = Math.max(0.5, Number(value()) || 10)
        break
      case "--help":
      case "-h":
        f.help = true
        break
      default:
        throw new Error(`unknown argument ${argv[i]}\n\n${usage}`)
    }
  }
  if (f.only?.has("soak")) f.soak = true
  if (f.only?.has("profile")) f.profile = true
  f.targets = ALL_TARGETS.filter((t) => f.targets.includes(t))
  return f
}

let flags
try {
  flags = parseArgs(process.argv.slice(2))
} catch (e) {
  console.error(e.message)
  process.exit(2)
}
if (flags.help) {
  console.log(usage)
  process.exit(0)
}
const want = (m) =>
  (flags.only ? flags.only.has(m) : m !== "soak" && m !== "profile") || (m === "soak" && flags.soak) || (m === "profile" && flags.profile)

const MODE = flags.quick
  ? {
      name: "quick",
      rounds: 1,
      slices: 1,
      streamSlices: 1,
      latencyMs: 500,
      throughputS: 0.5,
      sseMs: 0,
      sseConcurrency: 8,
      sseSpreadMs: 160,
      burstS: 0.5,
      rowWarmS: 0.25,
      warmupS: 0.5,
      streamWarmup: false,
      streams: 100,
      streamBursts: 1,
      settleMs: 300,
      extraRounds: 1,
      extraLatencyMs: 400,
      extraS: 0.5,
      workersWarmupS: 0.5,
      workersRoundS: 0.5,
      profileS: 6,
      startRuns: 1
    }
  : {
      name: "default",
      rounds: 3,
      // A round's latency and JSON rows in 4 slices per target (1.25 s each, the latency's 0.375 s),
      // its burst and translated rows in 4 of 0.75 s, the targets taking turns (\`sliced\` below).
      slices: 4,
      streamSlices: 4,
      latencyMs: 1500,
      throughputS: 5,
      sseMs: 1500,
      sseConcurrency: 16,
      sseSpreadMs: 1280,
      burstS: 3,
      // Each sliced row begins with one unmeasured slice of this length per target (`sliced` below;
      // autocannon stops on its 250 ms sample tick, so not shorter).
      rowWarmS: 0.25,
      // Each target's spawn → first 200: its own start and this many in all, round-robin (below, "Start time").
      startRuns: 5,
      warmupS: 5,
      streamWarmup: true,
      streams: 1000,
      // The 1000-stream row's bursts per target, the targets taking turns: the row's max gap is the
      // median of each burst's longest gap (one burst's is an extreme of its own: the floor's read
      // 135-318 ms across runs of one day).
      streamBursts: 3,
      settleMs: 1000,
      extraRounds: 3,
      extraLatencyMs: 1500,
      extraS: 3,
      // The `workers` section's one-process gateway is warmed this long in slices of
      // workersRoundS, and every worker to as many requests (docs/performance.md, workers
      // "2026-11-27 (night)").
      workersWarmupS: 12,
      workersRoundS: 4,
      profileS: 15
    }
if (flags.rounds) MODE.rounds = flags.rounds

// ---------------------------------------------------------------------------------------------
// Process hygiene: every child is stopped and every temp dir removed however we leave.

let stopping = false
const abort = async (why, code) => {
  if (stopping) return
  stopping = true
  console.error(`\n${why}: stopping every child process...`)
  await cleanup(3_000)
  process.exit(code)
}
process.on("SIGINT", () => abort("SIGINT", 130))
process.on("SIGTERM", () => abort("SIGTERM", 143))
process.on("SIGHUP", () => abort("SIGHUP", 129))
process.on("exit", cleanupSync)
process.on("uncaughtException", (e) => {
  console.error(e)
  abort("uncaught exception", 1)
})
process.on("unhandledRejection", (e) => {
  console.error(e)
  abort("unhandled rejection", 1)
})

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const elapsed = () => `${((performance.now() - T_START) / 1000).toFixed(1).padStart(6)}s`
const log = (...a) => console.error(`[bench ${elapsed()}]`, ...a)
const safe = async (label, fn) => {
  try {
    return await fn()
  } catch (e) {
    log(`${label} failed: ${e.message}`)
    return { error: e.message }
  }
}
const r2 = (v, d = 3) => (v == null ? null : Math.round(v * 10 ** d) / 10 ** d)

// ---------------------------------------------------------------------------------------------
// Machine, pinning, versions

const gitIn = (dir, ...args) => {
  try {
    return execFileSync("git", ["--no-optional-locks", ...args], {
      cwd: dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"]
    }).trim()
  } catch {
    return null
  }
}
const pkgVersion = (file) => {
  try {
    return JSON.parse(readFileSync(file, "utf8")).version
  } catch {
    return null
  }
}

const pin = flags.pin && tasksetAvailable()
const CORE_TARGET = 0
const CORE_LOAD = 1
const pinnedSelf = pin ? pinSelf(CORE_LOAD) : false
const notes = []
const pinning = pin
  ? `taskset: target under test (floor, gateway, peer) on core ${CORE_TARGET}; mock upstream and load generator (this process: autocannon and the SSE clients) on core ${CORE_LOAD}${pinnedSelf ? "" : " (pinning this process failed)"}`
  : `no pinning (${flags.pin ? "taskset not available or fewer than 2 cores" : "--no-pin"}): every process shares all cores`
const fdLimit = openFilesLimit()
if (fdLimit != null && fdLimit < MODE.streams * 2 + 256)
  notes.push(`open-file limit of the load generator is ${fdLimit}; ${MODE.streams} streams may fail (raise ulimit -n)`)

const machine = {
  cpu: os.cpus()[0]?.model ?? null,
  cores: os.cpus().length,
  availableParallelism: parallelism,
  totalMemoryBytes: os.totalmem(),
  node: process.version,
  kernel: `${os.type()} ${os.release()}`,
  arch: os.arch()
}
// When a tree's dist/ was last written (newest file: incremental builds rewrite only what changed).
const distStampOf = (root) => {
  let t = 0
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(path.join(d, e.name))
      else t = Math.max(t, statSync(path.join(d, e.name)).mtimeMs)
    }
  }
  try {
    walk(path.join(root, "dist"))
    return t ? new Date(t).toISOString() : null
  } catch {
    return null
  }
}
/** A gateway tree's version, commit, whether what builds into dist/ has uncommitted changes, and when dist/ was written. */
const buildOf = (root) => {
  const dirty = gitIn(root, "status", "--porcelain", "--", "src", "bin", "tsconfig.json", "tsconfig.build.json", "package-lock.json")
  return {
    version: pkgVersion(path.join(root, "package.json")),
    commit: gitIn(root, "rev-parse", "HEAD"),
    uncommittedChanges: dirty == null ? null : dirty.length > 0,
    distLastWritten: distStampOf(root)
  }
}
const versions = {
  gateway: buildOf(ROOT),
  peer: (() => {
    if (flags.peerGateway) {
      const b = buildOf(flags.peerGateway)
      return { package: "this gateway, another build", dir: flags.peerGateway, ...b, version: b.commit?.slice(0, 12) ?? "?" }
    }
    try {
      const e = peerEntry(BENCH_DIR)
      return { package: "@portkey-ai/gateway", version: e.version, entry: path.relative(BENCH_DIR, e.file) }
    } catch (e) {
      return { package: "@portkey-ai/gateway", error: e.message }
    }
  })(),
  autocannon: pkgVersion(path.join(BENCH_DIR, "node_modules/autocannon/package.json"))
}

// ---------------------------------------------------------------------------------------------
// Allocation: the floor, the gateway and the peer (all Node) start with bench/alloc-probe.cjs
// preloaded; its window (SIGUSR2 to open, SIGUSR2 to close) is opened, in each round right after
// the c=32 JSON 1 KB run, around ALLOC_REQUESTS more of the same requests over 32 connections, all
// answered (lib/load.mjs, countedRun: autocannon cuts its last requests halfway, even given an
// amount, which in a short run on a slow target is a good part of them), and gives the bytes allocated on the process's JS heap and the
// requests
// its HTTP server began and finished meanwhile (bench/README.md, "The metrics").
const ALLOC = want("throughput")
const ALLOC_TARGETS = ["floor", "gateway", "peer"]
const ALLOC_REQUESTS = flags.quick ? 1000 : 5000
// After the last answer, before the window closes: what a request does after its answer (the
// usage row handed to the writer) is in the window too.
const ALLOC_SETTLE_MS = 200
const probeDir = ALLOC ? mkdtempSync(path.join(process.env.BENCH_TMP_DIR || os.tmpdir(), "gateway-bench-alloc-")) : null
if (probeDir) registerTempDir(probeDir)
const probeFile = (name) => path.join(probeDir, `${name}.json`)
const probeFor = (name) => (ALLOC && ALLOC_TARGETS.includes(name) ? probeLaunch(probeFile(name)) : undefined)
const probes = {}

// ---------------------------------------------------------------------------------------------
// Start the targets

log(`mode ${MODE.name}: ${MODE.rounds} round(s), targets ${flags.targets.join(",")}; ${pinning}`)
const targets = {}
const t = (name) => targets[name]
// Selected and healthy; a target whose process died is noticed by checkAlive (and reported).
const ready = (name) => flags.targets.includes(name) && targets[name]?.ok === true

try {
  targets.direct = await startMock({ benchDir: BENCH_DIR, core: CORE_LOAD, pin })
} catch (e) {
  console.error(`the mock upstream did not start: ${e.message}`)
  await cleanup()
  process.exit(1)
}
log(`mock upstream ${t("direct").baseUrl} (pid ${t("direct").pid}) answered 200 after ${t("direct").startupMs.toFixed(0)} ms`)
const report = (name) => {
  const x = t(name)
  if (x.ok) log(`${name} ${x.baseUrl} (pid ${x.pid}) answered 200 after ${x.startupMs.toFixed(0)} ms`)
  else log(`${name} FAILED to start: ${x.error}`)
}
// Floor and peer start one at a time (spawn → first 200 is measured with nothing else running).
// With --peer-gateway, the peer's place holds the gateway of another build (started like this one).
// A gateway of the build at `rootDir` on a DATA_DIR of its own, prepared (not timed) on the load's core.
const startBuild =
  (rootDir, name) =>
  ({ core, mock, probe }) =>
    startGateway({ rootDir, core, prepCore: CORE_LOAD, pin, mock, env: flags.gatewayEnv, probe, name })
const startPeerGateway = flags.peerGateway ? startBuild(flags.peerGateway, "peer") : undefined
for (const [name, start] of [
  ["floor", startFloor],
  ["peer", startPeerGateway ?? startPeer]
]) {
  if (!flags.targets.includes(name)) continue
  targets[name] = await start({ benchDir: BENCH_DIR, core: CORE_TARGET, pin, mock: t("direct"), probe: probeFor(name) })
  report(name)
}
if (flags.peerGateway && want("translated") && t("peer")?.ok) {
  const added = await safe("translated providers (peer gateway)", () => addTranslationProviders(t("peer"), t("direct")))
  if (added?.error) notes.push(`translated rows, peer gateway: ${added.error}`)
}
// The gateway's CLI setup (on the load core) overlaps the verification of the others.
const gatewayPrep = flags.targets.includes("gateway")
  ? prepareGateway({ rootDir: ROOT, mock: t("direct"), core: CORE_LOAD, pin, env: flags.gatewayEnv }).catch((e) => e)
  : null

/** Checks that a target returns the mock's answers (JSON and both kinds of stream). */
const verification = {}
const verify = async (name) => {
  const x = targets[name]
  if (!x?.ok) return
  const v = await safe(`verify ${name}`, () => verifyTarget(x, { sseOnce, streamComplete, chunks: CHUNKS }))
  verification[name] = v
  const problems = v.error ? [v.error] : v.problems
  if (problems.length) {
    x.ok = false
    x.error = `does not return the mock's answers: ${problems.join("; ")}`
    log(`${name}: ${x.error}`)
  } else {
    log(
      `${name} verified: JSON ${v.json1k.bytes} B / ${v.json10k.bytes} B, paced SSE ${v.ssePaced.chunks} chunks in ${v.ssePaced.ms} ms, burst SSE ${v.sseBurst.chunks} chunks, [DONE] and usage${v.ssePaced.usage ? "" : " (no usage chunk)"}`
    )
  }
}
await Promise.all(["direct", "floor", "peer"].map(verify))
if (!t("direct").ok) {
  console.error("the mock upstream does not answer as expected; stopping")
  await cleanup()
  process.exit(1)
}
if (gatewayPrep) {
  targets.gateway = await launchGateway(await gatewayPrep, { rootDir: ROOT, core: CORE_TARGET, pin, probe: probeFor("gateway") })
  report("gateway")
  await verify("gateway")
  if (want("translated") && t("gateway").ok) {
    const added = await safe("translated providers", () => addTranslationProviders(t("gateway"), t("direct")))
    if (added?.error) notes.push(`translated rows: ${added.error}`)
  }
}

// The translated pairs: each target's stream must be whole (64 content deltas in the client's format).
const TRANSLATING = flags.peerGateway ? ["direct", "floor", "gateway", "peer"] : ["direct", "floor", "gateway"]
const translatedOk = {}
if (want("translated")) {
  for (const name of TRANSLATING) {
    if (!targets[name]?.ok) continue
    for (const { label, name: pairName } of TRANSLATED) {
      const q = translatedRequest(t(name), label)
      const r = await safe(`verify ${name} ${label}`, () => request(q.url, { headers: q.headers, body: q.body }))
      const n = r.error ? 0 : q.count(r.body)
      translatedOk[`${name}:${label}`] = r.status === 200 && n === CHUNKS
      if (!translatedOk[`${name}:${label}`]) {
        const why = r.error ?? `${r.status}, ${n} content deltas, ${String(r.body).slice(0, 300)}`
        notes.push(`translated ${pairName}, ${name}: not measured (${why})`)
        log(`${name} ${pairName}: ${why}`)
      }
    }
  }
  log(`translated streams verified: ${Object.entries(translatedOk).filter(([, ok]) => ok).length} of ${Object.keys(translatedOk).length}`)
}

await sleep(1_000)
const rssIdle = {}
for (const [name, x] of Object.entries(targets)) if (x.ok) rssIdle[name] = rssBytes(x.pid)

// Start time: one start is one sample of a figure that moves by a fifth from start to start, so
// each target is started MODE.startRuns times in all (its own start above and the rest here,
// round-robin across the targets, each stopped before the next starts; the others idle) and the
// row is their median (bench/README.md, "Start time").
const startSamples = {}
for (const [name, x] of Object.entries(targets)) if (x.startupMs != null) startSamples[name] = [x.startupMs]
const startAgain = {
  direct: () => startMock({ benchDir: BENCH_DIR, core: CORE_LOAD, pin }),
  floor: (probe) => startFloor({ benchDir: BENCH_DIR, core: CORE_TARGET, pin, mock: t("direct"), probe }),
  // Each on a DATA_DIR of its own, prepared as the measured gateway's was.
  gateway: (probe) => startBuild(ROOT, "gateway (start)")({ core: CORE_TARGET, mock: t("direct"), probe }),
  peer: (probe) => (startPeerGateway ?? startPeer)({ benchDir: BENCH_DIR, core: CORE_TARGET, pin, mock: t("direct"), probe })
}
for (let k = 1; k < MODE.startRuns; k++) {
  for (const name of ALL_TARGETS) {
    if (startSamples[name] === undefined || !ready(name)) continue
    // Preloaded as the target's own start was (the allocation probe, signalled never: its own file).
    const probe = ALLOC && ALLOC_TARGETS.includes(name) ? probeLaunch(path.join(probeDir, `${name}-start.json`)) : undefined
    const x = await safe(`start ${name} (${k + 1} of ${MODE.startRuns})`, () => startAgain[name](probe))
    // A failed start is a missing sample (null), not a shorter list: the row says how many it had.
    startSamples[name].push(x?.ok ? x.startupMs : null)
    if (!x?.ok) notes.push(`start time, ${name}: start ${k + 1} of ${MODE.startRuns} failed: ${x?.error ?? "no answer"}`)
    await x?.proc?.stop()
  }
}
if (MODE.startRuns > 1)
  log(
    `start time, ${MODE.startRuns} starts each: ${Object.entries(startSamples)
      .map(([n, v]) => `${n} ${v.map((ms) => (ms == null ? "failed" : ms.toFixed(0))).join(", ")} ms`)
      .join("; ")}`
  )

const active = () => ALL_TARGETS.filter(ready)

// ---------------------------------------------------------------------------------------------
// Measurements

const jsonReq = (x, size) => ({ headers: x.headers, body: chatBody(x.model(`json-${size}`)) })
const peakLoadRss = {}
const notePeak = (name) => {
  const v = rssBytes(targets[name].pid)
  if (v != null) peakLoadRss[name] = Math.max(peakLoadRss[name] ?? 0, v)
}
const checkAlive = (name) => {
  const x = targets[name]
  if (x.ok && !x.proc.alive()) {
    x.ok = false
    const info = x.proc.exitInfo()
    x.error = `exited during the run (${info?.code ?? info?.signal}): ${x.proc.output().slice(-500)}`
    log(`${name} ${x.error}`)
  }
  return x.ok
}

// Warm-up: JIT and connection pools, not measured.
if (want("latency") || want("throughput") || want("sse") || want("streams") || want("translated")) {
  for (const name of active()) {
    const x = t(name)
    await safe(`warm-up ${name}`, async () => {
      await throughputRun(x.chatUrl, { ...jsonReq(x, "1k"), connections: 32, durationS: MODE.warmupS })
      if (!MODE.streamWarmup) return
      await sseRun(x.chatUrl, {
        headers: x.headers,
        body: streamBody(x.model("sse-paced")),
        concurrency: 8,
        durationMs: 0,
        spreadMs: 200,
        expectedChunks: CHUNKS
      })
      await throughputRun(x.chatUrl, {
        headers: x.headers,
        body: streamBody(x.model("sse-burst")),
        connections: 32,
        durationS: MODE.warmupS / 2
      })
      // The translated pairs are code of their own in the gateway (a decoder and an encoder a
      // pair): warmed as the burst is, or each round's first run of a pair measured its JIT (the
      // gateway's first round of a pair read up to 2.5× its later ones).
      if (!want("translated")) return
      for (const { label } of TRANSLATED) {
        if (!translatedOk[`${name}:${label}`]) continue
        const q = translatedRequest(x, label)
        await throughputRun(q.url, { headers: q.headers, body: q.body, connections: 32, durationS: MODE.warmupS / 2 })
      }
    })
  }
  log(`warmed up ${active().join(", ")}`)
}

// The allocation probes: in place (a SIGUSR2 before that would end the process), and one empty
// window each, so the first measured one does not carry the probe's own first run.
if (ALLOC) {
  for (const name of ALLOC_TARGETS.filter(ready)) {
    const p = allocProbe(t(name).pid, probeFile(name))
    const ok = await safe(`alloc probe ${name}`, async () => {
      await p.ready()
      await p.open()
      await p.close()
      return true
    })
    if (ok === true) probes[name] = p
    else notes.push(`bytes allocated, ${name}: not measured (${ok.error})`)
  }
}
/** Until the process used at most one clock tick of CPU in 100 ms (at most 5 s). */
const quiesce = async (pid) => {
  const until = performance.now() + 5_000
  let last = cpuSeconds(pid)
  while (performance.now() < until) {
    await sleep(100)
    const now = cpuSeconds(pid)
    if (now == null || last == null || now - last <= 0.011) return
    last = now
  }
}
/** One window's figures, per request: the requests the target's HTTP server began in the window. */
const allocSummary = (w, run) => {
  if (w.requests && (w.requests.started !== run.ok + run.non2xx + run.errors || w.requests.finished !== w.requests.started))
    notes.push(
      `bytes allocated: a window's server-side count ${JSON.stringify(w.requests)} differs from the ${run.ok + run.non2xx} answers to ${ALLOC_REQUESTS} requests`
    )
  const requests = w.requests?.started ?? run.ok + run.non2xx
  const threadBytes = w.threads.reduce((a, x) => a + x.bytes, 0)
  return {
    bytes: w.bytes,
    requests: w.requests,
    clientAnswers: run.ok + run.non2xx,
    bytesPerRequest: requests > 0 ? w.bytes / requests : null,
    bySpace: w.bySpace,
    otherThreads: w.threads.length,
    otherThreadsExpected: w.threadsExpected,
    otherThreadBytes: threadBytes,
    otherThreadBytesPerRequest: requests > 0 && w.threadsExpected > 0 ? threadBytes / requests : null,
    gcs: w.gcs,
    gcMs: w.gcMs,
    gcUsPerRequest: requests > 0 ? (1000 * w.gcMs) / requests : null,
    windowMs: w.ms,
    rps: run.rps,
    non2xx: run.non2xx,
    errors: run.errors
  }
}

const THROUGHPUT = [
  ["c32_1k", 32, "1k"],
  ["c64_1k", 64, "1k"],
  ["c32_10k", 32, "10k"],
  ["c64_10k", 64, "10k"]
]
const rounds = []
const foreign = { max: 0, noisy: 0, measurements: 0 }
const noteForeign = (f) => {
  if (f == null) return
  foreign.measurements++
  foreign.max = Math.max(foreign.max, f)
  if (f > 0.1) foreign.noisy++
}
const runCpu = cpuSnapshot()
const roundBased = want("latency") || want("throughput") || want("sse") || want("translated")
for (let r = 1; roundBased && r <= MODE.rounds; r++) {
  const round = Object.fromEntries(active().map((n) => [n, {}]))
  const each = async (label, fn, names = active()) => {
    for (const name of names) {
      if (!checkAlive(name)) continue
      round[name] ??= {}
      const before = cpuSnapshot()
      const res = await safe(`round ${r} ${label} ${name}`, () => fn(t(name), name))
      // A run followed by more work (the allocation window) ends its CPU count where the run ends.
      const after = res?.cpuEnd ?? cpuSnapshot()
      if (res) delete res.cpuEnd
      res.foreignCpu = r2(foreignSince(before, after))
      // The target's own CPU time over the run: per request, it does not drift with the
      // machine's speed the way req/s does (this is a process's CPU seconds, from /proc).
      const pid = t(name).pid
      const cpuBefore = before.per.get(pid)
      const cpuAfter = after.per.get(pid)
      if (cpuBefore != null && cpuAfter != null) res.cpuS = cpuAfter - cpuBefore
      noteForeign(res.foreignCpu)
      round[name][label] = res
      await sleep(100)
    }
  }
  /**
   * A row measured in MODE.slices slices per target, the targets taking turns slice by slice (the
   * order reversed every other slice; an even count, so each order runs as often) rather than one
   * whole run each: this machine's speed moves by up to 2× within seconds (the floor's own CPU a
   * request read 90 and 154 µs in two runs a few seconds apart), and a ratio of two runs taken at
   * different moments measured that. Each target's slices are summed: requests, seconds and its
   * CPU time; `merge` joins what else a slice answered. A pause after each slice lets the target
   * finish what the slice's end cut (as between whole runs). `after` runs once per target after
   * its last slice (a spot check, the allocation window), outside the CPU count; what it fails
   * is noted apart (`afterError`). A target that died before its last slice has no value.
   * `run(target, name, seconds)` runs one slice of `seconds` (`sliceS` for a measured one); with
   * `peaks`, the target's RSS is sampled after each measured slice (the load's peak).
   */
  const sliced = async (label, { slices = MODE.slices, sliceS, run, merge, after, peaks = false }, names = active()) => {
    const parts = {}
    // First one unmeasured slice per target (MODE.rowWarmS long), in the measured slices' first
    // order. A row's first slice is the first of its kind since the row before: the mock and
    // this process's load generator, which every target shares, run its requests cold, and the
    // target measured first paid for that. In an A/A of one build in two slots (--peer-gateway),
    // the first slot read 0.80-0.84x the second's streams/s on the burst row, and 1.01-1.13x once
    // the slots' order was reversed (docs/performance.md, "2026-12-01 (afternoon)").
    for (const name of names) {
      if (!checkAlive(name)) continue
      await safe(`round ${r} ${label} ${name} (warm-up slice)`, () => run(t(name), name, MODE.rowWarmS))
      await sleep(100)
    }
    for (let k = 0; k < slices; k++) {
      for (const name of k % 2 === 0 ? names : [...names].reverse()) {
        if (!checkAlive(name)) continue
        const before = cpuSnapshot()
        const res = await safe(`round ${r} ${label} ${name}`, () => run(t(name), name, sliceS))
        const end = cpuSnapshot()
        if (peaks) notePeak(name)
        const pid = t(name).pid
        const cpuBefore = before.per.get(pid)
        const cpuAfter = end.per.get(pid)
        ;(parts[name] ??= []).push({
          res,
          cpuS: cpuBefore != null && cpuAfter != null ? cpuAfter - cpuBefore : null,
          foreign: foreignSince(before, end),
          ms: end.at - before.at
        })
        await sleep(100)
      }
    }
    for (const name of names) {
      const ps = parts[name]
      if (ps === undefined) continue
      round[name] ??= {}
      const failed = ps.find((p) => p.res?.error)?.res.error ?? (ps.length < slices ? `ran ${ps.length} of ${slices} slices` : undefined)
      const ms = ps.reduce((n, p) => n + p.ms, 0)
      const res =
        failed !== undefined
          ? { error: failed }
          : {
              ...merge(ps.map((p) => p.res)),
              cpuS: ps.every((p) => p.cpuS != null) ? ps.reduce((n, p) => n + p.cpuS, 0) : undefined,
              slices: ps.length
            }
      const foreign = ps.every((p) => p.foreign != null) && ms > 0 ? ps.reduce((n, p) => n + p.foreign * p.ms, 0) / ms : null
      res.foreignCpu = r2(foreign)
      noteForeign(res.foreignCpu)
      if (after && failed === undefined && checkAlive(name)) {
        const extra = await safe(`round ${r} ${label} ${name} (after)`, () => after(t(name), name, res))
        if (extra.error !== undefined) res.afterError = extra.error
        else Object.assign(res, extra)
      }
      round[name][label] = res
    }
  }
  /** A stream row's slices: `request(x)`'s stream at c=32, each slice its share of MODE.burstS. */
  const streamSlices = (request) => ({
    slices: MODE.streamSlices,
    sliceS: MODE.burstS / MODE.streamSlices,
    peaks: true,
    run: (x, _name, durationS) => {
      const q = request(x)
      return throughputRun(q.url, { headers: q.headers, body: q.body, connections: 32, durationS })
    }
  })
  /** autocannon runs summed: 2xx per second over all the slices' seconds. */
  const mergeRuns = (runs) => {
    const sum = (k) => runs.reduce((n, x) => n + (x[k] ?? 0), 0)
    const ok = sum("ok")
    const durationS = sum("durationS")
    const mid = (k) => median(runs.map((x) => x[k]).filter((v) => typeof v === "number"))
    return {
      rps: durationS > 0 ? ok / durationS : 0,
      ok,
      non2xx: sum("non2xx"),
      errors: sum("errors"),
      timeouts: sum("timeouts"),
      durationS,
      latencyP50: mid("latencyP50"),
      latencyP99: mid("latencyP99")
    }
  }
  if (want("latency")) {
    await sliced("latency", {
      sliceS: MODE.latencyMs / 1000 / MODE.slices,
      run: (x, _name, durationS) => latencyRun(x.chatUrl, { ...jsonReq(x, "1k"), durationMs: durationS * 1000, keepSamples: true }),
      merge: (runs) => {
        const failures = {}
        for (const x of runs) for (const [k, n] of Object.entries(x.failures)) failures[k] = (failures[k] ?? 0) + n
        const errors = runs.reduce((n, x) => n + x.errors, 0)
        return latencySummary(
          runs.flatMap((x) => x.samples),
          errors,
          failures,
          {}
        )
      }
    })
    log(
      `round ${r}/${MODE.rounds}: latency c=1 p50 ${active()
        .map((n) => `${n} ${round[n]?.latency?.p50?.toFixed(3) ?? "–"}`)
        .join(", ")} ms`
    )
  }
  if (want("throughput")) {
    for (const [label, c, size] of THROUGHPUT) {
      await sliced(label, {
        sliceS: MODE.throughputS / MODE.slices,
        peaks: true,
        run: (x, _name, durationS) => throughputRun(x.chatUrl, { ...jsonReq(x, size), connections: c, durationS }),
        merge: mergeRuns,
        // c=32 JSON 1 KB: then ALLOC_REQUESTS more inside an allocation window, where the target
        // has a probe (not in the slices' CPU time or req/s).
        after: async (x, name) => {
          const probe = label === "c32_1k" ? probes[name] : undefined
          if (!probe) return {}
          // The requests the timed run cut may still sit in the target's socket buffers (a slow
          // target reads and begins them after the run): the window opens once it is idle.
          await quiesce(x.pid)
          await probe.open()
          const run = await countedRun(x.chatUrl, { ...jsonReq(x, size), connections: c, requests: ALLOC_REQUESTS })
          await sleep(ALLOC_SETTLE_MS)
          return { alloc: allocSummary(await probe.close(), run) }
        }
      })
      log(
        `round ${r}/${MODE.rounds}: ${label} req/s ${active()
          .map((n) => `${n} ${round[n]?.[label]?.rps?.toFixed(0) ?? "–"}`)
          .join(", ")}`
      )
    }
  }
  if (want("sse")) {
    await each("sse", (x) =>
      sseRun(x.chatUrl, {
        headers: x.headers,
        body: streamBody(x.model("sse-paced")),
        concurrency: MODE.sseConcurrency,
        durationMs: MODE.sseMs,
        spreadMs: MODE.sseSpreadMs,
        expectedChunks: CHUNKS
      })
    )
    log(
      `round ${r}/${MODE.rounds}: SSE TTFT p50 ${active()
        .map((n) => `${n} ${round[n]?.sse?.ttftP50?.toFixed(3) ?? "–"}`)
        .join(", ")} ms`
    )
    await sliced("burst", {
      ...streamSlices((x) => ({ url: x.chatUrl, headers: x.headers, body: streamBody(x.model("sse-burst")) })),
      merge: mergeRuns,
      // autocannon counts a 200 as done; check separately that a burst stream is whole.
      after: async (x) => {
        const check = await sseOnce(x.chatUrl, { headers: x.headers, body: streamBody(x.model("sse-burst")) })
        return { spotCheckIncomplete: streamComplete(check, CHUNKS) ? 0 : 1 }
      }
    })
    log(
      `round ${r}/${MODE.rounds}: SSE burst streams/s ${active()
        .map((n) => `${n} ${round[n]?.burst?.rps?.toFixed(0) ?? "–"}`)
        .join(", ")}`
    )
  }
  if (want("translated")) {
    for (const { label } of TRANSLATED) {
      const names = active().filter((n) => translatedOk[`${n}:${label}`])
      await sliced(
        `tr_${label}`,
        {
          ...streamSlices((x) => translatedRequest(x, label)),
          merge: mergeRuns,
          after: async (x) => {
            const q = translatedRequest(x, label)
            const check = await request(q.url, { headers: q.headers, body: q.body })
            return { spotCheckIncomplete: check.status === 200 && q.count(check.body) === CHUNKS ? 0 : 1 }
          }
        },
        names
      )
      log(
        `round ${r}/${MODE.rounds}: ${label} streams/s ${names.map((n) => `${n} ${round[n]?.[`tr_${label}`]?.rps?.toFixed(0) ?? "–"}`).join(", ")}`
      )
    }
  }
  rounds.push(round)
}
// Anything that went wrong inside a measurement is listed under the table.
rounds.forEach((round, i) => {
  for (const [name, ms] of Object.entries(round)) {
    for (const [label, m] of Object.entries(ms)) {
      if (m.error) notes.push(`round ${i + 1}, ${name}, ${label}: ${m.error}`)
      const bad = (m.non2xx ?? 0) + (m.errors ?? 0) + (m.timeouts ?? 0)
      if (bad > 0 && typeof m.non2xx === "number")
        notes.push(
          `round ${i + 1}, ${name}, ${label}: ${m.non2xx} non-2xx, ${m.errors} errors, ${m.timeouts} timeouts (not counted in req/s)`
        )
      if (m.afterError) notes.push(`round ${i + 1}, ${name}, ${label}: the check after the slices failed: ${m.afterError}`)
      if (m.spotCheckIncomplete) notes.push(`round ${i + 1}, ${name}, ${label}: a burst stream read after the run was incomplete`)
      if (m.incomplete)
        notes.push(
          `round ${i + 1}, ${name}, ${label}: ${m.incomplete} of ${m.streams} paced streams incomplete (${JSON.stringify(m.failures)})`
        )
      if (label === "latency" && m.errors)
        notes.push(`round ${i + 1}, ${name}, latency: ${m.errors} failed requests (${JSON.stringify(m.failures)})`)
    }
  }
})

const rssAfterLoad = {}
if (want("throughput") || want("sse") || want("latency")) {
  await sleep(1_000)
  for (const name of active()) rssAfterLoad[name] = rssBytes(t(name).pid)
}

// 1000 concurrent paced streams per target, in MODE.streamBursts bursts, the targets taking turns.
const streams = {}
if (want("streams")) {
  const bursts = {}
  for (let burst = 0; burst < MODE.streamBursts; burst++) {
    for (const name of active()) {
      if (!checkAlive(name) || bursts[name]?.error) continue
      const x = t(name)
      await sleep(MODE.settleMs)
      const before = rssBytes(x.pid)
      const cpu0 = cpuSnapshot()
      const res = await safe(`streams ${name}`, () =>
        manyStreams(x.chatUrl, {
          headers: x.headers,
          body: streamBody(x.model("sse-paced")),
          n: MODE.streams,
          expectedChunks: CHUNKS,
          gapLimitMs: GAP_LIMIT_MS,
          sample: () => rssBytes(x.pid)
        })
      )
      if (res.error) {
        bursts[name] = res
        continue
      }
      const peak = Math.max(...res.samples.filter((v) => v != null))
      const fc = r2(foreignSince(cpu0))
      noteForeign(fc)
      ;(bursts[name] ??= []).push({ ...res, samples: undefined, foreignCpu: fc, rssBeforeBytes: before, rssPeakBytes: peak })
      if (Object.keys(res.errors).length)
        notes.push(`${MODE.streams} streams, ${name}, burst ${burst + 1}: incomplete streams ${JSON.stringify(res.errors)}`)
      log(
        `${name}, burst ${burst + 1} of ${MODE.streamBursts}: ${res.complete}/${MODE.streams} streams complete, ${res.stalled} with a gap > ${GAP_LIMIT_MS} ms, max gap ${res.maxGapMs.toFixed(1)} ms, TTFT p50 ${res.ttftP50?.toFixed(0)} ms, RSS ${peak >= before ? "+" : ""}${mb(peak - before).toFixed(1)} MB, ${Math.round(res.wallMs)} ms`
      )
    }
  }
  for (const [name, b] of Object.entries(bursts)) {
    if (!Array.isArray(b)) {
      streams[name] = b
      continue
    }
    // The first burst's RSS: the one that opens the sockets and grows the pools.
    const first = b[0]
    streams[name] = {
      n: MODE.streams,
      bursts: b.map((r) => ({
        complete: r.complete,
        stalled: r.stalled,
        maxGapMs: r.maxGapMs,
        maxGapP99: r.maxGapP99,
        ttftP50: r.ttftP50,
        wallMs: r.wallMs
      })),
      complete: Math.min(...b.map((r) => r.complete)),
      stalled: b.reduce((a, r) => a + r.stalled, 0),
      maxGapMs: median(b.map((r) => r.maxGapMs)),
      ttftP50: median(b.map((r) => r.ttftP50)),
      errors: Object.assign({}, ...b.map((r) => r.errors)),
      foreignCpu: Math.max(...b.map((r) => r.foreignCpu)),
      rssBeforeBytes: first.rssBeforeBytes,
      rssPeakBytes: first.rssPeakBytes,
      rssPer1000StreamsBytes: first.rssBeforeBytes == null ? null : ((first.rssPeakBytes - first.rssBeforeBytes) * 1000) / MODE.streams,
      pass: b.every((r) => r.complete === MODE.streams && r.stalled === 0)
    }
  }
}

// Gateway only: fallback (one 503, then success) and cache hits.
const api = (x, method, p, body) =>
  request(`${x.baseUrl}${p}`, { method, headers: x.adminHeaders, body: body === undefined ? undefined : JSON.stringify(body) })
const extraRun = async (x, body, check) => {
  const out = []
  for (let i = 0; i < MODE.extraRounds; i++) {
    const cpu0 = cpuSnapshot()
    const lat = await latencyRun(x.chatUrl, { headers: x.headers, body, durationMs: MODE.extraLatencyMs, check })
    const tp = await throughputRun(x.chatUrl, { headers: x.headers, body, connections: 32, durationS: MODE.extraS })
    const fc = r2(foreignSince(cpu0))
    noteForeign(fc)
    out.push({ latency: lat, c32: tp, foreignCpu: fc })
  }
  return out
}

let fallback = null
if (want("fallback") && ready("gateway") && checkAlive("gateway")) {
  const x = t("gateway")
  fallback = await safe("fallback", async () => {
    const settings = JSON.parse((await api(x, "GET", "/api/resilience")).body).settings
    const before = settings.providerBreaker.apikey
    const cooldownBefore = settings.connectionCooldown
    const lockoutBefore = settings.modelLockout
    // The bad target fails on every request; with the shipped settings its provider's breaker
    // opens after 12 consecutive failures, a 503 cools its connection down and may lock the model
    // out, and the router then skips it, which would measure something else. Off for this run
    // only, restored after.
    const patch = await api(x, "PATCH", "/api/resilience", {
      providerBreaker: { apikey: { degradationThreshold: 1_000_000, failureThreshold: 1_000_000 } },
      connectionCooldown: { apiKeyBaseMs: 0, maxCooldownMs: 0 },
      modelLockout: { enabled: false }
    })
    if (patch.status !== 200) throw new Error(`PATCH /api/resilience: ${patch.status} ${patch.body}`)
    const prov = await api(x, "POST", "/api/providers", {
      provider: "openai",
      name: "bad",
      baseUrl: `${t("direct").baseUrl}/v1`,
      apiKey: "sk-bench",
      defaultModel: "fail-503",
      models: ["fail-503"]
    })
    if (prov.status >= 300) throw new Error(`POST /api/providers: ${prov.status} ${prov.body}`)
    const combo = await api(x, "POST", "/api/combos", {
      name: "fallback",
      strategy: "priority",
      targets: [{ model: "bad/fail-503" }, { model: "openai-compatible/json-1k" }],
      // Every request falls back: with prompt-cache affinity (on for priority combos) the load's one
      // conversation would go straight to the target that last answered it (docs/routing.md).
      config: { promptCacheAffinity: false }
    })
    if (combo.status >= 300) throw new Error(`POST /api/combos: ${combo.status} ${combo.body}`)
    const body = chatBody("fallback")
    let probe
    for (let i = 0; i < 40; i++) {
      probe = await request(x.chatUrl, { headers: x.headers, body })
      if (probe.status === 200 && probe.headers["x-gateway-fallback-attempts"] === "1") break
      await sleep(100)
    }
    if (probe.headers?.["x-gateway-fallback-attempts"] !== "1")
      throw new Error(
        `the combo does not fall back: ${probe.status} attempts=${probe.headers?.["x-gateway-fallback-attempts"]} ${String(probe.body).slice(0, 300)}`
      )
    const runs = await extraRun(x, body, (r) => `attempts=${r.headers["x-gateway-fallback-attempts"] ?? "0"}`)
    await api(x, "PATCH", "/api/resilience", {
      providerBreaker: { apikey: before },
      connectionCooldown: cooldownBefore,
      modelLockout: lockoutBefore
    })
    return { breakerDuringRun: { degradationThreshold: 1_000_000, failureThreshold: 1_000_000 }, breakerRestored: before, runs }
  })
  if (!fallback.error)
    log(
      `fallback: req/s ${fallback.runs.map((r) => r.c32.rps.toFixed(0)).join(", ")}; p50 ${fallback.runs.map((r) => r.latency.p50?.toFixed(3)).join(", ")} ms; headers ${JSON.stringify(fallback.runs.map((r) => r.latency.checks))}`
    )
}

let cache = null
if (want("cache") && ready("gateway") && checkAlive("gateway")) {
  const x = t("gateway")
  cache = await safe("cache", async () => {
    const body = chatBody(x.model("json-1k"), { temperature: 0 })
    const first = await request(x.chatUrl, { headers: x.headers, body })
    const second = await request(x.chatUrl, { headers: x.headers, body })
    if (second.headers?.["x-gateway-cache"] !== "HIT")
      throw new Error(
        `no cache hit: first ${first.headers?.["x-gateway-cache"]}, second ${second.status} ${second.headers?.["x-gateway-cache"]}`
      )
    const runs = await extraRun(x, body, (r) => `cache=${r.headers["x-gateway-cache"] ?? "none"}`)
    return { first: first.headers["x-gateway-cache"], runs }
  })
  if (!cache.error)
    log(
      `cache: req/s ${cache.runs.map((r) => r.c32.rps.toFixed(0)).join(", ")}; p50 ${cache.runs.map((r) => r.latency.p50?.toFixed(3)).join(", ")} ms; headers ${JSON.stringify(cache.runs.map((r) => r.latency.checks))}`
    )
}

// Shadow traffic (docs/shadow.md): a combo whose requests are also sent to a shadow target (1 in
// 10, SHADOW_SAMPLE_RATE), interleaved with the same combo without one, so the primary's latency
// and throughput with shadow calls running beside it are read against the same rounds; the
// pairs it gathered checked.
const SHADOW_SAMPLE_RATE = 0.1
let shadowRun = null
if (want("shadow") && ready("gateway") && checkAlive("gateway")) {
  const x = t("gateway")
  shadowRun = await safe("shadow", async () => {
    const target = x.model("json-1k")
    for (const [name, config] of [
      ["plain", {}],
      ["shadowed", { shadow: [{ model: target, sampleRate: SHADOW_SAMPLE_RATE }] }]
    ]) {
      const r = await api(x, "POST", "/api/combos", { name, strategy: "priority", targets: [{ model: target }], config })
      if (r.status >= 300) throw new Error(`POST /api/combos: ${r.status} ${r.body}`)
    }
    const patch = await api(x, "PATCH", "/api/settings", { shadowOptions: { budgetUsdPerDay: 1_000_000, concurrency: 4 } })
    if (patch.status !== 200) throw new Error(`PATCH /api/settings: ${patch.status} ${patch.body}`)
    // The sampling is registered within a second of the first shadow combo.
    await sleep(1500)
    const plain = []
    const shadowed = []
    for (let i = 0; i < MODE.extraRounds; i++)
      for (const [name, into] of [
        ["plain", plain],
        ["shadowed", shadowed]
      ]) {
        const body = chatBody(name)
        const lat = await latencyRun(x.chatUrl, { headers: x.headers, body, durationMs: MODE.extraLatencyMs })
        const tp = await throughputRun(x.chatUrl, { headers: x.headers, body, connections: 32, durationS: MODE.extraS })
        into.push({ latency: lat, c32: tp })
      }
    await sleep(1000)
    const report = JSON.parse((await api(x, "GET", "/api/shadow/report?combo=shadowed")).body)
    const t0 = report.targets?.[0]
    // The sections after this one measure the gateway as it was: the combos go, and with the last
    // shadow list the sampling hook (within a second).
    for (const name of ["plain", "shadowed"]) await api(x, "DELETE", `/api/combos/${name}`)
    await sleep(1500)
    return {
      plain,
      shadowed,
      pairs: t0?.pairs ?? 0,
      failed: t0?.failed ?? 0,
      skipped: report.skipped,
      normalizedAgreement: t0?.normalizedAgreement ?? null
    }
  })
  if (!shadowRun.error)
    log(
      `shadow: p50 plain ${shadowRun.plain.map((r) => r.latency.p50?.toFixed(3)).join(", ")} / shadowed ${shadowRun.shadowed.map((r) => r.latency.p50?.toFixed(3)).join(", ")} ms; req/s plain ${shadowRun.plain.map((r) => r.c32.rps.toFixed(0)).join(", ")} / shadowed ${shadowRun.shadowed.map((r) => r.c32.rps.toFixed(0)).join(", ")}; pairs ${shadowRun.pairs} (failed ${shadowRun.failed}), skipped ${JSON.stringify(shadowRun.skipped)}`
    )
}

// `gateway --workers 2` against one process, c=32 JSON 1 KB, interleaved. Three gateways start
// fresh here, each on its own data dir: one process on the target core, two workers on the target
// core (the load generator and mock apart: on a 2-core machine both workers share one core), and
// two workers free to use every core (sharing the load's). V8 keeps optimizing for minutes under
// load and a worker serves half its gateway's requests, so the one-process gateway of the other
// sections (warm from all of them) would compare a warm process with cold workers
// (docs/performance.md, workers "2026-11-27 (evening)"). Here every process has served as many
// requests before each timed run: a gateway behind is first sent what it lacks (`amount`
// requests, not a duration; a workers gateway needs twice the one process's), in slices
// interleaved with the others' runs so that none sits idle much longer than another.
let workers = null
if (want("workers") && ready("gateway") && checkAlive("gateway")) {
  // Every gateway the section starts, stopped when it ends, whether it ends well or not.
  const started = []
  workers = await safe("workers", async () => {
    const launch = async (name, { pinned, processes }) => {
      const prep = await prepareGateway({ rootDir: ROOT, mock: t("direct"), core: CORE_LOAD, pin, env: flags.gatewayEnv })
      const gatewayArgs = processes > 1 ? ["--workers", String(processes)] : []
      const g = await launchGateway(prep, { rootDir: ROOT, core: CORE_TARGET, pin: pin && pinned, gatewayArgs, name })
      started.push(g)
      if (!g.ok) throw new Error(`${name}: ${g.error}`)
      return { g, processes, served: 0 }
    }
    const one = await launch("gateway-workers-one", { pinned: true, processes: 1 })
    const pinnedW = await launch("gateway-workers-pinned", { pinned: true, processes: 2 })
    const freeW = await launch("gateway-workers-free", { pinned: false, processes: 2 })
    // The curve: `--workers N` on every core for N from 3 up to the machine's cores (--workers-max),
    // measured as the two-worker side is, keyed `free<N>`: every N to 4, then the powers of two and
    // the top itself, at most 32 (the load's connections: more workers would hold none). A side
    // that does not start is noted and left out; the others are measured.
    const curve = []
    const top = Math.min(flags.workersMax, 32)
    for (let n = 3; n <= top; n++) {
      if (n > 4 && (n & (n - 1)) !== 0 && n !== top) continue
      try {
        curve.push([`free${n}`, await launch(`gateway-workers-free${n}`, { pinned: false, processes: n })])
      } catch (e) {
        notes.push(`workers: --workers ${n} on every core did not start (${e.message}); left out of the curve`)
      }
    }
    const load = async (side, opts) => {
      const r = await throughputRun(side.g.chatUrl, { ...jsonReq(side.g, "1k"), connections: 32, ...opts })
      side.served += r.ok
      return r
    }
    // A timed run; CPU summed over the process and its workers, µs per 2xx answer. Also each
    // process's share of it (primary first) and how many of the load's connections each process
    // held halfway through: where the workers' extra CPU goes, and whether one worker took most
    // connections (docs/performance.md, workers "2026-11-28").
    // The load's own CPU beside it (this process's autocannon and the mock; on CORE_LOAD when the
    // bench pins): with every core busy, `--workers` can serve about the cores' µs over the
    // gateway's CPU a request plus the load's at most (`ceiling` below).
    const loadCpuSeconds = () => {
      const u = process.cpuUsage()
      const mock = familyCpuSeconds(t("direct").pid)
      return mock == null ? null : (u.user + u.system) / 1e6 + mock
    }
    const timed = async (side) => {
      const pids = processTree(side.g.pid)
      const loadBefore = loadCpuSeconds()
      const before = familyCpuSeconds(side.g.pid)
      const ownBefore = pids.map(cpuSeconds)
      let connections = null
      const halfway = setTimeout(() => {
        connections = connectionsByPid(new URL(side.g.baseUrl).port)
      }, MODE.workersRoundS * 500)
      const r = await load(side, { durationS: MODE.workersRoundS })
      clearTimeout(halfway)
      const after = familyCpuSeconds(side.g.pid)
      const loadAfter = loadCpuSeconds()
      const perRequest = (a, b) => (a == null || b == null || r.ok === 0 ? null : ((b - a) * 1e6) / r.ok)
      return {
        rps: r.rps,
        cpuUs: perRequest(before, after),
        loadCpuUs: perRequest(loadBefore, loadAfter),
        cpuUsByProcess: pids.map((pid, i) => perRequest(ownBefore[i], cpuSeconds(pid))),
        connectionsByProcess: connections == null ? null : pids.map((pid) => connections[pid] ?? 0)
      }
    }
    // Tops `side` up to `perProcess` requests served by each of its processes.
    const catchUp = async (side, perProcess) => {
      const missing = perProcess * side.processes - side.served
      if (missing >= 32) await load(side, { amount: Math.round(missing) })
    }
    const sides = { one, pinned: pinnedW, free: freeW, ...Object.fromEntries(curve) }
    const keys = Object.keys(sides)
    const byKey = () => Object.fromEntries(keys.map((key) => [key, []]))
    const runs = {
      ...byKey(),
      cpuUs: byKey(),
      loadCpuUs: byKey(),
      ceiling: [],
      cpuUsByProcess: byKey(),
      connectionsByProcess: byKey(),
      servedPerProcess: null,
      // The sides of the curve (N from 3), each with its ceiling by round.
      curve: curve.map(([key, side]) => ({ processes: side.processes, key, ceiling: [] }))
    }
    const warmupSlices = Math.max(1, Math.round(MODE.workersWarmupS / MODE.workersRoundS))
    for (let i = 0; i < warmupSlices + MODE.extraRounds; i++) {
      const measured = i >= warmupSlices
      // Every gateway starts its run of this round with as many requests per process as the one
      // furthest ahead (usually the one process; the free workers when they serve faster).
      const mark = Math.max(...Object.values(sides).map((side) => side.served / side.processes))
      const results = {}
      for (const [key, side] of Object.entries(sides)) {
        await catchUp(side, mark)
        results[key] = await timed(side)
      }
      if (measured)
        for (const [key, r] of Object.entries(results)) {
          runs[key].push(r.rps)
          runs.cpuUs[key].push(r.cpuUs)
          runs.loadCpuUs[key].push(r.loadCpuUs)
          runs.cpuUsByProcess[key].push(r.cpuUsByProcess)
          runs.connectionsByProcess[key].push(r.connectionsByProcess)
        }
      // The cores the free sides are given (bench/lib/proc.mjs `spawnChild`: taskset 0-(cpus - 1));
      // the load's (this process and the mock) is CORE_LOAD alone when the bench pins.
      const ceilingOf = (key, processes) =>
        freeCeiling({
          cores: os.cpus().length,
          loadCores: pin ? 1 : os.cpus().length,
          processes,
          oneRps: results.one.rps,
          freeCpuUs: results[key].cpuUs,
          loadCpuUs: results[key].loadCpuUs
        })
      if (measured) {
        runs.ceiling.push(ceilingOf("free", freeW.processes))
        for (const point of runs.curve) point.ceiling.push(ceilingOf(point.key, point.processes))
      }
    }
    runs.servedPerProcess = Object.fromEntries(Object.entries(sides).map(([key, side]) => [key, Math.round(side.served / side.processes)]))
    return runs
  })
  for (const g of started) await g.proc?.stop("SIGTERM", 15_000)
  if (!workers.error) {
    const us = (xs) => xs.map((v) => (v == null ? "?" : v.toFixed(0))).join(", ")
    log(
      `workers: one process ${workers.one.map((v) => v.toFixed(0)).join(", ")}; --workers 2 pinned apart ${workers.pinned.map((v) => v.toFixed(0)).join(", ")}; on every core ${workers.free.map((v) => v.toFixed(0)).join(", ")} req/s`
    )
    log(
      `workers: CPU µs a request (all processes): one process ${us(workers.cpuUs.one)}; pinned apart ${us(workers.cpuUs.pinned)}; on every core ${us(workers.cpuUs.free)}; requests served per process ${JSON.stringify(workers.servedPerProcess)}`
    )
    log(
      `workers: the load's CPU µs a request (autocannon and the mock) beside the free workers ${us(workers.loadCpuUs.free)}; the most every core allows them ${workers.ceiling.map((v) => (v == null ? "?" : `${v.toFixed(2)}×`)).join(", ")} one process`
    )
    // Per round, primary + workers: CPU "1 + 95 + 97" µs a request, connections held "0/16/16".
    for (const { processes, key, ceiling } of workers.curve)
      log(
        `workers: --workers ${processes} on every core ${workers[key].map((v) => v.toFixed(0)).join(", ")} req/s; CPU µs a request ${us(workers.cpuUs[key])}; the load's beside it ${us(workers.loadCpuUs[key])}; the most the cores allow ${ceiling.map((v) => (v == null ? "?" : `${v.toFixed(2)}×`)).join(", ")} one process`
      )
    for (const key of ["pinned", "free", ...workers.curve.map((p) => p.key)])
      log(
        `workers: ${key === "pinned" ? "pinned apart" : key === "free" ? "on every core" : `--workers ${key.slice(4)} on every core`}, primary + workers: CPU µs a request ${workers.cpuUsByProcess[key].map((xs) => us(xs).replaceAll(", ", " + ")).join("; ")}; connections held ${workers.connectionsByProcess[key].map((xs) => (xs == null ? "?" : xs.join("/"))).join(", ")}`
      )
  }
}

/**
 * The gateway's memory as its GET /metrics reports it (docs/observability.md): V8's heap used (all
 * spaces; the old space apart) and resident, and the external memory; a figure the answer lacks is
 * undefined. Undefined if it does not answer.
 */
const gatewayMemory = async (x) => {
  try {
    const res = await fetch(`${x.baseUrl}/metrics`, { headers: x.adminHeaders, signal: AbortSignal.timeout(5_000) })
    if (!res.ok) {
      await res.body?.cancel()
      return undefined
    }
    const text = await res.text()
    const sum = (name, space) => {
      let total
      for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, "gm")))
        if (space === undefined || (m[1] ?? "").includes(`v8js_heap_space_name="${space}"`)) total = (total ?? 0) + Number(m[2])
      return total
    }
    return {
      heapUsedBytes: sum("v8js_memory_heap_used"),
      oldSpaceUsedBytes: sum("v8js_memory_heap_used", "old_space"),
      heapResidentBytes: sum("v8js_memory_heap_space_physical_size"),
      externalBytes: sum("gateway_memory_external")
    }
  } catch {
    return undefined
  }
}

/** Megabytes with `digits` decimals, or – for a figure missing. */
const mbText = (bytes, digits = 1) => (bytes == null ? "–" : mb(bytes).toFixed(digits))

// Soak: the gateway under steady c=32 JSON load, RSS every second (logged every 30 s).
let soak = null
if (want("soak") && ready("gateway") && checkAlive("gateway")) {
  const x = t("gateway")
  const durationS = Math.round(flags.soakMinutes * 60)
  log(`soak: ${durationS} s of c=32 JSON 1 KB against the gateway, RSS every second`)
  soak = await safe("soak", async () => {
    // A first scrape before the soak: the metrics' exporter loads at the first one, which would
    // otherwise step the RSS inside a short soak's first window.
    await gatewayMemory(x)
    const samples = [{ t: 0, rssBytes: rssBytes(x.pid) }]
    const everySecond = []
    /** The memory readings on their way (awaited before the soak's figures are taken). */
    const readings = []
    /** Reads the gateway's memory figures into sample `s`, logged with its RSS. */
    const readMemory = (s) =>
      readings.push(
        gatewayMemory(x)
          .then((m) => {
            Object.assign(s, m)
            log(
              `soak ${s.t} s: RSS ${mbText(s.rssBytes)} MB` +
                (m
                  ? `; V8 heap used ${mbText(m.heapUsedBytes)} (old space ${mbText(m.oldSpaceUsedBytes)}), resident ${mbText(m.heapResidentBytes)}, external ${mbText(m.externalBytes)} MB`
                  : "")
            )
          })
          .catch(() => undefined)
      )
    const cpu0 = cpuSnapshot()
    const t0 = performance.now()
    const timer = setInterval(() => {
      const s = { t: Math.round((performance.now() - t0) / 1000), rssBytes: rssBytes(x.pid) }
      if (s.rssBytes == null) return
      everySecond.push(s)
      if (s.t % 30 === 0 && samples[samples.length - 1].t !== s.t) {
        samples.push(s)
        // The gateway's own reading of where its memory is (GET /metrics: V8's heap, what Buffers
        // hold outside it), so a growth shows as the heap's or as memory held elsewhere.
        readMemory(s)
      }
    }, 1_000)
    const res = await throughputRun(x.chatUrl, { ...jsonReq(x, "1k"), connections: 32, durationS })
    clearInterval(timer)
    const final = { t: Math.round((performance.now() - t0) / 1000), rssBytes: rssBytes(x.pid) }
    if (final.t - samples[samples.length - 1].t < 5) samples[samples.length - 1] = final
    else samples.push(final)
    readMemory(final)
    await Promise.all(readings)
    // Warm-in: the first 2 minutes (at most a fifth of the soak) fill pools, caches and the heap.
    // Under load the heap is a sawtooth: RSS rises by up to ~100 MB between major collections,
    // a minute or two apart, so a reading taken at a given second says where in the tooth it
    // fell, not whether memory grows (two runs of one build read -10% and +13% from the median
    // of 3 readings 30 s apart). What a leak raises is the trough, what survives the collections:
    // growth = the lowest RSS of the last window − the lowest of the first window after the
    // warm-in, each window a fifth of the rest of the soak (at least a minute, so each holds a
    // collection). The readings' old figure (median of the last 3 − median of the first 3 after
    // the warm-in) is still reported, and the slope is fitted over every second after the warm-in.
    const warmS = Math.min(120, durationS / 5)
    const later = samples.filter((s) => s.t >= warmS && s.rssBytes != null)
    const med3 = (xs) => xs.map((s) => s.rssBytes).sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]
    const windowS = Math.max(60, (durationS - warmS) / 5)
    const lowest = (from, to) => Math.min(...everySecond.filter((s) => s.t >= from && s.t < to).map((s) => s.rssBytes))
    const base = lowest(warmS, warmS + windowS)
    const end = lowest(durationS - windowS, durationS + 1)
    const growth = end - base
    const fc = r2(foreignSince(cpu0))
    noteForeign(fc)
    return {
      durationS,
      rps: res.rps,
      non2xx: res.non2xx,
      errors: res.errors,
      samples,
      warmInS: warmS,
      windowS,
      baselineBytes: base,
      endBytes: end,
      growthBytes: growth,
      growthPct: (100 * growth) / base,
      readingsGrowthBytes: med3(later.slice(-3)) - med3(later.slice(0, 3)),
      slopeMbPerMin: slope(everySecond.filter((s) => s.t >= warmS).map((s) => [s.t / 60, mb(s.rssBytes)])),
      foreignCpu: fc,
      pass: growth <= 0.05 * base
    }
  })
}

/** The gateway's own memory readings of the soak (V8's heap used, the old space's, external), as a sentence; empty without them. */
const soakMemory = (run) => {
  const read = run.samples.filter((s) => s.heapUsedBytes != null)
  if (read.length === 0) return ""
  const at = (s) =>
    `${s.t}s ${mbText(s.heapUsedBytes, 0)}/${mbText(s.oldSpaceUsedBytes, 0)}/${mbText(s.heapResidentBytes, 0)}/${mbText(s.externalBytes)}`
  return ` The gateway's own readings (GET /metrics; V8 heap used / old space used / heap resident / external, MB): ${read.map(at).join(", ")}.`
}

const runForeign = foreignSince(runCpu)

// Profile: a second gateway under --cpu-prof per load (JSON c=32; the burst stream, same format;
// the three translated pairs), SIGTERM, top self time of each.
const PROFILES = [
  { label: "json", name: "c=32 JSON 1 KB", request: (g) => ({ url: g.chatUrl, ...jsonReq(g, "1k") }) },
  {
    label: "sse",
    name: "c=32 SSE burst, same format",
    request: (g) => ({ url: g.chatUrl, headers: g.headers, body: streamBody(g.model("sse-burst")) })
  },
  { label: "translated", name: "c=32 SSE burst, messages client → chat upstream", request: (g) => translatedRequest(g, "messages_chat") },
  {
    label: "translated-responses",
    name: "c=32 SSE burst, responses client → messages upstream",
    translation: true,
    request: (g) => translatedRequest(g, "responses_messages")
  },
  {
    label: "translated-generate",
    name: "c=32 SSE burst, chat client → generate-content upstream",
    translation: true,
    request: (g) => translatedRequest(g, "chat_generate")
  }
]
let profile = null
let profiles = null
if (want("profile") && flags.targets.includes("gateway")) {
  profiles = []
  for (const kind of PROFILES) {
    const one = await safe(`profile ${kind.label}`, async () => {
      const dir = path.join(BENCH_DIR, "results", "profiles")
      mkdirSync(dir, { recursive: true })
      const g = await startGateway({
        rootDir: ROOT,
        core: CORE_TARGET,
        prepCore: CORE_LOAD,
        pin,
        mock: t("direct"),
        extraNodeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`],
        name: "gateway-profiled",
        env: flags.gatewayEnv
      })
      if (!g.ok) throw new Error(g.error)
      if (kind.translation) await addTranslationProviders(g, t("direct"))
      log(`profile: gateway pid ${g.pid} under --cpu-prof, ${kind.name} for ${MODE.profileS} s`)
      const q = kind.request(g)
      // A short warm-up first, so the profile is the steady state more than the JIT.
      await throughputRun(q.url, { headers: q.headers, body: q.body, connections: 32, durationS: Math.min(2, MODE.profileS / 3) })
      const res = await throughputRun(q.url, { headers: q.headers, body: q.body, connections: 32, durationS: MODE.profileS })
      const exit = await g.proc.stop("SIGTERM", 30_000)
      const file = readdirSync(dir)
        .filter((f) => f.endsWith(".cpuprofile") && f.includes(`.${g.pid}.`))
        .map((f) => path.join(dir, f))[0]
      if (!file) throw new Error(`no .cpuprofile for pid ${g.pid} in ${dir} (exit ${exit.code ?? exit.signal})`)
      const top = topSelf(file, { limit: 25, root: ROOT })
      return { kind: kind.label, load: kind.name, file: path.relative(ROOT, file), durationS: MODE.profileS, rps: res.rps, exit, ...top }
    })
    profiles.push(one.error ? { kind: kind.label, load: kind.name, error: one.error } : one)
  }
  profile = profiles[0]
}

// ---------------------------------------------------------------------------------------------
// Stop everything, then aggregate and report.

log("stopping the targets")
await cleanup(15_000)

const metric = (extract) => {
  const out = {}
  for (const name of ALL_TARGETS) {
    const vals = rounds.map((rd) => (rd[name] ? extract(rd[name]) : null))
    if (vals.some((v) => v != null)) out[name] = acrossRounds(vals)
  }
  return out
}
// Per round: target minus direct in the same round, then median across rounds.
const added = (extract) => {
  const out = {}
  for (const name of ALL_TARGETS) {
    if (name === "direct") continue
    const vals = rounds.map((rd) => {
      const a = rd[name] ? extract(rd[name]) : null
      const d = rd.direct ? extract(rd.direct) : null
      return a == null || d == null ? null : a - d
    })
    if (vals.some((v) => v != null)) out[name] = acrossRounds(vals)
  }
  return out
}
const single = (byTarget, f = (v) => v) => {
  const out = {}
  for (const [k, v] of Object.entries(byTarget)) if (flags.targets.includes(k) && v != null && f(v) != null) out[k] = acrossRounds([f(v)])
  return out
}
/** The target's CPU µs per answered request of a throughput run, when its CPU time was read. */
const cpuPer = (run) => (run?.ok > 0 && typeof run.cpuS === "number" ? (1e6 * run.cpuS) / run.ok : null)
const val = (o, k) => (o && typeof o[k] === "number" && Number.isFinite(o[k]) ? o[k] : null)

const M = {
  "latency.p50": metric((x) => val(x.latency, "p50")),
  "latency.p99": metric((x) => val(x.latency, "p99")),
  "latency.p50.added": added((x) => val(x.latency, "p50")),
  "latency.p99.added": added((x) => val(x.latency, "p99")),
  ...Object.fromEntries(THROUGHPUT.map(([label]) => [`throughput.${label}`, metric((x) => (x[label]?.ok ? x[label].rps : null))])),
  "sse.ttft.p50": metric((x) => val(x.sse, "ttftP50")),
  "sse.ttft.p50.added": added((x) => val(x.sse, "ttftP50")),
  "sse.gap.p99": metric((x) => val(x.sse, "gapP99")),
  "sse.gap.p99.added": added((x) => val(x.sse, "gapP99")),
  "sse.burst.c32": metric((x) => (x.burst?.ok ? x.burst.rps : null)),
  "throughput.c32_1k.cpuUs": metric((x) => cpuPer(x.c32_1k)),
  "alloc.c32_1k.kbPerRequest": metric((x) => (x.c32_1k?.alloc?.bytesPerRequest == null ? null : x.c32_1k.alloc.bytesPerRequest / 1024)),
  "alloc.c32_1k.otherThreadsKbPerRequest": metric((x) =>
    x.c32_1k?.alloc?.otherThreadBytesPerRequest == null ? null : x.c32_1k.alloc.otherThreadBytesPerRequest / 1024
  ),
  "alloc.c32_1k.gcUsPerRequest": metric((x) => x.c32_1k?.alloc?.gcUsPerRequest ?? null),
  "sse.burst.c32.cpuUs": metric((x) => cpuPer(x.burst)),
  "sse.burst.c32.cpuUsPerChunk": metric((x) => (cpuPer(x.burst) == null ? null : cpuPer(x.burst) / CHUNKS)),
  ...Object.fromEntries(
    TRANSLATED.flatMap(({ label }) => [
      [`translated.${label}`, metric((x) => (x[`tr_${label}`]?.ok ? x[`tr_${label}`].rps : null))],
      [`translated.${label}.cpuUsPerChunk`, metric((x) => (cpuPer(x[`tr_${label}`]) == null ? null : cpuPer(x[`tr_${label}`]) / CHUNKS))]
    ])
  ),
  "streams.rssPer1000MB": single(streams, (s) => mb(s.rssPer1000StreamsBytes)),
  "streams.maxGapMs": single(streams, (s) => s.maxGapMs),
  "rss.idleMB": single(rssIdle, mb),
  "rss.afterLoadMB": single(rssAfterLoad, mb),
  "rss.peakDuringLoadMB": single(peakLoadRss, mb),
  "startup.ms": Object.fromEntries(
    Object.entries(startSamples)
      .filter(([n]) => flags.targets.includes(n))
      .map(([n, v]) => [n, acrossRounds(v)])
  )
}
const ext = (runs, f) => (runs && !runs.error ? acrossRounds(runs.runs.map(f)) : null)
const fb = { rps: ext(fallback, (r) => r.c32.rps), p50: ext(fallback, (r) => r.latency.p50) }
const ch = { rps: ext(cache, (r) => r.c32.rps), p50: ext(cache, (r) => r.latency.p50) }
const sh =
  shadowRun && !shadowRun.error
    ? {
        plainP50: acrossRounds(shadowRun.plain.map((r) => r.latency.p50)),
        shadowP50: acrossRounds(shadowRun.shadowed.map((r) => r.latency.p50)),
        plainP99: acrossRounds(shadowRun.plain.map((r) => r.latency.p99)),
        shadowP99: acrossRounds(shadowRun.shadowed.map((r) => r.latency.p99)),
        plainRps: acrossRounds(shadowRun.plain.map((r) => r.c32.rps)),
        shadowRps: acrossRounds(shadowRun.shadowed.map((r) => r.c32.rps))
      }
    : null
const countChecks = (runs, want) => {
  if (!runs || runs.error) return null
  let good = 0
  let all = 0
  let non2xx = 0
  for (const r of runs.runs) {
    for (const [k, n] of Object.entries(r.latency.checks)) {
      all += n
      if (k === want) good += n
    }
    non2xx += r.c32.non2xx + r.c32.errors + r.latency.errors
  }
  return { good, all, non2xx }
}
const fmtRange = (a) => `${a.median.toFixed(0)} (${a.min.toFixed(0)}–${a.max.toFixed(0)})`
const wk =
  workers && !workers.error
    ? {
        one: acrossRounds(workers.one),
        pinned: acrossRounds(workers.pinned),
        free: acrossRounds(workers.free),
        cpuUs: Object.fromEntries(["one", "pinned", "free"].map((k) => [k, acrossRounds(workers.cpuUs[k])])),
        ceiling: acrossRounds(workers.ceiling),
        // `--workers N` on every core, N from 3 to --workers-max (N = 2 is the free row).
        curve: workers.curve.map(({ processes, key, ceiling }) => ({
          processes,
          rps: acrossRounds(workers[key]),
          cpuUs: acrossRounds(workers.cpuUs[key]),
          ceiling: acrossRounds(ceiling)
        }))
      }
    : null
const fbChecks = countChecks(fallback, "attempts=1")
const chChecks = countChecks(cache, "cache=HIT")

// Pass / fail against the issue's targets (gateway only; never asserted in the test suite).
const gwm = (k) => M[k]?.gateway?.median ?? null
const rt = (k, other) => ratio(gwm(k), M[k]?.[other]?.median)
const both = (...conds) => {
  const known = conds.filter((c) => c != null)
  return known.length === 0 ? null : known.every(Boolean)
}
// The floor's median of a metric (for targets stated against the floor's own figure).
const fm = (k) => M[k]?.floor?.median ?? null
const atMost = (v, limit) => (v == null || limit == null ? null : v <= limit)
const atLeast = (v, limit) => (v == null || limit == null ? null : v >= limit)
const check = {
  addedP50: atMost(gwm("latency.p50.added"), fm("latency.p50.added") == null ? null : fm("latency.p50.added") + 0.2),
  addedP99: atMost(gwm("latency.p99.added"), 1),
  ...Object.fromEntries(
    THROUGHPUT.map(([label]) => {
      const f = rt(`throughput.${label}`, "floor")
      // Another build in the peer's place (--peer-gateway): not the peer the target is set against.
      const p = flags.peerGateway ? null : rt(`throughput.${label}`, "peer")
      return [`throughput.${label}`, both(f == null ? null : f >= 0.5, p == null ? null : p >= 5)]
    })
  ),
  cpuPerRequest: atMost(rt("throughput.c32_1k.cpuUs", "floor"), 2),
  sseThroughput: atLeast(rt("sse.burst.c32", "floor"), 0.5),
  sseCpu: atMost(rt("sse.burst.c32.cpuUs", "floor"), 2),
  ...Object.fromEntries(
    TRANSLATED.flatMap(({ label }) => [
      [`translated.${label}`, atLeast(rt(`translated.${label}`, "floor"), 0.4)],
      [`translated.${label}.cpu`, atMost(rt(`translated.${label}.cpuUsPerChunk`, "floor"), 3)]
    ])
  ),
  allocPerRequest: atMost(gwm("alloc.c32_1k.kbPerRequest"), 30),
  addedTtft: atMost(gwm("sse.ttft.p50.added"), fm("sse.ttft.p50.added") == null ? null : fm("sse.ttft.p50.added") + 0.3),
  rssIdle: atMost(gwm("rss.idleMB"), 120),
  rssAfterLoad: atMost(gwm("rss.afterLoadMB"), 250),
  startup: atMost(gwm("startup.ms"), 500),
  streams:
    streams.gateway && !streams.gateway.error
      ? streams.gateway.pass && (fm("streams.maxGapMs") == null || gwm("streams.maxGapMs") <= 1.5 * fm("streams.maxGapMs"))
      : null,
  workersPinned: wk ? wk.pinned.median / wk.one.median >= 0.95 : null,
  workersFree: wk ? wk.free.median / wk.one.median >= 1.3 : null,
  soak: soak && !soak.error ? soak.pass : want("soak") ? null : "n/a",
  fallbackHeader: fbChecks ? fbChecks.good === fbChecks.all && fbChecks.all > 0 && fbChecks.non2xx === 0 : null,
  cacheHit: chChecks ? chChecks.good === chChecks.all && chChecks.all > 0 && chChecks.non2xx === 0 : null
}

const status = Object.fromEntries(
  ALL_TARGETS.map((n) => {
    const x = targets[n]
    if (!flags.targets.includes(n)) return [n, "not selected"]
    if (!x) return [n, "not started"]
    if (x.ok) return [n, "ok"]
    return [n, x.startupMs == null ? "failed to start" : "FAILED"]
  })
)
const ms = (v) => (v == null ? "–" : v.toFixed(1))
const rows = [
  { label: "status", text: status },
  { section: "Latency, c=1, JSON 1 KB (ms)" },
  { label: "p50", values: M["latency.p50"], ratios: gatewayRatios(M["latency.p50"]) },
  {
    label: "added p50 (target − direct)",
    values: M["latency.p50.added"],
    ratios: gatewayRatios(M["latency.p50.added"], M["latency.p50.added"], { added: true }),
    target: "≤ floor + 0.2 ms",
    pass: check.addedP50
  },
  { label: "p99", values: M["latency.p99"], ratios: gatewayRatios(M["latency.p99"]) },
  {
    label: "added p99 (target − direct)",
    values: M["latency.p99.added"],
    ratios: gatewayRatios(M["latency.p99.added"], M["latency.p99.added"], { added: true }),
    target: "≤ 1 ms",
    pass: check.addedP99
  },
  { section: "Throughput (req/s)" },
  ...THROUGHPUT.map(([label, c, size]) => ({
    label: `c=${c}, JSON ${size === "1k" ? "1 KB" : "10 KB"}`,
    values: M[`throughput.${label}`],
    ratios: gatewayRatios(M[`throughput.${label}`]),
    target: "≥ 0.5× floor, ≥ 5× peer",
    pass: check[`throughput.${label}`]
  })),
  {
    label: "CPU µs per request, c=32, JSON 1 KB (the target process's own; lower is better)",
    values: M["throughput.c32_1k.cpuUs"],
    ratios: gatewayRatios(M["throughput.c32_1k.cpuUs"]),
    target: "≤ 2× floor",
    pass: check.cpuPerRequest
  },
  {
    label: "bytes allocated per request, c=32, JSON 1 KB (KB, the target's JS heap; lower is better)",
    values: M["alloc.c32_1k.kbPerRequest"],
    ratios: gatewayRatios(M["alloc.c32_1k.kbPerRequest"]),
    target: "≤ 30 KB",
    pass: check.allocPerRequest
  },
  ...(Object.keys(M["alloc.c32_1k.otherThreadsKbPerRequest"]).length
    ? [
        {
          label: "… and on the target's worker threads (KB per request)",
          values: M["alloc.c32_1k.otherThreadsKbPerRequest"],
          ratios: gatewayRatios(M["alloc.c32_1k.otherThreadsKbPerRequest"])
        }
      ]
    : []),
  { section: "Streaming (SSE)" },
  { label: "TTFT p50, paced (ms)", values: M["sse.ttft.p50"], ratios: gatewayRatios(M["sse.ttft.p50"]) },
  {
    label: "added TTFT p50 (ms)",
    values: M["sse.ttft.p50.added"],
    ratios: gatewayRatios(M["sse.ttft.p50.added"], M["sse.ttft.p50.added"], { added: true }),
    target: "≤ floor + 0.3 ms",
    pass: check.addedTtft
  },
  { label: "p99 inter-chunk gap, paced 20 ms (ms)", values: M["sse.gap.p99"], ratios: gatewayRatios(M["sse.gap.p99"]) },
  {
    label: "added p99 gap (ms)",
    values: M["sse.gap.p99.added"],
    ratios: gatewayRatios(M["sse.gap.p99.added"], M["sse.gap.p99.added"], { added: true })
  },
  {
    label: "streams/s, c=32, burst",
    values: M["sse.burst.c32"],
    ratios: gatewayRatios(M["sse.burst.c32"]),
    target: "≥ 0.5× floor",
    pass: check.sseThroughput
  },
  {
    label: "CPU µs per burst stream, c=32 (the target process's own; lower is better)",
    values: M["sse.burst.c32.cpuUs"],
    ratios: gatewayRatios(M["sse.burst.c32.cpuUs"]),
    target: "≤ 2× floor",
    pass: check.sseCpu
  },
  {
    label: `CPU µs per streamed chunk (burst ÷ ${CHUNKS})`,
    values: M["sse.burst.c32.cpuUsPerChunk"],
    ratios: gatewayRatios(M["sse.burst.c32.cpuUsPerChunk"])
  },
  { section: "Translated streams (burst of 64 chunks, c=32; direct and floor carry the upstream's own stream)" },
  ...TRANSLATED.flatMap(({ label, name }) => [
    {
      label: `${name}: streams/s`,
      values: M[`translated.${label}`],
      ratios: gatewayRatios(M[`translated.${label}`]),
      target: "≥ 0.4× floor",
      pass: check[`translated.${label}`]
    },
    {
      label: `${name}: CPU µs per chunk`,
      values: M[`translated.${label}.cpuUsPerChunk`],
      ratios: gatewayRatios(M[`translated.${label}.cpuUsPerChunk`]),
      target: "≤ 3× floor",
      pass: check[`translated.${label}.cpu`]
    }
  ]),
  { section: `${MODE.streams} concurrent paced streams` },
  {
    label: `complete / stalled (gap > ${GAP_LIMIT_MS} ms) / max gap, median of ${MODE.streamBursts} burst${MODE.streamBursts === 1 ? "" : "s"} (each)`,
    text: Object.fromEntries(
      Object.entries(streams).map(([n, s]) => [
        n,
        s.error ? "error" : `${s.complete}/${s.n}, ${s.stalled}, ${ms(s.maxGapMs)} ms (${s.bursts.map((r) => ms(r.maxGapMs)).join(", ")})`
      ])
    ),
    target: `all ${MODE.streams} complete, none stalled, max gap ≤ 1.5× floor`,
    pass: check.streams
  },
  { label: "RSS per 1000 open streams (MB)", values: M["streams.rssPer1000MB"], ratios: gatewayRatios(M["streams.rssPer1000MB"]) },
  { section: "Memory (RSS, MB) and start" },
  { label: "idle, after start", values: M["rss.idleMB"], ratios: gatewayRatios(M["rss.idleMB"]), target: "≤ 120 MB", pass: check.rssIdle },
  {
    label: "after the load runs",
    values: M["rss.afterLoadMB"],
    ratios: gatewayRatios(M["rss.afterLoadMB"]),
    target: "≤ 250 MB",
    pass: check.rssAfterLoad
  },
  {
    label: `growth over the ${flags.soakMinutes}-min soak`,
    text: {
      gateway: soak ? (soak.error ? "error" : `${mb(soak.growthBytes).toFixed(1)} MB (${soak.growthPct.toFixed(1)}%)`) : "not run (--soak)"
    },
    target: "no growth (≤ 5%)",
    pass: check.soak
  },
  {
    label:
      MODE.startRuns > 1 ? `spawn → first 200 (ms), median of each target's starts (${MODE.startRuns} a target)` : "spawn → first 200 (ms)",
    values: M["startup.ms"],
    ratios: gatewayRatios(M["startup.ms"]),
    target: "≤ 500 ms",
    pass: check.startup
  },
  { section: "Gateway only" },
  {
    label: "fallback (503, then success): req/s c=32",
    values: fb.rps ? { gateway: fb.rps } : {},
    ratios: gatewayRatios({ gateway: fb.rps }, M["throughput.c32_1k"]),
    target: "X-Gateway-Fallback-Attempts: 1 on every answer",
    pass: check.fallbackHeader
  },
  {
    label: "fallback: p50 c=1 (ms)",
    values: fb.p50 ? { gateway: fb.p50 } : {},
    ratios: gatewayRatios({ gateway: fb.p50 }, M["latency.p50"])
  },
  {
    label: "cache hit (temperature 0): req/s c=32",
    values: ch.rps ? { gateway: ch.rps } : {},
    ratios: gatewayRatios({ gateway: ch.rps }, M["throughput.c32_1k"]),
    target: "X-Gateway-Cache: HIT on every answer",
    pass: check.cacheHit
  },
  {
    label: "cache hit: p50 c=1 (ms)",
    values: ch.p50 ? { gateway: ch.p50 } : {},
    ratios: gatewayRatios({ gateway: ch.p50 }, M["latency.p50"])
  },
  {
    label: "shadow target on 1 request in 10: p50 / p99 c=1 (ms), ÷ the same combo without",
    text: {
      gateway: sh
        ? `${sh.shadowP50.median.toFixed(3)} / ${sh.shadowP99.median.toFixed(3)} (${(sh.shadowP50.median / sh.plainP50.median).toFixed(2)}× / ${(sh.shadowP99.median / sh.plainP99.median).toFixed(2)}×; without ${sh.plainP50.median.toFixed(3)} / ${sh.plainP99.median.toFixed(3)})`
        : "not run"
    },
    target: "pairs gathered, the primary within noise",
    pass: sh ? shadowRun.pairs > 0 : null
  },
  {
    label: "shadow target on 1 request in 10: req/s c=32, ÷ the same combo without",
    text: {
      gateway: sh
        ? `${sh.shadowRps.median.toFixed(0)} (${(sh.shadowRps.median / sh.plainRps.median).toFixed(2)}×; without ${sh.plainRps.median.toFixed(0)}); ${shadowRun.pairs} pairs`
        : "not run"
    }
  },
  { section: "`gateway --workers N` (c=32 JSON 1 KB, interleaved with the one-process gateway)" },
  { label: "one process: req/s", text: { gateway: wk ? fmtRange(wk.one) : "not run" } },
  {
    label: "--workers 2, load generator pinned apart: req/s (÷ one process)",
    text: { gateway: wk ? `${fmtRange(wk.pinned)} (${(wk.pinned.median / wk.one.median).toFixed(2)}×)` : "not run" },
    target: "≥ 0.95× one process",
    pass: check.workersPinned
  },
  {
    label: "--workers 2 on every core, sharing the load generator's: req/s (÷ one process)",
    text: { gateway: wk ? `${fmtRange(wk.free)} (${(wk.free.median / wk.one.median).toFixed(2)}×)` : "not run" },
    target: "≥ 1.3× one process",
    pass: check.workersFree
  },
  {
    label:
      "--workers 2 on every core: about the most the cores allow (an estimate: cores ÷ the CPU a request of the workers and of the load; the load's own core and the workers' cores bound too), ÷ one process",
    text: {
      gateway:
        wk?.ceiling?.median != null
          ? `${wk.ceiling.median.toFixed(2)}× (${wk.ceiling.min.toFixed(2)}–${wk.ceiling.max.toFixed(2)})`
          : "not run"
    }
  },
  ...(wk?.curve ?? []).map((p) => ({
    label: `--workers ${p.processes} on every core: req/s (÷ one process); CPU µs a request; about the most the cores allow, ÷ one process`,
    text: {
      gateway: `${fmtRange(p.rps)} (${(p.rps.median / wk.one.median).toFixed(2)}×); ${p.cpuUs.median?.toFixed(0) ?? "?"} µs; ${p.ceiling.median?.toFixed(2) ?? "?"}×`
    }
  })),
  {
    label: "CPU µs a request, all processes summed: one process / pinned apart / on every core",
    text: { gateway: wk?.cpuUs ? ["one", "pinned", "free"].map((k) => wk.cpuUs[k].median?.toFixed(0) ?? "?").join(" / ") : "not run" }
  }
]

const totalS = (performance.now() - T_START) / 1000
const table = markdownTable(rows)

const failed = Object.entries(targets)
  .filter(([, x]) => x.error)
  .map(([n, x]) => `- ${n}: ${x.error.split("\n")[0].slice(0, 400)}`)
const out = []
out.push(`## Gateway benchmark (${MODE.name} mode)`)
out.push("")
out.push(
  `${machine.cpu}, ${machine.cores} cores, ${(machine.totalMemoryBytes / 2 ** 30).toFixed(1)} GiB, Node ${machine.node}, ${machine.kernel}; gateway ${versions.gateway.version} at ${versions.gateway.commit?.slice(0, 12) ?? "?"}${versions.gateway.uncommittedChanges ? " (with uncommitted changes)" : ""}; peer ${flags.peerGateway ? `the gateway in ${flags.peerGateway} at ${versions.peer.version}` : `@portkey-ai/gateway ${versions.peer.version ?? "?"}`}; autocannon ${versions.autocannon ?? "?"}`
)
out.push("")
out.push(table)
out.push("")
out.push(
  `Cells: median of the round medians (min–max across ${MODE.rounds} interleaved round${MODE.rounds > 1 ? "s" : ""}: direct, floor, gateway, peer, repeated). "added" = target − direct in the same round. Ratios are the gateway's value ÷ the other target's, from the same run; for gateway-only rows the divisor is that target's plain JSON 1 KB figure (req/s at c=32, p50 at c=1).`
)
out.push(`Pinning: ${pinning}.`)
if (Object.keys(M["alloc.c32_1k.kbPerRequest"]).length)
  out.push(
    `Bytes allocated: the target's JS heap (main thread) over ${ALLOC_REQUESTS} c=32 JSON 1 KB requests after each round's c=32 JSON 1 KB slices (every answer awaited) plus ${ALLOC_SETTLE_MS} ms, from V8's used heap at the window's edges and before and after each GC (bench/alloc-probe.cjs, preloaded; Buffer contents outside the heap not included), ÷ the requests the target's HTTP server began in the window. Worker threads' heaps are counted apart.`
  )
out.push(
  `Gateway: production build (node bin/gateway), fresh DATA_DIR, usage logging on as shipped, LOG_LEVEL=warning (no per-request log lines are written); clients send an inference key from \`gateway keys add\`. ${flags.peerGateway ? `Peer: the gateway built in ${flags.peerGateway}, started as this one (--peer-gateway).` : `Peer: ${versions.peer.entry ?? "?"} --headless, routed by x-portkey-provider: openai + x-portkey-custom-host.`}`
)
out.push(
  `Durations: c=1 latency ${MODE.latencyMs / 1000} s, each throughput run ${MODE.throughputS} s, SSE ${MODE.sseConcurrency} concurrent paced streams (starts spread over ${MODE.sseSpreadMs} ms; new streams for ${MODE.sseMs / 1000} s, at least one per worker), burst ${MODE.burstS} s; warm-up ${MODE.warmupS} s per target (not measured).`
)
if (fallback && !fallback.error)
  out.push(
    `Fallback: combo \`fallback\` (priority: bad/fail-503 → openai-compatible/json-1k); the api-key breaker thresholds were raised and the connection cooldown and model lockout switched off for that run only (else the bad target is skipped after its first failures). Header check: ${fbChecks.good}/${fbChecks.all} answers with X-Gateway-Fallback-Attempts: 1, ${fbChecks.non2xx} non-2xx.`
  )
if (fallback?.error) out.push(`Fallback run failed: ${fallback.error}`)
if (cache && !cache.error)
  out.push(
    `Cache: ${chChecks.good}/${chChecks.all} c=1 answers with X-Gateway-Cache: HIT (first request: ${cache.first}), ${chChecks.non2xx} non-2xx.`
  )
if (cache?.error) out.push(`Cache run failed: ${cache.error}`)
if (shadowRun && !shadowRun.error)
  out.push(
    `Shadow: combos \`plain\` and \`shadowed\` (the same target; \`shadowed\` with config.shadow to that target at sampleRate ${SHADOW_SAMPLE_RATE}, shadowOptions.concurrency 4), interleaved per round. ${shadowRun.pairs} pairs gathered (${shadowRun.failed} failed), skipped ${JSON.stringify(shadowRun.skipped)}: shadow calls start only while no client request is in flight, so under c=32 most samples find no moment and no free slot, as designed.`
  )
if (shadowRun?.error) out.push(`Shadow run failed: ${shadowRun.error}`)
if (soak && !soak.error)
  out.push(
    `Soak: ${soak.durationS} s at c=32 (${soak.rps.toFixed(0)} req/s); RSS ${soak.samples.map((s) => `${s.t}s ${mb(s.rssBytes).toFixed(0)}`).join(", ")} MB; growth ${mb(soak.growthBytes).toFixed(1)} MB (the lowest RSS of the last ${soak.windowS} s − the lowest of the first ${soak.windowS} s after a ${soak.warmInS} s warm-in, sampled every second; the 30-s readings' median of the last 3 − of the first 3: ${mb(soak.readingsGrowthBytes).toFixed(1)} MB), slope ${soak.slopeMbPerMin == null ? "–" : soak.slopeMbPerMin.toFixed(2)} MB/min after the warm-in.${soakMemory(soak)}`
  )
if (failed.length) out.push(`Targets with problems:\n${failed.join("\n")}`)
const pct = (f) => (f == null ? "?" : `${(100 * f).toFixed(0)}%`)
out.push(
  `Background load: other processes used ${pct(runForeign)} of the machine's CPU during the measurements (worst single measurement ${pct(foreign.max)}; ${foreign.noisy} of ${foreign.measurements} measurements above 10%); load average ${loadStart.map((l) => l.toFixed(2)).join(" ")} at start, ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(
      " "
    )} at the end.${runForeign != null && runForeign > 0.1 ? " **The machine was busy with other work: treat these numbers as noisy and re-run on a quiet machine.**" : ""}`
)
for (const n of notes) out.push(`Note: ${n}`)
for (const p of profiles ?? []) {
  if (p.error) {
    out.push(`Profile (${p.load}) failed: ${p.error}`)
    continue
  }
  out.push("")
  out.push(`### CPU profile: gateway under ${p.load} for ${p.durationS} s (${p.rps.toFixed(0)} req/s under the profiler)`)
  out.push(`${p.file}; ${p.samples} samples, ${(p.totalMs / 1000).toFixed(1)} s profiled. Top 25 by self time:`)
  out.push("")
  out.push("| # | self ms | self % | function | location |")
  out.push("|---:|---:|---:|---|---|")
  p.top.forEach((f, i) =>
    out.push(
      `| ${i + 1} | ${f.selfMs.toFixed(0)} | ${f.selfPct.toFixed(1)} | ${f.name.replace(/\|/g, "\\|")} | ${f.url ? `${f.url}:${f.line}` : ""} |`
    )
  )
}

const stamp = new Date()
  .toISOString()
  .replace(/:/g, "-")
  .replace(/\.\d+Z$/, "Z")
const resultsDir = path.join(BENCH_DIR, "results")
mkdirSync(resultsDir, { recursive: true })
const file = path.join(resultsDir, `${stamp}.json`)
out.push("")
out.push(`Total run time: ${totalS.toFixed(1)} s (${(totalS / 60).toFixed(1)} min). Full results: ${path.relative(ROOT, file)}`)

const strip = (x) =>
  x
    ? { ok: x.ok, error: x.error, pid: x.pid, url: x.baseUrl, startupMs: r2(x.startupMs, 1), version: x.version, entry: x.entry }
    : undefined
const results = {
  schema: 1,
  startedAt: new Date(Date.now() - totalS * 1000).toISOString(),
  finishedAt: new Date().toISOString(),
  totalSeconds: r2(totalS, 1),
  mode: MODE,
  flags: { ...flags, only: flags.only ? [...flags.only] : null },
  machine,
  versions,
  pinning: { enabled: pin, description: pinning, targetCore: pin ? CORE_TARGET : null, loadCore: pin ? CORE_LOAD : null },
  config: {
    logLevel: "warning",
    usageLogging: "on (as shipped)",
    chunksPerStream: CHUNKS,
    paceMs: 20,
    gapLimitMs: GAP_LIMIT_MS,
    streams: MODE.streams,
    alloc: ALLOC
      ? {
          probe: "bench/alloc-probe.cjs (--require)",
          targets: Object.keys(probes),
          window: `${ALLOC_REQUESTS} c=32 JSON 1 KB requests after each round's c=32 JSON 1 KB slices, every answer awaited, + ${ALLOC_SETTLE_MS} ms`,
          perRequest:
            "bytes allocated on the main thread's JS heap ÷ requests begun by the target's HTTP server in the window (rounds[].<target>.c32_1k.alloc)"
        }
      : null
  },
  targets: Object.fromEntries(Object.entries(targets).map(([n, x]) => [n, strip(x)])),
  verification,
  metrics: M,
  ratios: Object.fromEntries(Object.entries(M).map(([k, v]) => [k, allRatios(v, { added: k.endsWith(".added") })])),
  checks: check,
  rounds,
  streams,
  rss: { idleBytes: rssIdle, afterLoadBytes: rssAfterLoad, peakDuringLoadBytes: peakLoadRss },
  fallback: fallback ? { ...fallback, summary: fb, headerChecks: fbChecks } : null,
  cache: cache ? { ...cache, summary: ch, headerChecks: chChecks } : null,
  shadow: shadowRun ? { ...shadowRun, summary: sh } : null,
  soak,
  workers: workers ? { ...workers, summary: wk } : null,
  profile,
  profiles,
  background: {
    foreignCpuShare: runForeign,
    worstMeasurement: foreign.max,
    noisyMeasurements: foreign.noisy,
    measurements: foreign.measurements,
    loadavgStart: loadStart,
    loadavgEnd: os.loadavg()
  },
  notes,
  table
}
writeFileSync(file, JSON.stringify(results, null, 2))
console.log(out.join("\n"))
process.exit(0)
