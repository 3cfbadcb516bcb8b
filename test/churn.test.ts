import { describe, expect, it } from "vitest"
import { IdMap, SlotSet } from "../src/kernel/churn.js"

describe("SlotSet", () => {
  it("holds each member once, forgets it on delete and gives its place to the next", () => {
    const set = new SlotSet<{ n: number }>()
    const a = { n: 1 }
    const b = { n: 2 }
    const c = { n: 3 }
    set.add(a).add(b).add(a)
    expect(set.size).toBe(2)
    expect(set.has(a)).toBe(true)
    expect(set.has(c)).toBe(false)
    expect(set.delete(c)).toBe(false)
    expect(set.delete(a)).toBe(true)
    expect(set.delete(a)).toBe(false)
    expect(set.has(a)).toBe(false)
    expect(set.size).toBe(1)
    set.add(c)
    expect([...set].map((x) => x.n).sort()).toEqual([2, 3])
  })

  it("keeps one object in two sets apart", () => {
    const one = new SlotSet<object>()
    const two = new SlotSet<object>()
    const x = {}
    const y = {}
    one.add(y).add(x)
    two.add(x)
    one.delete(y)
    expect(two.has(x)).toBe(true)
    two.delete(x)
    expect(one.has(x)).toBe(true)
    expect([...one]).toEqual([x])
  })

  it("lets members be deleted while it is iterated (the watchdog drops stalled streams as it sweeps)", () => {
    const set = new SlotSet<{ n: number }>()
    const items = Array.from({ length: 10 }, (_, n) => ({ n }))
    for (const i of items) set.add(i)
    const seen: Array<number> = []
    for (const i of set) {
      seen.push(i.n)
      if (i.n % 2 === 0) set.delete(i)
      if (i.n === 3) set.delete(items[7]!)
    }
    expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6, 8, 9])
    expect([...set].map((x) => x.n)).toEqual([1, 3, 5, 9])
    expect(set.size).toBe(4)
  })
})

describe("IdMap", () => {
  it("maps ids to values, counts them, and lists them in insertion order", () => {
    const map = new IdMap<{ v: string }>()
    map.set("req_b", { v: "b" }).set("req_a", { v: "a" })
    map.set("req_b", { v: "b2" })
    expect(map.size).toBe(2)
    expect(map.get("req_b")).toEqual({ v: "b2" })
    expect(map.get("toString")).toBeUndefined()
    expect(map.keys()).toEqual(["req_b", "req_a"])
    expect([...map.values()].map((x) => x.v)).toEqual(["b2", "a"])
    expect(map.delete("req_b")).toBe(true)
    expect(map.delete("req_b")).toBe(false)
    expect(map.delete("__proto__")).toBe(false)
    expect(map.size).toBe(1)
    map.set("__proto__", { v: "p" })
    expect(map.get("__proto__")).toEqual({ v: "p" })
    expect(map.size).toBe(2)
  })
  it("says which ids it holds, and forgets them all on clear (a new id then comes first)", () => {
    const map = new IdMap<number>()
    map.set("ti_1", 1).set("ti_2", 2)
    expect(map.has("ti_1")).toBe(true)
    expect(map.has("ti_3")).toBe(false)
    expect(map.has("constructor")).toBe(false)
    expect(map.has("__proto__")).toBe(false)
    map.clear()
    expect(map.size).toBe(0)
    expect(map.has("ti_1")).toBe(false)
    expect(map.get("ti_2")).toBeUndefined()
    map.set("ti_9", 9).set("ti_1", 1)
    expect(map.keys()).toEqual(["ti_9", "ti_1"])
    expect(map.size).toBe(2)
  })
})
