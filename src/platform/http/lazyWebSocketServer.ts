/**
 * A `noServer` WebSocket server whose `ws` is loaded by its first upgrade. The gateway's four
 * WebSocket endpoints (the Responses and realtime transports, the live and inspector feeds) are
 * built at every start; ws, with the lookups of its optional native helpers, was evaluated at every
 * start for upgrades most starts never see (docs/performance.md, "Start: what loads on first use").
 */
import type * as http from "node:http"
import type * as net from "node:net"
import type { ServerOptions, WebSocket, WebSocketServer } from "ws"

export interface LazyWebSocketServer {
  /** ws's `handleUpgrade`; the first one waits for ws to load (the socket is destroyed if it cannot, or if closed meanwhile). */
  readonly handleUpgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer, done: (ws: WebSocket) => void) => void
  /** Closes the server (and refuses upgrades still waiting for ws). */
  readonly close: () => void
}

export const lazyWebSocketServer = (
  options: Omit<ServerOptions, "noServer" | "server" | "port">,
  /** ws's `headers` event: the response headers of each 101, to add to. */
  onHeaders?: (headers: Array<string>, req: http.IncomingMessage) => void
): LazyWebSocketServer => {
  let server: WebSocketServer | undefined
  let loading: Promise<WebSocketServer> | undefined
  let closed = false
  const make = (): Promise<WebSocketServer> =>
    (loading ??= import("ws").then(
      ({ WebSocketServer }) => {
        const made = new WebSocketServer({ ...options, noServer: true })
        if (onHeaders) made.on("headers", onHeaders)
        server = made
        if (closed) made.close()
        return made
      },
      (e: unknown) => {
        // Tried again by the next upgrade.
        loading = undefined
        throw e
      }
    ))
  return {
    handleUpgrade: (req, socket, head, done) => {
      if (closed) return void socket.destroy()
      if (server !== undefined) return server.handleUpgrade(req, socket, head, done)
      make().then(
        (made) => {
          if (closed || socket.destroyed) return void socket.destroy()
          try {
            made.handleUpgrade(req, socket, head, done)
          } catch (e) {
            // What the caller's own error handling would have met synchronously: the socket goes,
            // and the error is reported as the server reports any unhandled one.
            socket.destroy()
            throw e
          }
        },
        (e: unknown) => {
          socket.destroy()
          throw e
        }
      )
    },
    close: () => {
      closed = true
      server?.close()
    }
  }
}

const destroyOnError = function (this: net.Socket) {
  this.destroy()
}

/**
 * Node hands an upgrade's socket over with no `error` listener: a client that resets it while the
 * upgrade waits (a sign-in check, an upstream's handshake, ws loading) would raise an uncaught
 * error. Called first thing for every upgrade; ws adds its own listeners once it takes the socket.
 */
export const guardUpgradeSocket = (socket: net.Socket): void => {
  socket.on("error", destroyOnError)
}
