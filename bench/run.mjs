#!/usr/bin/env node
// `npm run bench [-- flags]`: makes a fresh clone benchmarkable with one command.
//  1. installs bench/'s own dependencies when bench/node_modules is missing
//     (npm install --prefix bench --no-audit --no-fund, from bench/package-lock.json);
//  2. builds the gateway (npm run build) when dist/ is missing or older than src/;
//  3. runs bench/harness.mjs with the flags, in its own process group with the open-file limit
//     raised to the hard limit; Ctrl-C is forwarded, and whatever it leaves behind is killed.
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { staleness } from "../scripts/build-stamp.mjs"

const BENCH = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(BENCH, "..")
const npm = process.platform === "win32" ? "npm.cmd" : "npm"
const say = (m) => console.error(`[bench] ${m}`)

const needInstall = ["autocannon", "@portkey-ai/gateway"].some((p) => !existsSync(path.join(BENCH, "node_modules", p, "package.json")))
if (needInstall) {
  say("installing bench/ dependencies: npm install --prefix bench --no-audit --no-fund")
  const r = spawnSync(npm, ["install", "--prefix", "bench", "--no-audit", "--no-fund"], { cwd: ROOT, stdio: "inherit" })
  if (r.status !== 0) {
    say(`npm install --prefix bench failed (${r.status ?? r.signal})`)
    process.exit(1)
  }
}

// The same rule as `npm start` (scripts/build-stamp.mjs): build when dist/ is missing or older than a source.
const stale = staleness(ROOT)
if (stale !== undefined) {
  say(`npm run build (${stale})`)
  let r = spawnSync(npm, ["run", "build"], { cwd: ROOT, stdio: "inherit" })
  // With dist/ deleted but tsc's incremental build info left behind, tsc believes everything is
  // emitted and writes nothing. Then build without it.
  if (r.status === 0 && !existsSync(path.join(ROOT, "dist/cli/main.js"))) {
    say("the build emitted no dist/cli/main.js (stale incremental build info): removed, npm run build again")
    rmSync(path.join(ROOT, "dist/.tsbuildinfo"), { force: true })
    r = spawnSync(npm, ["run", "build"], { cwd: ROOT, stdio: "inherit" })
  }
  if (r.status !== 0 || !existsSync(path.join(ROOT, "dist/cli/main.js"))) {
    if (existsSync(path.join(ROOT, "dist/cli/main.js")))
      say(`npm run build failed (${r.status ?? r.signal}); benchmarking the existing dist/ (older than src/)`)
    else {
      say(`npm run build failed (${r.status ?? r.signal}) and there is no dist/`)
      process.exit(1)
    }
  }
}

// The harness leads its own process group, so the group can be swept when it is done, and
// keeps its temporary data dirs under one directory that is removed here whatever happens.
const tmp = mkdtempSync(path.join(os.tmpdir(), "gateway-bench-run-"))
const child = spawn(
  "/bin/sh",
  [
    "-c",
    'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"',
    "sh",
    process.execPath,
    path.join(BENCH, "harness.mjs"),
    ...process.argv.slice(2)
  ],
  {
    cwd: ROOT,
    stdio: "inherit",
    detached: true,
    env: { ...process.env, BENCH_TMP_DIR: tmp }
  }
)
const sweep = () => {
  try {
    process.kill(-child.pid, "SIGKILL")
  } catch {}
  try {
    rmSync(tmp, { recursive: true, force: true })
  } catch {}
}
let signalled = null
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    signalled = sig
    try {
      child.kill(sig)
    } catch {}
    // If the harness does not finish its own cleanup in time, take the whole group down.
    setTimeout(sweep, 20_000).unref()
  })
}
child.on("exit", (code, signal) => {
  sweep()
  process.exit(code ?? (signalled === "SIGINT" || signal === "SIGINT" ? 130 : 1))
})
