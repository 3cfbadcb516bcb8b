import * as Cookies from "@effect/platform/Cookies"
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Layer from "effect/Layer"
import * as Runtime from "effect/Runtime"
import * as Schedule from "effect/Schedule"
import type * as http from "node:http"
import { AdminAuth, SESSION_COOKIE } from "../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { MCP_SCOPES, type McpRestartResult, type McpStatus } from "../../domain/mcp.js"
import { HostPolicy, type HostPolicyShape } from "../../platform/http/HostPolicy.js"
import { trimmedHeader } from "../../platform/http/request.js"
import { isInitialize, readJsonRpc, reply } from "../../inference/mcp/jsonRpcHttp.js"
import { makeIdentify, userOfIdentity } from "../api/Auth.js"
import { Directory, type DirectoryShape } from "../../services/teams/Directory.js"
import { Settings } from "../../platform/settings/Settings.js"
import { callerOfIdentity, type McpCaller } from "./caller.js"
import { type HttpSessions, loadSdk, makeHttpSessions, ownerOf, type Session } from "./httpSessions.js"
import { McpTools } from "./McpTools.js"

export { MAX_MCP_SESSIONS, MCP_SESSION_IDLE_MS } from "./httpSessions.js"

/** Where the streamable HTTP transport answers, on the gateway's own port. */
export const MCP_PATH = "/mcp"
/** A JSON-RPC message (or batch) is small; tool arguments are a few fields. */
export const MAX_MCP_BODY_BYTES = 1024 * 1024

export interface McpHttpShape {
  /** The node:http handler for `MCP_PATH` (POST, GET, DELETE). */
  readonly handle: (req: http.IncomingMessage, res: http.ServerResponse) => void
  readonly status: Effect.Effect<McpStatus>
  /** Closes every HTTP session and builds the tool listing again. */
  readonly restart: Effect.Effect<McpRestartResult>
}

/** `http://<Host>` when the Host header is a plain host[:port], so skill raw URLs are absolute. */
const baseUrlOf = (req: http.IncomingMessage): string | undefined => {
  const host = req.headers.host
  return host && /^[A-Za-z0-9.-]+(:\d+)?$|^\[[0-9A-Fa-f:.]+\](:\d+)?$/.test(host) ? `http://${host}` : undefined
}

interface HandleRequestDeps {
  readonly hosts: HostPolicyShape
  readonly identify: ReturnType<typeof makeIdentify>
  /** The directory (CoreLayer, under every area): who a caller acts as. */
  readonly directory: DirectoryShape | undefined
  readonly sessions: HttpSessions["sessions"]
  readonly open: HttpSessions["open"]
}

