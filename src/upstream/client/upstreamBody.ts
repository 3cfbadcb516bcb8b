/**
 * An upstream answer's body read whole (src/upstream/client/UpstreamHttp.ts sends the requests):
 * the size limits, the error a read fails with, and the readers.
 */
import * as Effect from "effect/Effect"
import type { request } from "undici"
import { errors as undiciErrors } from "./undici.js"
import type { UpstreamResponse } from "./UpstreamHttp.js"

export type UpstreamBody = Awaited<ReturnType<typeof request>>["body"]

/** How much of an error answer's body is kept (the rest is not read: the connection is dropped). */
export const ERROR_BODY_MAX_BYTES = 1024 * 1024

/** Largest whole (non-streamed) answer read by default: generous for base64 images, far from node's string limit. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
export const MAX_RESPONSE_BYTES_ENV = "GATEWAY_MAX_UPSTREAM_RESPONSE_BYTES"

/**
 * Reading a whole answer's body failed after its headers: it grew past the size limit, went
 * silent for longer than the body idle timeout, or the connection broke.
 */
export class UpstreamBodyError extends Error {
  constructor(
    readonly reason: "too_large" | "stalled" | "broken",
    message: string
  ) {
    super(message)
  }
}

export const tooLarge = (limit: number) =>
  new UpstreamBodyError("too_large", `upstream answer larger than ${limit} bytes (${MAX_RESPONSE_BYTES_ENV})`)

/**
 * Reads an upstream body whole, up to `maxBytes`: beyond it the body is destroyed (which drops
 * the upstream connection) and what was read is answered (`cut`) or the read fails with an
 * UpstreamBodyError (`fail`). Interruption (the client went away) destroys the body, which
 * aborts the upstream request.
 */
export const readUpstreamBody = (
  body: UpstreamResponse["body"],
  maxBytes = Number.POSITIVE_INFINITY,
  overflow: "cut" | "fail" = "cut",
  idleMs?: number
) =>
  Effect.async<Buffer, Error>((resume) => {
    collect(body, maxBytes, overflow, (error, bytes) => resume(error ? Effect.fail(error) : Effect.succeed(bytes!)), idleMs)
    return Effect.sync(() => body.destroy())
  })

/**
 * Collects a body whole, then calls `done` once. Past `maxBytes` nothing more is read: the body
 * is destroyed at once (so an oversized answer costs at most the limit plus one chunk) and
 * `done` gets the first `maxBytes` (`cut`) or an UpstreamBodyError (`fail`). `idleMs`: a body
 * silent that long is destroyed and `done` gets an UpstreamBodyError (`stalled`); for a body
 * whose request set no undici body timeout (a stream asked for, answered whole).
 */
export const collect = (
  body: UpstreamBody,
  maxBytes: number,
  overflow: "cut" | "fail",
  done: (error: Error | undefined, bytes?: Buffer) => void,
  idleMs?: number
) => {
  const chunks: Array<Buffer> = []
  let size = 0
  let over = false
  let timer: NodeJS.Timeout | undefined
  if (idleMs !== undefined) {
    const finish = done
    const silent = () => {
      over = true
      body.off("data", onData)
      body.destroy()
      finish(new UpstreamBodyError("stalled", `upstream answer stalled: nothing for ${idleMs} ms`))
    }
    timer = setTimeout(silent, idleMs)
    const rearm = () => timer?.refresh()
    body.on("data", rearm)
    done = (error, bytes) => {
      clearTimeout(timer)
      body.off("data", rearm)
      finish(error, bytes)
    }
  }
  const onData = (chunk: Buffer) => {
    const room = maxBytes - size
    if (chunk.length <= room) {
      chunks.push(chunk)
      size += chunk.length
      return
    }
    over = true
    body.off("data", onData)
    body.destroy()
    if (overflow === "fail") return done(tooLarge(maxBytes))
    chunks.push(chunk.subarray(0, room))
    done(undefined, Buffer.concat(chunks, maxBytes))
  }
  body.on("data", onData)
  body.once("end", () => {
    if (!over) done(undefined, Buffer.concat(chunks, size))
  })
  // Also the abort error of the destroy above, which is not reported.
  body.once("error", (e: Error) => {
    if (!over) done(e)
  })
}

/**
 * Drops an answer's body unread. undici's body emits the abort as an `error`, which with no
 * listener would be an uncaught exception: one is added first.
 */
export const discardBody = (body: UpstreamResponse["body"]): void => {
  if (body.destroyed) return
  body.on("error", () => undefined)
  body.destroy()
}

export const BODY_IDLE_TIMEOUT_MS = 5 * 60 * 1000

/** A body that went silent for `ms`, as the caller reports it. */
export const bodyFailure = (e: Error, ms: number | undefined): Error =>
  e instanceof undiciErrors.BodyTimeoutError || (e as { code?: string }).code === "UND_ERR_BODY_TIMEOUT"
    ? new UpstreamBodyError("stalled", `upstream answer stalled: nothing for ${ms ?? BODY_IDLE_TIMEOUT_MS} ms`)
    : e instanceof UpstreamBodyError
      ? e
      : new UpstreamBodyError("broken", e.message)
