import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberId from "effect/FiberId"
import * as FiberRef from "effect/FiberRef"
import * as FiberRefs from "effect/FiberRefs"
import * as HashMap from "effect/HashMap"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Schedule from "effect/Schedule"
import * as http from "node:http"
import type * as net from "node:net"
import type { AddressInfo } from "node:net"
import { AdminAuth } from "../services/auth/AdminAuth.js"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { AppConfig, isLoopbackHost } from "../platform/config/AppConfig.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { type InferenceRequest, InferenceRoutes } from "../inference/dispatch.js"
import { newRequestId } from "../kernel/ids.js"
import { GatewayServer } from "../kernel/internalCall.js"
import { gatewayHeaders } from "../inference/io.js"
import { ResponsesWebSocket } from "../inference/responsesWs.js"
import { ManagementHandler } from "../management/api/App.js"
import { Dashboard } from "../management/dashboard/Static.js"
import { LiveFeed } from "../management/dashboard/LiveFeed.js"
import { InspectorFeed } from "../management/dashboard/InspectorFeed.js"
import { directLocal } from "../management/api/Auth.js"
import { MCP_PATH, McpHttp } from "../management/mcp/McpHttp.js"
import { answerRefused, lingerOnClose, lingering } from "../platform/http/lingering.js"
import { clientAddress } from "../platform/http/request.js"
import { ipRefusal } from "../platform/settings/ipFilter.js"
import { Settings } from "../platform/settings/Settings.js"
import { VERSION } from "../kernel/version.js"

/** How long in-flight requests get to finish on shutdown before their connections are cut. */
export const SHUTDOWN_GRACE = Duration.seconds(10)
/** How long, at shutdown, a connection that has not sent its request yet gets to send it. */
export const FRESH_GRACE = Duration.seconds(1)

export class ServerStartError extends Error {}

const listen = (server: http.Server, port: number, host: string) =>
  Effect.async<AddressInfo, ServerStartError>((resume) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off("listening", onListening)
      resume(
        Effect.fail(
          new ServerStartError(
            err.code === "EADDRINUSE"
              ? `port ${port} on ${host} is already in use (another gateway running? choose one with --port or PORT)`
              : `cannot listen on ${host}:${port}: ${err.message}`
          )
        )
      )
    }
    const onListening = () => {
      server.off("error", onError)
      resume(Effect.succeed(server.address() as AddressInfo))
    }
    server.once("error", onError)
    server.once("listening", onListening)
    server.listen(port, host)
  })

/**
 * One node:http server for both planes. Inference routes run as Effect programs forked on a
 * prepared runtime and tracked in a FiberSet; `/mcp` goes to the MCP transport; everything else
 * goes to the management HttpApi.
 * On shutdown the server stops accepting, waits up to SHUTDOWN_GRACE for in-flight requests of both planes,
 * then cuts what is left; only after that do the layers below (the batched writer) close.
 */
