/**
 * Realtime sessions on the HTTP port (`GET /v1/realtime?model=…`, also `/realtime` and
 * `/api/v1/realtime`): the client's WebSocket is authenticated as inference is, its model resolved
 * by the router's plan narrowed to realtime-capable targets, and relayed event by event to the
 * first target whose handshake succeeds (the guarded attempt: breakers, cooldowns, fallback).
 * See docs/realtime.md.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as http from "node:http"
import type * as net from "node:net"
import type { WebSocket } from "ws"
import { type LazyWebSocketServer, lazyWebSocketServer } from "../platform/http/lazyWebSocketServer.js"
import { allBlocked, newTracking } from "../kernel/attempts.js"
import { InferenceError } from "../kernel/errors.js"
import type { HookTable } from "../kernel/hookTable.js"
import { endRequest, requestReceived } from "../kernel/hooks.js"
import { newRequestId } from "../kernel/ids.js"
import { fireBegin, fireEnd } from "../kernel/listeners.js"
import type { Transport } from "../kernel/request.js"
import { RequestHooks, type RequestHooksShape } from "../kernel/RequestHooks.js"
import { authenticateInference, presentedKey } from "../inference/auth.js"
import { firstOf, narrowPlan } from "../inference/fallback.js"
import { InferenceRoutes } from "../inference/InferenceRoutes.js"
import { gatewayHeaders, type HttpRequestContext } from "../inference/io.js"
import { AppConfig, type InferenceAccess, inferenceAccess } from "../platform/config/AppConfig.js"
import { EventBus, type EventBusShape } from "../platform/events/EventBus.js"
import { FeatureFlags, type FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { InboundLimits, type InboundLimitsShape } from "../services/accounting/InboundLimits.js"
import { ApiKeys, type ApiKeysShape } from "../services/auth/ApiKeys.js"
import { Inspector, type InspectorShape } from "../services/inspector/Inspector.js"
import type { Candidate } from "../services/routing/types.js"
import { openAiResponses } from "../upstream/formats/openai-responses.js"
import { RealtimeSecrets, type RealtimeSecretsShape } from "../inference/RealtimeSecrets.js"
import type { RouteDeps } from "../inference/routes/openai.js"
import { BETA, connectRealtime, type RealtimeRequest } from "./realtimeUpstream.js"
import { closeWith, type LoggedEvent, type RealtimeSessionDeps, relaySession, type SessionEnd } from "./realtimeSession.js"

export const REALTIME_PATHS = new Set(["/v1/realtime", "/realtime", "/api/v1/realtime"])

/** The subprotocol browsers carry their key in (OpenAI's endpoint accepts it the same way). */
const KEY_PROTOCOL = "openai-insecure-api-key."

/** The subprotocol a browser's beta client asks for the beta protocol with (it cannot send `OpenAI-Beta`). */
const BETA_PROTOCOL = "openai-beta.realtime-v1"

