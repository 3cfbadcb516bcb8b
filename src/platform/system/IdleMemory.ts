/**
 * Gives V8's young generation back at rest: a scavenge every `GATEWAY_IDLE_GC_SECONDS` while it is grown lets V8 shrink it
 * (docs/performance.md#memory-at-rest; docs/operations.md#tuning-the-latency-tail-v8s-settings).
 */
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

/**
 * On by default only where it gives memory back: under Node 22's V8 the new space shrinks too
 * (later), but the freed pages stay with the process and its RSS does not drop (measured: 171 MB
 * before and after), so there a scavenge every few seconds would buy nothing.
 */
const NODE_MAJOR = Number(process.versions.node.split(".")[0])

/** Above this the new space has grown past its start (V8 starts it at 1 MB per semi-space on 64-bit). */
const GROWN = 4 * 1024 * 1024

export const IdleMemory = Layer.scopedDiscard(
  Effect.gen(function* () {
    const seconds = yield* Config.number("GATEWAY_IDLE_GC_SECONDS").pipe(Config.withDefault(NODE_MAJOR < 22 ? 5 : 0), Effect.orDie)
    if (!(seconds > 0)) return
    const gc = gcFunction()
    if (gc === undefined)
      return yield* Effect.logDebug("idle memory: V8's gc function is unavailable; the young generation shrinks when V8 gets to it")
    const round = Effect.sync(() => {
      if (youngBytes() > GROWN) gc({ type: "minor" })
    })
    yield* Effect.forkScoped(Effect.schedule(round, Schedule.spaced(Duration.seconds(seconds))))
  })
)
