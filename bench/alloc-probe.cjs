// Bytes allocated on the JS heap during a window, preloaded into a process under test:
//   node --require bench/alloc-probe.cjs <script>      BENCH_ALLOC_PROBE_OUT=<file.json>
// SIGUSR2 opens the window, SIGUSR2 again closes it; each edge (re)writes <file.json> with the
// window's sequence number and state ("open", then "closed" with the figures), so whoever sent
// the signal can wait for it. SIGUSR1 is left to the inspector.
//
// V8 keeps no running total of what it allocated, but its used heap only grows between two GCs
// by what was allocated and only shrinks in a GC. So, with v8.GCProfiler reporting the used heap
// before and after every GC in the window:
//   allocated = Σ over GCs (used before this GC − used after the previous one, or at the window's
//               start) + (used at the window's end − used after the last GC)
// Nothing runs per request or per allocation: the heap is read at the window's edges and by V8's
// GC callbacks (the profiler's own cost, a few µs per GC). What is counted is the JS heap (young,
// old, code and large-object spaces): the bytes behind Buffers and ArrayBuffers outside the heap
// are not, their JS objects are.
//
// HTTP requests are counted in the window too, from node's own diagnostics channels
// `http.server.request.start` and `http.server.response.finish` (subscribed only while the window
// is open: node then builds one small message object per request and per answer, ~150 bytes
// together, counted in the figure; BENCH_ALLOC_PROBE_REQUESTS=0 turns the count off).
//
// CommonJS and loaded by --require (on the command line or in NODE_OPTIONS), the probe also runs
// in the process's worker threads (node runs --require preloads in each worker; --import ones
// only in the main thread). There it reports its own
// isolate's allocations to the main thread over a BroadcastChannel, so work moved to another
// thread stays visible (`threads` in the result; `bytes` is the main thread's). A thread counts
// when it was running at the window's start and still is at its end.
"use strict"
const dc = require("node:diagnostics_channel")
const { renameSync, writeFileSync } = require("node:fs")
const v8 = require("node:v8")
const { BroadcastChannel, isMainThread, threadId } = require("node:worker_threads")

const CHANNEL = `bench-alloc-probe-${process.pid}`

const used = () => v8.getHeapStatistics().used_heap_size
/** { space name: used bytes } from v8.getHeapSpaceStatistics() or a GCProfiler entry's list. */
const spaces = (list) => {
  const out = {}
  for (const x of list) out[x.space_name ?? x.spaceName] = x.space_used_size ?? x.spaceUsedSize
  return out
}

/**
 * A full collection of a worker thread's heap, run after its window closes. Node's
 * `GCProfiler.stop()` leaves the GC callbacks registered until its native object, which `stop()`
 * lets go, is collected: until then every GC of the isolate appends its heap statistics (a few KB
 * of JSON) to that object's buffer, one buffer for each window stopped and not yet collected. In
 * the SQLite writer thread, whose heap sees few full collections, they grew for the rest of the
 * run (two 8 MB buffers: most of the soak row's growth in full runs; docs/performance.md,
 * "2026-11-30 (midday)"). Not in the main thread: its own full collections come within a minute
 * under load, and one forced at the window's close made the next empty windows read up to
 * ~210 KB (alloc-probe-check.mjs). `gc` is the process's own when it was started with
 * --expose-gc, else taken from a context made while the flag is set and cleared again at once.
 * Never throws: a worker thread of the process under test must not die of the probe.
 */
let fullGc // undefined: not obtained yet (tried again at the next close)
const collectStopped = () => {
  try {
    if (fullGc === undefined) {
      if (typeof globalThis.gc === "function") fullGc = globalThis.gc
      else {
        v8.setFlagsFromString("--expose-gc")
        try {
          fullGc = require("node:vm").runInNewContext("typeof gc === 'function' ? gc : undefined")
        } finally {
          v8.setFlagsFromString("--no-expose-gc")
        }
      }
    }
    fullGc?.()
  } catch {
    // No collection: the stopped profiler stays until the thread's own.
  }
}

/** One isolate's window: start() → stop() gives bytes allocated, GCs by type and their time. */
const windowOnHeap = () => {
  const profiler = new v8.GCProfiler()
  const startSpaces = spaces(v8.getHeapSpaceStatistics())
  const startUsed = used()
  const t0 = performance.now()
  profiler.start()
  return () => {
    const endUsed = used()
    const endSpaces = spaces(v8.getHeapSpaceStatistics())
    const ms = performance.now() - t0
    const { statistics } = profiler.stop()
    let bytes = 0
    let prevAfter = startUsed
    let gcUs = 0
    let freed = 0
    const gcs = {}
    // The same sum per space (objects move between spaces only inside a GC, so it holds for each):
    // which kind of allocation it was, and how much was the JIT's code (code_space).
    const bySpace = {}
    let prevSpaces = startSpaces
    for (const s of statistics) {
      const before = s.beforeGC.heapStatistics.usedHeapSize
      const after = s.afterGC.heapStatistics.usedHeapSize
      bytes += Math.max(0, before - prevAfter)
      freed += before - after
      prevAfter = after
      gcUs += s.cost
      gcs[s.gcType] = (gcs[s.gcType] ?? 0) + 1
      const b = spaces(s.beforeGC.heapSpaceStatistics)
      for (const k in b) bySpace[k] = (bySpace[k] ?? 0) + Math.max(0, b[k] - (prevSpaces[k] ?? 0))
      prevSpaces = spaces(s.afterGC.heapSpaceStatistics)
    }
    bytes += Math.max(0, endUsed - prevAfter)
    for (const k in endSpaces) bySpace[k] = (bySpace[k] ?? 0) + Math.max(0, endSpaces[k] - (prevSpaces[k] ?? 0))
    for (const k in bySpace) if (bySpace[k] === 0) delete bySpace[k]
    return { bytes, ms, startUsed, endUsed, freed, gcs, gcMs: gcUs / 1000, bySpace }
  }
}