export interface RealtimeWebSocketShape {
  /** Handles an HTTP upgrade; false when the path is not a realtime path. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
}

const headerLines = (requestId: string): Array<string> => Object.entries(gatewayHeaders(requestId)).map(([k, v]) => `${k}: ${v}`)

const REASONS: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  429: "Too Many Requests",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout"
}

/** An upgrade refused with an HTTP answer written to the socket itself (never a 500 for the client's own mistake). */
const refuse = (
  socket: net.Socket,
  requestId: string,
  status: number,
  message: string,
  code: string,
  headers: Readonly<Record<string, string>> = {}
) => {
  const type =
    status === 401
      ? "authentication_error"
      : status === 429
        ? "rate_limit_error"
        : status >= 500
          ? "upstream_error"
          : "invalid_request_error"
  const body = JSON.stringify({ error: { message, type, code } })
  const head = [
    `HTTP/1.1 ${status} ${REASONS[status] ?? "Error"}`,
    ...headerLines(requestId),
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    "content-type: application/json",
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close"
  ]
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`)
}

/** The offered subprotocols (`Sec-WebSocket-Protocol`). */
const protocolsOf = (req: http.IncomingMessage): Array<string> =>
  String(req.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p.length > 0)

const NO_BODY: Transport = { readBody: () => Effect.succeed(Buffer.alloc(0)) }

/**
 * The hooks a session's request runs with: the gateway's own, less the inspector's agent-bridge
 * listener, because the session records its own inspector entry (source `realtime`, with its
 * events); with both, one session would show as two entries.
 */
const sessionHooks = (table: HookTable): HookTable =>
  table.listeners.some((l) => l.name === "inspector")
    ? { ...table, listeners: table.listeners.filter((l) => l.name !== "inspector") }
    : table

/**
 * The session configuration a client secret was minted with, as the `session.update` that applies
 * it upstream when a session opens with the secret (OpenAI applies a secret's configuration the
 * same way: the page need not know it). Without `model`: the session's model is chosen at connect.
 * Undefined when there is nothing to apply.
 */
const secretConfiguration = (session: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> | undefined => {
  if (session === undefined) return undefined
  const { model: _model, ...rest } = session
  if (Object.keys(rest).filter((k) => k !== "type").length === 0) return undefined
  return { type: "realtime", ...rest }
}

/** Inspector snapshots of a running session at most this often (ms): the entry shows its events live. */
const LIVE_INSPECTOR_MS = 1000

/** A candidate the operator or the catalog marks realtime-capable. */
const realtimeCapable = (c: Candidate): boolean => c.spec?.capabilities.realtime === true

/** What an upgrade needs of the layer: who may connect, the plan and the attempt, where sessions are recorded, the sockets. */
interface AcceptDeps {
  readonly keys: ApiKeysShape
  readonly flags: FeatureFlagsShape
  readonly access: InferenceAccess
  readonly deps: RouteDeps
  readonly hooks: RequestHooksShape
  readonly bus: EventBusShape
  readonly secrets: RealtimeSecretsShape
  readonly inboundLimits: InboundLimitsShape
  readonly inspector: InspectorShape | undefined
  readonly run: RealtimeSessionDeps["run"]
  readonly wss: LazyWebSocketServer
  readonly upgradeIds: WeakMap<http.IncomingMessage, string>
  readonly sockets: Set<WebSocket>
  readonly scheme: "http" | "https"
  readonly idleMs: number
  readonly maxMs: number
  readonly handshakeMs: number
}

/** An upgrade on a realtime path: refused with an HTTP answer, or relayed to the first target that accepts (`relaySession`); made once per layer. */
const makeAccept = (d: AcceptDeps) => {
  const {
    keys,
    flags,
    access,
    deps,
    hooks,
    bus,
    secrets,
    inboundLimits,
    inspector,
    run,
    wss,
    upgradeIds,
    sockets,
    scheme,
    idleMs,
    maxMs,
    handshakeMs
  } = d
  return Effect.fnUntraced(function* (
    req: http.IncomingMessage,
    socket: net.Socket,
    head: Buffer,
    path: string,
    query: URLSearchParams,
    requestId: string
  ) {
    // The key: a header (as inference reads it), or the browser's subprotocol; an ephemeral client secret in either place.
    const offered = protocolsOf(req)
    const fromProtocol = offered.find((p) => p.startsWith(KEY_PROTOCOL))?.slice(KEY_PROTOCOL.length)
    const presented = fromProtocol || presentedKey(req, query)
    // A client secret minted with a session configuration: its model when the client names none, the rest applied upstream.
    const secretSession = presented !== undefined && secrets.isSecret(presented) ? secrets.sessionOf(presented) : undefined
    const secretModel = typeof secretSession?.["model"] === "string" ? secretSession["model"].trim() : undefined
    const model = query.get("model")?.trim() || secretModel
    if (!model) return refuse(socket, requestId, 400, "the realtime endpoint needs ?model=<id>", "missing_model")
    let apiKeyId: string | null
    if (presented !== undefined && secrets.isSecret(presented)) {
      const bound = secrets.redeem(presented)
      // The key that minted it must still be usable: a key disabled or expired since takes its secrets with it.
      const owner = bound === undefined || bound === null ? undefined : yield* keys.byId(bound)
      const usable = bound === null || (owner !== undefined && owner.enabled && (owner.expiresAt === null || owner.expiresAt > Date.now()))
      if (bound === undefined || !usable)
        return refuse(
          socket,
          requestId,
          401,
          "the client secret is unknown or expired: mint a new one with POST /v1/realtime/client_secrets",
          "invalid_client_secret"
        )
      apiKeyId = bound
    } else {
      const auth = yield* authenticateInference(keys, flags, access, req, query, fromProtocol || undefined).pipe(Effect.either)
      if (auth._tag === "Left") return refuse(socket, requestId, auth.left.status, auth.left.message, auth.left.code ?? "unauthorized")
      apiKeyId = auth.right
    }
    // The beta protocol: the header, or (browsers cannot set headers) the subprotocol its browser clients offer.
    const beta =
      offered.includes(BETA_PROTOCOL) ||
      String(req.headers["openai-beta"] ?? "")
        .split(",")
        .some((v) => v.trim() === BETA)

    const answer = { statusCode: 101, headersSent: false }
    const ctx: HttpRequestContext = {
      requestId,
      answer,
      startedAt: Date.now(),
      req,
      // Nothing writes to it: the session's events go over the socket.
      res: answer as unknown as http.ServerResponse,
      method: req.method ?? "GET",
      headers: req.headers,
      transport: NO_BODY,
      path,
      query,
      apiKeyId,
      responseHeaders: {},
      hooks: sessionHooks(hooks.current()),
      route: `websocket ${path}`
    }
    /**
     * The session's request ends for the lifecycle's listeners and the request hooks (plugins:
     * onResponse for a session that ended well, onError otherwise); `gone`: the client left.
     */
    const endSession = (status: number, error?: InferenceError, gone = false) => {
      answer.statusCode = status
      fireEnd(ctx, status, error)
      const hooked = endRequest(ctx, error, gone)
      if (hooked !== undefined) run(hooked)
    }
    /** A handshake refused once the session's request began: its end heard, then the HTTP answer. */
    const refuseSession = (e: InferenceError, fallbackCode: string, headers: Readonly<Record<string, string>> = {}) => {
      endSession(e.status, e)
      refuse(socket, requestId, e.status, e.message, e.code ?? fallbackCode, { ...headers, ...e.headers })
    }
    fireBegin(ctx)
    // The request hooks' begin (plugins' onRequest), before the budget check and routing as for any request: a block refuses the handshake.
    if ((ctx.hooks?.onRequest.length ?? 0) > 0) {
      const heard = yield* requestReceived(ctx, openAiResponses, { endpoint: "realtime", model, stream: true, body: { model } }).pipe(
        Effect.either
      )
      if (heard._tag === "Left") return refuseSession(heard.left, "request_blocked")
    }

    // The router's plan, narrowed to realtime-capable targets.
    const planned = yield* deps.inference.plan(model, openAiResponses).pipe(Effect.either)
    if (planned._tag === "Left") return refuseSession(planned.left, "model_not_found")
    // The models each level (the key, its user, team(s), the organisation) allows, as for any request.
    const modelRefused = deps.accounting.modelRefusal(apiKeyId, model, () =>
      planned.right.candidates.map((c) => ({ model: c.model, key: c.key, provider: c.connection.provider.id }))
    )
    if (modelRefused)
      return refuseSession(
        new InferenceError({
          status: 403,
          kind: "permission",
          code: "model_not_allowed",
          message: `model "${model}" is not allowed for ${modelRefused.label} (its models: ${modelRefused.models.join(", ")})`,
          level: modelRefused.level
        }),
        "model_not_allowed"
      )
    const able = narrowPlan(planned.right, realtimeCapable)
    if (!able || (able.candidates.length === 0 && able.blocked.length === 0)) {
      const other = firstOf(planned.right)
      return refuseSession(
        new InferenceError({
          status: 400,
          kind: "invalid_request",
          code: "realtime_model_required",
          message: `${model}${other ? ` (${other.connection.name}/${other.model})` : ""} is not a realtime model: use a model the catalog or the operator marks realtime-capable (capability "realtime")`
        }),
        "realtime_model_required"
      )
    }
    if (able.candidates.length === 0) return refuseSession(allBlocked(openAiResponses, able), "no_available_target")
    const budget = deps.accounting.budget(apiKeyId)
    if (!budget.ok)
      return refuseSession(
        new InferenceError({
          status: 429,
          kind: "rate_limit",
          code: "budget_exhausted",
          message: `the ${budget.window} budget of ${budget.subject} is spent`
        }),
        "budget_exhausted",
        { "retry-after": String(Math.max(1, Math.ceil(budget.retryAfterMs / 1000))) }
      )

    // The key's inbound rate limit counts a session as one request.
    const admission = apiKeyId === null ? undefined : inboundLimits.admit(ctx, apiKeyId)
    if (admission !== undefined) {
      const admitted = yield* Effect.either(admission)
      if (admitted._tag === "Left") return refuseSession(admitted.left, "rate_limited", ctx.responseHeaders ?? {})
    }
    const track = newTracking(model)
    const request: RealtimeRequest = { ctx, format: openAiResponses, model, beta, handshakeMs, committed: () => false }
    const connected = yield* deps.inference.guarded(request, able, track, connectRealtime).pipe(Effect.either)
    if (connected._tag === "Left") {
      const e: InferenceError = connected.left
      if (beta && e.code === "realtime_beta_unsupported") {
        endSession(e.status, e)
        // Said over the socket, as a realtime client reads it.
        upgradeIds.set(req, requestId)
        wss.handleUpgrade(req, socket, head, (ws) =>
          closeWith(
            ws,
            1003,
            "realtime_beta_unsupported",
            "no target of this model takes the beta realtime protocol (OpenAI-Beta: realtime=v1)"
          )
        )
        return
      }
      return refuseSession(e, "upstream_error")
    }
    const upstream = connected.right.socket
    const candidate = track.tried!
    upgradeIds.set(req, requestId)
    // A client gone before its handshake is answered leaves no upstream session behind.
    const abandoned = () => {
      upstream.terminate()
      endSession(499, undefined, true)
    }
    socket.once("close", abandoned)
    wss.handleUpgrade(req, socket, head, (ws) => {
      socket.off("close", abandoned)
      sockets.add(ws)
      const configured = beta ? undefined : secretConfiguration(secretSession)
      if (configured !== undefined) upstream.send(JSON.stringify({ type: "session.update", session: configured }))
      const started = Date.now()
      const info = {
        sessionId: requestId,
        model,
        provider: candidate.connection.provider.id,
        connection: candidate.connection.name,
        upstreamModel: candidate.model,
        apiKeyId
      }
      bus.publish("realtime.session.started", info)
      // Events are kept while the inspector keeps bodies (a client watching, or INSPECTOR_CAPTURE_BODIES).
      const log: Array<LoggedEvent> | undefined = inspector?.core.sink.wantsBodies() ? [] : undefined
      const url = `${scheme}://${String(req.headers.host ?? "gateway")}${path}?model=${encodeURIComponent(model)}`
      const live = inspector === undefined ? undefined : liveEntry(inspector, { url, requestId, info, candidate, beta, log, started })
      relaySession(
        { usage: deps.usage, accounting: deps.accounting, run, idleMs, maxMs },
        {
          client: ws,
          upstream,
          early: connected.right.early,
          ctx,
          candidate,
          model,
          apiKeyId,
          beta,
          log,
          ended: (end: SessionEnd) => {
            sockets.delete(ws)
            const durationMs = Date.now() - started
            bus.publish("realtime.session.ended", {
              ...info,
              durationMs,
              closeCode: end.code,
              reason: end.reason,
              responses: end.responses,
              costUsd: end.costUsd,
              inputTokens: end.usage.inputTokens,
              outputTokens: end.usage.outputTokens
            })
            const status = end.code === 1000 || end.code === 1005 ? 200 : end.code === 1008 ? 429 : 502
            endSession(
              status,
              status === 200
                ? undefined
                : new InferenceError({
                    status,
                    kind: status === 429 ? "rate_limit" : "upstream",
                    code: end.reason.split(":")[0] || "session_closed",
                    message: `the realtime session closed with ${end.code}: ${end.reason}`
                  })
            )
            live?.close(end)
          }
        }
      )
    })
  })
}

