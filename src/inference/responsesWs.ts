import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import type * as http from "node:http"
import type * as net from "node:net"
import { type WebSocket, WebSocketServer } from "ws"
import { ApiKeys } from "../auth/ApiKeys.js"
import { AppConfig, inferenceAccess } from "../config/AppConfig.js"
import { FeatureFlags } from "../flags/FeatureFlags.js"
import { type CanonicalError, newId } from "../formats/canonical.js"
import { obj, str, tryJson } from "../formats/common.js"
import { openAiResponses } from "../formats/openai-responses.js"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../http/untrusted.js"
import { Connections } from "../providers/Connections.js"
import { probeTimeoutMs } from "../routing/auto/selfHealing.js"
import type { Candidate } from "../routing/types.js"
import { allBlocked, AttemptFailed, type AttemptOutcome, attemptFailed, failureOfError, newTracking, recordRequest } from "./attempts.js"
import { authenticateInference } from "./auth.js"
import type { InferenceCall } from "./call.js"
import { InferenceRoutes, newRequestId } from "./dispatch.js"
import { errorBody, type InferenceError } from "./errors.js"
import { type AttemptRequest, firstOf, narrowPlan } from "./fallback.js"
import { gatewayHeaders, type RequestContext } from "./io.js"
import { normalizePassthrough } from "./passthrough.js"
import { makeRelay, streamEnded } from "./relays.js"
import { type Expanded, type Origin, ResponseStore } from "./responseStore.js"
import { type EventFraming, relayFrames, type StreamSink, StreamWatchdog } from "./stream.js"
import { StreamTimeouts } from "./timeouts.js"
import { splitNoThinking } from "./catalog.js"
import { decodeResponsesRequest } from "./routes/openai.js"

export const WS_PATHS = new Set(["/v1/responses", "/responses", "/api/v1/responses"])