if (!isMainThread && typeof v8.GCProfiler !== "function") {
  // A worker thread on a Node without GCProfiler: nothing to measure.
} else if (!isMainThread) {
  // A worker thread: start and stop with the main thread's window, answer with its figures.
  const ch = new BroadcastChannel(CHANNEL)
  ch.unref()
  let stop = null
  ch.onmessage = ({ data }) => {
    if (data?.kind === "open") {
      stop = windowOnHeap()
      ch.postMessage({ kind: "opened", seq: data.seq, threadId })
    } else if (data?.kind === "close" && stop) {
      const r = stop()
      stop = null
      ch.postMessage({ kind: "report", seq: data.seq, threadId, ...r })
      // Now, before a next window can open in this thread (nothing holds the native profiler after stop()).
      collectStopped()
    }
  }
  ch.postMessage({ kind: "hello", threadId })
} else {
  const OUT = process.env.BENCH_ALLOC_PROBE_OUT
  // BENCH_ALLOC_PROBE_REQUESTS=0: no request count (alloc-probe-check.mjs measures what it costs).
  const COUNT = process.env.BENCH_ALLOC_PROBE_REQUESTS !== "0"
  const write = (obj) => {
    if (!OUT) return
    const tmp = `${OUT}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(obj))
    renameSync(tmp, OUT)
  }
  const ch = new BroadcastChannel(CHANNEL)
  ch.unref()
  const workers = new Set()
  let reports = null
  let reportsSeq = 0
  ch.onmessage = ({ data }) => {
    if (data?.kind === "hello") workers.add(data.threadId)
    else if (data?.kind === "report" && reports && data.seq === reportsSeq) reports.set(data.threadId, data)
    else if (data?.kind === "opened" && current && data.seq === current.seq) current.opened.add(data.threadId)
  }
  let seq = 0
  let current = null
  const counts = { started: 0, finished: 0 }
  const onStart = () => counts.started++
  const onFinish = () => counts.finished++

  const open = () => {
    seq++
    counts.started = 0
    counts.finished = 0
    if (COUNT) {
      dc.subscribe("http.server.request.start", onStart)
      dc.subscribe("http.server.response.finish", onFinish)
    }
    ch.postMessage({ kind: "open", seq })
    const openedAt = new Date().toISOString()
    current = { seq, openedAt, opened: new Set(), stop: windowOnHeap() }
    // Said once every worker thread known has opened its own window too (they answer on their
    // own event loops; at most 1 s). Until then the harness sends no load.
    const t0 = Date.now()
    const w = current
    const say = () => {
      if (current !== w) return
      if (w.opened.size < workers.size && Date.now() - t0 < 1000) return void setTimeout(say, 1)
      write({ seq: w.seq, state: "open", pid: process.pid, openedAt, threadsOpened: w.opened.size })
    }
    say()
  }
  const close = () => {
    const { seq: s, stop, openedAt } = current
    current = null
    const main = stop()
    if (COUNT) {
      dc.unsubscribe("http.server.request.start", onStart)
      dc.unsubscribe("http.server.response.finish", onFinish)
    }
    const requests = COUNT ? { ...counts } : null
    // The worker threads answer on their own event loops: wait a little for each one known.
    reports = new Map()
    reportsSeq = s
    ch.postMessage({ kind: "close", seq: s })
    const t0 = Date.now()
    const done = () => {
      if (reports.size < workers.size && Date.now() - t0 < 1000) return void setTimeout(done, 10)
      const threads = [...reports.values()].map(({ kind, seq: _, ...r }) => r)
      reports = null
      write({
        seq: s,
        state: "closed",
        pid: process.pid,
        openedAt,
        closedAt: new Date().toISOString(),
        requests,
        ...main,
        threads,
        threadsExpected: workers.size
      })
    }
    done()
  }
  if (typeof v8.GCProfiler !== "function") {
    // Node before 18.15 / 19.6: no handler, so the harness must not signal (it would kill).
    write({ seq: 0, state: "unsupported", pid: process.pid, error: `v8.GCProfiler is missing in node ${process.version}` })
  } else {
    process.on("SIGUSR2", () => {
      try {
        if (current) close()
        else open()
      } catch (e) {
        current = null
        // An open that threw after subscribing would otherwise count the next window's requests twice.
        dc.unsubscribe("http.server.request.start", onStart)
        dc.unsubscribe("http.server.response.finish", onFinish)
        write({ seq, state: "error", pid: process.pid, error: String(e?.stack ?? e) })
      }
    })
    // Written at load, so the harness knows the handler is in place before it signals.
    write({ seq: 0, state: "ready", pid: process.pid })
  }
}