/** What a session's inspector entry shows. */
interface LiveEntryInit {
  readonly url: string
  readonly requestId: string
  readonly info: Readonly<Record<string, unknown>>
  readonly candidate: Candidate
  readonly beta: boolean
  readonly log: Array<LoggedEvent> | undefined
  readonly started: number
}

/**
 * A session's one inspector entry, shown while it runs: begun (in flight) when the session opens,
 * its events so far written to it at most every `LIVE_INSPECTOR_MS` while new ones come (the
 * inspector sends each write to whoever watches), and its close and totals at the end.
 */
const liveEntry = (inspector: InspectorShape, init: LiveEntryInit) => {
  const sink = inspector.core.sink
  const id = sink.begin({
    source: "realtime",
    method: "GET",
    url: init.url,
    headers: {
      upgrade: "websocket",
      "x-gateway-realtime-target": `${init.candidate.connection.name}/${init.candidate.model}`,
      ...(init.beta ? { "openai-beta": BETA } : {})
    },
    body: Buffer.alloc(0),
    requestId: init.requestId
  })
  const write = (end: SessionEnd | undefined) => {
    const durationMs = Date.now() - init.started
    sink.end(id, {
      status: 101,
      headers: {
        "content-type": "application/json",
        ...(end === undefined
          ? { "x-gateway-realtime-state": "open" }
          : { "x-gateway-realtime-close": `${end.code} ${end.reason}`.slice(0, 200) }),
        "x-gateway-realtime-events": String(init.log?.length ?? 0),
        "x-gateway-duration-ms": String(durationMs)
      },
      body: Buffer.from(
        JSON.stringify({
          session: init.info,
          close: end === undefined ? null : { code: end.code, reason: end.reason },
          responses: end?.responses ?? null,
          costUsd: end?.costUsd ?? null,
          events: init.log
        })
      ),
      ttfbMs: durationMs
    })
  }
  let shown = 0
  const timer =
    init.log === undefined
      ? undefined
      : setInterval(() => {
          if (init.log!.length === shown) return
          shown = init.log!.length
          write(undefined)
        }, LIVE_INSPECTOR_MS)
  timer?.unref()
  return {
    close: (end: SessionEnd) => {
      if (timer !== undefined) clearInterval(timer)
      write(end)
    }
  }
}

