import { sealResponse } from "../upstream/formats/signatures.js"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type { Transport } from "../kernel/request.js"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import type * as http from "node:http"
import type * as net from "node:net"
import { type WebSocket, WebSocketServer } from "ws"
import { InboundLimits } from "../services/accounting/InboundLimits.js"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { AppConfig, inferenceAccess } from "../platform/config/AppConfig.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { Guardrails } from "../services/guardrails/Guardrails.js"
import { type CanonicalError, newId, wholeUsage } from "../domain/canonical.js"
import { arr, obj, str, tryJson } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { openAiResponses } from "../upstream/formats/openai-responses.js"
import { FORMATS } from "../upstream/formats/registry.js"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../kernel/untrusted.js"
import { kindOf, modelDoes } from "../domain/catalog/catalog.js"
import type { UpstreamResponse } from "../upstream/client/UpstreamHttp.js"
import { probeTimeoutMs } from "../services/routing/auto/selfHealing.js"
import type { Candidate } from "../services/routing/types.js"
import { responseEvents } from "./answers.js"
import { allBlocked, AttemptFailed, type AttemptOutcome, attemptFailed, failureOfError, headerValue, newTracking, type Tracking } from "../kernel/attempts.js"
import { authenticateInference } from "./auth.js"
import { attachUsageRow } from "./builtinHooks.js"
import { traceIdOf } from "../services/observability/Observability.js"
import type { InferenceCall } from "./call.js"
import { InferenceRoutes } from "./dispatch.js"
import { newRequestId } from "../kernel/ids.js"
import { decodeFailure, errorBody, InferenceError } from "../kernel/errors.js"
import { type AttemptRequest, firstOf, narrowPlan } from "./fallback.js"
import { endRequest, observe, RequestHooks, requestReceived, routeResolved } from "../kernel/hooks.js"
import { fireBegin, fireEnd } from "../kernel/listeners.js"
import { gatewayHeaders, type HttpRequestContext, responseHeaders } from "./io.js"
import { noThinkingBody, normalizePassthrough } from "./passthrough.js"
import { encodeFor, errorInAnswer } from "./sending.js"
import { makeRelay, streamEnded } from "./relays.js"
import { type Expanded, type Origin, ResponseStore, type ResponseStoreShape } from "./responseStore.js"
import { type EventFraming, type FrameRelay, relayFrames, type StreamSink, StreamWatchdog } from "./stream.js"
import { StreamTimeouts } from "./timeouts.js"
import { splitNoThinking } from "../upstream/providers/catalogEntries.js"
import { customToolNames, decodeResponsesRequest } from "./routes/openai.js"

export const WS_PATHS = new Set(["/v1/responses", "/responses", "/api/v1/responses"])

