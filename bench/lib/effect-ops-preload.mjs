// Preloaded into the gateway (`node --import`) by bench/effect-ops.mjs: counts the Effect
// runtime's instructions (every op a fiber evaluates) and the fibers started.
// SIGUSR1 resets the counts; SIGUSR2 writes them as JSON to $EFFECT_OPS_OUT.
// It patches the prototype of effect's FiberRuntime, an internal class: a development tool, not
// something the gateway ships with.
import { writeFileSync } from "node:fs"

// The gateway runs the bundle (dist/bundle/), which holds its own copy of effect, not the one in
// node_modules: the class is found from a live fiber instead. Effect stores the fiber it is
// running in globalThis["effect/FiberCurrent"]; the first store is intercepted, its fiber's
// prototype patched, and the property made a plain one again.
const OPS = [
  "Sync",
  "Success",
  "Failure",
  "WithRuntime",
  "OnSuccess",
  "OnFailure",
  "OnSuccessAndFailure",
  "Async",
  "Yield",
  "While",
  "Iterator",
  "Commit",
  "UpdateRuntimeFlags",
  "Tag",
  "Left",
  "Right",
  "Some",
  "None",
  "Micro"
]
const counts = Object.fromEntries(OPS.map((op) => [op, 0]))
let fibers = 0
let patched = false
const patch = (proto) => {
  for (const op of OPS) {
    const original = proto[op]
    if (typeof original !== "function") continue
    proto[op] = function (instruction) {
      counts[op]++
      return original.call(this, instruction)
    }
  }
  const start = proto.start
  proto.start = function (...args) {
    fibers++
    return start.apply(this, args)
  }
  patched = true
}
const KEY = "effect/FiberCurrent"
Object.defineProperty(globalThis, KEY, {
  configurable: true,
  get: () => undefined,
  set: (fiber) => {
    Object.defineProperty(globalThis, KEY, { value: fiber, writable: true, configurable: true, enumerable: true })
    if (fiber !== undefined && fiber !== null && !patched) patch(Object.getPrototypeOf(fiber))
  }
})
process.on("SIGUSR1", () => {
  for (const op of OPS) counts[op] = 0
  fibers = 0
})
process.on("SIGUSR2", () => {
  writeFileSync(
    process.env.EFFECT_OPS_OUT ?? "effect-ops.json",
    JSON.stringify({ patched, ops: Object.values(counts).reduce((a, b) => a + b, 0), fibers, byOp: counts })
  )
})
