/**
 * The live feed's own port, GATEWAY_LIVE_WS_PORT (20129 by default; 0 picks a free one; when PORT
 * is 0, so is it), for tools that expect the feed there: any path upgrades, anything else is
 * answered 426. A port already in use is a warning, not a failed start.
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as http from "node:http"
import type * as net from "node:net"
import type { AppConfigShape } from "../../platform/config/AppConfig.js"
import { guardUpgradeSocket } from "../../platform/http/lazyWebSocketServer.js"

/** The live feed's path on the gateway's own port (and any path on the live port). */
export const LIVE_PATH = "/api/live/ws"
/** The spec's default port of the dashboard live WebSocket server (GATEWAY_LIVE_WS_PORT). */
export const DEFAULT_LIVE_PORT = 20129

export interface LivePortDeps {
  readonly config: AppConfigShape
  readonly runFork: (effect: Effect.Effect<void>) => unknown
  /** Takes an upgrade of the live port (`samePort` false: the Origin may be the main port's page). */
  readonly accept: (req: http.IncomingMessage, socket: net.Socket, head: Buffer, samePort: boolean) => void
}

/** Listens on the live port for the life of the scope; the port it bound, or undefined when it could not. */
export const listenLivePort = Effect.fnUntraced(function* ({ config, runFork, accept }: LivePortDeps) {
  const configured = yield* Config.integer("GATEWAY_LIVE_WS_PORT").pipe(
    Config.validate({
      message: "GATEWAY_LIVE_WS_PORT must be a port number from 0 to 65535 (0 picks a free one)",
      validation: (n) => n >= 0 && n <= 65535
    }),
    Config.option
  )
  const livePort = Option.getOrElse(configured, () => (config.port === 0 ? 0 : DEFAULT_LIVE_PORT))
  const server = http.createServer((_req, res) => {
    const body = JSON.stringify({
      _tag: "UpgradeRequired",
      message: `the live feed is a WebSocket: connect to ws://<host>:<this port>${LIVE_PATH}`
    })
    res.writeHead(426, { "content-type": "application/json", "content-length": Buffer.byteLength(body), upgrade: "websocket" })
    res.end(body)
  })
  server.on("upgrade", (req, socket, head) => {
    guardUpgradeSocket(socket as net.Socket)
    accept(req, socket as net.Socket, head, false)
  })
  let bound: number | undefined
  yield* Effect.async<void>((resume) => {
    const onError = (e: NodeJS.ErrnoException) => {
      server.off("listening", onListening)
      runFork(
        Effect.logWarning(
          `live feed: port ${livePort} is not available (${e.code ?? e.message}); the dashboard's feed is on the main port at ${LIVE_PATH}`
        )
      )
      resume(Effect.void)
    }
    const onListening = () => {
      server.off("error", onError)
      bound = (server.address() as net.AddressInfo).port
      resume(Effect.void)
    }
    server.once("error", onError)
    server.once("listening", onListening)
    // Port 0 is exclusive: under `--workers` node's cluster would otherwise hand this listener
    // the very handle of the main port (both ask for "port 0" on the same host), and the two
    // servers would take turns answering the main port's connections.
    server.listen({ port: livePort, host: config.host, exclusive: livePort === 0 })
  })
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      if (bound !== undefined) {
        server.close()
        server.closeAllConnections()
      }
    })
  )
  return (): number | undefined => bound
})
