import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { helperThreads, parseHelperNice, startsProfiler, uvPoolSize } from "../bin/helper-threads.mjs"
import { firstCpu } from "./support/processes.js"
import { runCli, type ServerProcess, startServerProcess } from "./support/cli.js"

/**
 * bin/gateway on one CPU (`taskset`, a one-core container): the threads node starts before any
 * JavaScript (V8's workers for concurrent marking, sweeping and compiles, the scheduler of their
 * delayed tasks, the inspector's signal thread) run below the main thread, nice
 * GATEWAY_V8_HELPER_NICE (default 10); libuv's pool and the threads made later keep the main
 * thread's nice. Seen from outside: real gateway processes, each thread's nice read from /proc.
 */

/** [thread id, nice] of every thread of `pid`, in the order they were made (ids grow). */
const threads = (pid: number): Array<[number, number]> =>
  fs
    .readdirSync(`/proc/${pid}/task`)
    .map(Number)
    .sort((a, b) => a - b)
    .flatMap((tid) => {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
        return [[tid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16])] as [number, number]]
      } catch {
        return [] // ended meanwhile
      }
    })

/** The nice this process runs at (the suite may be run under `nice`): the gateways inherit it. */
const BASE = os.getPriority()

/**
 * The nice of each thread after the main one, as runs: e.g. "10x6 0x5" (six at 10, then five at the
 * main thread's nice, written 0).
 */
const runs = (pid: number): string => {
  const all = threads(pid)
  expect(all[0]).toEqual([pid, BASE])
  const out: Array<[number, number]> = []
  for (const [, raw] of all.slice(1)) {
    const nice = raw === BASE ? 0 : raw
    const last = out.at(-1)
    if (last && last[0] === nice) last[1]++
    else out.push([nice, 1])
  }
  return out.map(([nice, n]) => `${nice}x${n}`).join(" ")
}

const dirs: Array<string> = []
const servers: Array<ServerProcess> = []
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

const start = async (
  env: Record<string, string>,
  options: { readonly oneCpu: boolean; readonly nodeArgs?: ReadonlyArray<string>; readonly args?: ReadonlyArray<string> }
) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "helper-threads-"))
  dirs.push(dir)
  const s = await startServerProcess({ DATA_DIR: dir, HOME: dir, ...env }, options.args ?? [], {
    prefix: options.oneCpu ? ["taskset", "-c", String(firstCpu())] : [],
    nodeArgs: options.nodeArgs ?? [],
    startMs: 30_000
  })
  servers.push(s)
  expect((await fetch(`${s.url}/api/health/ping`)).status).toBe(200)
  return s
}

/** `n` runs at 10 then at least `pool` at 0, nothing else. */
const shape = (text: string, reniced: number, pool: number) => {
  const m = /^10x(\d+) 0x(\d+)$/.exec(text)
  expect(m, `thread nices after the main thread: ${text}`).not.toBeNull()
  expect(Number(m![1])).toBe(reniced)
  expect(Number(m![2])).toBeGreaterThanOrEqual(pool)
}

describe("which threads are node's start-up helpers (bin/helper-threads.mjs)", () => {
  it("reads UV_THREADPOOL_SIZE as libuv does: atoi into an unsigned int, 0 as 1, at most 1024, 4 unset", () => {
    const cases: Array<[string | undefined, number]> = [
      [undefined, 4],
      ["6", 6],
      [" 6", 6],
      ["+6", 6],
      ["5abc", 5],
      ["", 1],
      ["abc", 1],
      ["0", 1],
      ["-0", 1],
      ["0x10", 1],
      ["-1", 1024],
      ["2000", 1024],
      ["1024", 1024],
      ["4294967296", 1],
      ["4294967297", 1],
      ["99999999999999999999999", 1024]
    ]
    for (const [text, n] of cases) expect(uvPoolSize(text), JSON.stringify(text)).toBe(n)
  })

  it("by position on unnamed threads: those made before libuv's pool; nothing after a wraparound of thread ids", () => {
    const named = (ids: Array<number>, name = "node") => ids.map((t) => [t, name] as const)
    // main, scheduler, 4 V8 workers, inspector signal thread, a pool of 4 (given in any order)
    const t = named([100, 110, 109, 108, 107, 106, 105, 104, 103, 102, 101])
    expect(helperThreads(t, 100, 4)).toEqual([101, 102, 103, 104, 105, 106])
    expect(helperThreads(t, 100, 6)).toEqual([101, 102, 103, 104])
    expect(helperThreads(t, 100, 20)).toEqual([])
    // io_uring's kernel threads are not counted
    expect(helperThreads([...t, [111, "iou-wrk-100"]], 100, 4)).toEqual([101, 102, 103, 104, 105, 106])
    // ids wrapped: the pool's are below the main thread's
    expect(helperThreads(named([100, 101, 102, 103, 104, 105, 106, 3, 4, 5, 6]), 100, 4)).toEqual([])
  })

  it("by name when libuv names its pool: every thread but the main one and the pool's", () => {
    const t = [
      [50, "node"],
      [51, "V8Worker"],
      [52, "V8Worker"],
      [53, "libuv-worker"],
      [54, "libuv-worker"],
      [55, "node"]
    ] as const
    expect(helperThreads(t, 50, 4)).toEqual([51, 52, 55])
  })

  it("left alone under a profiler: the node options that start one", () => {
    for (const on of [
      "--cpu-prof",
      "--cpu_prof",
      "--prof",
      "--prof-cpp",
      "--prof_cpp",
      '--max-old-space-size=99 "--cpu-prof"',
      "--cpu-prof --cpu-prof-dir=x"
    ])
      expect(startsProfiler(on), on).toBe(true)
    for (const off of ["", "--cpu-prof-dir=x", "--cpu-prof-name=y", "--prof-process", "--no-prof", "--heap-prof", "--proficient"])
      expect(startsProfiler(off), off).toBe(false)
  })

  it("GATEWAY_V8_HELPER_NICE: 10 unset or empty, 0-19, anything else an error naming it", () => {
    expect(parseHelperNice(undefined)).toBe(10)
    expect(parseHelperNice("")).toBe(10)
    expect(parseHelperNice("0")).toBe(0)
    expect(parseHelperNice("19")).toBe(19)
    for (const bad of ["20", "-1", "+5", " 5", "05", "1.5", "ten"])
      expect(String(parseHelperNice(bad)), bad).toContain(`not ${JSON.stringify(bad)}`)
  })
})

