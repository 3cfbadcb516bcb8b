import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Directory } from "../../services/teams/Directory.js"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import type * as http from "node:http"
import type * as net from "node:net"
import type { WebSocket } from "ws"
import { lazyWebSocketServer } from "../../platform/http/lazyWebSocketServer.js"
import { AdminAuth } from "../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { type FeedEvent, summaryOf } from "../../services/inspector/bufferViews.js"
import { Inspector } from "../../services/inspector/Inspector.js"
import { INSPECTOR_WS_PATH } from "../../services/inspector/paths.js"
import { Settings } from "../../platform/settings/Settings.js"
import { directLocal, identifyWithin, makeIdentify } from "../api/Auth.js"
import { admitManagementSocket, originAllowed, refuse } from "./LiveFeed.js"

/** A client further behind than this many bytes is dropped (it reconnects and gets a fresh snapshot). */
const MAX_BUFFERED = 4 * 1024 * 1024

export interface InspectorFeedShape {
  /** Takes an upgrade when its path is the inspector's feed; false otherwise. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
}

/**
 * The inspector's live feed of entry summaries (docs/inspector.md#api): loopback-only before credentials, then the management
 * API's rules from the gateway's own pages (docs/dashboard.md#live-feed); a client that cannot keep up is dropped, not buffered.
 */
export class InspectorFeed extends Context.Tag("gateway/InspectorFeed")<InspectorFeed, InspectorFeedShape>() {
  static readonly layer = Layer.scoped(
    InspectorFeed,
    Effect.gen(function* () {
      const inspector = yield* Inspector
      const identify = identifyWithin(
        makeIdentify(yield* ApiKeys, yield* AdminAuth, yield* Settings),
        Option.getOrUndefined(yield* Effect.serviceOption(Directory)),
        ["admin"],
        "the inspector feed"
      )
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())
      const clients = new Set<WebSocket>()
      const wss = lazyWebSocketServer({ maxPayload: 4096 })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const ws of clients) ws.close(1001, "gateway shutting down")
          wss.close()
        })
      )

      const attach = (ws: WebSocket) => {
        let queued: Array<FeedEvent> = []
        let scheduled = false
        /** Events wait for the snapshot (which may wait for the other workers' entries). */
        let snapshotSent = false
        // Events of one turn of the event loop go out together (a burst is one pass).
        const flush = () => {
          scheduled = false
          if (!snapshotSent) return
          const batch = queued
          queued = []
          if (ws.readyState !== ws.OPEN) return
          if (ws.bufferedAmount > MAX_BUFFERED) {
            ws.close(1013, "too far behind: reconnect for a fresh snapshot")
            ws.terminate()
            return
          }
          for (const e of batch) ws.send(JSON.stringify(e))
        }
        const unsubscribe = inspector.core.subscribe((e) => {
          queued.push(e)
          if (!scheduled) {
            scheduled = true
            setImmediate(flush)
          }
        })
        clients.add(ws)
        ws.on("close", () => {
          unsubscribe()
          clients.delete(ws)
        })
        ws.on("error", () => ws.terminate())
        // Under --workers, what the other processes recorded before anyone looked is gathered first.
        const snapshot = () => {
          if (ws.readyState === ws.OPEN)
            ws.send(
              JSON.stringify({
                type: "snapshot",
                entries: inspector.core.entries({}).map(summaryOf),
                bufferSize: inspector.config.bufferSize
              })
            )
          snapshotSent = true
          // What came meanwhile is in the snapshot already; later changes follow it.
          queued = []
        }
        if (inspector.node === undefined) snapshot()
        else runFork(Effect.andThen(inspector.gathered, Effect.sync(snapshot)))
      }

      return {
        upgrade: (req, socket, head) => {
          if ((req.url ?? "/").split("?")[0] !== INSPECTOR_WS_PATH) return false
          if (!directLocal(req)) {
            refuse(
              socket,
              403,
              "Forbidden",
              "the traffic inspector is loopback-only: connect from this machine, directly (not through a tunnel or a proxy)"
            )
            return true
          }
          if (!originAllowed(req, true)) {
            refuse(socket, 403, "Forbidden", "the inspector feed is open to the gateway's own pages only (Origin differs)")
            return true
          }
          admitManagementSocket(identify, runFork, req, socket, "the inspector feed", () => wss.handleUpgrade(req, socket, head, attach))
          return true
        }
      }
    })
  )
}
