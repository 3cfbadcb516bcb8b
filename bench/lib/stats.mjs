// Small statistics helpers. Percentiles use the nearest-rank method on a sorted copy.

export const sorted = (xs) => Float64Array.from(xs).sort()

/** Nearest-rank percentile (p in 0..100) of an array; null when empty. */
export const percentile = (xs, p) => {
  if (!xs || xs.length === 0) return null
  const s = sorted(xs)
  const rank = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))
  return s[rank]
}

/** Several percentiles of one sample at once: { p50, p90, p99, max, n, mean }. */
export const summary = (xs) => {
  if (!xs || xs.length === 0) return { n: 0, p50: null, p90: null, p99: null, max: null, mean: null }
  const s = sorted(xs)
  const at = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
  let sum = 0
  for (const x of s) sum += x
  return { n: s.length, p50: at(50), p90: at(90), p99: at(99), max: s[s.length - 1], mean: sum / s.length }
}

/** Median of the finite numbers of a list (the mean of the middle two for an even count). */
export const median = (xs) => {
  const v = xs.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return null
  const m = v.length >> 1
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2
}

/** Median, min and max across rounds; nulls (failed rounds) are skipped but counted. */
export const acrossRounds = (xs) => {
  const v = xs.filter((x) => typeof x === "number" && Number.isFinite(x))
  return {
    median: median(v),
    min: v.length ? Math.min(...v) : null,
    max: v.length ? Math.max(...v) : null,
    rounds: xs.map((x) => (typeof x === "number" && Number.isFinite(x) ? x : null))
  }
}

/** a / b, or null when either is missing or b is 0. */
export const ratio = (a, b) => (a == null || b == null || b === 0 ? null : a / b)

/** Least-squares slope of y over x (units of y per unit of x); null with fewer than 2 points. */
export const slope = (points) => {
  if (points.length < 2) return null
  const n = points.length
  let sx = 0,
    sy = 0,
    sxx = 0,
    sxy = 0
  for (const [x, y] of points) {
    sx += x
    sy += y
    sxx += x * x
    sxy += x * y
  }
  const d = n * sxx - sx * sx
  return d === 0 ? null : (n * sxy - sx * sy) / d
}

/**
 * About the most `--workers` on every core can serve, ÷ one process's req/s: with every core busy,
 * each request costs the gateway's processes `freeCpuUs` and the load beside them (the load
 * generator and the mock, on the same cores) `loadCpuUs`, so `cores` cores serve about
 * cores × 10⁶ ÷ (freeCpuUs + loadCpuUs) requests a second at most. An estimate from CPU read below
 * saturation (kernel time charged to no process is left out). Two more bounds: the load on
 * `loadCores` cores (pinned to one, as the bench pins it) serves at most loadCores × 10⁶ ÷ loadCpuUs,
 * and `processes` workers use no more than that many cores (processes × 10⁶ ÷ freeCpuUs). On two
 * cores with two workers neither binds. Null when a figure is missing.
 */
export const freeCeiling = ({ cores, oneRps, freeCpuUs, loadCpuUs, processes = cores, loadCores = cores }) =>
  [cores, oneRps, freeCpuUs, loadCpuUs, processes, loadCores].some((x) => typeof x !== "number" || !Number.isFinite(x) || x <= 0)
    ? null
    : Math.min((cores * 1e6) / (freeCpuUs + loadCpuUs), (processes * 1e6) / freeCpuUs, (loadCores * 1e6) / loadCpuUs) / oneRps
