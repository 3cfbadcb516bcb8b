import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { StreamTimeouts, type StreamTimeoutsShape } from "./StreamTimeouts.js"

export class StreamStalled extends Data.TaggedError("StreamStalled")<{ readonly message: string }> {}

/** Progress of one upstream stream, as the watchdog sees it (epoch ms; 0 = not yet). */
export interface StreamProgress {
  readonly headersAt: number
  lastChunkAt: number
  firstContentAt: number
  /** The upstream is paused because the client is not reading: silence then is not the upstream's. */
  paused?: boolean
  /** The connection's own silence limit (ms), for both the first content and the idle gap. */
  readonly silenceMs?: number
}

/** Why a stream counts as stalled at `now`, if it does. */
const stallOf = (state: StreamProgress, timeouts: StreamTimeoutsShape, now: number): StreamStalled | undefined => {
  const firstContentMs = state.silenceMs ?? timeouts.firstContentMs
  if (!state.firstContentAt && now - state.headersAt > firstContentMs) {
    return new StreamStalled({ message: `upstream sent no content within ${firstContentMs} ms` })
  }
  const idleMs = state.silenceMs ?? timeouts.idleMs
  if (!state.paused && now - state.lastChunkAt > idleMs) {
    return new StreamStalled({ message: `upstream stream stalled: nothing for ${idleMs} ms` })
  }
  return undefined
}

/** How much later than planned a sweep may run before it counts as late (timer drift is a few ms). */
const LATE_MS = 20

const checkInterval = (timeouts: StreamTimeoutsShape) => Math.max(5, Math.floor(Math.min(timeouts.firstContentMs, timeouts.idleMs) / 5))

/** One open stream under the watchdog: its progress, and what to do when it stalls. */
export interface Watched {
  readonly state: StreamProgress
  readonly stalled: (e: StreamStalled) => void
}

/** Watches every open stream of the process; `watch` answers the function that stops watching one. */
export interface StreamWatchdogShape {
  readonly watch: (w: Watched) => () => void
}

/**
 * The streams' watchdog: one Schedule-driven sweep over every open stream instead of a timer fiber per
 * stream (docs/resilience.md, "Upstream timeouts and limits").
 */
export const makeStreamWatchdog: (timeouts: StreamTimeoutsShape) => Effect.Effect<StreamWatchdogShape, never, Scope.Scope> =
  Effect.fnUntraced(function* (timeouts: StreamTimeoutsShape) {
    const open = new Set<Watched>()
    const interval = checkInterval(timeouts)
    // When the sweep itself runs late (a busy event loop), the chunks that arrived meanwhile are still
    // unread in their sockets: timers run before the loop reads them. Such a sweep passes no verdict
    // and the next one (after one read of every socket) does; never two passes in a row, so a loop
    // that stays late still ends stalled streams.
    let lastSweepAt = 0
    let passed = false
    const sweep = Effect.sync(() => {
      const now = Date.now()
      const late = lastSweepAt !== 0 && now - lastSweepAt > interval + LATE_MS
      lastSweepAt = now
      if (open.size === 0) return
      if (late && !passed) {
        passed = true
        return
      }
      passed = false
      for (const w of open) {
        const stalled = stallOf(w.state, timeouts, now)
        if (stalled) {
          open.delete(w)
          try {
            w.stalled(stalled)
          } catch {
            // A stream's own handler reports its errors (see relayStream); the sweep goes on for the others.
          }
        }
      }
    })
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(interval)))
    return {
      watch: (w) => {
        open.add(w)
        return () => {
          open.delete(w)
        }
      }
    }
  })

/** The process's one stream watchdog, shared by the HTTP pipeline and the WebSocket transport. */
export class StreamWatchdog extends Context.Tag("gateway/StreamWatchdog")<StreamWatchdog, StreamWatchdogShape>() {
  static readonly layer = Layer.scoped(StreamWatchdog, Effect.flatMap(StreamTimeouts, makeStreamWatchdog))
}
