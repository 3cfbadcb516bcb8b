import { transformSync } from "esbuild"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
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

describe("IdMap against a Map, under random operations", () => {
  it("answers get, has, size, keys and values as a Map does, deletes during iteration included", () => {
    // A small seeded generator: the same operations on every run.
    let seed = 42
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff
      return seed % n
    }
    const map = new IdMap<number>()
    const ref = new Map<string, number>()
    // Few distinct ids (reused, deleted, set again) and some that collide often in a small index.
    const idOf = () => (rand(4) === 0 ? `req_${rand(2000)}` : `k${rand(60)}`)
    for (let step = 0; step < 60_000; step++) {
      const op = rand(100)
      const id = idOf()
      if (op < 45) {
        map.set(id, step)
        ref.set(id, step)
      } else if (op < 85) expect(map.delete(id)).toBe(ref.delete(id))
      else if (op < 95) {
        expect(map.get(id)).toBe(ref.get(id))
        expect(map.has(id)).toBe(ref.has(id))
      } else if (op < 99) {
        // Iterate, deleting after some yields ids not yet reached, or all of them: the same
        // deletes in a Map's iteration give the same values in the same order.
        const plan = new Map<number, Array<string>>()
        for (const k of ref.keys())
          if (rand(3) === 0) {
            const at = rand(ref.size + 1)
            plan.set(at, [...(plan.get(at) ?? []), k])
          }
        const wipeAt = rand(4) === 0 ? rand(ref.size + 1) : -1
        const iterate = (values: Iterable<number>, del: (id: string) => unknown, ids: () => Array<string>) => {
          const seen: Array<number> = []
          for (const v of values) {
            const j = seen.length
            seen.push(v)
            for (const d of plan.get(j) ?? []) del(d)
            if (j === wipeAt) for (const d of ids()) del(d)
          }
          return seen
        }
        const mirror = new Map(ref)
        const expected = iterate(
          mirror.values(),
          (d) => mirror.delete(d),
          () => [...mirror.keys()]
        )
        expect(
          iterate(
            map.values(),
            (d) => map.delete(d),
            () => map.keys()
          )
        ).toEqual(expected)
        for (const k of [...ref.keys()]) if (!mirror.has(k)) ref.delete(k)
      } else if (op < 100 && rand(2) === 0) {
        // Cleared during an iteration: it ends there (none of what was held is found).
        const seen: Array<number> = []
        for (const v of map.values()) {
          seen.push(v)
          map.clear()
          ref.clear()
        }
        expect(seen.length).toBeLessThanOrEqual(1)
      } else {
        map.clear()
        ref.clear()
      }
      expect(map.size).toBe(ref.size)
      if (step % 500 === 0) {
        expect(map.keys()).toEqual([...ref.keys()])
        expect([...map.values()]).toEqual([...ref.values()])
      }
    }
    expect(map.keys()).toEqual([...ref.keys()])
  })

  it("does not make ids property names: a million unique ids leave the process's memory as they found it", async () => {
    // A child process each: one through IdMap, one through an object in dictionary mode (what it
    // was), 32 ids held at a time as requests in flight. The dictionary interns every id (V8's
    // string table, off the JS heap, and each name copied to the old generation).
    const dir = mkdtempSync(path.join(os.tmpdir(), "idmap-"))
    try {
      const ts = readFileSync(path.join(import.meta.dirname, "../src/kernel/churn.ts"), "utf8")
      writeFileSync(path.join(dir, "churn.mjs"), transformSync(ts, { loader: "ts", format: "esm" }).code)
      writeFileSync(
        path.join(dir, "run.mjs"),
        `import { IdMap } from "./churn.mjs"
import { randomBytes } from "node:crypto"
const byMap = process.argv[2] === "idmap"
const map = new IdMap(), dict = Object.create(null), live = []
const round = (n) => {
  for (let i = 0; i < n; i++) {
    const id = "req_" + randomBytes(16).toString("hex")
    if (byMap) map.set(id, i); else dict[id] = i
    live.push(id)
    if (live.length > 32) { const old = live.shift(); if (byMap) map.delete(old); else delete dict[old] }
  }
}
round(50_000)
const before = process.memoryUsage().rss
round(1_000_000)
process.stdout.write(String((process.memoryUsage().rss - before) / 1048576))
`
      )
      const grew = (mode: string) =>
        Number(
          execFileSync(process.execPath, ["--max-semi-space-size=2", path.join(dir, "run.mjs"), mode], {
            encoding: "utf8",
            timeout: 60_000
          })
        )
      const dictionary = grew("dictionary")
      const idmap = grew("idmap")
      // Measured: 22–23 MB and 3–4 MB. The dictionary's growth shows the measure sees interning.
      expect(dictionary).toBeGreaterThan(12)
      expect(idmap).toBeLessThan(Math.min(8, dictionary / 3))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
