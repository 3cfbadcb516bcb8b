/**
 * Keeps V8's young generation small at rest: its growth is held from start-up until the gateway first serves load (bin/gateway
 * holds it), and a scavenge every `GATEWAY_IDLE_GC_SECONDS` while it is grown lets V8 shrink it. Start-up's garbage, which
 * the small young generation promotes, is collected once at the first rest after the server listens
 * (docs/performance.md#memory-at-rest; docs/operations.md#tuning-the-latency-tail-v8s-settings), at a rest with
 * nothing in flight (`ServerActivity`): the collection is a pause every answer being streamed would wait out.
 */
import { performance } from "node:perf_hooks"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"

export type Gc = (options?: { readonly type?: "minor" | "major" }) => void

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

/** CPU µs the process has used (every thread: V8's helper threads work for a collection too). */
const cpuMicros = (): number => {
  const u = process.cpuUsage()
  return u.user + u.system
}

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
 * Load, as against start-up's last steps and a few requests: for two seconds in a row, the event
 * loop busy for more than 80% of each (start-up's end and a gateway's first requests, lazy
 * modules loaded included, measured 0.4–0.6 of a second on a loaded machine; c=32 load ~1), or
 * the process using more than LOADED_CPU of a core in each. The second because a process that
 * shares its core (`--workers` on fewer cores than workers, a busy machine) waits for its turn in
 * the event loop's poll, which counts as idle: measured under c=32 load, two workers pinned to one
 * core read 0.06–0.44 and 0.7–1.0, so one of them kept the small young generation (a scavenge
 * every ~1 MB allocated) for the whole load while the other grew it.
 */
const BUSY = 0.8
/** A core's share a gateway at rest never uses (its periodic work: under 2%) and a served load does. */
const LOADED_CPU = 0.3
/** At rest: the event loop busy for less than this share of the interval between two idle rounds. */
const AT_REST = 0.05
const BUSY_SECONDS = 2

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
const releaseGrowthOnLoad = (startUp: StartUpCollection) =>
  Effect.suspend(() => {
    let last = performance.eventLoopUtilization()
    let lastCpu = cpuMicros()
    let lastCollectionCpu = startUp.cpuMicros
    let lastAt = performance.now()
    let busySeconds = 0
    const check = Effect.sync(() => {
      const now = performance.eventLoopUtilization()
      const cpu = cpuMicros()
      const at = performance.now()
      // CPU µs used since the last check over the wall µs elapsed: the share of one core. The
      // start-up collection's own CPU is not load.
      const cpuShare = (cpu - lastCpu - (startUp.cpuMicros - lastCollectionCpu)) / ((at - lastAt) * 1000)
      lastCpu = cpu
      lastCollectionCpu = startUp.cpuMicros
      lastAt = at
      busySeconds = performance.eventLoopUtilization(now, last).utilization > BUSY || cpuShare > LOADED_CPU ? busySeconds + 1 : 0
      last = now
      const loaded = busySeconds >= BUSY_SECONDS
      growth(loaded ? 2 : 1)
      return loaded
    })
    // Each check a second after the last, the first too: checked at once, it measured the few
    // microseconds since the layer started, which read as busy, so start-up's next second on a
    // busy machine (the first requests, the writer thread's start) made two and released the
    // growth before any load (the young generation then grew to 2 x 8 MB at rest).
    return Effect.repeat(Effect.delay(check, Duration.seconds(1)), { until: (loaded) => loaded })
  })

/** Whether the event loop was at rest (busy under AT_REST) since the last time it was asked. */
export const restMeter = (): (() => boolean) => {
  let last = performance.eventLoopUtilization()
  return () => {
    const now = performance.eventLoopUtilization()
    const atRest = performance.eventLoopUtilization(now, last).utilization < AT_REST
    last = now
    return atRest
  }
}

/**
 * What the server is answering now: its HTTP answers being written (streams included) and its
 * realtime and Responses WebSocket connections (src/server/Server.ts provides it). The start-up
 * collection waits until there is none: a slow stream or a voice session keeps the event loop
 * nearly idle, and its 50-150 ms pause was a gap in each of them.
 */
export class ServerActivity extends Context.Tag("gateway/ServerActivity")<
  ServerActivity,
  {
    readonly inFlight: () => number
    /** Requests and upgrades received since the server started. */
    readonly received: () => number
  }
>() {}

/**
 * Whether requests and upgrades came at under one a second on average since the last time it was
 * asked (always, without a server: a service built alone). Light traffic (a dozen paced streams a
 * second) leaves the event loop nearly idle, and a young collection there let V8 shrink the young
 * generation that the next seconds of traffic grew again onto pages the system must provide
 * afresh: a paced stream took ~50 page faults (6-14 µs each on a virtual machine) against ~1-3
 * with the young generation left as it was (docs/performance.md, "2026-12-02 (midday)"). What an
 * open dashboard polls (a ping every 10 s, a page's data every 2-10 s) and a probe now and then
 * stay under it, as does a connection held open with nothing on it.
 */
export const underOneRequestASecond = (activity: Option.Option<Context.Tag.Service<ServerActivity>>): (() => boolean) => {
  if (Option.isNone(activity)) return () => true
  let last = activity.value.received()
  let lastAt = performance.now()
  return () => {
    const now = activity.value.received()
    const at = performance.now()
    const few = now - last < (at - lastAt) / 1000
    last = now
    lastAt = at
    return few
  }
}