/** One request to `MCP_PATH`: the Host and Origin checks, the caller, then its session (a new one for an initialize). */
const makeHandleRequest = ({ hosts, identify, directory, sessions, open }: HandleRequestDeps) => {
  const serve = (
    transport: StreamableHTTPServerTransport,
    caller: McpCaller,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body?: unknown
  ) =>
    Effect.promise(() => {
      // The SDK hands `req.auth` to the handlers as `extra.authInfo`: the caller of this very request.
      Object.assign(req, { auth: { token: "", clientId: caller.id, scopes: [...caller.scopes], extra: { caller } } })
      return transport.handleRequest(req, res, body)
    })

  /** The session a request names, if it exists and belongs to this caller; else the answer was written. */
  const sessionFor = (req: http.IncomingMessage, res: http.ServerResponse, caller: McpCaller): Session | undefined => {
    const id = trimmedHeader(req, "mcp-session-id")
    if (id === undefined)
      return void reply(
        res,
        400,
        -32000,
        "Bad Request: Mcp-Session-Id header is required (open a session with an initialize request first)"
      )
    const session = sessions.get(id)
    if (!session) return void reply(res, 404, -32001, "Session not found: it was closed or never existed; initialize a new one")
    if (session.owner !== ownerOf(caller))
      return void reply(res, 403, -32000, "this session belongs to another caller (the credentials differ from those that opened it)")
    session.lastSeen = Date.now()
    return session
  }

  const handleRequest = (req: http.IncomingMessage, res: http.ServerResponse) =>
    Effect.gen(function* () {
      // DNS rebinding (the MCP transport's own requirement): a foreign Origin, or on a loopback
      // bind a Host that is no name of this gateway, is refused before anything else.
      const refused = hosts.refusal(req)
      if (refused) {
        req.resume()
        return reply(res, 403, -32000, `Forbidden: ${refused.message}`, {}, { code: refused.code })
      }
      const cookies = req.headers.cookie ? Cookies.parseHeader(req.headers.cookie) : {}
      const who = yield* Effect.either(
        identify({
          method: req.method ?? "GET",
          headers: req.headers as Record<string, string | undefined>,
          sessionCookie: cookies[SESSION_COOKIE],
          source: req
        })
      )
      if (who._tag === "Left") {
        req.resume()
        const unauthorized = who.left._tag === "Unauthorized"
        return reply(
          res,
          unauthorized ? 401 : 403,
          -32001,
          who.left.message,
          unauthorized ? { "www-authenticate": 'Bearer realm="gateway"' } : {}
        )
      }
      // The user the caller acts as caps what it may do (docs/teams.md); a removed or disabled one is no authentication.
      const user =
        who.right.kind === "none" || directory === undefined ? undefined : yield* Effect.either(userOfIdentity(directory, who.right))
      if (user?._tag === "Left") {
        req.resume()
        return reply(res, 401, -32001, user.left.message, { "www-authenticate": 'Bearer realm="gateway"' })
      }
      const caller = callerOfIdentity(who.right, baseUrlOf(req), user?.right.role)
      if (req.method === "GET" || req.method === "DELETE") {
        const session = sessionFor(req, res, caller)
        if (session) yield* serve(session.transport, caller, req, res)
        return
      }
      if (req.method !== "POST")
        return reply(res, 405, -32000, `Method Not Allowed: ${MCP_PATH} takes POST, GET and DELETE`, { allow: "GET, POST, DELETE" })
      const read = yield* readJsonRpc(req, res, MAX_MCP_BODY_BYTES)
      if (read === undefined) return
      const body = read.body
      if (req.headers["mcp-session-id"] !== undefined) {
        const session = sessionFor(req, res, caller)
        if (session) yield* serve(session.transport, caller, req, res, body)
        return
      }
      if (!isInitialize(body))
        return reply(res, 400, -32000, "Bad Request: no Mcp-Session-Id header; a session begins with an initialize request")
      yield* serve(yield* open(caller), caller, req, res, body)
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError(`${req.method} ${MCP_PATH} failed unexpectedly`, Cause.pretty(cause)).pipe(
          Effect.zipRight(Effect.sync(() => reply(res, 500, -32603, "internal error (logged by the gateway)")))
        )
      )
    )

  return handleRequest
}

/**
 * MCP over streamable HTTP on the gateway's port: sessions (`Mcp-Session-Id`) each with their own
 * SDK server and transport, callers authenticated on every request as the management plane
 * authenticates (docs/mcp.md), the caller handed to the tools through the transport's authInfo.
 */
export class McpHttp extends Context.Tag("gateway/McpHttp")<McpHttp, McpHttpShape>() {
  static readonly layer = Layer.scoped(
    McpHttp,
    Effect.gen(function* () {
      const tools = yield* McpTools
      const identify = makeIdentify(yield* ApiKeys, yield* AdminAuth, yield* Settings)
      const hosts = yield* HostPolicy
      const runtime = yield* Effect.runtime<never>()
      const run = Runtime.runPromise(runtime)
      const { sessions, closeAll, closeIdle, open } = makeHttpSessions({ tools, run })
      const startedAt = new Date().toISOString()
      let restartedAt: string | null = null

      yield* Effect.addFinalizer(() => closeAll)
      // Idle sessions are closed once a minute.
      yield* closeIdle.pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.forkScoped)
      const directory = Option.getOrUndefined(yield* Effect.serviceOption(Directory))
      const handleRequest = makeHandleRequest({ hosts, identify, directory, sessions, open })

      return {
        handle: (req, res) => void Runtime.runFork(runtime)(handleRequest(req, res)),
        status: Effect.map(Effect.zip(tools.settings, Effect.promise(loadSdk)), ([s, { LATEST_PROTOCOL, PROTOCOL_VERSIONS }]) => ({
          transports: [
            { name: "streamable-http" as const, endpoint: MCP_PATH },
            { name: "stdio" as const, endpoint: "gateway --mcp" }
          ],
          protocolVersions: [...PROTOCOL_VERSIONS],
          latestProtocolVersion: LATEST_PROTOCOL,
          tools: tools.tools.length,
          scopes: [...MCP_SCOPES],
          sessionsActive: sessions.size,
          startedAt,
          restartedAt,
          ...s
        })),
        restart: Effect.gen(function* () {
          const closedSessions = sessions.size
          yield* closeAll
          yield* tools.rebuild
          restartedAt = new Date().toISOString()
          yield* Effect.logInfo(`MCP restarted: ${closedSessions} session(s) closed, ${tools.tools.length} tools`)
          return { closedSessions, tools: tools.tools.length, restartedAt }
        })
      }
    })
  )
}
