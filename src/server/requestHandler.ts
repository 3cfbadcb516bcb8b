/**
 * What a request meets in the HTTP server, once it arrived: the answers in flight counted (so
 * shutdown can wait for them), the IP filter, then its plane (the dashboard's files, MCP, the
 * loopback-only inspector routes, an inference route, or the management API). This is the
 * request path: everything here is made once per server, nothing per request.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import type * as Runtime from "effect/Runtime"
import type * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import type { InferenceRequest, InferenceRoutesShape } from "../inference/InferenceRoutes.js"
import { gatewayHeaders } from "../inference/io.js"
import type { RealtimeWebSocketShape } from "./RealtimeWebSocket.js"
import type { ResponsesWebSocketShape } from "./ResponsesWebSocket.js"
import { newRequestId } from "../kernel/ids.js"
import { directLocal } from "../management/api/Auth.js"
import type { NodeHandler } from "../management/api/ManagementHandler.js"
import type { InspectorFeedShape } from "../management/dashboard/InspectorFeed.js"
import type { LiveFeedShape } from "../management/dashboard/LiveFeed.js"
import type { DashboardShape } from "../management/dashboard/Dashboard.js"
import { MCP_PATH, type McpHttpShape } from "../management/mcp/McpHttp.js"
import { isMcpGatewayPath, MCP_GATEWAY_PATH, type McpGatewayShape } from "../inference/mcp/McpGateway.js"
import { SlotSet } from "../kernel/churn.js"
import { guardUpgradeSocket } from "../platform/http/lazyWebSocketServer.js"
import { lingering } from "../platform/http/lingering.js"
import { TurnBudget } from "../platform/http/turnBudget.js"
import type { IpScreen } from "./ipScreen.js"

/** The server's `FiberSet.runtime`: forks a program into the server's fibers (awaited at shutdown). */
export type Run = (effect: Effect.Effect<void>, options?: Runtime.RunForkOptions) => Fiber.RuntimeFiber<void, never>

/** What the server keeps of its connections and answers: written per request, read by the shutdown. */
export interface ServerTraffic {
  /** Set when shutdown begins: from then on every answer says `Connection: close`. */
  closing: boolean
  /**
   * Answers being written, so shutdown can still mark those whose headers have not gone out. These
   * come and go with every request, the connections with every connection: `SlotSet`s, not `Set`s
   * (src/kernel/churn.ts).
   */
  readonly open: SlotSet<http.ServerResponse>
  /**
   * Connections accepted that have not sent a complete request yet. Node counts them as idle,
   * so closing idle connections at shutdown would reset a client whose request is on its way
   * (it connected just before the signal, or the server was busy): they get FRESH_GRACE.
   */
  readonly fresh: SlotSet<net.Socket>
  /** Every connection open. */
  readonly sockets: SlotSet<net.Socket>
  /** Management requests in flight: they run on the platform's own fibers, counted so shutdown waits for them too. */
  management: number
  /** Requests the common path serves (docs/ARCHITECTURE.md, "The common path"): no fiber of theirs to await. */
  common: number
  /**
   * Sockets the realtime and Responses WebSocket transports took (their sessions, and an upgrade
   * they refused until its socket closes): traffic no answer counts.
   */
  sessions: number
  /**
   * Requests and upgrades received since the server started: the young collection and the C heap's
   * trim at rest wait for an interval with under one a second (src/platform/system/IdleMemory.ts).
   */
  received: number
}

/** A server's traffic before its first connection. */
export const newTraffic = (): ServerTraffic => ({
  closing: false,
  open: new SlotSet(),
  fresh: new SlotSet(),
  sockets: new SlotSet(),
  management: 0,
  common: 0,
  sessions: 0,
  received: 0
})

/** A request's answer, once screened: `serve` sends it to its plane, `failed` is the last resort for a handler that threw. */
export interface Planes {
  readonly serve: (req: http.IncomingMessage, res: http.ServerResponse) => void
  readonly failed: (req: http.IncomingMessage, res: http.ServerResponse, error: unknown) => void
}

/** A turn's time for starting new requests, by default (`GATEWAY_TURN_BUDGET_MS`; platform/http/turnBudget.ts). */
export const TURN_BUDGET_MS = 10

/** The node:http request listener: counts the answer in flight (or marks it `Connection: close` during shutdown), then screens and serves
 * it, within the turn's budget for new requests (platform/http/turnBudget.ts). */
