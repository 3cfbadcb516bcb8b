import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type { CanonicalError } from "../formats/canonical.js"
import { type Frame, NdjsonParser, SseParser } from "../formats/frames.js"
import type { UpstreamResponse } from "../upstream/UpstreamHttp.js"
import { gatewayHeaders, type RequestContext } from "./io.js"
import type { StreamTimeoutsShape } from "./timeouts.js"

/** How one upstream stream is turned into what the client receives, frame by frame. */
export interface FrameRelay {
  /** Text for the client for one upstream frame ("" for nothing). */
  frame(frame: Frame): string
  /** Text after the upstream ended normally. */
  end(): string
  /** Text after the upstream broke off or stalled: the client format's error event. */
  broken(error: CanonicalError): string
}

export class StreamStalled extends Data.TaggedError("StreamStalled")<{ readonly message: string }> {}

/** Progress of one upstream stream, as the watchdog sees it (epoch ms; 0 = not yet). */
export interface StreamProgress {
  readonly headersAt: number
  lastChunkAt: number
  firstContentAt: number
}

/**
 * Fails with StreamStalled when the stream sends no content within `firstContentMs` of its
 * headers, or nothing at all for `idleMs`. A Schedule drives the checks; race it with the relay.
 */
export const watchStream = (state: StreamProgress, timeouts: StreamTimeoutsShape): Effect.Effect<never, StreamStalled> => {
  const check = Effect.suspend(() => {
    const now = Date.now()
    if (!state.firstContentAt && now - state.headersAt > timeouts.firstContentMs) {
      return Effect.fail(new StreamStalled({ message: `upstream sent no content within ${timeouts.firstContentMs} ms` }))
    }
    if (now - state.lastChunkAt > timeouts.idleMs) {
      return Effect.fail(new StreamStalled({ message: `upstream stream stalled: nothing for ${timeouts.idleMs} ms` }))
    }
    return Effect.void
  })
  const interval = Math.max(5, Math.floor(Math.min(timeouts.firstContentMs, timeouts.idleMs) / 5))
  return Effect.repeat(check, Schedule.spaced(interval)).pipe(Effect.zipRight(Effect.never))
}

export interface StreamOutcome {
  readonly ttftMs: number | null
  readonly error: string | null
}

/**
 * Relays an upstream stream: chunks are parsed into frames as they arrive (nothing is held
 * back but a partial line), each frame's text is written at once, and writing respects
 * backpressure. A watchdog (a Schedule) ends a stream that sends no content within
 * `firstContentMs` or goes silent for `idleMs`; the client then gets its format's error event.
 * Interruption (the client left) destroys the upstream body, which aborts the upstream request.
 */
export const relayStream = (
  ctx: RequestContext,
  res: UpstreamResponse,
  framing: "sse" | "ndjson",
  relay: FrameRelay,
  contentType: string,
  timeouts: StreamTimeoutsShape
): Effect.Effect<StreamOutcome> => {
  const parser = framing === "sse" ? new SseParser() : new NdjsonParser()
  const state: StreamProgress = { headersAt: Date.now(), lastChunkAt: Date.now(), firstContentAt: 0 }
  let ttftMs: number | null = null

  const write = (text: string) => {
    if (!text || ctx.res.destroyed) return true
    if (ttftMs === null) ttftMs = Date.now() - ctx.startedAt
    if (!state.firstContentAt) state.firstContentAt = Date.now()
    return ctx.res.write(text)
  }

  ctx.res.writeHead(200, {
    ...gatewayHeaders(ctx.requestId),
    "content-type": contentType,
    "cache-control": "no-cache",
    "x-accel-buffering": "no"
  })
  ctx.res.flushHeaders()

  const pump = Effect.async<StreamOutcome>((resume) => {
    const body = res.body
    let done = false
    const onDrain = () => body.resume()
    const finish = (error: CanonicalError | undefined) => {
      if (done) return
      done = true
      const tail = error ? relay.broken(error) : relay.end()
      if (!ctx.res.destroyed) ctx.res.end(tail)
      resume(Effect.succeed({ ttftMs, error: error?.message ?? null }))
    }
    body.on("data", (chunk: Buffer) => {
      state.lastChunkAt = Date.now()
      let text = ""
      try {
        for (const frame of parser.push(chunk)) text += relay.frame(frame)
      } catch (e) {
        body.destroy()
        return finish({ status: 502, kind: "upstream", message: `upstream stream could not be parsed: ${(e as Error).message}` })
      }
      if (!write(text)) {
        body.pause()
        ctx.res.once("drain", onDrain)
      }
    })
    body.once("end", () => {
      if (done) return
      let text = ""
      for (const frame of parser.end()) text += relay.frame(frame)
      write(text)
      finish(undefined)
    })
    body.once("error", (err: Error) => finish({ status: 502, kind: "upstream", message: `upstream stream ended unexpectedly: ${err.message}` }))
    return Effect.sync(() => {
      done = true
      ctx.res.off("drain", onDrain)
      body.destroy()
    })
  })

  return Effect.raceFirst(pump, watchStream(state, timeouts)).pipe(
    Effect.catchTag("StreamStalled", (e) =>
      Effect.sync(() => {
        if (!ctx.res.destroyed) ctx.res.end(relay.broken({ status: 504, kind: "timeout", message: e.message, code: "upstream_stalled" }))
        return { ttftMs, error: e.message }
      })
    )
  )
}
