#!/usr/bin/env node
// `node bench/cli-startup.mjs [--runs N] [--compare <other bin/gateway>]`: how long `gateway`
// takes to answer commands that need no server, hyperfine-style. Each round runs, in turn, a
// `node -e 0` baseline (the cost of starting Node at all), @effect/cli's Command module loaded
// alone (the floor of any CLI built on it) and every command below, each as a fresh process in
// one temporary DATA_DIR (prepared by one unmeasured `keys list`, so the database exists); N
// rounds (default 15) after one warm-up round. Prints per command the median and min–max wall time,
// the median minus the baseline (what the gateway itself costs) and the ratio to the baseline,
// plus the modules the command loads (a deterministic figure: it moves only when the imports
// do, so it shows a regression that noisy timings hide). `--compare` adds the same commands run
// by another build (a checkout of an older commit, built) to the same rounds, labelled `(other)`.
// Needs `npm run build`.
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { median } from "./lib/stats.mjs"

const BENCH = path.dirname(fileURLToPath(import.meta.url))
const BIN = path.resolve(BENCH, "../bin/gateway")
const arg = (name, dflt) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt)
const runs = arg("--runs", 15)
const other = process.argv.includes("--compare") ? path.resolve(process.argv[process.argv.indexOf("--compare") + 1]) : undefined
const say = (m) => console.error(`[cli-startup] ${m}`)

const dataDir = mkdtempSync(path.join(os.tmpdir(), "cli-startup-"))
const env = {
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: dataDir,
  DATA_DIR: dataDir,
  GATEWAY_ENV_FILE: path.join(dataDir, ".env"),
  NO_COLOR: "1"
}

const COMMANDS = [["--version"], ["--help"], ["keys", "list", "--help"], ["env", "show"], ["keys", "list"]]
// The least any @effect/cli program can load: the library's Command module (resolved from the repo).
const FLOOR = `import(${JSON.stringify(path.resolve(BENCH, "../node_modules/@effect/cli/dist/esm/Command.js"))})`
const cases = [
  { label: "node -e 0 (baseline)", args: ["-e", "0"], baseline: true },
  { label: "@effect/cli's Command module alone (floor)", args: ["--input-type=module", "-e", FLOOR] },
  ...COMMANDS.flatMap((c) => [
    { label: `gateway ${c.join(" ")}`, args: [BIN, ...c] },
    ...(other ? [{ label: `gateway ${c.join(" ")} (other)`, args: [other, ...c] }] : [])
  ])
]

const once = (args, extraEnv = {}) => {
  const t = process.hrtime.bigint()
  const r = spawnSync(process.execPath, args, { env: { ...env, ...extraEnv }, encoding: "utf8" })
  const ms = Number(process.hrtime.bigint() - t) / 1e6
  if (r.status !== 0) throw new Error(`${args.join(" ")} exited ${r.status}: ${r.stderr}`)
  return { ms, stderr: r.stderr }
}

// Modules loaded: bench/lib/moduleTrace.mjs lists them.
const traceFile = path.join(dataDir, "modules.txt")
const modulesOf = (args) => {
  if (args[0] === "-e") return 0
  once(["--import", path.join(BENCH, "lib/moduleTrace.mjs"), ...args], { MODULE_TRACE_OUT: traceFile })
  return readFileSync(traceFile, "utf8")
    .split("\n")
    .filter((l) => l !== "").length
}

try {
  mkdirSync(dataDir, { recursive: true })
  once([BIN, "keys", "list"])
  if (other) say(`comparing with ${other}`)
  say(`warm-up, then ${runs} rounds of ${cases.length} commands (DATA_DIR ${dataDir})`)
  for (const c of cases) once(c.args)
  const times = cases.map(() => [])
  for (let r = 0; r < runs; r++) {
    cases.forEach((c, i) => times[i].push(once(c.args).ms))
    if ((r + 1) % 5 === 0) say(`round ${r + 1}/${runs}`)
  }
  const base = median(times[0])
  const rows = cases.map((c, i) => ({
    command: c.label,
    medianMs: median(times[i]),
    minMs: Math.min(...times[i]),
    maxMs: Math.max(...times[i]),
    overBaselineMs: median(times[i]) - base,
    ratio: median(times[i]) / base,
    modules: modulesOf(c.args)
  }))
  const f = (n) => n.toFixed(0)
  console.log(
    `Node ${process.version}, ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}, ${runs} rounds\n`
  )
  console.log("| Command | median ms (min–max) | over baseline | ÷ baseline | modules loaded |")
  console.log("|---|---|---|---|---|")
  for (const r of rows)
    console.log(
      `| \`${r.command}\` | ${f(r.medianMs)} (${f(r.minMs)}–${f(r.maxMs)}) | ${r.command.includes("baseline") ? "-" : f(r.overBaselineMs)} | ${r.ratio.toFixed(1)}× | ${r.modules || "-"} |`
    )
  const outDir = path.join(BENCH, "results")
  mkdirSync(outDir, { recursive: true })
  const file = path.join(outDir, `cli-startup-${new Date().toISOString().replace(/:/g, "-").replace(/\..*/, "Z")}.json`)
  writeFileSync(
    file,
    JSON.stringify(
      { node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), runs, other: other ?? null, rows, times },
      null,
      2
    )
  )
  say(`wrote ${path.relative(process.cwd(), file)}`)
} finally {
  rmSync(dataDir, { recursive: true, force: true })
}
