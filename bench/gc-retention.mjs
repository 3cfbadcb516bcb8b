// What survives a scavenge. Each scenario runs for a few seconds in its own `node --trace-gc-nvp`
// process: one long-lived Effect fiber doing small units of work that each suspend once (a
// setImmediate, as a request waits for its upstream), and allocating ~7 KB of garbage per unit.
// The table gives, per scavenge, the bytes allocated, the bytes that survived it and the bytes
// promoted to the old generation. Garbage that is really garbage gives ~50 KB survivors per
// scavenge; a scenario far above that keeps objects alive past their use, which is what makes the
// gateway's scavenges long (docs/performance.md, "The latency tail").
//
//   node bench/gc-retention.mjs [--seconds 3] [scenario ...]
//
// Nothing is pinned and nothing listens: it needs only this repository's `effect`.
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { HELPER_SOURCE } from "../scripts/spread-rewrite.mjs"

const SCENARIOS = {
  "async (baseline)": "Effect.async((resume) => { setImmediate(() => { garbage(); resume(Effect.void) }) })",
  "Deferred.make + async": "Effect.flatMap(Deferred.make(), () => wait)",
  "Deferred.await (completed later)":
    "Effect.flatMap(Deferred.make(), (d) => Effect.zipRight(Effect.sync(() => setImmediate(() => { garbage(); Deferred.unsafeDone(d, Effect.void) })), Deferred.await(d)))",
  "fork + await": "Effect.flatMap(Effect.fork(Effect.sync(garbage)), (f) => f.await)",
  "{ ...obj, x } + async": "Effect.suspend(() => { keep = { ...plain, x: 1 }; return wait })",
  "Object.assign({}, obj, { x }) + async": "Effect.suspend(() => { keep = Object.assign({}, plain, { x: 1 }); return wait })",
  "{ ...obj } + async": "Effect.suspend(() => { keep = { ...plain }; return wait })",
  "__gatewayExtend(obj, { x }) + async (the bundle's rewrite)":
    "Effect.suspend(() => { keep = __gatewayExtend(plain, { x: 1 }); return wait })",
  // Not one long fiber: a root fiber per unit (Runtime.runFork, as the server runs each request).
  "runFork per unit + async": "wait",
  "runFork per unit, no async": "Effect.sync(garbage)"
}
const PER_UNIT_FIBER = new Set(["runFork per unit + async", "runFork per unit, no async"])

const args = process.argv.slice(2)
const child = args[0] === "--child"
if (child) {
  const { Effect, Deferred, Runtime } = await import("effect")
  const seconds = Number(args[2])
  const garbage = () => Array.from({ length: 100 }, (_, i) => ({ i, s: "x" + i })).length
  const plain = { a: 1, b: 2, c: 3 }
  const wait = Effect.async((resume) => {
    setImmediate(() => {
      garbage()
      resume(Effect.void)
    })
  })
  const body = new Function(
    "Effect",
    "Deferred",
    "garbage",
    "wait",
    "plain",
    `${HELPER_SOURCE}\nlet keep; return () => ${SCENARIOS[args[1]]}`
  )(Effect, Deferred, garbage, wait, plain)
  const end = Date.now() + seconds * 1000
  if (PER_UNIT_FIBER.has(args[1])) {
    const fork = Runtime.runFork(Runtime.defaultRuntime)
    const next = () => fork(body()).addObserver(() => (Date.now() < end ? setImmediate(next) : undefined))
    next()
  } else {
    Effect.runFork(Effect.whileLoop({ while: () => Date.now() < end, body, step: () => {} }))
  }
} else {
  const at = args.indexOf("--seconds")
  const seconds = at >= 0 ? Number(args[at + 1]) : 3
  const wanted = args.filter((a, i) => !a.startsWith("--") && args[i - 1] !== "--seconds")
  const names = wanted.length > 0 ? Object.keys(SCENARIOS).filter((n) => wanted.some((w) => n.includes(w))) : Object.keys(SCENARIOS)
  const self = fileURLToPath(import.meta.url)
  const rows = []
  for (const name of names) {
    const run = spawnSync(process.execPath, [...process.execArgv, "--trace-gc-nvp", self, "--child", name, String(seconds)], {
      encoding: "latin1",
      maxBuffer: 1 << 28
    })
    if (run.status !== 0) {
      console.error(`${name}: exited ${run.status}\n${run.stderr}`)
      process.exitCode = 1
      continue
    }
    const scavenges = run.stdout
      .split("\n")
      .filter((l) => l.includes("gc=s "))
      .slice(3)
      .map((l) => Object.fromEntries([...l.matchAll(/(\w[\w.]*)=([0-9.]+)/g)].map((m) => [m[1], Number(m[2])])))
    const avg = (k) => scavenges.reduce((a, r) => a + (r[k] ?? 0), 0) / Math.max(1, scavenges.length)
    const pauses = scavenges.map((r) => r.pause).sort((a, b) => a - b)
    rows.push([
      name,
      scavenges.length,
      (avg("allocated") / 1024).toFixed(0),
      (avg("new_space_survived") / 1024).toFixed(0),
      (avg("promoted") / 1024).toFixed(0),
      (pauses[Math.floor(pauses.length / 2)] ?? 0).toFixed(2)
    ])
  }
  console.log(`node ${process.version}, ${seconds} s per scenario; KB per scavenge\n`)
  console.log("| scenario | scavenges | allocated | survived | promoted | pause median ms |")
  console.log("|---|---:|---:|---:|---:|---:|")
  for (const r of rows) console.log(`| ${r.join(" | ")} |`)
}
