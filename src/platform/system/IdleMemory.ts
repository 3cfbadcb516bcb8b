/**
 * Keeps V8's young generation small at rest: its growth is held from start-up until the gateway first serves load (bin/gateway
 * holds it), and a scavenge every `GATEWAY_IDLE_GC_SECONDS` while it is grown lets V8 shrink it
 * (docs/performance.md#memory-at-rest; docs/operations.md#tuning-the-latency-tail-v8s-settings).
 */
import { performance } from "node:perf_hooks"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"

type Gc = (options?: { readonly type?: "minor" | "major" }) => void

/** V8's `gc` function: the global one under `--expose-gc`, else one taken from a fresh context with the flag set for that moment only. */
const gcFunction = (): Gc | undefined => {
  const global = (globalThis as { gc?: Gc }).gc
  if (typeof global === "function") return global
  try {
    v8.setFlagsFromString("--expose-gc")
    const gc = vm.runInNewContext("gc") as Gc
    return typeof gc === "function" ? gc : undefined
  } catch {
    return undefined
  } finally {
    v8.setFlagsFromString("--no-expose-gc")
  }
}

/** Bytes the new space holds now (its two semi-spaces' committed size as V8 reports it). */
const youngBytes = (): number => v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0

/** Bytes of objects in the old space, live or not yet found dead (V8 learns which in a full collection). */
const oldBytes = (): number => v8.getHeapSpaceStatistics().find((s) => s.space_name === "old_space")?.space_used_size ?? 0

/**
 * On by default only where it gives memory back: under Node 22's V8 the new space shrinks too
 * (later), but the freed pages stay with the process and its RSS does not drop (measured: 171 MB
 * before and after), so there a scavenge every few seconds would buy nothing.
 */
const NODE_MAJOR = Number(process.versions.node.split(".")[0])

/** Above this the new space has grown past its start (V8 starts it at 1 MB per semi-space on 64-bit). */
const GROWN = 4 * 1024 * 1024

/**
 * The young generation's growth factor: 1 holds it at its size, 2 is V8's (semi-spaces double,
 * up to 16 MB each). A flag V8 reads whenever it would grow the space, so it can change at run
 * time; V8 also puts it back to 2 whenever it creates an isolate (the writer thread's).
 */
const growth = (factor: 1 | 2) => v8.setFlagsFromString(`--semi-space-growth-factor=${factor}`)

/**
 * Load, as against start-up's last steps and a few requests: the event loop busy for more than
 * 80% of each of two seconds in a row (start-up's end and a gateway's first requests, lazy
 * modules loaded included, measured 0.4–0.6 of a second on a loaded machine; c=32 load ~1).
 */
const BUSY = 0.8
/** At rest: the event loop busy for less than this share of the interval between two idle rounds. */
const AT_REST = 0.05
const BUSY_SECONDS = 2

/**
 * The old space grown this much since the last full collection: what a load (or start-up, whose
 * garbage the held young generation promotes) leaves there, mostly dead, is worth one full
 * collection at rest. A full collection of a ~50 MB heap at rest after the bench's load gave back
 * about half of it (docs/performance.md#memory-at-rest, 2026-11-27 (night)).
 */
const OLD_GROWN = 8 * 1024 * 1024
/**
 * How often the rest after load is looked for. V8 runs a full collection under load when the old
 * space reaches its limit, which grows with it; at rest, it may not run one for minutes, and the
 * garbage the load left keeps its pages (RSS) until then. A quarter second: the first quarter
 * second at rest collects, so a gateway gives its load's garbage back within about half a second
 * of the load's end. Each check is two statistics reads.
 */
const REST_CHECK_MS = 250

/**
 * Whether bin/gateway held the young generation's growth at start: not when the node command
 * line set the growth factor, nor with `GATEWAY_IDLE_GC_SECONDS=0` in the environment (V8's
 * behaviour throughout). Read as bin/gateway read it.
 */
const growthHeld = (): boolean =>
  !process.execArgv.some((a) => /^--semi[-_]space[-_]growth[-_]factor(=|$)/.test(a)) && process.env["GATEWAY_IDLE_GC_SECONDS"] !== "0"