/**
 * Realtime sessions over WebSocket, relayed to OpenAI-compatible realtime upstreams. Idle and
 * maximum durations: `GATEWAY_REALTIME_IDLE_SECONDS` (default 600, 0: none) and
 * `GATEWAY_REALTIME_MAX_SECONDS` (default 3600, 0: none).
 */
export class RealtimeWebSocket extends Context.Tag("gateway/RealtimeWebSocket")<RealtimeWebSocket, RealtimeWebSocketShape>() {
  static readonly layer = Layer.scoped(
    RealtimeWebSocket,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const config = yield* AppConfig
      const access = inferenceAccess(config)
      const { deps } = yield* InferenceRoutes
      const hooks = yield* RequestHooks
      const bus = yield* EventBus
      const secrets = yield* RealtimeSecrets
      const inboundLimits = yield* InboundLimits
      const inspector = Option.getOrUndefined(yield* Effect.serviceOption(Inspector))
      const idleMs = (yield* Config.integer("GATEWAY_REALTIME_IDLE_SECONDS").pipe(Config.withDefault(600))) * 1000
      const maxMs = (yield* Config.integer("GATEWAY_REALTIME_MAX_SECONDS").pipe(Config.withDefault(3600))) * 1000
      const handshakeMs = (yield* Config.integer("GATEWAY_REALTIME_HANDSHAKE_SECONDS").pipe(Config.withDefault(15))) * 1000
      const fibers = yield* FiberSet.make()
      const run = yield* FiberSet.runtime(fibers)<never>()
      const upgradeIds = new WeakMap<http.IncomingMessage, string>()
      const wss = lazyWebSocketServer(
        {
          maxPayload: 64 * 1024 * 1024,
          perMessageDeflate: false,
          // The `realtime` subprotocol is selected when offered (the key subprotocol never is).
          handleProtocols: (protocols) => (protocols.has("realtime") ? "realtime" : false)
        },
        (headers, req) => {
          const id = upgradeIds.get(req)
          if (id !== undefined) headers.push(...headerLines(id))
        }
      )
      const sockets = new Set<WebSocket>()
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const ws of sockets) closeWith(ws, 1001, "gateway_shutting_down", "the gateway is shutting down")
          wss.close()
        })
      )
      const scheme: "http" | "https" = config.tlsCert !== undefined ? "https" : "http"

      const accept = makeAccept({
        keys,
        flags,
        access,
        deps,
        hooks,
        bus,
        secrets,
        inboundLimits,
        inspector,
        run,
        wss,
        upgradeIds,
        sockets,
        scheme,
        idleMs,
        maxMs,
        handshakeMs
      })

      return {
        upgrade: (req, socket, head) => {
          const url = req.url ?? "/"
          const q = url.indexOf("?")
          const path = q === -1 ? url : url.slice(0, q)
          if (!REALTIME_PATHS.has(path)) return false
          const query = new URLSearchParams(q === -1 ? "" : url.slice(q + 1))
          const requestId = newRequestId()
          run(
            accept(req, socket, head, path, query, requestId).pipe(
              Effect.catchAllCause((cause) =>
                Effect.zipRight(
                  Effect.logError("realtime upgrade failed unexpectedly", cause),
                  Effect.sync(() => {
                    if (socket.writable) refuse(socket, requestId, 502, "the realtime session could not be opened", "realtime_failed")
                    else socket.destroy()
                  })
                )
              )
            )
          )
          return true
        }
      }
    })
  )
}
