/**
 * Gives the C heap's freed pages back to the system once the gateway is at rest (its event loop
 * idle, under a request a second): checked every `GATEWAY_MALLOC_TRIM_SECONDS` (default 10; 0 turns
 * it off), one trim per rest.
 *
 * What the gateway allocates outside V8's heap (Buffers' memory, the HTTP parser's, SQLite's, the
 * writer thread's) comes from glibc's malloc, which keeps what is freed for the next allocations
 * and gives back only the top of the main heap. After a load it keeps the load's high-water mark:
 * a gateway 25 s after a minute of bench load held 149.5 MB, 137.5 MB with this trim (its main
 * heap 25.1 against 7.7 MB; docs/performance.md, "2026-11-29 (night): the C heap given back at
 * rest"). The native addon's `trimMemory()` runs `malloc_trim(0)` on the libuv threadpool, off the
 * event loop (an allocation on the loop may wait while the trim walks the main arena, ~1-2 ms once
 * the heap was trimmed before). Not under load: there the freed pages are taken again within
 * seconds (a trim every 10 s under c=32 made RSS swing wider and did not slow its climb). Without
 * the addon (another platform, no compiler) or under a C library without the call (musl), nothing
 * runs.
 */
import { createRequire } from "node:module"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { restMeter, ServerActivity, underOneRequestASecond } from "./IdleMemory.js"
import { nativeAddonPath } from "./nativeAddon.js"

/** The addon's `trimMemory`: true when pages went back, false when none, null without `malloc_trim` (not glibc). */
export type TrimMemory = () => Promise<boolean | null>

/** The addon's `trimMemory`, or why there is none. */
export const loadTrimMemory = (): TrimMemory | string => {
  const addon = nativeAddonPath()
  if (addon === undefined) return "the native addon is not built (npm run build:native) or this is not Linux"
  try {
    const trim = (createRequire(import.meta.url)(addon) as { trimMemory?: unknown }).trimMemory
    return typeof trim === "function" ? (trim as TrimMemory) : "the native addon predates trimMemory: rebuild it with npm run build:native"
  } catch (e) {
    return `the native addon did not load: ${e instanceof Error ? e.message : String(e)}`
  }
}

const DEFAULT_SECONDS = 10

/** The layer with `load` giving the trim (tests count the calls). */
export const makeMallocTrim = (load: () => TrimMemory | string) =>
  Layer.scopedDiscard(
    Effect.gen(function* () {
      const seconds = yield* Config.number("GATEWAY_MALLOC_TRIM_SECONDS").pipe(Config.withDefault(DEFAULT_SECONDS), Effect.orDie)
      if (!(seconds > 0)) return
      const trim = load()
      if (typeof trim === "string") return yield* Effect.logDebug(`malloc trim: off: ${trim}`)
      const atRest = restMeter()
      // Rest is also under a request a second: what light traffic frees it takes again.
      const quiet = underOneRequestASecond(yield* Effect.serviceOption(ServerActivity))
      /** Whether this rest has had its trim: a gateway left idle trims once, not every interval. */
      let trimmed = false
      const round: Effect.Effect<boolean | null> = Effect.suspend(() => {
        // Both read each round: each measures from the last. Load starts a new rest; light traffic
        // only puts the trim off.
        const rested = atRest()
        const calm = quiet()
        if (!rested) {
          trimmed = false
          return Effect.succeed(false)
        }
        if (trimmed || !calm) return Effect.succeed(false)
        trimmed = true
        return Effect.tryPromise(() => trim()).pipe(Effect.orElseSucceed(() => false))
      })
      // One trim at a time (the next check is `seconds` after the last ended); a C library without the call stops it.
      yield* Effect.forkScoped(
        Effect.repeat(
          Effect.delay(round, Duration.seconds(seconds)),
          Schedule.recurWhile((released) => released !== null)
        )
      )
    })
  )

export const MallocTrim = makeMallocTrim(loadTrimMemory)