/**
 * Start-up and the first requests keep most of what they allocate (modules, compiled code, the
 * layers), which V8 takes as a reason to grow the young generation to its largest before any
 * load: ~30 MB of RSS an idle gateway keeps. bin/gateway holds the growth; this releases it for
 * good at the first load (its first two seconds run with the small young generation), and until
 * then holds it again each second (a new isolate puts V8's factor back).
 */
const releaseGrowthOnLoad = Effect.suspend(() => {
  let last = performance.eventLoopUtilization()
  let busySeconds = 0
  const check = Effect.sync(() => {
    const now = performance.eventLoopUtilization()
    busySeconds = performance.eventLoopUtilization(now, last).utilization > BUSY ? busySeconds + 1 : 0
    last = now
    const loaded = busySeconds >= BUSY_SECONDS
    growth(loaded ? 2 : 1)
    return loaded
  })
  return Effect.repeat(check, { schedule: Schedule.spaced(Duration.seconds(1)), until: (loaded) => loaded })
})

/**
 * A full collection that also compacts the old space. Without compaction a load's survivors stay
 * scattered over the pages it filled and V8 keeps every page that holds one (after the bench's
 * load: 62 MB of old space for 32 MB of objects); V8 compacts on its own only when it finds a page
 * nearly empty. The flag is read at the collection and set for that one only, as `--expose-gc`
 * is above. `gc()` without options: under Node 20's V8, `gc({ type: "major" })` ran a young
 * collection (an old object stayed).
 */
const compactingCollection = (gc: Gc) => {
  v8.setFlagsFromString("--compact-on-every-full-gc")
  try {
    gc()
  } finally {
    v8.setFlagsFromString("--no-compact-on-every-full-gc")
  }
}

/**
 * One full collection at the first rest after the old space grew by OLD_GROWN: at start-up's end
 * (its garbage promoted by the small young generation) and after each load. At rest only, as the
 * young collections below: a request that arrives during the collection waits for it (tens of
 * milliseconds), once per load.
 */
const collectAfterLoad = (gc: Gc) =>
  Effect.suspend(() => {
    let last = performance.eventLoopUtilization()
    // Zero until the first collection: start-up's garbage counts as grown.
    let afterLastFull = 0
    const check = Effect.sync(() => {
      const now = performance.eventLoopUtilization()
      const atRest = performance.eventLoopUtilization(now, last).utilization < AT_REST
      last = now
      if (!atRest || oldBytes() - afterLastFull < OLD_GROWN) return
      compactingCollection(gc)
      afterLastFull = oldBytes()
      // The collection's own time is not load: the next check measures from here.
      last = performance.eventLoopUtilization()
    })
    return Effect.schedule(check, Schedule.spaced(Duration.millis(REST_CHECK_MS)))
  })

export const IdleMemory = Layer.scopedDiscard(
  Effect.gen(function* () {
    if (growthHeld()) yield* Effect.forkScoped(releaseGrowthOnLoad)
    const seconds = yield* Config.number("GATEWAY_IDLE_GC_SECONDS").pipe(Config.withDefault(NODE_MAJOR < 22 ? 5 : 0), Effect.orDie)
    if (!(seconds > 0)) return
    const gc = gcFunction()
    if (gc === undefined)
      return yield* Effect.logDebug("idle memory: V8's gc function is unavailable; the young generation shrinks when V8 gets to it")
    // At rest only: the event loop idle for most of the interval. Under load a forced collection
    // is a pause the requests in flight wait out (measured: 1000 open streams after the bench's
    // load rounds had a 415 ms gap with it, 181 ms without), and V8 collects there anyway.
    let last = performance.eventLoopUtilization()
    const round = Effect.sync(() => {
      const now = performance.eventLoopUtilization()
      const atRest = performance.eventLoopUtilization(now, last).utilization < AT_REST
      last = now
      if (atRest && youngBytes() > GROWN) gc({ type: "minor" })
    })
    yield* Effect.forkScoped(Effect.schedule(round, Schedule.spaced(Duration.seconds(seconds))))
    yield* Effect.forkScoped(collectAfterLoad(gc))
  })
)
