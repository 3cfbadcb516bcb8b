// Preloaded into the gateway (`node --import`) by bench/effect-ops.mjs: counts the Effect
// runtime's instructions (every op a fiber evaluates) and the fibers started.
// SIGUSR1 resets the counts; SIGUSR2 writes them as JSON to $EFFECT_OPS_OUT.
// It patches the prototype of effect's FiberRuntime, an internal class: a development tool, not
// something the gateway ships with.
import { writeFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const { FiberRuntime } = await import(pathToFileURL(path.join(root, "node_modules/effect/dist/esm/internal/fiberRuntime.js")).href)

const OPS = ["Sync", "Success", "Failure", "WithRuntime", "OnSuccess", "OnFailure", "OnSuccessAndFailure", "Async", "Yield", "While", "Iterator", "Commit", "UpdateRuntimeFlags", "Tag", "Left", "Right", "Some", "None", "Micro"]
const counts = Object.fromEntries(OPS.map((op) => [op, 0]))
let fibers = 0
const proto = FiberRuntime.prototype
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
process.on("SIGUSR1", () => {
  for (const op of OPS) counts[op] = 0
  fibers = 0
})
process.on("SIGUSR2", () => {
  writeFileSync(process.env.EFFECT_OPS_OUT ?? "effect-ops.json", JSON.stringify({ ops: Object.values(counts).reduce((a, b) => a + b, 0), fibers, byOp: counts }))
})