export interface ResponsesWebSocketShape {
  /** Handles an HTTP upgrade on the server; false when the path is not a Responses WebSocket path. */
  readonly upgrade: (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => boolean
}

/** A response.create frame is its request's body (set on the context when it is made). */
const WS_TRANSPORT: Transport = { readBody: (ctx) => Effect.succeed(ctx.body ?? Buffer.alloc(0)) }

/** X-Gateway-Version and X-Gateway-Request-Id as raw header lines, for answers written to the socket itself. */
const headerLines = (requestId: string): Array<string> => Object.entries(gatewayHeaders(requestId)).map(([k, v]) => `${k}: ${v}`)

const refuse = (socket: net.Socket, requestId: string, status: number, reason: string, message: string, code: string) => {
  const body = JSON.stringify({ error: { message, type: status === 401 ? "authentication_error" : "invalid_request_error", code } })
  const head = [`HTTP/1.1 ${status} ${reason}`, ...headerLines(requestId), "content-type: application/json", `content-length: ${Buffer.byteLength(body)}`, "connection: close"]
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`)
}

/**
 * An error sent as a frame, shaped like the Responses API's own `error` event; `headers` (what an
 * HTTP answer would carry in its head: `retry-after`, the rate-limit fields, a guardrail's
 * warning) go in the event's `headers` object, where Codex reads them.
 */
const errorFrame = (e: InferenceError, headers?: Readonly<Record<string, string>>) => {
  const body = obj(errorBody(e, openAiResponses))?.["error"] ?? { message: e.message }
  return JSON.stringify({ type: "error", status: e.status, error: body, ...(headers ? { headers } : {}) })
}

/** The head fields of an error answer: the rate-limit fields the request got, then the error's own. */
const errorHeaders = (ctx: HttpRequestContext, e: InferenceError): Record<string, string> | undefined => {
  let out: Record<string, string> | undefined
  for (const k in ctx.responseHeaders) if (k.startsWith("ratelimit-") || k.startsWith("x-ratelimit-")) (out ??= {})[k] = ctx.responseHeaders[k]!
  if (e.headers) for (const k in e.headers) (out ??= {})[k.toLowerCase()] = e.headers[k]!
  return out
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

/** A Responses stream's last event (the response done, failed or cut short). */
const TERMINAL_EVENT = /"type"\s*:\s*"response\.(completed|failed|incomplete)"/

/** Messages (each followed by RS) as the Responses API's SSE events, for an answer rewrite written for the HTTP stream. */
const toSse = (text: string): string => {
  let out = ""
  for (const m of text.split(RS)) if (m !== "") out += `data: ${m.replace(/\n/g, "\ndata: ")}\n\n`
  return out
}

/** SSE events back into messages (each followed by RS); comments (a rewrite's warning) have no message. */
const fromSse = (text: string): string => {
  let out = ""
  for (const block of text.split("\n\n")) {
    if (block === "" || block.startsWith(":")) continue
    const data: Array<string> = []
    for (const line of block.split("\n")) if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5))
    if (data.length !== 0) out += data.join("\n") + RS
  }
  return out
}

/**
 * What the lifecycle reads of a WebSocket response where an HTTP request has its response
 * (`HookHost.res`): the status it ended with, and whether its answer began.
 */
interface SocketAnswer {
  statusCode: number
  headersSent: boolean
  /** Its last message went out: a socket closed now does not cancel it (its bookkeeping finishes). */
  finished?: boolean
}

/**
 * A relayed stream's sink on a WebSocket: one message per event (see `socketEvents`). Nothing is
 * committed until the relay wrote, so the response can still go to another candidate. A
 * cancelled response (`response.cancel`, the socket closed) interrupts the relay's fiber.
 *
 * It is the WebSocket's counterpart of io.ts's stream writers: the answer rewrite given at
 * onRequest (guardrails: placeholders restored, response sanitization) runs on each write, on
 * the events as SSE (what it was written for), before the messages go out; onStreamStart fires
 * at the first write, onFrame once per message (`text`: the message), onStreamEnd at the end.
 * Without a rewrite or handlers a write costs what it did before: a split on RS.
 */
class SocketSink implements StreamSink {
  /** The relay wrote: the response is committed. */
  sent = false

  constructor(
    private readonly ctx: HttpRequestContext,
    private readonly answer: SocketAnswer,
    private readonly send: (text: string) => void,
    private readonly open: () => boolean
  ) {}

  private start(): void {
    if (this.answer.headersSent) return
    this.answer.headersSent = true
    const { ctx } = this
    const listeners = ctx.hooks?.onStreamStart
    const head = ctx.rewrite?.head
    if (head === undefined && (listeners === undefined || listeners.length === 0)) return
    let headers: Readonly<Record<string, string | number>> = responseHeaders(ctx)
    if (head !== undefined) headers = head(headers)
    ctx.answerHeaders = headers
    if (listeners !== undefined && listeners.length !== 0) observe(ctx, "onStreamStart", listeners, { status: 200, headers })
  }

  private out(text: string): void {
    const onFrame = this.ctx.hooks?.onFrame
    for (const message of text.split(RS)) {
      if (message === "") continue
      // The response's last event: the client may close at once, which must not cancel it.
      if (this.answer.finished !== true && TERMINAL_EVENT.test(message)) this.answer.finished = true
      this.send(message)
      if (onFrame !== undefined && onFrame.length !== 0) observe(this.ctx, "onFrame", onFrame, { text: message })
    }
  }

  write(text: string): boolean {
    this.sent = true
    this.start()
    const frame = this.ctx.rewrite?.frame
    this.out(frame === undefined ? text : fromSse(frame(toSse(text))))
    return true
  }

  end(tail: string, error: string | null): void {
    this.answer.finished = true
    this.start()
    const end = this.ctx.rewrite?.end
    if (end !== undefined) {
      const r = end(toSse(tail), error)
      tail = fromSse(r.text)
      error = r.error
    }
    this.out(tail)
    const listeners = this.ctx.hooks?.onStreamEnd
    if (listeners !== undefined && listeners.length !== 0)
      observe(this.ctx, "onStreamEnd", listeners, {
        text: tail
          .split(RS)
          .filter((m) => m !== "")
          .join("\n"),
        error
      })
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

/**
 * A translated stream's relay for the socket: the client encoder writes SSE events (as for an
 * HTTP client); each event's data becomes one message (`fromSse`).
 */
const asMessages = (relay: FrameRelay): FrameRelay => ({
  frame: (frame) => fromSse(relay.frame(frame)),
  end: () => fromSse(relay.end()),
  broken: (e) => fromSse(relay.broken(e))
})

/** One `response.create` frame, as the guarded attempt tries it on each candidate. */
interface SocketRequest extends AttemptRequest {
  readonly sink: SocketSink
  /** Reasoning off (the model id's no-thinking alias). */
  readonly noThinking: boolean
  /** The frame without `type` and `generate`. */
  readonly body: Record<string, unknown>
  /** The body with the socket's conversation put in front, for the candidate that will answer. */
  readonly expanded: (c: Candidate) => Effect.Effect<Expanded, InferenceError>
  readonly remember: (id: string, input: ReadonlyArray<unknown>, output: ReadonlyArray<unknown>, origin?: Origin) => void
}

const speaksResponses = (c: Candidate): boolean => c.connection.formats.includes("openai-responses")

/**
 * Whether a candidate can answer a response at all: any family can by translation, but a
 * model the catalog knows as another kind (speech, images, rerank, embeddings...) cannot.
 */
const generates = (c: Candidate): boolean => modelDoes(c.connection.provider, c.model, "chat")

/** What the frames of one WebSocket need of it, made once per connection. */
interface SocketConn {
  readonly ws: WebSocket
  readonly apiKeyId: string | null
  /** The socket's conversation. */
  readonly store: ResponseStoreShape
  /** A message to the client, while the socket is open. */
  readonly send: (text: string) => void
}

/** What one response's work leaves for its end: how to stop tracking it in flight, once it is. */
interface ServeState {
  untrack: (() => void) | undefined
}

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
      const watchdog = yield* StreamWatchdog
      const timeouts = yield* StreamTimeouts
      const access = inferenceAccess(yield* AppConfig)
      const { deps } = yield* InferenceRoutes
      const hooks = yield* RequestHooks
      const guardrails = yield* Guardrails
      const inboundLimits = yield* InboundLimits
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
      const tryResponse: (request: SocketRequest, c: Candidate, options: { readonly probe: boolean }) => Effect.Effect<AttemptOutcome, AttemptFailed> = Effect.fnUntraced(
        function* (request: SocketRequest, c: Candidate, options: { readonly probe: boolean }) {
          const { connection } = c
          const client = openAiResponses
          // A Responses upstream gets the frame's body (normalised); any other family the request
          // translated through the canonical form, as POST /v1/responses sends it.
          const native = speaksResponses(c)
          const upstream = native ? client : FORMATS[connection.format]
          const expanded = yield* Effect.mapError(request.expanded(c), (e) => attemptFailed(e, undefined))
          let upstreamBody: Record<string, unknown>
          if (native) {
            const body = { ...expanded.body, stream: true }
            upstreamBody = normalizePassthrough("openai-responses", request.noThinking ? noThinkingBody("openai-responses", body) : body, connection)
          } else {
            const canonical = yield* Effect.try({ try: () => client.decodeRequest(expanded.body), catch: (e) => attemptFailed(decodeFailure(client, e), undefined) })
            upstreamBody = encodeFor(connection, { ...canonical, model: c.model, stream: true, ...(request.noThinking ? { reasoning: { enabled: false } } : {}) }).body
          }
          // Probes through a half-open breaker wait less for headers, as over HTTP.
          const headersTimeoutMs = options.probe ? probeTimeoutMs(connection.timeouts?.headersMs ?? timeouts.streamHeadersMs) : undefined
          const res = yield* deps.inference
            .send({ connection, model: c.model }, upstream.id, upstreamBody, { stream: true, ...(headersTimeoutMs ? { headersTimeoutMs } : {}) }, client)
            .pipe(
              Effect.mapError((e) =>
                attemptFailed(e, failureOfError(e), e.code === "provider_misconfigured" || e.code === "provider_url_blocked" || e.code === "oauth_refresh_failed")
              )
            )
          if (res.status < 200 || res.status >= 300) {
            const { error, info } = yield* deps.inference.readFailure(res, upstream, client, connection)
            return yield* Effect.fail(attemptFailed(error, info))
          }
          const call: InferenceCall = {
            ctx: request.ctx,
            format: client,
            body: expanded.body,
            model: request.model,
            stream: true,
            endpoint: "responses.ws",
            // Pass-through events go one per message; translated ones are encoded as SSE and split below.
            ...(native ? { eventFraming: socketEvents } : {}),
            encodeOptions: { customTools: customToolNames(arr(expanded.body["tools"]), obj), request: request.body },
            onCompleted: (r) => request.remember(r.id, expanded.input, r.output, r.origin)
          }
          const origin: Origin = { connectionId: connection.id, stored: request.body["store"] !== false }
          if (!native && String(res.headers["content-type"] ?? "").includes("application/json")) return yield* replayWholeTo(request, call, res, upstream, c)
          const relayed = makeRelay(call, upstream, client, native, origin, connection)
          const relay = native ? relayed.relay : asMessages(relayed.relay)
          // The connection's own silence limit, as over HTTP.
          const result = yield* relayFrames(res, upstream.framing, relay, request.sink, watchdog, request.ctx.startedAt, connection.timeouts?.idleMs)
          const ended = streamEnded(result, relayed, res, client)
          return ended instanceof AttemptFailed ? yield* Effect.fail(ended) : ended
        }
      )

      /**
       * A translated candidate that answered a stream request whole (some upstreams do): its answer
       * replayed as the Responses events it would have streamed, as over HTTP.
       */
      const replayWholeTo = Effect.fnUntraced(function* (request: SocketRequest, call: InferenceCall, res: UpstreamResponse, upstream: WireFormat, c: Candidate) {
        const { connection } = c
        const text = yield* Effect.mapError(deps.inference.wholeText(res, openAiResponses, connection), (f) => attemptFailed(f.error, f.info))
        const json = tryJson(text)
        const bad = errorInAnswer(upstream.id, json, text, openAiResponses, connection, "answer")
        if (bad) return yield* Effect.fail(attemptFailed(bad.error, bad.info))
        const decoded = sealResponse(upstream.decodeResponse(json), connection.id)
        const encoder = openAiResponses.streamEncoder({ model: call.model, requestId: call.ctx.requestId, ...(call.encodeOptions ? { options: call.encodeOptions } : {}) })
        request.sink.end(
          fromSse(
            responseEvents(decoded)
              .map((e) => encoder.push(e))
              .join("") + encoder.end()
          ),
          null
        )
        if (encoder.result) call.onCompleted?.(encoder.result())
        const reported = upstream.usageOfResponse(json)
        const usage = reported ? wholeUsage(reported) : undefined
        return {
          status: 200,
          usage,
          ttftMs: null,
          error: null,
          headers: headerValue(res.headers),
          costUsd: deps.accounting.cost(connection.provider.id, c.model, usage)
        } satisfies AttemptOutcome
      })

      /** A hook blocked the response: its usage row says so. */
      const refused = (track: Tracking, e: InferenceError) => Effect.sync(() => (track.outcome = { status: e.status, usage: undefined, ttftMs: null, error: e.message }))

      /** A prewarm frame: its input remembered, an empty completed response sent (see `handle`). */
      const prewarm = Effect.fnUntraced(
        function* (conn: SocketConn, body: Record<string, unknown>, model: string) {
          const { store, send } = conn
          const expanded = yield* store.expand(body, openAiResponses, true)
          const id = newId("resp_")
          const created = Math.floor(Date.now() / 1000)
          const response = (status: string) => ({
            id,
            object: "response",
            created_at: created,
            status,
            model,
            output: [],
            usage: status === "completed" ? { input_tokens: 0, output_tokens: 0, total_tokens: 0 } : null
          })
          send(JSON.stringify({ type: "response.created", sequence_number: 0, response: response("in_progress") }))
          send(JSON.stringify({ type: "response.completed", sequence_number: 1, response: response("completed") }))
          store.remember(id, expanded.input, [])
        },
        (effect, conn) => Effect.catchAll(effect, (e) => Effect.sync(() => conn.send(errorFrame(e))))
      )

      /** The work of one `response.create` (see `respond`) on its connection; `state.untrack` is set once it is in flight. */
      const serve: (
        conn: SocketConn,
        ctx: HttpRequestContext,
        answer: SocketAnswer,
        body: Record<string, unknown>,
        model: string,
        state: ServeState
      ) => Effect.Effect<void, InferenceError> = Effect.fnUntraced(function* (
        conn: SocketConn,
        ctx: HttpRequestContext,
        answer: SocketAnswer,
        body: Record<string, unknown>,
        model: string,
        state: ServeState
      ) {
        const { ws, apiKeyId, store, send } = conn
        // The key's inbound limits, per message as HTTP checks them per request.
        const admission = apiKeyId === null ? undefined : inboundLimits.admit(ctx, apiKeyId)
        if (admission !== undefined) yield* admission

        // The router's plan: every family answers (translated where it does not speak
        // Responses), narrowed to the candidates that generate text at all.
        const { model: planned, noThinking } = splitNoThinking(model)
        const plan = yield* deps.inference.plan(planned, openAiResponses)
        const able = narrowPlan(plan, generates)
        if (!able) {
          const other = firstOf(plan)
          if (!other) return yield* allBlocked(openAiResponses, plan)
          return yield* new InferenceError({
            status: 400,
            kind: "invalid_request",
            code: "upstream_ws_provider_required",
            message: `${model} is a ${kindOf(other.connection.provider, other.model)} model of ${other.connection.name}: it cannot answer a response, over the WebSocket or over HTTP. Use a chat model.`
          })
        }
        // Always expanded here (the connection's own store), but the answering server's own stored items are kept.
        const expandFor = (c: Candidate | undefined) => store.expand(body, openAiResponses, true, c && { id: c.connection.id, storesResponses: false })
        const first = able.candidates[0]
        const expanded = yield* expandFor(first)
        // Refused as POST /v1/responses refuses it, with the same message.
        yield* decodeResponsesRequest(expanded.body, typeof body["previous_response_id"] === "string" && body["previous_response_id"] !== "")

        const track = newTracking(model)
        const call: InferenceCall = { ctx, format: openAiResponses, body: expanded.body, model, stream: true, endpoint: "responses.ws" }
        state.untrack = deps.inference.track(ctx, "responses.ws")
        // One usage row per response, whatever happened (a cancelled one included): at its end.
        attachUsageRow(deps.usage, deps.accounting, call, track)
        // The guardrails (when any of their flags is on) and the registered hooks see the
        // conversation as it will go upstream, as over HTTP; the body they leave goes to every
        // candidate (without them each candidate gets its own expansion, see ResponseStore).
        const guard = guardrails.attach(ctx)
        if (guard) yield* guard
        let hooked: Record<string, unknown> | undefined
        if (ctx.hooks!.onRequest.length !== 0) {
          hooked = yield* Effect.tapError(requestReceived(ctx, openAiResponses, call), (e) => refused(track, e))
        }
        // Budgets hold here as on HTTP (token limits in the guarded attempt).
        const budget = deps.accounting.budget(apiKeyId)
        if (!budget.ok) {
          const retryAfter = String(Math.max(1, Math.ceil(budget.retryAfterMs / 1000)))
          track.outcome = { status: 429, usage: undefined, ttftMs: null, error: "budget_exhausted" }
          return yield* new InferenceError({
            status: 429,
            kind: "rate_limit",
            code: "budget_exhausted",
            message: `the ${budget.window} budget of this API key is spent`,
            headers: { "retry-after": retryAfter }
          })
        }
        track.hold = deps.accounting.reserve(apiKeyId)
        const table = ctx.hooks!
        if (table.onModelSelect.length !== 0 || (table.onComboResolve.length !== 0 && able.kind !== "direct")) {
          const selected = yield* Effect.tapError(routeResolved(ctx, openAiResponses, model, able, hooked ?? expanded.body, "responses"), (e) => refused(track, e))
          if (selected) hooked = selected
        }
        const sink = new SocketSink(ctx, answer, send, () => ws.readyState === ws.OPEN)
        const fixed: Expanded | undefined = hooked && { ...expanded, body: hooked }
        const request: SocketRequest = {
          ctx,
          format: openAiResponses,
          model,
          committed: () => sink.sent,
          sink,
          noThinking,
          body,
          expanded: (c) => (fixed ? Effect.succeed(fixed) : c === first ? Effect.succeed(expanded) : expandFor(c)),
          // The client's own input is remembered (as over HTTP): the next response's hooks see the conversation whole again.
          remember: (id, input, output, origin) => store.remember(id, input, output, origin)
        }
        yield* deps.inference.guarded(request, able, track, tryResponse)
      })

      const session = (ws: WebSocket, req: http.IncomingMessage, apiKeyId: string | null) => {
        const store = ResponseStore.make({ maxEntries: 100, maxAgeMs: 2 * 60 * 60 * 1000 })
        let current: Fiber.RuntimeFiber<void, never> | undefined
        /** The answer of the response in progress (`current`), once it has one. */
        let answering: SocketAnswer | undefined
        const queue: Array<string> = []
        const send = (text: string) => {
          if (ws.readyState === ws.OPEN) ws.send(text)
        }
        const conn: SocketConn = { ws, apiKeyId, store, send }

        /** A frame the gateway cannot take (not a request: no lifecycle), answered with an error event. */
        const invalid = (code: string, message: string) => send(JSON.stringify({ type: "error", status: 400, error: { type: "invalid_request_error", code, message } }))

        const handle = (raw: string): Effect.Effect<void> =>
          Effect.suspend(() => {
            if (jsonTooDeep(raw)) return Effect.sync(() => invalid("json_too_deep", `frame is ${TOO_DEEP_MESSAGE}`))
            const frame = obj(tryJson(raw))
            if (!frame) return Effect.sync(() => invalid("invalid_json", "frames must be JSON objects"))
            if (frame["type"] !== "response.create") return Effect.sync(() => invalid("unsupported_frame", `expected type response.create, got ${String(frame["type"])}`))
            const { type: _t, generate, ...body } = frame
            const model = str(body["model"])
            if (!model) return Effect.sync(() => invalid("missing_model", "response.create needs a model"))
            // Prewarm: remember the input, generate nothing (no upstream call, no lifecycle, no usage row).
            if (generate === false) return prewarm(conn, body, model)
            return respond(raw, body, model)
          }).pipe(
            Effect.catchAllDefect((d) =>
              Effect.logError("websocket frame failed", d).pipe(
                Effect.zipRight(Effect.sync(() => send(JSON.stringify({ type: "error", status: 500, error: { type: "server_error", message: "internal error" } }))))
              )
            ),
            Effect.annotateLogs({ transport: "websocket" })
          )

        /**
         * One `response.create`: a request of the inference plane with the lifecycle of a
         * `POST /v1/responses` (docs/ARCHITECTURE.md, "Seam 2"): the key's inbound rate limits,
         * the guardrails, onRequest, the budget, onModelSelect, the guarded attempt (onAttemptStart,
         * onProviderError), the answer's rewrite and stream events through the socket's sink, and
         * its end (onResponse or onError, with the usage row). A failure is the error event.
         */
        const respond = (raw: string, body: Record<string, unknown>, model: string): Effect.Effect<void> => {
          const answer: SocketAnswer = { statusCode: 200, headersSent: false }
          answering = answer
          const ctx: HttpRequestContext = {
            requestId: newRequestId(),
            startedAt: Date.now(),
            req,
            // Nothing writes to it: the answer goes out as socket events (`answer` is what the lifecycle reads).
            res: answer as unknown as http.ServerResponse,
            method: req.method ?? "GET",
            headers: req.headers,
            answer,
            transport: WS_TRANSPORT,
            path: req.url ?? "",
            query: new URLSearchParams(),
            apiKeyId,
            responseHeaders: {},
            hooks: hooks.current(),
            // The frame is the request's body (the token estimate of the inbound limits reads it).
            body: Buffer.from(raw),
            route: `websocket ${(req.url ?? "").split("?")[0]}`
          }
          // In flight, its span while tracing is on; its log lines carry its request and trace ids.
          fireBegin(ctx)
          const traceId = traceIdOf(ctx)
          const state: ServeState = { untrack: undefined }
          // As the dispatcher ends an HTTP request: the error event, then the end hooks (the usage
          // row among them), uninterruptibly, so a cancelled response still gets its row (499).
          return Effect.uninterruptibleMask((restore) =>
            Effect.flatMap(Effect.exit(restore(serve(conn, ctx, answer, body, model, state))), (exit) => {
              let error: InferenceError | undefined
              let gone = false
              let after: Effect.Effect<void> = Effect.void
              if (Exit.isFailure(exit)) {
                if (Cause.isInterruptedOnly(exit.cause)) gone = true
                else {
                  const failure = Cause.failureOption(exit.cause)
                  error =
                    failure._tag === "Some"
                      ? failure.value
                      : new InferenceError({ status: 500, kind: "server", code: "internal_error", message: `internal error (request ${ctx.requestId})` })
                  if (failure._tag === "None") after = Effect.logError("websocket response failed unexpectedly", Cause.pretty(exit.cause))
                  if (!answer.headersSent) answer.statusCode = error.status
                  const text = errorFrame(error, errorHeaders(ctx, error))
                  ctx.answerBody = text
                  send(text)
                }
              }
              const ending = endRequest(ctx, error, gone)
              fireEnd(ctx, gone ? 499 : answer.statusCode, error)
              const done = Effect.sync(() => state.untrack?.())
              return Effect.zipRight(ending === undefined ? done : Effect.zipRight(ending, done), after)
            })
          ).pipe(Effect.annotateLogs(traceId === undefined ? { requestId: ctx.requestId } : { requestId: ctx.requestId, traceId }))
        }

        // Frames are answered one after another; response.cancel stops the one in progress.
        const next = () => {
          if (current || queue.length === 0) return
          const raw = queue.shift()!
          current = run(handle(raw))
          current.addObserver(() => {
            current = undefined
            answering = undefined
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
          // A response whose last message went out is not cancelled by the close that follows it
          // (clients close right after response.completed): it ends, its usage row says 200.
          if (current && answering?.finished !== true) run(Fiber.interrupt(current))
        })
        ws.on("error", () => ws.terminate())
      }

      /** An upgrade on a Responses WebSocket path: refused with an HTTP answer, or its socket handed to `session`. */
      const accept = Effect.fnUntraced(function* (req: http.IncomingMessage, socket: net.Socket, head: Buffer, query: URLSearchParams, requestId: string) {
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
          return refuse(socket, requestId, auth.left.status, auth.left.status === 401 ? "Unauthorized" : "Forbidden", auth.left.message, auth.left.code ?? "unauthorized")
        upgradeIds.set(req, requestId)
        wss.handleUpgrade(req, socket, head, (ws) => {
          sockets.add(ws)
          session(ws, req, auth.right)
        })
      })

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