export interface ResponsesWebSocketShape {
  /** Handles an HTTP upgrade on the server; false when the path is not a Responses WebSocket path. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
}

/** X-Gateway-Version and X-Gateway-Request-Id as raw header lines, for answers written to the socket itself. */
const headerLines = (requestId: string): Array<string> => Object.entries(gatewayHeaders(requestId)).map(([k, v]) => `${k}: ${v}`)

const refuse = (socket: net.Socket, requestId: string, status: number, reason: string, message: string, code: string) => {
  const body = JSON.stringify({ error: { message, type: status === 401 ? "authentication_error" : "invalid_request_error", code } })
  const head = [`HTTP/1.1 ${status} ${reason}`, ...headerLines(requestId), "content-type: application/json", `content-length: ${Buffer.byteLength(body)}`, "connection: close"]
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`)
}

/** An error sent as a frame, shaped like the Responses API's own `error` event. */
const errorFrame = (e: InferenceError) => {
  const body = obj(errorBody(e, openAiResponses))?.["error"] ?? { message: e.message }
  return JSON.stringify({ type: "error", status: e.status, error: body })
}

/**
 * Events of a relayed stream become WebSocket messages: each event's data followed by an ASCII
 * record separator (as in JSON text sequences, RFC 7464; it cannot occur in JSON text), which
 * the socket's sink splits on. The stream's own `[DONE]` is not an event.
 */
const RS = "\u001e"

/** What the socket gets in place of SSE: one message per event; a broken stream ends with an error message. */
const socketEvents = (): EventFraming => ({
  element: (data) => (data === "[DONE]" ? "" : data + RS),
  close: () => "",
  broken: (e: CanonicalError) =>
    JSON.stringify({ type: "error", status: e.status, error: { type: e.kind === "timeout" ? "timeout_error" : "upstream_error", code: e.code ?? null, message: e.message } }) + RS
})

/**
 * A relayed stream's sink on a WebSocket: one message per event (see `socketEvents`). Nothing is
 * committed until a message went out, so the response can still go to another candidate. A
 * cancelled response (`response.cancel`, the socket closed) interrupts the relay's fiber.
 */
class SocketSink implements StreamSink {
  /** A message of this response went out. */
  sent = false

  constructor(
    private readonly send: (text: string) => void,
    private readonly open: () => boolean
  ) {}

  write(text: string): boolean {
    for (const message of text.split(RS)) {
      if (message === "") continue
      this.sent = true
      this.send(message)
    }
    return true
  }

  end(tail: string): void {
    if (tail) this.write(tail)
  }

  gone(): boolean {
    return !this.open()
  }

  committed(): boolean {
    return this.sent
  }

  onDrain(): void {}

  offDrain(): void {}
}

/** One `response.create` frame, as the guarded attempt tries it on each candidate. */
interface SocketRequest extends AttemptRequest {
  readonly sink: SocketSink
  /** The frame without `type` and `generate`. */
  readonly body: Record<string, unknown>
  /** The body with the socket's conversation put in front, for the candidate that will answer. */
  readonly expanded: (c: Candidate) => Effect.Effect<Expanded, InferenceError>
  readonly remember: (id: string, input: ReadonlyArray<unknown>, output: ReadonlyArray<unknown>, origin?: Origin) => void
}

const speaksResponses = (c: Candidate): boolean => c.connection.formats.includes("openai-responses")

/**
 * Responses over WebSocket, on the HTTP port at /v1/responses, /responses and /api/v1/responses.
 * Each `response.create` frame becomes one streamed `POST /responses` through the guarded
 * attempt (fallback.ts) over the model's connections that speak the Responses API natively, so
 * it has HTTP's admission, breakers, cooldowns and fallback (before any message went out); the
 * answer's events go back one JSON frame each, through HTTP's stream relay and watchdog
 * (`relayFrames`, with the socket as its sink). One usage row (`responses.ws`) per response.
 *
 * Codex's protocol: a prewarm frame with `generate: false` gets an empty completed response
 * (nothing is generated), and later frames name it in `previous_response_id` with only the new
 * input; the gateway keeps each socket's conversation (input and output per response id), so
 * this works with `store: false` and with upstreams that store nothing.
 *
 * Upgrades answer 426 when GATEWAY_UPSTREAM_WS_ENABLED is off or no connection speaks the
 * Responses API (clients such as Codex then fall back to HTTP); a frame for a model of another
 * family gets the error code `upstream_ws_provider_required`.
 */
export class ResponsesWebSocket extends Context.Tag("gateway/ResponsesWebSocket")<ResponsesWebSocket, ResponsesWebSocketShape>() {
  static readonly layer = Layer.scoped(
    ResponsesWebSocket,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const connections = yield* Connections
      const watchdog = yield* StreamWatchdog
      const timeouts = yield* StreamTimeouts
      const access = inferenceAccess(yield* AppConfig)
      const { deps } = yield* InferenceRoutes
      const fibers = yield* FiberSet.make()
      const run = yield* FiberSet.runtime(fibers)<never>()
      const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 * 1024 })
      const sockets = new Set<WebSocket>()
      // The 101 carries the upgrade request's id like every other answer.
      const upgradeIds = new WeakMap<http.IncomingMessage, string>()
      wss.on("headers", (headers, req) => {
        const id = upgradeIds.get(req)
        if (id !== undefined) headers.push(...headerLines(id))
      })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          for (const ws of sockets) ws.close(1001, "gateway shutting down")
          wss.close()
        })
      )

      /**
       * One try of a `response.create` against one candidate: a streamed `POST /responses`,
       * relayed by the HTTP pipeline's relay and watchdog (its sink the socket); a failure before
       * any message went out leaves the frame free to go to the next candidate.
       */
      const tryResponse = (request: SocketRequest, c: Candidate, options: { readonly probe: boolean }): Effect.Effect<AttemptOutcome, AttemptFailed> =>
        Effect.gen(function* () {
          const { connection } = c
          const client = openAiResponses
          const expanded = yield* Effect.mapError(request.expanded(c), (e) => attemptFailed(e, undefined))
          const upstreamBody = normalizePassthrough("openai-responses", { ...expanded.body, stream: true }, connection)
          // Probes through a half-open breaker wait less for headers, as over HTTP.
          const headersTimeoutMs = options.probe ? probeTimeoutMs(connection.timeouts?.headersMs ?? timeouts.streamHeadersMs) : undefined
          const res = yield* deps.inference
            .send({ connection, model: c.model }, "openai-responses", upstreamBody, { stream: true, ...(headersTimeoutMs ? { headersTimeoutMs } : {}) }, client)
            .pipe(Effect.mapError((e) => attemptFailed(e, failureOfError(e), e.code === "provider_misconfigured" || e.code === "provider_url_blocked")))
          if (res.status < 200 || res.status >= 300) {
            const { error, info } = yield* deps.inference.readFailure(res, client, client, connection)
            return yield* Effect.fail(attemptFailed(error, info))
          }
          const call: InferenceCall = {
            ctx: request.ctx,
            format: client,
            body: expanded.body,
            model: request.model,
            stream: true,
            endpoint: "responses.ws",
            eventFraming: socketEvents,
            onCompleted: (r) => request.remember(r.id, expanded.input, r.output, r.origin)
          }
          const origin: Origin = { connectionId: connection.id, stored: request.body["store"] !== false }
          const relayed = makeRelay(call, client, client, true, origin, connection)
          // The connection's own silence limit, as over HTTP.
          const result = yield* relayFrames(res, "sse", relayed.relay, request.sink, watchdog, request.ctx.startedAt, connection.timeouts?.idleMs)
          const ended = streamEnded(result, relayed, res, client)
          return ended instanceof AttemptFailed ? yield* Effect.fail(ended) : ended
        })

      const session = (ws: WebSocket, req: http.IncomingMessage, apiKeyId: string | null) => {
        const store = ResponseStore.make({ maxEntries: 100, maxAgeMs: 2 * 60 * 60 * 1000 })
        let current: Fiber.RuntimeFiber<void, never> | undefined
        const queue: Array<string> = []
        const send = (text: string) => {
          if (ws.readyState === ws.OPEN) ws.send(text)
        }

        const handle = (raw: string): Effect.Effect<void> =>
          Effect.gen(function* () {
            if (jsonTooDeep(raw)) return send(JSON.stringify({ type: "error", status: 400, error: { type: "invalid_request_error", code: "json_too_deep", message: `frame is ${TOO_DEEP_MESSAGE}` } }))
            const frame = obj(tryJson(raw))
            if (!frame) return send(JSON.stringify({ type: "error", status: 400, error: { type: "invalid_request_error", code: "invalid_json", message: "frames must be JSON objects" } }))
            if (frame["type"] !== "response.create") {
              return send(JSON.stringify({ type: "error", status: 400, error: { type: "invalid_request_error", code: "unsupported_frame", message: `expected type response.create, got ${String(frame["type"])}` } }))
            }
            const { type: _t, generate, ...body } = frame
            const model = str(body["model"])
            if (!model) return send(JSON.stringify({ type: "error", status: 400, error: { type: "invalid_request_error", code: "missing_model", message: "response.create needs a model" } }))
            const ctx: RequestContext = { requestId: newRequestId(), startedAt: Date.now(), req, res: undefined as never, path: req.url ?? "", query: new URLSearchParams(), apiKeyId, responseHeaders: {} }
            if (generate === false) {
              const expanded = yield* store.expand(body, openAiResponses, true)
              // Prewarm: remember the input, generate nothing.
              const id = newId("resp_")
              const created = Math.floor(Date.now() / 1000)
              const response = (status: string) => ({ id, object: "response", created_at: created, status, model, output: [], usage: status === "completed" ? { input_tokens: 0, output_tokens: 0, total_tokens: 0 } : null })
              send(JSON.stringify({ type: "response.created", sequence_number: 0, response: response("in_progress") }))
              send(JSON.stringify({ type: "response.completed", sequence_number: 1, response: response("completed") }))
              store.remember(id, expanded.input, [])
              return
            }

            // The router's plan, narrowed to the candidates that speak the Responses API natively.
            const plan = yield* deps.inference.plan(splitNoThinking(model).model, openAiResponses)
            const able = narrowPlan(plan, speaksResponses)
            if (!able) {
              const other = firstOf(plan)
              if (!other) return yield* allBlocked(openAiResponses, plan)
              return send(
                JSON.stringify({
                  type: "error",
                  status: 400,
                  error: {
                    type: "invalid_request_error",
                    code: "upstream_ws_provider_required",
                    message: `${model} is served by ${other.connection.name} (${other.connection.format}); the WebSocket transport needs a Responses-API upstream. Use POST /v1/responses for other models.`
                  }
                })
              )
            }
            // Always expanded here (the connection's own store), but the answering server's own stored items are kept.
            const expandFor = (c: Candidate | undefined) => store.expand(body, openAiResponses, true, c && { id: c.connection.id, storesResponses: false })
            const first = able.candidates[0]
            const expanded = yield* expandFor(first)
            // Refused as POST /v1/responses refuses it, with the same message.
            yield* decodeResponsesRequest(expanded.body, typeof body["previous_response_id"] === "string" && body["previous_response_id"] !== "")
            // Budgets hold here as on HTTP (token limits in the guarded attempt).
            const budget = deps.accounting.budget(apiKeyId)
            if (!budget.ok) {
              return send(JSON.stringify({ type: "error", status: 429, error: { type: "rate_limit_error", code: "budget_exhausted", message: `the ${budget.window} budget of this API key is spent` } }))
            }
            const untrack = deps.inference.track(ctx, "responses.ws")
            const track = newTracking(model)
            track.hold = deps.accounting.reserve(apiKeyId)
            const sink = new SocketSink(send, () => ws.readyState === ws.OPEN)
            const request: SocketRequest = {
              ctx,
              format: openAiResponses,
              model,
              committed: () => sink.sent,
              sink,
              body,
              expanded: (c) => (c === first ? Effect.succeed(expanded) : expandFor(c)),
              remember: (id, input, output, origin) => store.remember(id, input, output, origin)
            }
            // One usage row per response, whatever happened (a cancelled one included).
            yield* deps.inference.guarded(request, able, track, tryResponse).pipe(
              Effect.ensuring(
                Effect.suspend(() => {
                  untrack()
                  return recordRequest(deps.usage, deps.accounting, { ctx, endpoint: "responses.ws", stream: true, model }, track)
                })
              )
            )
          }).pipe(
            Effect.catchAll((e) => Effect.sync(() => send(errorFrame(e)))),
            Effect.catchAllDefect((d) => Effect.logError("websocket frame failed", d).pipe(Effect.zipRight(Effect.sync(() => send(JSON.stringify({ type: "error", status: 500, error: { type: "server_error", message: "internal error" } })))))),
            Effect.annotateLogs({ transport: "websocket" })
          )

        // Frames are answered one after another; response.cancel stops the one in progress.
        const next = () => {
          if (current || queue.length === 0) return
          const raw = queue.shift()!
          current = run(handle(raw))
          current.addObserver(() => {
            current = undefined
            next()
          })
        }
        ws.on("message", (data, isBinary) => {
          const text = isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString()
          if (obj(tryJson(text))?.["type"] === "response.cancel") {
            if (current) run(Fiber.interrupt(current))
            return
          }
          queue.push(text)
          next()
        })
        ws.on("close", () => {
          sockets.delete(ws)
          queue.length = 0
          if (current) run(Fiber.interrupt(current))
        })
        ws.on("error", () => ws.terminate())
      }

      return {
        upgrade: (req, socket, head) => {
          const url = req.url ?? "/"
          const q = url.indexOf("?")
          const path = q === -1 ? url : url.slice(0, q)
          if (!WS_PATHS.has(path)) return false
          const query = new URLSearchParams(q === -1 ? "" : url.slice(q + 1))
          const requestId = newRequestId()
          run(
            Effect.gen(function* () {
              if (!(yield* flags.enabled("GATEWAY_UPSTREAM_WS_ENABLED"))) {
                return refuse(socket, requestId, 426, "Upgrade Required", "the Responses WebSocket transport is off (GATEWAY_UPSTREAM_WS_ENABLED); use POST /v1/responses", "websocket_disabled")
              }
              const auth = yield* authenticateInference(keys, flags, access, req, query).pipe(Effect.either)
              if (auth._tag === "Left") return refuse(socket, requestId, auth.left.status, auth.left.status === 401 ? "Unauthorized" : "Forbidden", auth.left.message, auth.left.code ?? "unauthorized")
              const capable = (yield* connections.list).some((c) => c.enabled && c.formats.includes("openai-responses"))
              if (!capable) {
                return refuse(socket, requestId, 426, "Upgrade Required", "no connection speaks the Responses API natively; use POST /v1/responses", "upstream_ws_provider_required")
              }
              upgradeIds.set(req, requestId)
              wss.handleUpgrade(req, socket, head, (ws) => {
                sockets.add(ws)
                session(ws, req, auth.right)
              })
            }).pipe(Effect.catchAllCause(() => Effect.sync(() => socket.destroy())))
          )
          return true
        }
      }
    })
  )
}