// A nice is only raised: under `nice -n 10` or more there is nothing to see.
describe.runIf(process.platform === "linux" && BASE < 10)("V8's helper threads below the main thread on one CPU (bin/gateway)", () => {
  it("under taskset: node's start-up threads at nice 10, libuv's pool at 0; the count follows --v8-pool-size", {
    timeout: 90_000
  }, async () => {
    const [plain, small] = await Promise.all([
      start({ UV_THREADPOOL_SIZE: "5" }, { oneCpu: true }),
      start({ UV_THREADPOOL_SIZE: "7" }, { oneCpu: true, nodeArgs: ["--v8-pool-size=2"] })
    ])
    const plainRuns = runs(plain.child.pid!)
    const smallRuns = runs(small.child.pid!)
    const reniced = Number(/^10x(\d+)/.exec(plainRuns)?.[1])
    // V8's four workers and the scheduler of their delayed tasks at least.
    expect(reniced, plainRuns).toBeGreaterThanOrEqual(5)
    shape(plainRuns, reniced, 5)
    // Two V8 workers fewer, two reniced threads fewer; the larger pool all at 0.
    shape(smallRuns, reniced - 2, 7)
  })

  it("GATEWAY_V8_HELPER_NICE sets the nice; 0 leaves every thread at the main thread's, as does --cpu-prof", {
    timeout: 60_000
  }, async () => {
    const profiles = fs.mkdtempSync(path.join(os.tmpdir(), "helper-threads-prof-"))
    dirs.push(profiles)
    const [five, off, profiled] = await Promise.all([
      start({ GATEWAY_V8_HELPER_NICE: "5" }, { oneCpu: true }),
      start({ GATEWAY_V8_HELPER_NICE: "0" }, { oneCpu: true }),
      // A profiler's sampling thread is one of them: left as it is, so that it samples the busy times.
      start({}, { oneCpu: true, nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profiles}`] })
    ])
    expect(runs(five.child.pid!)).toMatch(BASE < 5 ? /^5x\d+ 0x\d+$/ : /^0x\d+$/)
    expect(runs(off.child.pid!)).toMatch(/^0x\d+$/)
    expect(runs(profiled.child.pid!)).toMatch(/^0x\d+$/)
  })

  it.runIf(os.availableParallelism() >= 2)("with more than one CPU nothing is changed", { timeout: 60_000 }, async () => {
    const s = await start({}, { oneCpu: false })
    expect(runs(s.child.pid!)).toMatch(/^0x\d+$/)
  })

  it("--workers 2 under taskset: each worker's start-up threads too, at the nice the primary's environment gave", {
    timeout: 60_000
  }, async () => {
    // The env file is read after bin/gateway's first lines: it does not set the primary's helpers'
    // nice, and the workers (whose environment the primary makes after reading it) follow the primary.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "helper-threads-env-"))
    dirs.push(dir)
    const envFile = path.join(dir, "gateway.env")
    fs.writeFileSync(envFile, "GATEWAY_V8_HELPER_NICE=5\n")
    const s = await start({ GATEWAY_ENV_FILE: envFile }, { oneCpu: true, args: ["--workers", "2"] })
    const pid = s.child.pid!
    const primary = runs(pid)
    const reniced = Number(/^10x(\d+)/.exec(primary)?.[1])
    shape(primary, reniced, 4)
    const children = () => fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
    // A worker just forked may not have run bin/gateway's first lines yet, or be halfway through them.
    const done = (p: number) => new RegExp(`^10x${reniced} 0x\\d+$`).test(runs(p))
    const until = Date.now() + 20_000
    while (!(children().length === 2 && children().every(done)) && Date.now() < until) await new Promise((r) => setTimeout(r, 100))
    const workers = children()
    expect(workers).toHaveLength(2)
    for (const p of workers) shape(runs(p), reniced, 4)
  })

  it("a nice outside 0-19 is refused at start with a message naming it", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "helper-threads-"))
    dirs.push(dir)
    const r = await runCli(["--port", "0"], { GATEWAY_V8_HELPER_NICE: "25", DATA_DIR: dir, HOME: dir })
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('GATEWAY_V8_HELPER_NICE must be a whole number from 0 to 19, not "25"')
  })
})
