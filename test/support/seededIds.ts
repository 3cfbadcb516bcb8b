import { afterEach, beforeEach, vi } from "vitest"

/**
 * Ids and clock made the same on every run: `Math.random` a seeded Park–Miller generator and
 * `Date.now` fixed, for each test of the file that calls this (at its top level). Tests that
 * encode or decode the same stream twice reseed before each pass, so both make the same ids.
 */
export const seededIdsAndClock = (): { readonly reseed: (seed: number) => void } => {
  let seed = 1
  beforeEach(() => {
    vi.spyOn(Math, "random").mockImplementation(() => {
      seed = (seed * 16807) % 2147483647
      return seed / 2147483647
    })
    vi.spyOn(Date, "now").mockReturnValue(1_700_000_000_000)
  })
  afterEach(() => {
    vi.restoreAllMocks()
  })
  return {
    reseed: (n) => {
      seed = n
    }
  }
}