export const makeRequestListener = (deps: {
  readonly traffic: ServerTraffic
  readonly screen: IpScreen
  readonly failed: Planes["failed"]
  /** A turn's time for starting new requests (ms). */
  readonly turnBudgetMs: number
}) => {
  const { traffic, failed } = deps
  const { open, fresh } = traffic
  const { screened } = deps.screen
  const start = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    try {
      screened(req, res)
    } catch (e) {
      failed(req, res, e)
    }
  }
  // A request whose client went away while it waited: nothing to answer, no longer in flight.
  const gone = (req: http.IncomingMessage, res: http.ServerResponse): boolean => {
    if (!res.destroyed && !req.socket.destroyed) return false
    open.delete(res)
    return true
  }
  const turns = new TurnBudget(deps.turnBudgetMs, start, gone)
  const listener = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    // During shutdown the answer says `Connection: close` and node closes the socket after it.
    if (traffic.closing) res.shouldKeepAlive = false
    else open.add(res)
    traffic.received++
    fresh.delete(req.socket)
    // A body nobody reads (a 401, 404 or 413 given early, a GET or DELETE with a body) is read
    // and dropped after the answer, so the client still sending it is not reset.
    lingering(req, res)
    turns.admit(req, res)
  }
  return Object.assign(listener, { turns })
}

export interface PlanesDeps {
  readonly traffic: ServerTraffic
  readonly run: Run
  readonly inference: InferenceRoutesShape
  readonly management: NodeHandler
  readonly mcp: McpHttpShape
  /** `/v1/mcp`: the registered MCP servers behind the gateway (src/inference/mcp/McpGateway.ts). */
  readonly mcpGateway: McpGatewayShape
  readonly dashboard: DashboardShape
}

/** The planes a screened request goes to (the dashboard, MCP, the inspector routes, inference, management), and the 500 of a handler that
 * threw. */
