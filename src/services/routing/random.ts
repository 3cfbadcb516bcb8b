import type { RandomSource } from "./types.js"

/** The process's random numbers (Math.random). */
export const systemRandom: RandomSource = { next: Math.random }

/**
 * A deterministic source (mulberry32) for tests and reproducible runs: the same seed gives the
 * same sequence.
 */
export const seededRandom = (seed: number): RandomSource => {
  let a = seed >>> 0
  return {
    next: () => {
      a = (a + 0x6d2b79f5) >>> 0
      let t = a
      t = Math.imul(t ^ (t >>> 15), t | 1)
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296
    }
  }
}

/** An index in [0, n) from a source. */
export const pickIndex = (random: RandomSource, n: number): number => Math.min(n - 1, Math.floor(random.next() * n))
