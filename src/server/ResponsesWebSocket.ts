import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import type * as http from "node:http"
import type * as net from "node:net"
import type { WebSocket } from "ws"
import { type LazyWebSocketServer, lazyWebSocketServer } from "../platform/http/lazyWebSocketServer.js"
import { newRequestId } from "../kernel/ids.js"
import { RequestHooks } from "../kernel/RequestHooks.js"
import { AppConfig, type InferenceAccess, inferenceAccess } from "../platform/config/AppConfig.js"
import { FeatureFlags, type FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { InboundLimits } from "../services/accounting/InboundLimits.js"
import { ApiKeys, type ApiKeysShape } from "../services/auth/ApiKeys.js"
import { Guardrails } from "../services/guardrails/Guardrails.js"
import { authenticateInference } from "../inference/auth.js"
import { InferenceRoutes } from "../inference/InferenceRoutes.js"
import { gatewayHeaders } from "../inference/io.js"
import { makeResponseAttempt } from "./responsesWsAttempt.js"
import { makeServe } from "./responsesWsResponse.js"
import { openSession, type SessionDeps } from "./responsesWsSession.js"
import { StreamWatchdog } from "../inference/stream.js"
import { StreamTimeouts } from "../inference/StreamTimeouts.js"

export const WS_PATHS = new Set(["/v1/responses", "/responses", "/api/v1/responses"])

export interface ResponsesWebSocketShape {
  /** Handles an HTTP upgrade on the server; false when the path is not a Responses WebSocket path. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
}

/** X-Gateway-Version and X-Gateway-Request-Id as raw header lines, for answers written to the socket itself. */
const headerLines = (requestId: string): Array<string> => Object.entries(gatewayHeaders(requestId)).map(([k, v]) => `${k}: ${v}`)

/** An upgrade refused with an HTTP answer written to the socket itself. */
const refuse = (socket: net.Socket, requestId: string, status: number, reason: string, message: string, code: string) => {
  const body = JSON.stringify({ error: { message, type: status === 401 ? "authentication_error" : "invalid_request_error", code } })
  const head = [
    `HTTP/1.1 ${status} ${reason}`,
    ...headerLines(requestId),
    "content-type: application/json",
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close"
  ]
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`)
}

/** What `accept` needs: who may connect (the flag, the keys, the access rules) and where an accepted socket goes. */
interface AcceptDeps {
  readonly flags: FeatureFlagsShape
  readonly keys: ApiKeysShape
  readonly access: InferenceAccess
  readonly wss: LazyWebSocketServer
  /** The request id each accepted upgrade's 101 carries. */
  readonly upgradeIds: WeakMap<http.IncomingMessage, string>
  readonly session: SessionDeps
}

/** An upgrade on a Responses WebSocket path: refused with an HTTP answer, or its socket handed to a session (`openSession`); made once per
 * layer. */
const makeAccept = ({ flags, keys, access, wss, upgradeIds, session }: AcceptDeps) =>
  Effect.fnUntraced(function* (req: http.IncomingMessage, socket: net.Socket, head: Buffer, query: URLSearchParams, requestId: string) {
    if (!(yield* flags.enabled("GATEWAY_UPSTREAM_WS_ENABLED"))) {
      return refuse(
        socket,
        requestId,
        426,
        "Upgrade Required",
        "the Responses WebSocket transport is off (GATEWAY_UPSTREAM_WS_ENABLED); use POST /v1/responses",
        "websocket_disabled"
      )
    }
    const auth = yield* authenticateInference(keys, flags, access, req, query).pipe(Effect.either)
    if (auth._tag === "Left")
      return refuse(
        socket,
        requestId,
        auth.left.status,
        auth.left.status === 401 ? "Unauthorized" : "Forbidden",
        auth.left.message,
        auth.left.code ?? "unauthorized"
      )
    upgradeIds.set(req, requestId)
    wss.handleUpgrade(req, socket, head, (ws) => {
      session.sockets.add(ws)
      openSession(session, ws, req, auth.right)
    })
  })

/**
 * Responses over WebSocket on the HTTP port (/v1/responses, /responses, /api/v1/responses): each
 * `response.create` frame is served as a streamed `POST /v1/responses` (docs/formats.md, "Decisions").
 */
export class ResponsesWebSocket extends Context.Tag("gateway/ResponsesWebSocket")<ResponsesWebSocket, ResponsesWebSocketShape>() {
  static readonly layer = Layer.scoped(
    ResponsesWebSocket,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const watchdog = yield* StreamWatchdog
      const timeouts = yield* StreamTimeouts
      const access = inferenceAccess(yield* AppConfig)
      const { deps } = yield* InferenceRoutes
      const hooks = yield* RequestHooks
      const guardrails = yield* Guardrails
      const inboundLimits = yield* InboundLimits
      const fibers = yield* FiberSet.make()
      const run = yield* FiberSet.runtime(fibers)<never>()
      const sockets = new Set<WebSocket>()
      // The 101 carries the upgrade request's id like every other answer.
      const upgradeIds = new WeakMap<http.IncomingMessage, string>()
      const wss = lazyWebSocketServer({ maxPayload: 64 * 1024 * 1024 }, (headers, req) => {
        const id = upgradeIds.get(req)
        if (id !== undefined) headers.push(...headerLines(id))
      })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const ws of sockets) ws.close(1001, "gateway shutting down")
          wss.close()
        })
      )

      const tryResponse = makeResponseAttempt({ inference: deps.inference, accounting: deps.accounting, watchdog, timeouts })
      const serve = makeServe({
        inference: deps.inference,
        usage: deps.usage,
        accounting: deps.accounting,
        inboundLimits,
        guardrails,
        tryResponse,
        compaction: deps.compaction
      })
      const accept = makeAccept({ flags, keys, access, wss, upgradeIds, session: { run, sockets, hooks, serve } })

      return {
        upgrade: (req, socket, head) => {
          const url = req.url ?? "/"
          const q = url.indexOf("?")
          const path = q === -1 ? url : url.slice(0, q)
          if (!WS_PATHS.has(path)) return false
          const query = new URLSearchParams(q === -1 ? "" : url.slice(q + 1))
          const requestId = newRequestId()
          run(accept(req, socket, head, query, requestId).pipe(Effect.catchAllCause(() => Effect.sync(() => socket.destroy()))))
          return true
        }
      }
    })
  )
}