export const makePlanes = (deps: PlanesDeps): Planes => {
  const { traffic, run, inference, management, mcp, mcpGateway, dashboard } = deps
  const { open } = traffic

  /**
   * The end of an answer the common path gave (`this`), heard once: one function for every
   * request, where `once` would wrap a closure per request in a closure and a state of its own.
   */
  function commonClosed(this: http.ServerResponse): void {
    this.off("close", commonClosed)
    traffic.common--
    open.delete(this)
  }

  /** The end of an answer a forked program gives (`this`), heard once (as `commonClosed`). */
  function forkedClosed(this: http.ServerResponse): void {
    this.off("close", forkedClosed)
    open.delete(this)
  }

  const serve = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = req.url ?? "/"
    const q = url.indexOf("?")
    const path = q === -1 ? url : url.slice(0, q)
    // The dashboard's files, and a browser at `/` sent there (src/management/dashboard/Dashboard.ts): one
    // character test for every other path.
    if ((path.length === 1 || path.charCodeAt(1) === 100) /* "/" or "/d…" */ && dashboard.handle(req, res, path))
      return void open.delete(res)
    // MCP over streamable HTTP (src/management/mcp/McpHttp.ts): its own sessions and long-lived streams.
    if (path === MCP_PATH) {
      res.once("close", () => open.delete(res))
      return mcp.handle(req, res)
    }
    // The MCP servers behind the gateway: sessions and long-lived streams as on `/mcp`, a key always.
    if (path.startsWith(MCP_GATEWAY_PATH) && isMcpGatewayPath(path)) {
      res.once("close", () => open.delete(res))
      return mcpGateway.handle(req, res, path)
    }
    // The inspector and capture routes (spec document 3) are loopback-only, checked before any
    // credentials: a session token leaked through a tunnel or a forwarding proxy cannot reach them.
    if (path.startsWith("/api/tools/") && !directLocal(req)) return loopbackOnly(req, res)
    // With `fork`, a request the common path takes runs without a fiber ("common"), and is
    // forked only if it stops being common (docs/ARCHITECTURE.md, "The common path").
    const taken = inference.route(req, res, path, q === -1 ? "" : url.slice(q + 1), (request) => fork(res, request))
    if (taken === undefined) {
      traffic.management++
      res.once("close", () => {
        traffic.management--
        open.delete(res)
      })
      return management(req, res)
    }
    if (taken === "common") {
      // No fiber to wait for at shutdown: counted until its answer is done with.
      traffic.common++
      return void res.on("close", commonClosed)
    }
    res.on("close", forkedClosed)
    fork(res, taken)
  }

  /** Runs a request's program on its own fiber, interrupted when its client goes away. */
  const fork = (res: http.ServerResponse, taken: InferenceRequest) => {
    // The fiber is the request's own: its log annotations (request id, trace id when there is
    // one) are set when it is forked, at no cost of effects.
    const fiber = run(taken.program, {
      updateRefs: (refs, id) => {
        const annotations = HashMap.set(
          FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations),
          "requestId",
          taken.requestId as unknown
        )
        return FiberRefs.updateAs(refs, {
          fiberId: id,
          fiberRef: FiberRef.currentLogAnnotations,
          value: taken.traceId === undefined ? annotations : HashMap.set(annotations, "traceId", taken.traceId as unknown)
        })
      }
    })
    // Forked by the common path after its client left: interrupted at once.
    if (res.closed) {
      if (!res.writableFinished) fiber.unsafeInterruptAsFork(FiberId.none)
      return
    }
    res.once("close", () => {
      if (!res.writableFinished) fiber.unsafeInterruptAsFork(FiberId.none)
    })
  }

  const loopbackOnly = (req: http.IncomingMessage, res: http.ServerResponse) => {
    open.delete(res)
    const body = JSON.stringify({
      _tag: "Forbidden",
      message:
        "the traffic inspector and capture routes are loopback-only: call them from this machine, directly (not through a tunnel, a proxy or a forwarded header)"
    })
    res.writeHead(403, { ...gatewayHeaders(newRequestId()), "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
    req.resume()
  }

  /** Last resort for a handler that threw (a bug): a 500 if nothing was sent yet, a log line, and the server goes on. */
  const failed = (req: http.IncomingMessage, res: http.ServerResponse, error: unknown) => {
    open.delete(res)
    const requestId = newRequestId()
    run(
      Effect.logError(
        `${req.method} ${(req.url ?? "/").split("?")[0]} failed unexpectedly; answered 500`,
        Cause.pretty(Cause.die(error))
      ).pipe(Effect.annotateLogs("requestId", requestId))
    )
    try {
      if (res.headersSent) return void res.destroy()
      const body = JSON.stringify({
        error: { message: `internal error (request ${requestId})`, type: "server_error", code: "internal_error", param: null }
      })
      res.writeHead(500, { ...gatewayHeaders(requestId), "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      res.end(body)
    } catch {
      res.destroy()
    }
  }

  return { serve, failed }
}

export interface UpgradeDeps {
  readonly traffic: ServerTraffic
  readonly run: Run
  readonly screen: IpScreen
  readonly live: LiveFeedShape
  readonly inspectorFeed: InspectorFeedShape
  readonly websocket: ResponsesWebSocketShape
  /** Realtime sessions (`/v1/realtime`). */
  readonly realtime: RealtimeWebSocketShape
}

/** The `upgrade` listener: WebSocket upgrades go to the dashboard's live feed, the inspector feed and the Responses transport; any other
 * path is not upgradable. */
export const makeUpgradeListener = (deps: UpgradeDeps) => {
  const { run, screen, live, inspectorFeed, websocket, realtime } = deps
  const { traffic } = deps
  const { fresh } = traffic
  const sessionClosed = () => {
    traffic.sessions--
  }
  /** A session taken (the socket is the transport's now): counted until its socket closes. */
  const session = (socket: net.Socket): true => {
    traffic.sessions++
    socket.once("close", sessionClosed)
    return true
  }
  return (req: http.IncomingMessage, duplex: Duplex, head: Buffer): void => {
    const socket = duplex as net.Socket
    guardUpgradeSocket(socket)
    fresh.delete(socket)
    traffic.received++
    try {
      const refused = screen.upgradeRefusal(req)
      if (refused) {
        const body = JSON.stringify({ error: { message: refused, type: "forbidden", code: "ip_not_allowed", param: null } })
        socket.end(
          `HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
        )
        return
      }
      if (
        !live.upgrade(req, socket, head) &&
        !inspectorFeed.upgrade(req, socket, head) &&
        !(websocket.upgrade(req, socket, head) && session(socket)) &&
        !(realtime.upgrade(req, socket, head) && session(socket))
      ) {
        socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
      }
    } catch (e) {
      run(Effect.logError(`upgrade of ${(req.url ?? "/").split("?")[0]} failed unexpectedly`, Cause.pretty(Cause.die(e))))
      if (socket.writable) socket.end("HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
      else socket.destroy()
    }
  }
}
