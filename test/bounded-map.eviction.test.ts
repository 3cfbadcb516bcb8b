import { describe, expect, it } from "vitest"
import { BoundedMap } from "../src/kernel/BoundedMap.js"
import { Model } from "./support/boundedMapModel.js"

/**
 * BoundedMap reads its oldest entries through iterators it keeps from one eviction to the next
 * (not a Map's first key read anew, which walks the deleted entries): what it holds must be what
 * the plain model holds (the oldest key first, read anew), whatever the mix of sets, reads,
 * deletes, clears and expiries, on maps large enough for their tables to be rebuilt.
 */
describe("BoundedMap: eviction through kept iterators", () => {
  for (const order of ["insertion", "lru"] as const)
    for (const ttl of [undefined, 40])
      for (const max of [1, 50]) {
        it(`evicts as the model does (${order}, ttl ${ttl ?? "none"}, at most ${max})`, () => {
          let seed = 11
          const next = (n: number) => {
            seed = (seed * 1103515245 + 12345) % 2 ** 31
            return seed % n
          }
          const m = new BoundedMap<number, number>({ maxEntries: max, order, ...(ttl === undefined ? {} : { ttlMs: ttl }) })
          let model = new Model(max, order === "lru", ttl)
          /** The model's `evictExpired`: drops expired entries from the oldest end, up to the first live one. */
          const modelEvictExpired = (now: number): number => {
            if (ttl === undefined) return 0
            let n = 0
            for (const [k, at] of model.expiry) {
              if (at > now) break
              model.expiry.delete(k)
              model.map.delete(k)
              n++
            }
            return n
          }
          let now = 1_000
          let last = 0
          for (let i = 0; i < 10_000; i++) {
            now += next(3)
            const op = next(14)
            const key = op < 5 ? last : next(max * 3)
            last = key
            if (op < 8) {
              m.set(key, i, now)
              model.set(key, i, now)
            } else if (op < 11) expect(m.get(key, now)).toBe(model.get(key, now))
            else if (op < 13) {
              m.delete(key)
              model.delete(key)
            } else if (next(40) === 0) {
              m.clear()
              model = new Model(max, order === "lru", ttl)
            } else expect(m.evictExpired(now)).toBe(modelEvictExpired(now))
            if (i % 5 === 0) expect([...m.entries()]).toEqual([...model.map.entries()])
          }
          expect([...m.entries()]).toEqual([...model.map.entries()])
        }, 60_000)
      }
})
