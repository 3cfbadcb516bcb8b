import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as http from "node:http"
import type * as net from "node:net"
import { type WebSocket, WebSocketServer } from "ws"
import { AdminAuth, SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { EventBus, type GatewayEvent } from "../../platform/events/EventBus.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { makeIdentify } from "../api/Auth.js"
import { Settings } from "../../platform/settings/Settings.js"

/** The live feed's path on the gateway's own port (and any path on the live port). */
export const LIVE_PATH = "/api/live/ws"
/** The spec's default port of the dashboard live WebSocket server (GATEWAY_LIVE_WS_PORT). */
export const DEFAULT_LIVE_PORT = 20129
/** Events replayed to a new client. */
const RECENT = 100
/** A client further behind than this many bytes misses events until it catches up. */
const MAX_BUFFERED = 1024 * 1024
/** A process with dashboard clients says so this often, and is believed this long. */
const WATCH_EVERY_MS = 10_000
const WATCH_FOR_MS = 30_000

/** What the processes of a node (or the gateways on one Redis) tell each other on the `live` channel. */
type LiveWire =
  | { readonly t: "events"; readonly events: ReadonlyArray<GatewayEvent>; readonly to?: string }
  | { readonly t: "watch"; readonly from: string; readonly until: number }

export interface LiveFeedShape {
  /** Takes an upgrade on the main port when its path is the live feed's; false otherwise. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
  /** The separate live port actually bound (undefined when off or not bound). */
  readonly port: () => number | undefined
}

const cookieValue = (header: string | undefined, name: string): string | undefined => {
  if (!header) return undefined
  for (const part of header.split(";")) {
    const i = part.indexOf("=")
    if (i !== -1 && part.slice(0, i).trim() === name) {
      try {
        return decodeURIComponent(part.slice(i + 1).trim())
      } catch {
        return undefined
      }
    }
  }
  return undefined
}

const hostname = (hostHeader: string): string => (hostHeader.startsWith("[") ? hostHeader.slice(0, hostHeader.indexOf("]") + 1) : hostHeader.split(":")[0]!)

/**
 * A browser may open a WebSocket to any site, with the user's cookies: only a page of the
 * gateway itself may use the session. On the main port the Origin must be this host and port;
 * on the live port, this host name (the page was loaded from the main port). No Origin: not a
 * browser, the credentials decide.
 */
export const originAllowed = (req: http.IncomingMessage, samePort: boolean): boolean => {
  const origin = req.headers["origin"]
  if (origin === undefined) return true
  const host = req.headers["host"]
  if (!host) return false
  try {
    const o = new URL(origin)
    return samePort ? o.host === host : o.hostname === hostname(host)
  } catch {
    return false
  }
}

export const refuse = (socket: net.Socket, status: number, text: string, message: string) => {
  const body = JSON.stringify({ _tag: status === 401 ? "Unauthorized" : status === 403 ? "Forbidden" : "NotFound", message })
  if (socket.writable) socket.end(`HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  else socket.destroy()
}

/**
 * Who may open a management WebSocket (`what`: "the live feed", "the inspector feed"): what may
 * use the management API (a session cookie, an admin key, this machine while requireLogin is
 * off). Refused with a JSON answer on the socket; `admitted` runs for a caller who may.
 */
export const admitManagementSocket = (
  identify: ReturnType<typeof makeIdentify>,
  runFork: (effect: Effect.Effect<void>) => unknown,
  req: http.IncomingMessage,
  socket: net.Socket,
  what: string,
  admitted: () => void
): void => {
  runFork(
    identify({ method: "GET", headers: req.headers as Record<string, string | undefined>, sessionCookie: cookieValue(req.headers["cookie"], SESSION_COOKIE), source: req }).pipe(
      Effect.either,
      Effect.map((who) => {
        if (who._tag === "Left") return refuse(socket, who.left._tag === "Unauthorized" ? 401 : 403, who.left._tag, who.left.message)
        const id = who.right
        if (id.kind === "none") return refuse(socket, 401, "Unauthorized", `${what} needs a dashboard session, an admin API key, or this machine with requireLogin off`)
        if (id.kind === "api-key" && !id.key.scopes.includes("admin")) return refuse(socket, 401, "Unauthorized", `this API key lacks the admin scope ${what} needs`)
        admitted()
      }),
      Effect.catchAllCause(() => Effect.sync(() => socket.destroy()))
    )
  )
}

/**
 * The dashboard's live feed (docs/dashboard.md, "Live feed"): every event of the event bus
 * (requests completed and failed, provider errors and recoveries, quotas, combo switches,
 * guardrail actions) pushed to the dashboards that are open, as JSON text frames:
 * `{ type: "hello", recent: [...] }` once (the last 100), then `{ type: "event", event }`.
 *
 * `GATEWAY_ENABLE_LIVE_WS` (default on, read at start) starts it: on the gateway's own port at
 * /api/live/ws, which the dashboard uses, and on its own port, GATEWAY_LIVE_WS_PORT (20129 by
 * default; 0 picks a free one; when PORT is 0, so is it), for tools that expect it there. A port
 * already in use is a warning, not a failed start. Off, the path answers 404 and nothing
 * subscribes. Who may listen: what may use the management API (a session cookie, an admin key,
 * this machine while requireLogin is off), from the gateway's own pages only.
 */
export class LiveFeed extends Context.Tag("gateway/LiveFeed")<LiveFeed, LiveFeedShape>() {
  static readonly layer = Layer.scoped(
    LiveFeed,
    Effect.gen(function* () {
      const flags = yield* FeatureFlags
      const enabled = yield* flags.enabled("GATEWAY_ENABLE_LIVE_WS")
      const config = yield* AppConfig
      if (!enabled) {
        return {
          upgrade: (req, socket) => {
            if ((req.url ?? "/").split("?")[0] !== LIVE_PATH) return false
            refuse(socket, 404, "Not Found", "the live feed is off (GATEWAY_ENABLE_LIVE_WS=false; it is read at start)")
            return true
          },
          port: () => undefined
        }
      }
      const identify = makeIdentify(yield* ApiKeys, yield* AdminAuth, yield* Settings)
      const bus = yield* EventBus
      const runtime = yield* Effect.runtime<never>()
      const runFork = Runtime.runFork(runtime)

      const recent: GatewayEvent[] = []
      const clients = new Set<WebSocket>()
      const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const ws of clients) ws.close(1001, "gateway shutting down")
          wss.close()
        })
      )

      // One listener for all clients. Publishing only queues the event (it runs on the request
      // that published it); the queue is written out once per turn of the event loop, so a
      // burst of events is one pass, as a subscription's batch was, without a fiber's wake-up
      // for every event. A client more than MAX_BUFFERED behind skips events.
      let queued: GatewayEvent[] = []
      let flushing = false
      const flush = () => {
        flushing = false
        const batch = queued
        queued = []
        for (const e of batch) {
          recent.push(e)
          if (recent.length > RECENT) recent.shift()
          if (clients.size === 0) continue
          const frame = JSON.stringify({ type: "event", event: e })
          for (const ws of clients) if (ws.bufferedAmount < MAX_BUFFERED) ws.send(frame)
        }
      }
      const enqueue = (e: GatewayEvent) => {
        queued.push(e)
        if (!flushing) {
          flushing = true
          setImmediate(flush)
        }
      }
      // Every process's events, whichever process a dashboard is connected to (`--workers`, several
      // gateways on Redis), on the `live` channel (docs/scale-out.md) — but only while a dashboard
      // is connected to some process: a process with clients says so (`watch`, again every
      // WATCH_EVERY_MS, forgotten after WATCH_FOR_MS, so one that died takes its watchers along);
      // the others then send their events, batched per turn, and once their recent ones. With
      // nobody watching, a request costs no message.
      const shared = yield* SharedState.orLocal
      const self = `${process.pid}-${Math.random().toString(36).slice(2, 10)}`
      const watchers = new Map<string, number>()
      const watchedElsewhere = (): boolean => {
        if (watchers.size === 0) return false
        const now = Date.now()
        for (const [who, until] of watchers) {
          if (until > now) return true
          watchers.delete(who)
        }
        return false
      }
      let outgoing: GatewayEvent[] = []
      /** This process's own recent events: what a new watcher elsewhere is sent once. */
      const own: GatewayEvent[] = []
      const others = shared.channel<LiveWire>("live", (m) => {
        if (m.t === "events") {
          // Events for one watcher (its catch-up), or for whoever has clients.
          if (m.to !== undefined ? m.to !== self : clients.size === 0) return
          for (const e of m.events) enqueue(e)
          return
        }
        if (m.from === self) return
        const known = (watchers.get(m.from) ?? 0) > Date.now()
        if (m.until > Date.now()) watchers.set(m.from, m.until)
        else watchers.delete(m.from)
        // A new watcher gets this process's recent events once (its clients had only their own process's).
        if (!known && m.until > Date.now() && own.length > 0) others.publish({ t: "events", to: m.from, events: own.slice() })
      })
      const sendOut = () => {
        const batch = outgoing
        outgoing = []
        if (batch.length > 0) others.publish({ t: "events", events: batch })
      }
      yield* bus.listen((e) => {
        enqueue(e)
        if (!others.shared) return
        own.push(e)
        if (own.length > RECENT) own.shift()
        if (!watchedElsewhere()) return
        if (outgoing.push(e) === 1) setImmediate(sendOut)
      })
      let heartbeat: NodeJS.Timeout | undefined
      const watching = (on: boolean) => {
        if (!others.shared) return
        others.publish({ t: "watch", from: self, until: on ? Date.now() + WATCH_FOR_MS : 0 })
        if (on && heartbeat === undefined) {
          heartbeat = setInterval(() => others.publish({ t: "watch", from: self, until: Date.now() + WATCH_FOR_MS }), WATCH_EVERY_MS)
          heartbeat.unref()
        } else if (!on && heartbeat !== undefined) {
          clearInterval(heartbeat)
          heartbeat = undefined
        }
      }
      yield* Effect.addFinalizer(() => Effect.sync(() => clients.size > 0 && watching(false)))

      const accept = (req: http.IncomingMessage, socket: net.Socket, head: Buffer, samePort: boolean) => {
        if (!originAllowed(req, samePort)) return refuse(socket, 403, "Forbidden", "the live feed is open to the gateway's own pages only (Origin differs)")
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

      // The separate live port.
      const configured = yield* Config.integer("GATEWAY_LIVE_WS_PORT").pipe(
        Config.validate({ message: "GATEWAY_LIVE_WS_PORT must be a port number from 0 to 65535 (0 picks a free one)", validation: (n) => n >= 0 && n <= 65535 }),
        Config.option
      )
      const livePort = Option.getOrElse(configured, () => (config.port === 0 ? 0 : DEFAULT_LIVE_PORT))
      const server = http.createServer((_req, res) => {
        const body = JSON.stringify({ _tag: "UpgradeRequired", message: `the live feed is a WebSocket: connect to ws://<host>:<this port>${LIVE_PATH}` })
        res.writeHead(426, { "content-type": "application/json", "content-length": Buffer.byteLength(body), upgrade: "websocket" })
        res.end(body)
      })
      server.on("upgrade", (req, socket, head) => accept(req, socket as net.Socket, head, false))
      let bound: number | undefined
      yield* Effect.async<void>((resume) => {
        const onError = (e: NodeJS.ErrnoException) => {
          server.off("listening", onListening)
          runFork(Effect.logWarning(`live feed: port ${livePort} is not available (${e.code ?? e.message}); the dashboard's feed is on the main port at ${LIVE_PATH}`))
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

      return {
        upgrade: (req, socket, head) => {
          if ((req.url ?? "/").split("?")[0] !== LIVE_PATH) return false
          accept(req, socket, head, true)
          return true
        },
        port: () => bound
      }
    })
  )
}