/** The HTTP server of both planes; publishes where it listens (`GatewayServer`, src/kernel/internalCall.ts). */
export const GatewayServerLive = Layer.scoped(
  GatewayServer,
  Effect.gen(function* () {
    const config = yield* AppConfig
    const inference = yield* InferenceRoutes
    const management = yield* ManagementHandler
    const websocket = yield* ResponsesWebSocket
    const mcp = yield* McpHttp
    const dashboard = yield* Dashboard
    const live = yield* LiveFeed
    const inspectorFeed = yield* InspectorFeed
    const flags = yield* FeatureFlags
    const settings = yield* Settings
    const fibers = yield* FiberSet.make<void, never>()
    // Management requests run on the platform's own fibers: counted, so shutdown waits for them too.
    let managementInFlight = 0
    // Requests the common path serves (docs/ARCHITECTURE.md, "The common path"): no fiber of theirs to await.
    let commonInFlight = 0
    // Request fibers run without Effect's built-in fiber metrics (a counter and a histogram
    // updated per fiber, which nothing reads): one fiber per request.
    const run = yield* FiberSet.runtime(fibers)<never>().pipe(Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.disable(RuntimeFlags.RuntimeMetrics)))

    // Set when shutdown begins: from then on every answer says `Connection: close`.
    let closing = false
    // Answers being written, so shutdown can still mark those whose headers have not gone out.
    const open = new Set<http.ServerResponse>()

    // The inbound IP filter (docs/operations.md, "Settings"): before anything else, on every
    // route. With both lists empty this is one boolean read per request.
    const TRUST = "GATEWAY_TRUST_PROXY_HEADERS" as const
    let trustProxy = yield* flags.enabled(TRUST)
    /** The filter's verdict for `req`; undefined lets it in. */
    const refusal = (req: http.IncomingMessage, trust: boolean) => {
      const verdict = settings.ipFilter().check(clientAddress(req, trust))
      return verdict && ipRefusal(verdict)
    }
    const refuse = (req: http.IncomingMessage, res: http.ServerResponse, message: string) => {
      const requestId = newRequestId()
      const body = JSON.stringify({ error: { message, type: "forbidden", code: "ip_not_allowed", param: null } })
      res.writeHead(403, { ...gatewayHeaders(requestId), "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      res.end(body)
      req.resume()
    }
    const screened = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (!settings.ipFilter().active) return serve(req, res)
      const trust = flags.peekEnabled(TRUST)
      if (trust !== undefined) {
        trustProxy = trust
        const refused = refusal(req, trust)
        return refused ? refuse(req, res, refused) : serve(req, res)
      }
      // The flag is not known fresh: read it, then decide (the request waits a moment).
      run(
        Effect.map(flags.enabled(TRUST), (t) => {
          trustProxy = t
          try {
            const refused = refusal(req, t)
            return refused ? refuse(req, res, refused) : serve(req, res)
          } catch (e) {
            failed(req, res, e)
          }
        })
      )
    }

    const serve = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const url = req.url ?? "/"
      const q = url.indexOf("?")
      const path = q === -1 ? url : url.slice(0, q)
      // The dashboard's files, and a browser at `/` sent there (src/management/dashboard/Static.ts): one
      // character test for every other path.
      if ((path.length === 1 || path.charCodeAt(1) === 100) /* "/" or "/d…" */ && dashboard.handle(req, res, path)) return void open.delete(res)
      // MCP over streamable HTTP (src/management/mcp/McpHttp.ts): its own sessions and long-lived streams.
      if (path === MCP_PATH) {
        res.once("close", () => open.delete(res))
        return mcp.handle(req, res)
      }
      // The inspector and capture routes (spec document 3) are loopback-only, checked before any
      // credentials: a session token leaked through a tunnel or a forwarding proxy cannot reach them.
      if (path.startsWith("/api/tools/") && !directLocal(req)) return loopbackOnly(req, res)
      // With `fork`, a request the common path takes runs without a fiber ("common"), and is
      // forked only if it stops being common (docs/ARCHITECTURE.md, "The common path").
      const taken = inference.route(req, res, path, q === -1 ? "" : url.slice(q + 1), (request) => fork(res, request))
      if (taken === undefined) {
        managementInFlight++
        res.once("close", () => {
          managementInFlight--
          open.delete(res)
        })
        return management(req, res)
      }
      if (taken === "common") {
        // No fiber to wait for at shutdown: counted until its answer is done with.
        commonInFlight++
        return void res.once("close", () => {
          commonInFlight--
          open.delete(res)
        })
      }
      res.once("close", () => open.delete(res))
      fork(res, taken)
    }

    /** Runs a request's program on its own fiber, interrupted when its client goes away. */
    const fork = (res: http.ServerResponse, taken: InferenceRequest) => {
      // The fiber is the request's own: its log annotations (request id, trace id when there is
      // one) are set when it is forked, at no cost of effects.
      const fiber = run(taken.program, {
        updateRefs: (refs, id) => {
          const annotations = HashMap.set(FiberRefs.getOrDefault(refs, FiberRef.currentLogAnnotations), "requestId", taken.requestId as unknown)
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
        message: "the traffic inspector and capture routes are loopback-only: call them from this machine, directly (not through a tunnel, a proxy or a forwarded header)"
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
        Effect.logError(`${req.method} ${(req.url ?? "/").split("?")[0]} failed unexpectedly; answered 500`, Cause.pretty(Cause.die(error))).pipe(
          Effect.annotateLogs("requestId", requestId)
        )
      )
      try {
        if (res.headersSent) return void res.destroy()
        const body = JSON.stringify({ error: { message: `internal error (request ${requestId})`, type: "server_error", code: "internal_error", param: null } })
        res.writeHead(500, { ...gatewayHeaders(requestId), "content-type": "application/json", "content-length": Buffer.byteLength(body) })
        res.end(body)
      } catch {
        res.destroy()
      }
    }

    // requestTimeout (node's default, 5 min) bounds receiving a request, not streaming the answer.
    const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
      // During shutdown the answer says `Connection: close` and node closes the socket after it.
      if (closing) res.shouldKeepAlive = false
      else open.add(res)
      fresh.delete(req.socket)
      // A body nobody reads (a 401, 404 or 413 given early, a GET or DELETE with a body) is read
      // and dropped after the answer, so the client still sending it is not reset.
      lingering(req, res)
      try {
        screened(req, res)
      } catch (e) {
        failed(req, res, e)
      }
    })

    // A request the HTTP parser refuses (or that did not arrive in time) is answered, and what the
    // client still sends is read and dropped before the socket closes, instead of node's bare
    // status and a destroy that resets a client still sending its body.
    server.on("clientError", answerRefused)

    // Connections accepted that have not sent a complete request yet. Node counts them as idle,
    // so closing idle connections at shutdown would reset a client whose request is on its way
    // (it connected just before the signal, or the server was busy): they get FRESH_GRACE.
    const fresh = new Set<net.Socket>()
    const sockets = new Set<net.Socket>()
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

    // WebSocket upgrades: the dashboard's live feed and the Responses transport; any other path is not upgradable.
    server.on("upgrade", (req, socket, head) => {
      fresh.delete(socket as net.Socket)
      try {
        const refused = settings.ipFilter().active ? refusal(req, flags.peekEnabled(TRUST) ?? trustProxy) : undefined
        if (refused) {
          const body = JSON.stringify({ error: { message: refused, type: "forbidden", code: "ip_not_allowed", param: null } })
          socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
          return
        }
        if (!live.upgrade(req, socket as net.Socket, head) && !inspectorFeed.upgrade(req, socket as net.Socket, head) && !websocket.upgrade(req, socket as net.Socket, head)) {
          socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        }
      } catch (e) {
        run(Effect.logError(`upgrade of ${(req.url ?? "/").split("?")[0]} failed unexpectedly`, Cause.pretty(Cause.die(e))))
        if (socket.writable) socket.end("HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        else socket.destroy()
      }
    })

    const address = yield* listen(server, config.port, config.host)
    yield* Effect.addFinalizer(
      Effect.fnUntraced(function* () {
        // Answers still to be written say `Connection: close` (their sockets then close after
        // them, with a FIN, and clients do not send another request on them); idle keep-alive
        // sockets are closed now, with a FIN too.
        closing = true
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
        const managementDone = Effect.repeat(
          Effect.sync(() => managementInFlight + commonInFlight),
          { until: (n) => n === 0, schedule: Schedule.spaced("10 millis") }
        )
        // Interruptible, or the timeout could not end the wait (a finalizer is uninterruptible).
        const drained = yield* Effect.interruptible(Effect.zipRight(FiberSet.awaitEmpty(fibers), managementDone)).pipe(Effect.timeout(SHUTDOWN_GRACE), Effect.option)
        if (drained._tag === "None") yield* Effect.logWarning("shutdown grace elapsed; closing remaining connections")
        // Sockets whose answers went out before shutdown (as keep-alive) are idle now: closed cleanly first.
        server.closeIdleConnections()
        server.closeAllConnections()
        yield* Effect.logInfo("server stopped")
      })
    )

    const host = address.family === "IPv6" ? `[${address.address}]` : address.address
    const url = `http://${host}:${address.port}`
    yield* Effect.logInfo(`gateway ${VERSION} listening on ${url} (data in ${config.dataDir})`)
    if (!isLoopbackHost(config.host) && !(yield* flags.enabled("REQUIRE_API_KEY"))) {
      yield* Effect.logWarning(
        config.allowUnauthenticatedRemote
          ? `SECURITY: listening on ${config.host}, reachable from other machines, while REQUIRE_API_KEY is off and GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true: anyone who can reach this port can use your providers. Set REQUIRE_API_KEY=true (or PUT /api/settings/feature-flags) and create keys with \`gateway keys add\`.`
          : `listening on ${config.host}, reachable from other machines, while REQUIRE_API_KEY is off: inference requires a gateway API key on this address anyway (create one with \`gateway keys add\`); GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE=true would serve without keys.`
      )
    }
    const keys = yield* ApiKeys
    const admin = yield* AdminAuth
    if (!(yield* admin.hasPassword) && !(yield* keys.hasAdminKey)) {
      yield* Effect.logWarning("no admin password or admin API key is set, so the management API cannot be used yet: run `gateway setup` (or start with INITIAL_PASSWORD)")
    }
    return { host: address.address, port: address.port, url }
  })
)
