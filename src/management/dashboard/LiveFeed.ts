import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Directory } from "../../services/teams/Directory.js"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type * as http from "node:http"
import type * as net from "node:net"
import type { WebSocket } from "ws"
import { type LazyWebSocketServer, lazyWebSocketServer } from "../../platform/http/lazyWebSocketServer.js"
import { AdminAuth } from "../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { identifyWithin, makeIdentify } from "../api/Auth.js"
import { Settings } from "../../platform/settings/Settings.js"
import { type LiveClients, makeDelivery, makeLiveChannel } from "./liveEvents.js"
import { LIVE_PATH, listenLivePort } from "./livePort.js"
import { admitManagementSocket, originAllowed, refuse } from "./managementSocket.js"

export { DEFAULT_LIVE_PORT, LIVE_PATH } from "./livePort.js"
export { admitManagementSocket, originAllowed, refuse } from "./managementSocket.js"

export interface LiveFeedShape {
  /** Takes an upgrade on the main port when its path is the live feed's; false otherwise. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
  /** The separate live port actually bound (undefined when off or not bound). */
  readonly port: () => number | undefined
}

/** The live feed while GATEWAY_ENABLE_LIVE_WS is off: its path answers 404, nothing listens. */
const feedOff: LiveFeedShape = {
  upgrade: (req, socket) => {
    if ((req.url ?? "/").split("?")[0] !== LIVE_PATH) return false
    refuse(socket, 404, "Not Found", "the live feed is off (GATEWAY_ENABLE_LIVE_WS=false; it is read at start)")
    return true
  },
  port: () => undefined
}

/** What `accept` needs: who may listen, the WebSocket server, the dashboards, and how to tell the other processes one watches. */
interface AcceptDeps extends LiveClients {
  readonly identify: ReturnType<typeof makeIdentify>
  readonly runFork: (effect: Effect.Effect<void>) => unknown
  readonly wss: LazyWebSocketServer
  readonly watching: (on: boolean) => void
}

/** A dashboard's upgrade (on either port): admitted, it is sent the recent events, then every event; made once per layer. */
const makeAccept =
  ({ identify, runFork, wss, clients, recent, watching }: AcceptDeps) =>
  (req: http.IncomingMessage, socket: net.Socket, head: Buffer, samePort: boolean) => {
    if (!originAllowed(req, samePort))
      return refuse(socket, 403, "Forbidden", "the live feed is open to the gateway's own pages only (Origin differs)")
    admitManagementSocket(identify, runFork, req, socket, "the live feed", () =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        clients.add(ws)
        if (clients.size === 1) watching(true)
        ws.on("close", () => {
          if (clients.delete(ws) && clients.size === 0) watching(false)
        })
        ws.on("error", () => ws.terminate())
        // Nothing is read from clients; a message is ignored.
        ws.send(JSON.stringify({ type: "hello", recent }))
      })
    )
  }

/**
 * The dashboard's live feed: every event-bus event pushed to the open dashboards, on /api/live/ws and GATEWAY_LIVE_WS_PORT
 * while GATEWAY_ENABLE_LIVE_WS is on (ports, frames and who may listen: docs/dashboard.md#live-feed).
 */
export class LiveFeed extends Context.Tag("gateway/LiveFeed")<LiveFeed, LiveFeedShape>() {
  static readonly layer = Layer.scoped(
    LiveFeed,
    Effect.gen(function* () {
      const flags = yield* FeatureFlags
      const enabled = yield* flags.enabled("GATEWAY_ENABLE_LIVE_WS")
      const config = yield* AppConfig
      if (!enabled) return feedOff
      const identify = identifyWithin(
        makeIdentify(yield* ApiKeys, yield* AdminAuth, yield* Settings),
        Option.getOrUndefined(yield* Effect.serviceOption(Directory)),
        ["admin", "viewer"],
        "the live feed"
      )
      const bus = yield* EventBus
      const runtime = yield* Effect.runtime<never>()
      const runFork = Runtime.runFork(runtime)

      const recent: LiveClients["recent"] = []
      const clients = new Set<WebSocket>()
      const wss = lazyWebSocketServer({ maxPayload: 4096 })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const ws of clients) ws.close(1001, "gateway shutting down")
          wss.close()
        })
      )

      // One listener for all clients: this process's dashboards, then the other processes' while one watches.
      const enqueue = makeDelivery({ clients, recent })
      const channel = makeLiveChannel({ shared: yield* SharedState.orLocal, clients, enqueue })
      yield* bus.listen(channel.listener)
      yield* Effect.addFinalizer(() => Effect.sync(() => clients.size > 0 && channel.watching(false)))

      const accept = makeAccept({ identify, runFork, wss, clients, recent, watching: channel.watching })
      const port = yield* listenLivePort({ config, runFork, accept })

      return {
        upgrade: (req, socket, head) => {
          if ((req.url ?? "/").split("?")[0] !== LIVE_PATH) return false
          accept(req, socket, head, true)
          return true
        },
        port
      }
    })
  )
}
