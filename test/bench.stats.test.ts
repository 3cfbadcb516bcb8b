import * as path from "node:path"
import { describe, expect, it } from "vitest"

/** The bench's arithmetic (bench/lib/stats.mjs, plain JavaScript: typed here). */
interface StatsLib {
  readonly freeCeiling: (x: {
    cores: unknown
    oneRps: unknown
    freeCpuUs: unknown
    loadCpuUs: unknown
    processes?: unknown
    loadCores?: unknown
  }) => number | null
}
const loadStats = async (): Promise<StatsLib> => (await import(path.resolve("bench/lib/stats.mjs"))) as StatsLib

describe("bench/lib/stats.mjs freeCeiling", () => {
  it("is the cores' µs over the workers' and the load's CPU a request, against one process's req/s", async () => {
    const { freeCeiling } = await loadStats()
    // 2 cores, 200 µs a request in all: 10,000 req/s at most, twice one process's 5,000.
    expect(freeCeiling({ cores: 2, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: 50 })).toBeCloseTo(2, 10)
    // The 2026-12-01 23:20 run's third round: one process 6,069 req/s; the free workers 179.8 µs a
    // request, the load beside them ~92 (a rig's reading): under 1.3 even with every core busy.
    const c = freeCeiling({ cores: 2, oneRps: 6_069, freeCpuUs: 179.8, loadCpuUs: 92 })
    expect(c).toBeGreaterThan(1.2)
    expect(c).toBeLessThan(1.3)
  })

  it("is bounded by the workers' own cores when there are fewer workers than cores", async () => {
    const { freeCeiling } = await loadStats()
    // 8 cores could serve 40,000 req/s at 200 µs a request in all; 3 workers at 150 µs each serve
    // 20,000 at most: 4× one process's 5,000.
    expect(freeCeiling({ cores: 8, processes: 3, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: 50 })).toBeCloseTo(4, 10)
    // As many workers as cores: the cores' bound, as without `processes`.
    expect(freeCeiling({ cores: 2, processes: 2, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: 50 })).toBeCloseTo(2, 10)
    expect(freeCeiling({ cores: 2, processes: 0, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: 50 })).toBeNull()
  })

  it("is bounded by the load's own cores: pinned to one, it serves 10⁶ ÷ its CPU a request at most", async () => {
    const { freeCeiling } = await loadStats()
    // 8 cores and 8 workers could serve 53,333 req/s; the load on one core at 50 µs, 20,000: 4× one
    // process's 5,000.
    expect(freeCeiling({ cores: 8, processes: 8, loadCores: 1, oneRps: 5_000, freeCpuUs: 100, loadCpuUs: 50 })).toBeCloseTo(4, 10)
    // Two cores, the load pinned to one: the cores bind first, as without `loadCores`.
    expect(freeCeiling({ cores: 2, processes: 2, loadCores: 1, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: 50 })).toBeCloseTo(2, 10)
  })

  it("is null when a figure is missing or not positive", async () => {
    const { freeCeiling } = await loadStats()
    expect(freeCeiling({ cores: null, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: 50 })).toBeNull()
    expect(freeCeiling({ cores: 2, oneRps: 0, freeCpuUs: 150, loadCpuUs: 50 })).toBeNull()
    expect(freeCeiling({ cores: 2, oneRps: 5_000, freeCpuUs: null, loadCpuUs: 50 })).toBeNull()
    expect(freeCeiling({ cores: 2, oneRps: 5_000, freeCpuUs: 150, loadCpuUs: Number.NaN })).toBeNull()
  })
})
