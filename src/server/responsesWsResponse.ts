/**
 * One `response.create` of a Responses WebSocket: a request of the inference plane with the
 * lifecycle of a `POST /v1/responses` (`serve`, wrapped by `respond`), or, for a prewarm frame,
 * an empty completed response (`prewarm`).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as http from "node:http"
import type { WebSocket } from "ws"
import { newId } from "../domain/canonical.js"
import { kindOf, modelDoes } from "../domain/catalog/catalog.js"
import { allBlocked, newTracking, type Tracking } from "../kernel/attempts.js"
import { InferenceError } from "../kernel/errors.js"
import { endRequest, requestReceived, routeResolved } from "../kernel/hooks.js"
import type { RequestHooksShape } from "../kernel/RequestHooks.js"
import { newRequestId } from "../kernel/ids.js"
import { fireBegin, fireEnd } from "../kernel/listeners.js"
import type { Transport } from "../kernel/request.js"
import type { AccountingShape } from "../services/accounting/Accounting.js"
import type { InboundLimitsShape } from "../services/accounting/InboundLimits.js"
import type { GuardrailsShape } from "../services/guardrails/Guardrails.js"
import { traceIdOf } from "../services/observability/Observability.js"
import type { Candidate } from "../services/routing/types.js"
import type { UsageShape } from "../services/usage/Usage.js"
import { openAiResponses } from "../upstream/formats/openai-responses.js"
import { splitNoThinking } from "../upstream/providers/catalogEntries.js"
import { attachUsageRow } from "../inference/builtinHooks.js"
import type { InferenceCall, InferenceShape } from "../inference/call.js"
import { firstOf, narrowPlan } from "../inference/fallback.js"
import type { HttpRequestContext } from "../inference/io.js"
import type { Expanded, ResponseStoreShape } from "../inference/ResponseStore.js"
import type { makeResponseAttempt, SocketRequest } from "./responsesWsAttempt.js"
import { errorFrame, errorHeaders, type SocketAnswer, SocketSink } from "./responsesWsSink.js"
import { decodeResponsesRequest } from "../inference/routes/openai.js"
import { type ResponsesCompactionShape, upstreamCompacts } from "../inference/compaction/ResponsesCompaction.js"
import { isCompactionTrigger, TRIGGER_TYPE } from "../inference/compaction/items.js"
import { compactionEvents } from "../inference/compaction/answers.js"
import { obj } from "../upstream/formats/common.js"
import { mcpToolIndex } from "../inference/mcp/responsesTools.js"

/** What the frames of one WebSocket need of it, made once per connection. */
export interface SocketConn {
  readonly ws: WebSocket
  /** The upgrade request: the head each response's context carries. */
  readonly req: http.IncomingMessage
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

/** A response.create frame is its request's body (set on the context when it is made). */
const WS_TRANSPORT: Transport = { readBody: (ctx) => Effect.succeed(ctx.body ?? Buffer.alloc(0)) }

/**
 * Whether a candidate can answer a response at all: any family can by translation, but a
 * model the catalog knows as another kind (speech, images, rerank, embeddings...) cannot.
 */
const generates = (c: Candidate): boolean => modelDoes(c.connection.provider, c.model, "chat")

/** A hook blocked the response: its usage row says so. */
const refused = (track: Tracking, e: InferenceError) =>
  Effect.sync(() => (track.outcome = { status: e.status, usage: undefined, ttftMs: null, error: e.message }))

/** A prewarm frame: its input remembered, an empty completed response sent (see `handle` in responsesWsSession.ts). */
export const prewarm = Effect.fnUntraced(
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
type Serve = (
  conn: SocketConn,
  ctx: HttpRequestContext,
  answer: SocketAnswer,
  body: Record<string, unknown>,
  model: string,
  state: ServeState
) => Effect.Effect<void, InferenceError>

/** What a response needs of the gateway: the inference plane, usage rows and budgets, the key's limits, the guardrails, the try on a
 * candidate. */
export interface ServeDeps {
  readonly inference: InferenceShape
  readonly usage: UsageShape
  readonly accounting: AccountingShape
  readonly inboundLimits: InboundLimitsShape
  readonly guardrails: GuardrailsShape
  readonly tryResponse: ReturnType<typeof makeResponseAttempt>
  /** Codex's compaction (docs/agents.md, "Codex compaction"); absent in partial layers. */
  readonly compaction?: ResponsesCompactionShape | undefined
}

/** A response's work (`serve`): admission, the plan, the conversation, the hooks, the budget, the guarded attempt; made once per layer. */
export const makeServe = ({ inference, usage, accounting, inboundLimits, guardrails, tryResponse, compaction }: ServeDeps): Serve =>
  Effect.fnUntraced(function* (
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

    // `mcp` tools run in the gateway's tool loop, which answers over HTTP only: refused here rather
    // than passed to an upstream that would see a server it cannot reach (docs/mcp.md).
    const mcpAt = mcpToolIndex(body)
    if (mcpAt >= 0)
      return yield* new InferenceError({
        status: 400,
        kind: "invalid_request",
        code: "mcp_tools_http_only",
        param: `tools[${mcpAt}]`,
        message: `tools[${mcpAt}] is an mcp tool: the gateway runs MCP tools for POST /v1/responses, not over the WebSocket; send this request over HTTP`
      })

    // The router's plan: every family answers (translated where it does not speak
    // Responses), narrowed to the candidates that generate text at all.
    const { model: planned, noThinking } = splitNoThinking(model)
    const plan = yield* inference.plan(planned, openAiResponses)
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
    // The gateway's own compaction items go upstream as the summary they hold, whatever the candidate.
    const expandFor = (c: Candidate | undefined) =>
      Effect.flatMap(store.expand(body, openAiResponses, true, c && { id: c.connection.id, storesResponses: false }), (e) => {
        const opened = compaction === undefined ? e.body : compaction.openItems(e.body)
        if (opened instanceof InferenceError) return Effect.fail(opened)
        return Effect.succeed(opened === e.body ? e : { ...e, body: opened })
      })
    const first = able.candidates[0]
    const expanded = yield* expandFor(first)
    // A compaction asked with the trigger: the summary's one item, unless the first candidate compacts itself.
    if (compaction !== undefined && isCompactionTrigger(expanded.body) && !(first !== undefined && upstreamCompacts(first.connection))) {
      const made = yield* compaction.compact(expanded.body, model, apiKeyId)
      const events = compactionEvents(made, model)
      answer.headersSent = true
      for (const e of events) send(JSON.stringify(e))
      answer.finished = true
      const completed = obj(events[events.length - 1]!["response"])!
      store.remember(
        String(completed["id"]),
        expanded.input.filter((i) => obj(i)?.["type"] !== TRIGGER_TYPE),
        [made.item]
      )
      return
    }
    // Refused as POST /v1/responses refuses it, with the same message.
    yield* decodeResponsesRequest(expanded.body, typeof body["previous_response_id"] === "string" && body["previous_response_id"] !== "")

    const track = newTracking(model)
    const call: InferenceCall = { ctx, format: openAiResponses, body: expanded.body, model, stream: true, endpoint: "responses.ws" }
    state.untrack = inference.track(ctx, "responses.ws")
    // One usage row per response, whatever happened (a cancelled one included): at its end.
    attachUsageRow(usage, accounting, call, track)
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
    const budget = accounting.budget(apiKeyId)
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
    track.hold = accounting.reserve(apiKeyId)
    const table = ctx.hooks!
    if (table.onModelSelect.length !== 0 || (table.onComboResolve.length !== 0 && able.kind !== "direct")) {
      const selected = yield* Effect.tapError(routeResolved(ctx, openAiResponses, model, able, hooked ?? expanded.body, "responses"), (e) =>
        refused(track, e)
      )
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
    yield* inference.guarded(request, able, track, tryResponse)
  })

/** What `respond` needs: the registered hooks (read per response) and the response's work. */
export interface RespondDeps {
  readonly hooks: RequestHooksShape
  readonly serve: Serve
}

/**
 * One `response.create`: a request of the inference plane with the lifecycle of a
 * `POST /v1/responses` (docs/ARCHITECTURE.md, "Seam 2"): the key's inbound rate limits,
 * the guardrails, onRequest, the budget, onModelSelect, the guarded attempt (onAttemptStart,
 * onProviderError), the answer's rewrite and stream events through the socket's sink, and
 * its end (onResponse or onError, with the usage row). A failure is the error event.
 */
export const respond = (
  { hooks, serve }: RespondDeps,
  conn: SocketConn,
  answer: SocketAnswer,
  raw: string,
  body: Record<string, unknown>,
  model: string
): Effect.Effect<void> => {
  const { req, apiKeyId, send } = conn
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
              : new InferenceError({
                  status: 500,
                  kind: "server",
                  code: "internal_error",
                  message: `internal error (request ${ctx.requestId})`
                })
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
