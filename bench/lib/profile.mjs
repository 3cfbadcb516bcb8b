// Reads a V8 .cpuprofile (node --cpu-prof) and sums self time per function.
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/**
 * Self time per `functionName url:line` (line 1-based). Uses the sample list and its time
 * deltas when present (each sample's delta is charged to the node it hit), else hitCount × the
 * mean interval. Returns { totalMs, samples, top: [{ name, url, line, selfMs, selfPct, samples }] }.
 */
export const topSelf = (file, { limit = 25, root } = {}) => {
  const prof = JSON.parse(readFileSync(file, "utf8"))
  const byId = new Map(prof.nodes.map((n) => [n.id, n]))
  const selfSamples = new Map()
  const selfUs = new Map()
  if (Array.isArray(prof.samples) && prof.samples.length > 0) {
    const deltas = prof.timeDeltas ?? []
    for (let i = 0; i < prof.samples.length; i++) {
      const id = prof.samples[i]
      // timeDeltas[i] is the time before sample i; charge the interval after it (the next delta).
      const d = deltas[i + 1] ?? deltas[i] ?? 0
      selfSamples.set(id, (selfSamples.get(id) ?? 0) + 1)
      selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, d))
    }
  } else {
    const interval =
      (prof.endTime - prof.startTime) /
      Math.max(
        1,
        prof.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0)
      )
    for (const n of prof.nodes) {
      selfSamples.set(n.id, n.hitCount ?? 0)
      selfUs.set(n.id, (n.hitCount ?? 0) * interval)
    }
  }
  const agg = new Map()
  let totalUs = 0
  let totalSamples = 0
  for (const [id, us] of selfUs) {
    const n = byId.get(id)
    if (!n) continue
    const cf = n.callFrame
    const url = shorten(cf.url, root)
    const line = cf.lineNumber >= 0 ? cf.lineNumber + 1 : 0
    const name = cf.functionName || "(anonymous)"
    const key = `${name} ${url}:${line}`
    const e = agg.get(key) ?? { name, url, line, selfUs: 0, samples: 0 }
    e.selfUs += us
    e.samples += selfSamples.get(id) ?? 0
    agg.set(key, e)
    totalUs += us
    totalSamples += selfSamples.get(id) ?? 0
  }
  const top = [...agg.values()]
    .sort((a, b) => b.selfUs - a.selfUs)
    .slice(0, limit)
    .map((e) => ({
      name: e.name,
      url: e.url,
      line: e.line,
      selfMs: e.selfUs / 1000,
      selfPct: totalUs ? (100 * e.selfUs) / totalUs : 0,
      samples: e.samples
    }))
  return { totalMs: totalUs / 1000, samples: totalSamples, top }
}

const shorten = (url, root) => {
  if (!url) return ""
  let u = url
  if (u.startsWith("file://")) {
    try {
      u = fileURLToPath(u)
    } catch {}
  }
  if (root && u.startsWith(root)) u = u.slice(root.length).replace(/^\//, "")
  return u
}
