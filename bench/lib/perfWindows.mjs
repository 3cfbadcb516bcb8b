// What a process's main thread ran between two of the first-byte probe's stamps, from a
// `perf record -k mono -g` of it (bench/first-byte.mjs --perf): every sample whose time falls in a
// stream's window, the windows of all the streams summed. The probe stamps on the monotonic clock
// too (`mono`), the clock perf stamps with; each second of rows is checked against perf's samples
// all the same: shifted by the distance (searched within ±5 ms) that puts the most samples of
// node's head callback inside the rows' head windows. It has read 0–0.1 ms; a misplaced window
// holds other requests' work (an earlier rig, timed from `performance.now()`, was 2.5 ms off).
import { spawn } from "node:child_process"
import readline from "node:readline"

/** A frame as perf script prints it, without its address and object: `JS:*name file:line:col` for node's JIT functions. */
const frameName = (line) =>
  line
    .trim()
    .replace(/^[0-9a-f]+\s+/, "")
    .replace(/\s+\([^)]*\)$/, "")

/**
 * Reads `perf script` of `data` for the thread `tid` and hands each sample to `onSample(timeUs,
 * frames)`, leaf first.
 */
const readSamples = (data, tid, onSample) =>
  new Promise((resolve, reject) => {
    const child = spawn("perf", ["script", "-i", data, "-F", "pid,tid,time,ip,sym", "--ns"], { stdio: ["ignore", "pipe", "ignore"] })
    const lines = readline.createInterface({ input: child.stdout })
    let time
    let frames = []
    const flush = () => {
      if (time !== undefined) onSample(time, frames)
      time = undefined
      frames = []
    }
    lines.on("line", (line) => {
      if (line.length === 0) return flush()
      const head = /^\s*(\d+)\/(\d+)\s+([\d.]+):/.exec(line)
      if (head) {
        flush()
        if (Number(head[2]) === tid) time = Number(head[3]) * 1e6
        return
      }
      if (time !== undefined) frames.push(frameName(line))
    })
    child.on("error", reject)
    child.on("close", (code) => {
      flush()
      code === 0 ? resolve() : reject(new Error(`perf script exited with ${code}`))
    })
  })

/** How many of the sorted `times` fall in the spans (each shifted by `off`). */
const countIn = (times, spans, off) => {
  let n = 0
  for (const [a, b] of spans) {
    let lo = 0
    let hi = times.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (times[mid] < a + off) lo = mid + 1
      else hi = mid
    }
    for (let k = lo; k < times.length && times[k] <= b + off; k++) n++
  }
  return n
}

/**
 * The windows' samples: for each [from, to] pair of the probe's fields (`head` is the row's own
 * start), the samples in it, by the function they were in (self, the leaf) and by every function
 * on their stack (inclusive). `rows` are the probe's rows (with `mono`, µs, and the fields in ms
 * from the head).
 */
export const perfWindows = async ({ data, tid, rows, windows }) => {
  // Pass one: the times of the samples in the head's own callback (node's `parserOnIncoming`,
  // where the probe's `head` stamp is taken).
  const headTimes = []
  await readSamples(data, tid, (t, frames) => {
    if (frames.some((f) => f.includes("parserOnIncoming"))) headTimes.push(t)
  })
  headTimes.sort((a, b) => a - b)
  // The shift, for each second of rows, that puts the most head-callback samples inside the rows'
  // head → first microtask windows (a callback that runs nothing else).
  const sorted = rows.filter((r) => typeof r.mono === "number" && typeof r.sync === "number").sort((a, b) => a.mono - b.mono)
  const shiftOf = new Map()
  const segments = []
  for (let k = 0; k < sorted.length; ) {
    const start = sorted[k].mono
    const segment = []
    while (k < sorted.length && sorted[k].mono - start < 1e6) segment.push(sorted[k++])
    const spans = segment.map((r) => [r.mono, r.mono + r.sync * 1e3])
    let best = { off: 0, n: -1 }
    for (let off = -5000; off <= 5000; off += 25) {
      const n = countIn(headTimes, spans, off)
      if (n > best.n) best = { off, n }
    }
    segments.push({ at: start, us: best.off, samples: best.n, rows: segment.length })
    for (const r of segment) shiftOf.set(r, best.off)
  }
  const all = windows.map(([from, to]) => {
    const spans = []
    for (const r of rows) {
      const a = from === "head" ? 0 : r[from]
      const b = r[to]
      if (typeof a !== "number" || typeof b !== "number" || typeof r.mono !== "number" || b < a) continue
      const off = shiftOf.get(r) ?? 0
      spans.push([r.mono + a * 1e3 + off, r.mono + b * 1e3 + off])
    }
    spans.sort((x, y) => x[0] - y[0])
    return { from, to, spans, next: 0, samples: 0, self: new Map(), inclusive: new Map() }
  })
  // Pass two: each sample into every window it falls in (perf script gives them in time order).
  await readSamples(data, tid, (t, frames) => {
    for (const w of all) {
      while (w.next < w.spans.length && w.spans[w.next][1] < t) w.next++
      let inside = false
      for (let i = w.next; i < w.spans.length && w.spans[i][0] <= t; i++) if (t <= w.spans[i][1]) inside = true
      if (!inside) continue
      w.samples++
      const leaf = frames[0] ?? "(none)"
      w.self.set(leaf, (w.self.get(leaf) ?? 0) + 1)
      for (const f of new Set(frames)) w.inclusive.set(f, (w.inclusive.get(f) ?? 0) + 1)
    }
  })
  return {
    segments,
    windows: all.map((w) => ({
      from: w.from,
      to: w.to,
      streams: w.spans.length,
      meanUs: w.spans.length === 0 ? 0 : w.spans.reduce((n, [a, b]) => n + b - a, 0) / w.spans.length,
      samples: w.samples,
      self: [...w.self].sort((a, b) => b[1] - a[1]),
      inclusive: [...w.inclusive].sort((a, b) => b[1] - a[1])
    }))
  }
}

/** The analysis as text: per window, its top functions, self and inclusive (JS functions and those of node and V8). */
export const perfWindowsText = ({ segments, windows }, { top = 25 } = {}) => {
  const out = [
    `perf's clock against the probe's, fitted a second of rows at a time: ${segments.map((g) => (g.us / 1000).toFixed(3)).join(" / ")} ms`
  ]
  for (const w of windows) {
    out.push(
      "",
      `### ${w.from} → ${w.to}: ${w.streams} streams, mean ${w.meanUs.toFixed(0)} µs, ${w.samples} samples (${(w.samples / Math.max(1, w.streams)).toFixed(1)} a stream)`
    )
    const share = (n) => `${((100 * n) / Math.max(1, w.samples)).toFixed(1).padStart(5)}%`
    out.push("self:")
    for (const [f, n] of w.self.slice(0, top)) out.push(`  ${share(n)} ${f}`)
    out.push("inclusive (JS functions):")
    for (const [f, n] of w.inclusive.filter(([f]) => f.startsWith("JS:")).slice(0, top)) out.push(`  ${share(n)} ${f}`)
  }
  return out.join("\n")
}
