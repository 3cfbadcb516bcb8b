/**
 * The HTTP server's connections and its graceful stop: every socket is tracked (with those that
 * have not sent a request yet apart), and at shutdown the server stops accepting, lets fresh
 * connections send their request, waits up to SHUTDOWN_GRACE for the requests in flight of both
 * planes, then cuts what is left.
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Schedule from "effect/Schedule"
import type * as http from "node:http"
import type * as net from "node:net"
import { lingerOnClose } from "../platform/http/lingering.js"
import type { ServerTraffic } from "./requestHandler.js"

/** How long in-flight requests get to finish on shutdown before their connections are cut. */
export const SHUTDOWN_GRACE = Duration.seconds(10)
/** How long, at shutdown, a connection that has not sent its request yet gets to send it. */
export const FRESH_GRACE = Duration.seconds(1)

/** Tracks the server's connections in `traffic` (all of them, and the fresh ones until their first request); each closes with a linger. */
export const trackConnections = (server: http.Server, traffic: ServerTraffic): void => {
  const { sockets, fresh } = traffic
  server.on("connection", (socket: net.Socket) => {
    // Closed after its last answer with a linger: the client's bytes still on their way are read, not reset.
    lingerOnClose(socket)
    sockets.add(socket)
    fresh.add(socket)
    socket.once("close", () => {
      sockets.delete(socket)
      fresh.delete(socket)
    })
  })
}

/**
 * The server's stop (a finalizer of its layer): no more connections, `Connection: close` on
 * every answer still to be written, fresh connections given FRESH_GRACE, the requests in flight
 * SHUTDOWN_GRACE; then every connection left is closed. Only after that do the layers below
 * (the batched writer) close.
 */
export const shutdownServer = (deps: {
  readonly server: http.Server
  readonly traffic: ServerTraffic
  readonly fibers: FiberSet.FiberSet<void, never>
  /** New requests waiting for their turn (platform/http/turnBudget.ts): accepted, so waited for too. */
  readonly turns: { readonly pending: number }
}) =>
  Effect.fnUntraced(function* () {
    const { server, traffic, fibers, turns } = deps
    const { open, sockets, fresh } = traffic
    // Answers still to be written say `Connection: close` (their sockets then close after
    // them, with a FIN, and clients do not send another request on them); idle keep-alive
    // sockets are closed now, with a FIN too.
    traffic.closing = true
    for (const res of open) if (!res.headersSent) res.shouldKeepAlive = false
    server.close()
    // Idle keep-alive sockets (they were answered and wait for another request) close now;
    // a socket still to send its first request is left FRESH_GRACE to send it (answered
    // with `Connection: close`), then closed.
    const busy = new Set<unknown>([...open].map((res) => res.socket))
    for (const socket of sockets) if (!fresh.has(socket) && !busy.has(socket)) socket.destroy()
    // Bounded by the schedule itself: a finalizer is uninterruptible, so a timeout around
    // the wait could not end it.
    yield* Effect.repeat(
      Effect.sync(() => fresh.size),
      {
        until: (n) => n === 0,
        schedule: Schedule.spaced("10 millis").pipe(Schedule.upTo(FRESH_GRACE))
      }
    )
    for (const socket of fresh) socket.destroy()
    // Every request accepted: the forked ones (fibers), management and common-path requests, and
    // those still waiting for their turn, which may fork a fiber once started (so the fibers are
    // looked at again until all are done together).
    const allDone = Effect.zipRight(
      FiberSet.awaitEmpty(fibers),
      Effect.map(FiberSet.size(fibers), (forked) => forked === 0 && turns.pending === 0 && traffic.management + traffic.common === 0)
    )
    // Interruptible, or the timeout could not end the wait (a finalizer is uninterruptible).
    const drained = yield* Effect.interruptible(
      Effect.repeat(allDone, { until: (done) => done, schedule: Schedule.spaced("10 millis") })
    ).pipe(Effect.timeout(SHUTDOWN_GRACE), Effect.option)
    if (drained._tag === "None") yield* Effect.logWarning("shutdown grace elapsed; closing remaining connections")
    // Sockets whose answers went out before shutdown (as keep-alive) are idle now: closed cleanly first.
    server.closeIdleConnections()
    server.closeAllConnections()
    yield* Effect.logInfo("server stopped")
  })
