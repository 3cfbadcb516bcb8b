import { Effect, Runtime } from "effect"
const mode = process.argv[2]
const probe = Effect.runFork(Effect.void); const proto = Object.getPrototypeOf(probe)
if (mode === "syncdrain") proto.drainQueueLaterOnExecutor = function () { this.drainQueueOnCurrentThread() }
if (mode === "clearstate") { const o = proto.setExitValue; proto.setExitValue = function (e) { o.call(this, e); this._queue = []; this._stack = []; this._fiberRefs = undefined; this._children = null; this._asyncInterruptor = null; this._supervisor = null; this._tracer = null } }
if (mode === "refs") { const o = proto.setExitValue; proto.setExitValue = function (e) { o.call(this, e); this._fiberRefs = undefined } }
if (mode === "stackqueue") { const o = proto.setExitValue; proto.setExitValue = function (e) { o.call(this, e); this._queue = []; this._stack = [] } }
if (mode === "exitvalue") { const o = proto.setExitValue; proto.setExitValue = function (e) { o.call(this, e); this._exitValue = null } }
const work = Effect.gen(function* () {
  const data = Array.from({ length: 100 }, (_, i) => ({ i, s: "x" + i }))
  yield* Effect.async((resume) => { setImmediate(() => resume(Effect.void)) })
  return data.length
})
const rt = Runtime.defaultRuntime
const end = Date.now() + 3000
const next = () => { const f = Runtime.runFork(rt)(work); f.addObserver(() => { if (Date.now() < end) setImmediate(next) }) }
next()
