import { describe, expect, it } from "vitest"
import { BoundedMap } from "../src/kernel/BoundedMap.js"
import { Model } from "./support/boundedMapModel.js"

/**
 * BoundedMap updates the newest key in place (no delete and set): the order, the values and the
 * expiries must be those of the plain delete-then-set model, whatever the mix of operations.
 */
describe("BoundedMap: the newest key set again in place", () => {
  for (const order of ["insertion", "lru"] as const)
    for (const ttl of [undefined, 40]) {
      it(`keeps the delete-then-set order (${order}, ttl ${ttl ?? "none"})`, () => {
        let seed = 7
        const next = (n: number) => {
          seed = (seed * 1103515245 + 12345) % 2 ** 31
          return seed % n
        }
        const m = new BoundedMap<number, number>({ maxEntries: 8, order, ...(ttl === undefined ? {} : { ttlMs: ttl }) })
        const model = new Model(8, order === "lru", ttl)
        let now = 1_000
        let last = 0
        for (let i = 0; i < 20_000; i++) {
          now += next(3)
          const op = next(12)
          // Often the same key again (a counter per request), else one of a few.
          const key = op < 5 ? last : next(12)
          last = key
          if (op < 8) {
            m.set(key, i, now)
            model.set(key, i, now)
          } else if (op < 11) expect(m.get(key, now)).toBe(model.get(key, now))
          else {
            m.delete(key)
            model.delete(key)
          }
          expect([...m.entries()]).toEqual([...model.map.entries()])
        }
      })
    }

  it("a key set again after others were set, read or cleared moves to the end", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 3, order: "lru" })
    m.set("a", 1).set("a", 2).set("b", 3)
    m.set("a", 4)
    expect([...m.keys()]).toEqual(["b", "a"])
    m.get("b")
    m.set("a", 5)
    expect([...m.entries()]).toEqual([
      ["b", 3],
      ["a", 5]
    ])
    m.clear()
    m.set("c", 1).set("a", 6)
    expect([...m.keys()]).toEqual(["c", "a"])
  })
})