/** Whether nothing is in flight (always, without a server: a service built alone). */
const nothingInFlight = (activity: Option.Option<Context.Tag.Service<ServerActivity>>) => (): boolean =>
  Option.isNone(activity) || activity.value.inFlight() === 0

/** The CPU µs the start-up collection used (every thread), which is not load. */
interface StartUpCollection {
  cpuMicros: number
}

/**
 * How often the start-up collection looks for rest. A quarter second: it runs within about half a
 * second of start-up's end; each look is one utilization reading.
 */
const REST_CHECK_MS = 250

/** How long the start-up collection waits, from its first rest, for one with nothing in flight. */
const QUIET_WAIT_MS = 60_000

/**
 * A full collection that also compacts the old space: V8 keeps every page a survivor is on, and
 * compacts on its own only pages it finds nearly empty. The flag is read at the collection and set
 * for this one only, as `--expose-gc` is above. `gc()` without options: under Node 20's V8,
 * `gc({ type: "major" })` runs a young collection.
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
 * Once, at the first quarter second at rest after the server listens: one compacting full
 * collection. Start-up keeps most of what it allocates, and the held young generation promotes its
 * temporaries too, so the old space holds ~40 MB of which ~24 live; V8 collects the old space on
 * its own only near a limit an idle process may not reach for minutes (RSS 1 s after the bench's
 * verification requests ~134 -> ~114 MB: docs/performance.md#memory-at-rest, 2026-11-28). Once
 * only: run again after each load, it made the next load cost ~25-30% more CPU per request
 * (2026-11-27 (night)). The collection takes 50-130 ms; a request that arrives during it waits, and
 * one in flight would: it waits for a quarter second with nothing in flight (`quiet`). A gateway
 * that serves from its first second (a restart under traffic) rested first with streams open.
 * Waits so for QUIET_WAIT_MS at most from its first rest: what stays open without traffic (an
 * MCP client's event stream, a Codex WebSocket between turns), or an answer the count never saw
 * end (node emits no `close` for a request pipelined behind one whose client left), does not put
 * it off for good.
 */
const collectStartUp = (gc: Gc, state: StartUpCollection, quiet: () => boolean) =>
  Effect.suspend(() => {
    const atRest = restMeter()
    let firstRest: number | undefined
    const check = Effect.suspend(() => {
      // Both read each time: the meter's window starts again at each reading.
      if (!atRest()) return Effect.succeed(false)
      const now = performance.now()
      firstRest ??= now
      if (!quiet() && now - firstRest < QUIET_WAIT_MS) return Effect.succeed(false)
      const before = cpuMicros()
      compactingCollection(gc)
      state.cpuMicros += cpuMicros() - before
      return Effect.as(Effect.logDebug(`idle memory: start-up's garbage collected (${Math.round(performance.now() - now)} ms)`), true)
    })
    return Effect.repeat(Effect.delay(check, Duration.millis(REST_CHECK_MS)), { until: (done) => done })
  })

/** What the layer reads of V8 (tests give their own): its `gc`, the young generation's size, whether bin/gateway held its growth. */
export interface V8Memory {
  readonly gc: () => Gc | undefined
  readonly youngBytes: () => number
  readonly growthHeld: () => boolean
}

/** The layer over `memory`. */
export const makeIdleMemory = (memory: V8Memory) =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const { youngBytes } = memory
      const startUp: StartUpCollection = { cpuMicros: 0 }
      if (memory.growthHeld()) yield* Effect.forkScoped(releaseGrowthOnLoad(startUp))
      const seconds = yield* Config.number("GATEWAY_IDLE_GC_SECONDS").pipe(Config.withDefault(NODE_MAJOR < 22 ? 5 : 0), Effect.orDie)
      if (!(seconds > 0)) return
      const gc = memory.gc()
      if (gc === undefined)
        return yield* Effect.logDebug("idle memory: V8's gc function is unavailable; the young generation shrinks when V8 gets to it")
      const activity = yield* Effect.serviceOption(ServerActivity)
      yield* Effect.forkScoped(collectStartUp(gc, startUp, nothingInFlight(activity)))
      // At rest only: the event loop idle for most of the interval and under a request a second in it.
      // Under load a forced collection is a pause the requests in flight wait out (measured: 1000
      // open streams after the bench's load rounds had a 415 ms gap with it, 181 ms without), and V8
      // collects there anyway; under light traffic it shrinks what the traffic grows again
      // (`underOneRequestASecond`). A young collection at rest is a pause of 1-2 ms: it does not wait for
      // nothing in flight (a connection that stays open would keep the young generation grown).
      const atRest = restMeter()
      const quiet = underOneRequestASecond(activity)
      const round = Effect.sync(() => {
        // Both read each round: each measures from the last.
        const rested = atRest()
        if (quiet() && rested && youngBytes() > GROWN) gc({ type: "minor" })
      })
      yield* Effect.forkScoped(Effect.schedule(round, Schedule.spaced(Duration.seconds(seconds))))
    })
  )

export const IdleMemory = makeIdleMemory({ gc: gcFunction, youngBytes, growthHeld })
