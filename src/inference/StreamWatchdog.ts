import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { SlotSet } from "../kernel/churn.js"
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
    // Streams come and go at the pace of requests: a `SlotSet`, not a `Set` (src/kernel/churn.ts).
    const open = new SlotSet<Watched>()
    // The verdict waits for a read of the loop's sockets: after the process was held up, the chunks
    // that came meanwhile are still unread when a timer fires. The sweep's fiber may resume in any
    // phase of the loop, the check phase too (where one `setImmediate` would run at once, before any
    // read), so it is two: the second is queued from the check phase and runs after the next poll.
    const judge = () => {
      const now = Date.now()
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
    }
    const judgeNextTurn = () => setImmediate(judge)
    const sweep = Effect.sync(() => {
      if (open.size > 0) setImmediate(judgeNextTurn)
    })
    yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(checkInterval(timeouts))))
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
