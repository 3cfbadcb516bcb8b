// How much of what a request allocates V8 promotes to the old generation, by where the requests
// in flight are kept: a Set, a Map, an array with a free list (src/kernel/churn.ts, SlotSet), an
// object in dictionary mode (IdMap), or nowhere. A loop keeps 32 "requests" (a few KB each) in
// flight for 4 s; each mode runs in its own `node --trace-gc --trace-gc-nvp` and its young
// collections' `promoted` and `allocated` are summed (docs/performance.md, "Promotion").
//
//   node bench/collection-promotion.mjs
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const MODES = ["none", "set", "map", "slots", "dict"]
const SECONDS = 4
const IN_FLIGHT = 32

const child = (mode) => {
  const open = new Set()
  const live = new Map()
  const slots = []
  const free = []
  const dict = Object.create(null)
  const inflight = []
  let id = 0
  const make = () => {
    const r = { id: ++id, headers: {}, parts: [], slot: -1 }
    for (let i = 0; i < 20; i++) r.headers[`h${i}`] = `value-${i}-${id}`
    for (let i = 0; i < 10; i++) r.parts.push(new Array(20).fill(id))
    return r
  }
  const start = Date.now()
  while (Date.now() - start < SECONDS * 1000) {
    for (let k = 0; k < 100; k++) {
      const r = make()
      if (mode === "set") open.add(r)
      else if (mode === "map") live.set(`req-${r.id}`, { r })
      else if (mode === "dict") dict[`req-${r.id}`] = { r }
      else if (mode === "slots") {
        r.slot = free.length > 0 ? free.pop() : slots.length
        slots[r.slot] = r
      }
      inflight.push(r)
      if (inflight.length <= IN_FLIGHT) continue
      const done = inflight.shift()
      if (mode === "set") open.delete(done)
      else if (mode === "map") live.delete(`req-${done.id}`)
      else if (mode === "dict") delete dict[`req-${done.id}`]
      else if (mode === "slots") {
        slots[done.slot] = undefined
        free.push(done.slot)
      }
    }
  }
}

if (process.argv[2] === "--child") child(process.argv[3])
else {
  const self = fileURLToPath(import.meta.url)
  console.log(`mode   promoted ÷ allocated   survived ÷ allocated   young pause (mean ms)   full collections`)
  for (const mode of MODES) {
    const out = spawnSync(process.execPath, ["--trace-gc", "--trace-gc-nvp", self, "--child", mode], { encoding: "utf8" }).stdout
    // Young collections' sums, and the full collections counted.
    const sum = { promoted: 0, new_space_survived: 0, allocated: 0, pause: 0, young: 0, full: 0 }
    for (const line of out.split("\n")) {
      const kind = / gc=(\w+)/.exec(line)?.[1]
      if (kind === undefined) continue
      if (kind !== "s") {
        sum.full++
        continue
      }
      sum.young++
      for (const k of ["promoted", "new_space_survived", "allocated", "pause"])
        sum[k] += Number(new RegExp(` ${k}=([\\d.]+)`).exec(line)?.[1] ?? 0)
    }
    const share = (x) => (sum.allocated > 0 ? (x / sum.allocated).toFixed(3) : "–")
    console.log(
      `${mode.padEnd(6)} ${share(sum.promoted).padStart(20)} ${share(sum.new_space_survived).padStart(22)} ${(sum.young > 0 ? sum.pause / sum.young : 0).toFixed(2).padStart(23)} ${String(sum.full).padStart(18)}`
    )
  }
}
