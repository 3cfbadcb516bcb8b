// `node --import ./test/support/optimizerProbe.mjs bin/gateway`: whether V8's optimizing compiler
// (TurboFan) compiles a hot function of this file's own, asked twice: when the server first listens
// (still starting) and after its first answer has been written. One JSON line each, in the file
// named by OPTIMIZER_PROBE_OUT. test/serve-code-cache.process.test.ts reads it: the loader's hold
// on the compiler (scripts/bundle-cli.mjs), seen from inside the process.
import { appendFileSync } from "node:fs"
import http from "node:http"
import net from "node:net"
import v8 from "node:v8"

const out = process.env.OPTIMIZER_PROBE_OUT
// V8's %GetOptimizationStatus, taken with the flag set for that moment only (the process's flags,
// and so its code cache's tag, stay as they were).
v8.setFlagsFromString("--allow-natives-syntax")
const status = new Function("f", "return %GetOptimizationStatus(f)")
v8.setFlagsFromString("--no-allow-natives-syntax")
/** V8's bit for code TurboFan compiled (src/runtime/runtime.h, OptimizationStatus::kTurboFanned). */
const TURBOFANNED = 1 << 6

const hot = (a) => {
  let s = 0
  for (let i = 0; i < a.length; i++) s += a[i] * 2
  return s
}
const numbers = Array.from({ length: 1000 }, (_, i) => i)
/**
 * Runs `hot` well past TurboFan's budget, gives a compilation in the background time to finish, and
 * reports whether it ran. Rounds of 1,000 calls (~15 ms uncompiled): held, all 40 rounds run, and
 * they must end well before the loader's own 10 s release, under a full suite's load too.
 */
const ask = async (when) => {
  let turbofanned = false
  for (let round = 0; round < 40 && !turbofanned; round++) {
    for (let i = 0; i < 1000; i++) hot(numbers)
    await new Promise((r) => setTimeout(r, 25))
    turbofanned = (status(hot) & TURBOFANNED) !== 0
  }
  if (out) appendFileSync(out, `${JSON.stringify({ when, turbofanned })}\n`)
}

// The loader's release, as the server calls it (src/platform/system/optimizerHold.ts: through
// globalThis; the loader's own 10 s timer calls it directly and is not recorded): one line when it
// is called, so a test tells the first answer's release from the timer's.
const RELEASE = Symbol.for("gateway.releaseOptimizer")
let release
Object.defineProperty(globalThis, RELEASE, {
  configurable: true,
  set: (f) => {
    release = f
  },
  get: () =>
    release &&
    (() => {
      if (out) appendFileSync(out, `${JSON.stringify({ when: "released by the server" })}\n`)
      release()
    })
})

// The first server to listen (the main port's or the live feed's: both during the start). One whose
// port is taken never emits `listening`: each is watched until one has.
let listened = false
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (!listened)
    this.once("listening", () => {
      if (listened) return
      listened = true
      ask("listening")
    })
  return listen.apply(this, args)
}
let answered = false
const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (event, ...args) {
  if (event === "request" && !answered) {
    answered = true
    args[1].once("close", () => setTimeout(() => ask("answered"), 50))
  }
  return emit.call(this, event, ...args)
}
