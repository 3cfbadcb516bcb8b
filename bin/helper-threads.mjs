// With one CPU to run on, V8's helper threads (concurrent marking and sweeping, background
// compiles) get the same share of it as the main thread whenever they have work: a 251 ms turn of
// a thousand open streams was two thirds concurrent marking (docs/performance.md, "Where a thousand
// streams stall"). Put below the main thread (nice raised to GATEWAY_V8_HELPER_NICE, default 10; 0
// leaves them), they run when it waits, and it finishes what they have not. bin/gateway calls
// `lowerHelperThreads` before it loads the server (docs/operations.md, "Tuning the latency tail").
import { readdirSync, readFileSync } from "node:fs"
import { access } from "node:fs/promises"
import os from "node:os"
import { fileURLToPath } from "node:url"

/** GATEWAY_V8_HELPER_NICE: 10 when unset or empty, a whole number 0-19, or an Error naming the value. */
export const parseHelperNice = (text) => {
  if (text === undefined || text === "") return 10
  if (/^1?[0-9]$/.test(text)) return Number(text)
  return new Error(`GATEWAY_V8_HELPER_NICE must be a whole number from 0 to 19, not ${JSON.stringify(text)}`)
}

/** The width of C's `long` here (32 on 32-bit Linux, where `strtol` saturates sooner). */
const LONG_BITS = ["arm", "ia32", "mips", "mipsel", "ppc", "s390", "x32"].includes(process.arch) ? 32 : 64

/**
 * The number of threads libuv's pool has, read from UV_THREADPOOL_SIZE as libuv reads it (the same
 * in the libuv of Node 20, 22 and 24): 4 when unset; otherwise glibc's `atoi` (leading blanks, a
 * sign, digits, the rest ignored; `strtol` saturating at a long's bounds, `LONG_BITS`, then cut to
 * an int) kept in an unsigned int, 0 taken as 1 and more than 1024 as 1024 (so "-1" is 1024 threads).
 */
export const uvPoolSize = (text) => {
  if (text === undefined) return 4
  const digits = /^[ \t\n\v\f\r]*([+-]?\d+)/.exec(text)?.[1]
  let n = digits === undefined ? 0n : BigInt(digits)
  const longMax = LONG_BITS === 64 ? 2n ** 63n - 1n : 2n ** 31n - 1n
  if (n > longMax) n = longMax
  if (n < -longMax - 1n) n = -longMax - 1n
  const threads = BigInt.asUintN(32, n)
  return threads === 0n ? 1 : threads > 1024n ? 1024 : Number(threads)
}

/**
 * Which of a process's threads are node's start-up helpers, from its threads as [id, name] in any
 * order. Named threads (libuv from 1.50 names its pool `libuv-worker`; the kernel names io_uring's
 * `iou-*`): every thread but the main one and those. Otherwise by position: thread ids grow in the
 * order threads are made, and the helpers are the ones made before libuv's pool, the last `pool`
 * (the caller makes sure the pool exists and nothing was made after it). An empty list when the
 * kernel's ids wrapped around since the process started (which is which is not known then).
 */
export const helperThreads = (threads, pid, pool) => {
  const sorted = threads.filter(([, name]) => !name.startsWith("iou-")).sort(([a], [b]) => a - b)
  if (sorted[0]?.[0] !== pid) return []
  if (sorted.some(([, name]) => name === "libuv-worker")) {
    return sorted.slice(1).flatMap(([tid, name]) => (name === "libuv-worker" ? [] : [tid]))
  }
  return sorted.slice(1, Math.max(1, sorted.length - pool)).map(([tid]) => tid)
}

/**
 * Whether node options (execArgv and NODE_OPTIONS, as one text) start a profiler: its sampling
 * thread starts before any JavaScript too, and below the main thread it would miss the busy times.
 */
export const startsProfiler = (options) => /(^|[\s"'])--(cpu[-_])?prof([-_]cpp)?(["'\s=]|$)/.test(options)

const profiling = () => startsProfiler(`${process.execArgv.join(" ")} ${process.env.NODE_OPTIONS ?? ""}`)

/**
 * Raises the nice of node's start-up helper threads to `nice` when this process may run on one CPU
 * (Linux: a thread's nice by its id, read from /proc/self/task). libuv's pool (file reads, DNS
 * lookups, zlib) and every thread made later (the SQLite writer) keep the main thread's nice. Never
 * fails: anything unreadable leaves the threads as they are.
 */
export const lowerHelperThreads = async (nice) => {
  if (nice === 0 || process.platform !== "linux" || os.availableParallelism?.() !== 1 || profiling()) return
  try {
    await access(fileURLToPath(import.meta.url)).catch(() => {}) // libuv's pool is complete from here on
    const threads = readdirSync("/proc/self/task").map((t) => {
      let name = ""
      try {
        name = readFileSync(`/proc/self/task/${t}/comm`, "utf8").trim()
      } catch {}
      return [Number(t), name]
    })
    for (const tid of helperThreads(threads, process.pid, uvPoolSize(process.env.UV_THREADPOOL_SIZE))) {
      try {
        if (os.getPriority(tid) < nice) os.setPriority(tid, nice)
      } catch {}
    }
  } catch {}
}
