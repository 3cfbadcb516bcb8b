import { describe, expect, it } from "vitest"
import { BoundedMap } from "../src/kernel/BoundedMap.js"

const keysOf = <K, V>(m: BoundedMap<K, V>) => [...m.keys()]

describe("BoundedMap", () => {
  it("never holds more than maxEntries, whatever mix of sets, reads and deletes", () => {
    // A fixed pseudo-random sequence (LCG), so a failure replays.
    let seed = 42
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed % n
    }
    for (const order of ["insertion", "lru"] as const) {
      const m = new BoundedMap<number, number>({ maxEntries: 50, order })
      for (let i = 0; i < 20_000; i++) {
        const key = next(200)
        const op = next(10)
        if (op < 6) m.set(key, i)
        else if (op < 9) m.get(key)
        else m.delete(key)
        expect(m.size).toBeLessThanOrEqual(50)
      }
      // Full again with new keys: exactly the 50 newest remain.
      for (let k = 1000; k < 1100; k++) m.set(k, k)
      expect(keysOf(m)).toEqual(Array.from({ length: 50 }, (_, i) => 1050 + i))
    }
  })

  it("insertion order: a new key beyond the bound evicts the oldest set, one for one", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 3 })
    m.set("a", 1).set("b", 2).set("c", 3)
    m.set("d", 4)
    expect(keysOf(m)).toEqual(["b", "c", "d"])
    expect(m.get("a")).toBeUndefined()
    m.set("e", 5)
    expect(keysOf(m)).toEqual(["c", "d", "e"])
  })

  it("insertion order: overwriting a key makes it the newest; reads do not move it", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 3 })
    m.set("a", 1).set("b", 2).set("c", 3)
    expect(m.get("a")).toBe(1)
    expect(m.has("a")).toBe(true)
    m.set("d", 4)
    expect(keysOf(m)).toEqual(["b", "c", "d"])
    m.set("b", 20)
    m.set("e", 5)
    expect(keysOf(m)).toEqual(["d", "b", "e"])
    expect(m.get("b")).toBe(20)
  })

  it("lru order: get and has make an entry the newest, peek does not, so the least recently used goes first", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 3, order: "lru" })
    m.set("a", 1).set("b", 2).set("c", 3)
    expect(m.get("a")).toBe(1)
    expect(keysOf(m)).toEqual(["b", "c", "a"])
    expect(m.has("b")).toBe(true)
    expect(keysOf(m)).toEqual(["c", "a", "b"])
    expect(m.peek("c")).toBe(3)
    m.set("d", 4)
    expect(keysOf(m)).toEqual(["a", "b", "d"])
    expect(m.get("missing")).toBeUndefined()
    expect(keysOf(m)).toEqual(["a", "b", "d"])
  })

  it("a stored undefined is an entry: has is true, and it counts toward the bound", () => {
    const m = new BoundedMap<string, number | undefined>({ maxEntries: 2 })
    m.set("none", undefined)
    expect(m.has("none")).toBe(true)
    expect(m.get("none")).toBeUndefined()
    m.set("x", 1).set("y", 2)
    expect(m.has("none")).toBe(false)
    expect(m.size).toBe(2)
  })

  it("ttl: an entry set at t reads until t + ttl and is absent (and dropped) from then on", () => {
    const m = new BoundedMap<string, string>({ maxEntries: 10, ttlMs: 1000 })
    m.set("k", "v", 5000)
    expect(m.get("k", 5999)).toBe("v")
    expect(m.peek("k", 5999)).toBe("v")
    expect(m.has("k", 5999)).toBe(true)
    expect(m.get("k", 6000)).toBeUndefined()
    expect(m.size).toBe(0)
  })

  it("ttl: setting a key again starts its time over and makes it the newest", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 10, ttlMs: 1000 })
    m.set("a", 1, 0)
    m.set("b", 2, 100)
    m.set("a", 3, 900)
    expect(keysOf(m)).toEqual(["b", "a"])
    expect(m.get("b", 1100)).toBeUndefined()
    expect(m.get("a", 1100)).toBe(3)
    expect(m.get("a", 1900)).toBeUndefined()
  })

  it("ttl: a set drops the expired entries at the oldest end, so memory goes back as entries age", () => {
    const m = new BoundedMap<number, number>({ maxEntries: 100, ttlMs: 1000 })
    for (let i = 0; i < 50; i++) m.set(i, i, i * 10)
    expect(m.size).toBe(50)
    // At 1250: entries set at or before 250 (i <= 25) have expired.
    m.set(999, 999, 1250)
    expect(m.size).toBe(25)
    expect(keysOf(m)[0]).toBe(26)
    expect(m.evictExpired(1400)).toBe(15)
    expect(keysOf(m)[0]).toBe(41)
  })

  it("ttl with lru: a read moves the entry but does not lengthen its life", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 2, order: "lru", ttlMs: 1000 })
    m.set("a", 1, 0)
    m.set("b", 2, 10)
    expect(m.get("a", 500)).toBe(1)
    expect(keysOf(m)).toEqual(["b", "a"])
    m.set("c", 3, 600)
    expect(keysOf(m)).toEqual(["a", "c"])
    expect(m.get("a", 1000)).toBeUndefined()
    expect(m.get("c", 1000)).toBe(3)
  })

  it("delete and clear empty it; a bound below 1 is taken as 1", () => {
    const m = new BoundedMap<string, number>({ maxEntries: 0 })
    expect(m.maxEntries).toBe(1)
    m.set("a", 1).set("b", 2)
    expect(keysOf(m)).toEqual(["b"])
    expect(m.delete("b")).toBe(true)
    expect(m.delete("b")).toBe(false)
    m.set("c", 3)
    m.clear()
    expect(m.size).toBe(0)
    expect([...m]).toEqual([])
  })
})
