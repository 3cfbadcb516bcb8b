import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { arr, obj, str } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { boolean, checkParams, integer, oneOf, params, string } from "../../upstream/formats/params.js"
import { openAiResponses } from "../../upstream/formats/openai-responses.js"
import type { FlagKey } from "../../platform/flags/catalog.js"
import type { CanonicalRequest, CanonicalResponse, StreamEvent } from "../../domain/canonical.js"
import { newId, wholeUsage, type Usage } from "../../domain/canonical.js"
import { usageToOpenAi } from "../../upstream/formats/openai-chat-answers.js"
import { RequestDecodeError, type StreamEncoder } from "../../upstream/formats/format.js"
import type { UsageShape } from "../../services/usage/Usage.js"
import {
  catalogEntries,
  modelObject,
  openAiModelList,
  splitNoThinking,
  virtualModelObject
} from "../../upstream/providers/catalogEntries.js"
import type { VirtualModel } from "../../services/routing/Router.js"
import type { BridgeModels } from "../../domain/bridge.js"
import type { AccountingShape } from "../../services/accounting/Accounting.js"
import { embed, openAiEmbeddings } from "../embeddings.js"
import { badRequest, decodeFailure, InferenceError, tryDecode } from "../../kernel/errors.js"
import { type HttpRequestContext, sendJson, withJsonObject } from "../io.js"
import type { InferenceCall, InferenceShape } from "../call.js"
import type { CommonPathRefusal } from "../commonPath.js"
import type { RoutePlan } from "../../services/routing/plan.js"
import type { ResponseStoreShape } from "../ResponseStore.js"
import { hasMcpTool } from "../mcp/responsesTools.js"
import type { ResponsesMcpShape } from "../mcp/ResponsesMcp.js"
import { decodedAs, type RouteDef } from "./types.js"
import type { Connection, ResolvedTarget } from "../../upstream/providers/Connections.js"
import { sseData } from "../../upstream/formats/frames.js"
import { type ResponsesCompactionShape, upstreamCompacts } from "../compaction/ResponsesCompaction.js"
import { isCompactionTrigger, TRIGGER_TYPE } from "../compaction/items.js"
import { compactEndpointAnswer, compactionResponse, compactionSse } from "../compaction/answers.js"
import { endStream, responseHeaders, startStream, writeStream } from "../io.js"
import { sealAnswer } from "../../upstream/formats/signatures.js"

export interface RouteDeps {
  readonly inference: InferenceShape
  readonly usage: UsageShape
  readonly responses: ResponseStoreShape
  readonly connections: Effect.Effect<ReadonlyArray<Connection>>
  readonly flag: (key: FlagKey) => Effect.Effect<boolean>
  /** Prices and settles requests served outside the pipeline (embeddings, WebSocket). */
  readonly accounting: AccountingShape
  /** Combos and advertised auto ids (model lists). */
  readonly virtualModels: Effect.Effect<ReadonlyArray<VirtualModel>>
  /** The gateway's default bridge models (docs/bridge.md): model lists say what each model takes through them; absent in partial layers. */
  readonly bridgeDefaults?: (() => BridgeModels) | undefined
  /** Responses requests with `mcp` tools (docs/mcp.md, "MCP tools in model requests"); absent where the MCP gateway is not built. */
  readonly mcp?: ResponsesMcpShape | undefined
  /** Codex's compaction requests, answered by the gateway for any upstream (docs/agents.md, "Codex compaction"); absent in partial layers. */
  readonly compaction?: ResponsesCompactionShape | undefined
}

/** No custom tools: one set shared by every request without tools (the usual case), read only. */
const NO_CUSTOM_TOOLS: ReadonlySet<string> = new Set()

/** Names of the `type: "custom"` tools of a request (`spec` finds the object holding the name). */
export const customToolNames = (
  tools: ReadonlyArray<unknown>,
  spec: (tool: unknown) => Record<string, unknown> | undefined
): ReadonlySet<string> => {
  let names: Set<string> | undefined
  for (const t of tools) {
    const name = obj(t)?.["type"] === "custom" ? str(spec(t)?.["name"]) : undefined
    if (name) (names ??= new Set()).add(name)
  }
  return names ?? NO_CUSTOM_TOOLS
}

/** The encode options of a chat request without stream options or custom tools (the usual one): one object shared, read only. */
const PLAIN_CHAT_OPTIONS: Readonly<Record<string, unknown>> = Object.freeze({ stream_options: undefined, customTools: NO_CUSTOM_TOOLS })

/** Where a chat tool's custom definition is (`tools[].custom`). */
const chatCustomSpec = (t: unknown): Record<string, unknown> | undefined => obj(obj(t)?.["custom"])

/** `POST /v1/chat/completions`: the call, or the 400 that refuses the body (the route's and the common path's). */
export const chatCall = (ctx: HttpRequestContext, body: Record<string, unknown>): InferenceCall | InferenceError => {
  let canonical: CanonicalRequest
  try {
    canonical = openAiChat.decodeRequest(body)
  } catch (e) {
    return decodeFailure(openAiChat, e)
  }
  const { model, noThinking } = splitNoThinking(canonical.model)
  const customTools = Array.isArray(body["tools"]) ? customToolNames(body["tools"], chatCustomSpec) : NO_CUSTOM_TOOLS
  const streamOptions = body["stream_options"]
  return {
    ctx,
    format: openAiChat,
    body,
    model,
    stream: canonical.stream,
    endpoint: "chat.completions",
    decode: decodedAs(body, canonical, openAiChat.decodeRequest),
    noThinking,
    encodeOptions:
      streamOptions === undefined && customTools === NO_CUSTOM_TOOLS ? PLAIN_CHAT_OPTIONS : { stream_options: streamOptions, customTools }
  }
}

/** `POST /v1/chat/completions`. */
export const chatCompletions = (deps: RouteDeps) => (ctx: HttpRequestContext, body: Record<string, unknown>) => {
  // Called once the body is read (inside that step): decoding needs no step of its own.
  const call = chatCall(ctx, body)
  return call instanceof InferenceError ? Effect.fail(call) : deps.inference.run(call)
}

// ---------------------------------------------------------------- legacy completions

/** Parameters of legacy completions beyond the chat ones (those are checked by the chat decoder). */
const COMPLETIONS_PARAMS = params({ logprobs: integer(0, 5), echo: boolean, best_of: integer(1), suffix: string })

/** `/v1/completions` answers in text_completion shape, decoded as a one-message chat. */
const completionsDecode = (body: Record<string, unknown>): CanonicalRequest => {
  const prompt = body["prompt"]
  const text =
    typeof prompt === "string"
      ? prompt
      : Array.isArray(prompt) && prompt.every((p) => typeof p === "string")
        ? prompt.join("\n")
        : undefined
  if (text === undefined) throw new RequestDecodeError("prompt must be a string or an array of strings", "prompt")
  checkParams(body, COMPLETIONS_PARAMS)
  const { messages: _m, logprobs: _l, ...rest } = body
  return openAiChat.decodeRequest({ ...rest, messages: [{ role: "user", content: text }] })
}

const completionsResponse = (model: string) => (res: CanonicalResponse) => ({
  id: `cmpl-${res.id.replace(/^chatcmpl-/, "")}`,
  object: "text_completion",
  created: res.created,
  model,
  choices: [
    {
      index: 0,
      text: res.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join(""),
      logprobs: null,
      finish_reason: res.stopReason === "max_tokens" ? "length" : "stop"
    }
  ],
  ...(res.usage
    ? {
        usage: {
          prompt_tokens: res.usage.inputTokens,
          completion_tokens: res.usage.outputTokens,
          total_tokens: res.usage.inputTokens + res.usage.outputTokens
        }
      }
    : {})
})

/**
 * Streamed text_completion chunks. Usage is collected from the stream and, when the client asked
 * with `stream_options.include_usage`, sent as a last chunk with empty `choices` (as chat does).
 */
class CompletionsStreamEncoder implements StreamEncoder {
  private readonly id = newId("cmpl-")
  private readonly created = Math.floor(Date.now() / 1000)
  private usage: Partial<Usage> | undefined
  constructor(
    private readonly model: string,
    private readonly includeUsage: boolean
  ) {}
  private base() {
    return { id: this.id, object: "text_completion", created: this.created, model: this.model }
  }
  private chunk(text: string, finish: string | null) {
    return sseData({ ...this.base(), choices: [{ index: 0, text, logprobs: null, finish_reason: finish }] })
  }
  push(ev: StreamEvent): string {
    if (ev.type === "text_delta") return ev.text ? this.chunk(ev.text, null) : ""
    if (ev.type === "usage") this.usage = { ...this.usage, ...ev.usage }
    if (ev.type === "finish") return this.chunk("", ev.stopReason === "max_tokens" ? "length" : "stop")
    if (ev.type === "error") return sseData(openAiChat.encodeError(ev.error))
    return ""
  }
  end(): string {
    const usage =
      this.includeUsage && this.usage ? sseData({ ...this.base(), choices: [], usage: usageToOpenAi(wholeUsage(this.usage)) }) : ""
    return `${usage}data: [DONE]\n\n`
  }
}

export const completions = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const canonical = yield* tryDecode(openAiChat, () => completionsDecode(body))
    yield* deps.inference.run({
      ctx,
      format: openAiChat,
      body,
      model: canonical.model,
      stream: canonical.stream,
      endpoint: "completions",
      decode: decodedAs(body, canonical, completionsDecode),
      passthrough: false,
      encodeResponse: completionsResponse(canonical.model),
      streamEncoder: () => new CompletionsStreamEncoder(canonical.model, obj(body["stream_options"])?.["include_usage"] === true)
    })
  })

// ---------------------------------------------------------------- responses

/**
 * A Responses request (`previous_response_id` already expanded) in canonical form, or the 400
 * that refuses it: the same for `POST /v1/responses` (both paths) and the WebSocket's `response.create`.
 */
export const decodeResponsesNow = (body: Record<string, unknown>, continues: boolean): CanonicalRequest | InferenceError => {
  let canonical: CanonicalRequest
  try {
    canonical = openAiResponses.decodeRequest(body)
  } catch (e) {
    return decodeFailure(openAiChat, e)
  }
  return canonical.messages.length === 0 && canonical.system.length === 0 && !continues && arr(body["input"]).length === 0
    ? badRequest("input must not be empty: send at least one message or instructions", "input")
    : canonical
}

/** `decodeResponsesNow` as an effect, run when the effect runs. */
export const decodeResponsesRequest = (
  body: Record<string, unknown>,
  continues: boolean
): Effect.Effect<CanonicalRequest, InferenceError> =>
  Effect.suspend(() => {
    const decoded = decodeResponsesNow(body, continues)
    return decoded instanceof InferenceError ? Effect.fail(decoded) : Effect.succeed(decoded)
  })

/** Whether a Responses body continues an earlier response (a non-empty `previous_response_id`). */
const continuesResponse = (body: Record<string, unknown>): boolean =>
  typeof body["previous_response_id"] === "string" && body["previous_response_id"] !== ""

/** A Responses body as it goes upstream (`opened`), and the full input the answer is remembered with. */
interface OpenedResponses {
  readonly opened: Record<string, unknown>
  readonly input: ReadonlyArray<unknown>
}

/**
 * `previous_response_id` resolved against the connection that will answer (`target`, known when
 * the request continues one: see ResponseStore.expand), then the gateway's own compaction items
 * opened into the summary they hold, whatever the upstream; or the 400 of either. Both paths.
 */
const openResponses = (
  deps: RouteDeps,
  body: Record<string, unknown>,
  target: ResolvedTarget | undefined
): OpenedResponses | InferenceError => {
  const native = target !== undefined && target.connection.formats.includes("openai-responses")
  const expanded = deps.responses.expandNow(
    body,
    openAiResponses,
    target !== undefined && !native,
    target && { id: target.connection.id, storesResponses: native && target.connection.provider.quirks?.storesResponses === true }
  )
  if (expanded instanceof InferenceError) return expanded
  const opened = deps.compaction === undefined ? expanded.body : deps.compaction.openItems(expanded.body)
  return opened instanceof InferenceError ? opened : { opened, input: expanded.input }
}

/** The call a Responses request hands the pipeline, its answer remembered for `previous_response_id`; or the 400 of its body. Both paths. */
const responsesCallOf = (
  deps: RouteDeps,
  ctx: HttpRequestContext,
  body: Record<string, unknown>,
  { opened, input }: OpenedResponses,
  continues: boolean
): InferenceCall | InferenceError => {
  const canonical = decodeResponsesNow(opened, continues)
  if (canonical instanceof InferenceError) return canonical
  const { model, noThinking } = splitNoThinking(canonical.model)
  const custom = customToolNames(arr(opened["tools"]), obj)
  return {
    ctx,
    format: openAiResponses,
    body: opened,
    model,
    stream: canonical.stream,
    endpoint: "responses",
    decode: decodedAs(opened, canonical, openAiResponses.decodeRequest),
    noThinking,
    encodeOptions: { customTools: custom, request: body },
    onCompleted: (r) => deps.responses.remember(r.id, input, r.output, r.origin)
  }
}

/**
 * `inference.resolve` without an effect: the target of a model whose plan the router has in
 * memory (`plan` answers that one as an Either, which is itself the effect) and whose first
 * candidate is the one `resolve` answers; undefined when either is not so (the pipeline resolves it).
 */
const resolvedNow = (inference: InferenceShape, model: string): ResolvedTarget | undefined => {
  const planned: unknown = inference.plan(model, openAiResponses)
  if (!Either.isEither(planned)) return undefined
  const plan = (planned as Either.Either<RoutePlan, InferenceError>).pipe(Either.getOrUndefined)
  const first = plan?.candidates[0]
  return first && { connection: first.connection, model: first.model }
}

/**
 * `POST /v1/responses` on the common path (docs/ARCHITECTURE.md, "The common path"): the call
 * `responses` would hand the pipeline, made without an effect, or the 400 it would answer, or why
 * it needs the pipeline: `mcp` tools (the gateway's tool loop), a Codex compaction trigger, a
 * `previous_response_id` whose answering connection is not known in memory.
 */
export const responsesCall =
  (deps: RouteDeps) =>
  (ctx: HttpRequestContext, body: Record<string, unknown>): InferenceCall | InferenceError | CommonPathRefusal => {
    if (deps.mcp !== undefined && hasMcpTool(body)) return "mcp"
    if (deps.compaction !== undefined && isCompactionTrigger(body)) return "compaction"
    const requested = str(body["model"])
    const continues = continuesResponse(body)
    let target: ResolvedTarget | undefined
    if (requested && continues) {
      target = resolvedNow(deps.inference, splitNoThinking(requested).model)
      if (target === undefined) return "previous_response"
    }
    const opened = openResponses(deps, body, target)
    return opened instanceof InferenceError ? opened : responsesCallOf(deps, ctx, body, opened, continues)
  }

/**
 * `POST /v1/responses`. `previous_response_id` is resolved by the gateway itself when it
 * produced that response (the conversation is kept in memory), so it works with any upstream
 * and with `store: false`. One with `mcp` tools runs the gateway's MCP tool loop instead (ResponsesMcp).
 */
export const responses = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    if (deps.mcp !== undefined && hasMcpTool(body)) return yield* deps.mcp.serve(ctx, body, deps.responses)
    const requested = str(body["model"])
    const continues = continuesResponse(body)
    // Codex asks for a compaction with a trigger last in its input: one read of the last item.
    const trigger = deps.compaction !== undefined && isCompactionTrigger(body)
    // The answering connection decides how previous_response_id is resolved (see ResponseStore.expand), and who compacts.
    const target =
      requested && (continues || trigger) ? yield* deps.inference.resolve(splitNoThinking(requested).model, openAiResponses) : undefined
    const opened = openResponses(deps, body, target)
    if (opened instanceof InferenceError) return yield* opened
    if (trigger && requested && !(target !== undefined && upstreamCompacts(target.connection)))
      return yield* answerCompaction(deps, deps.compaction!, ctx, opened.opened, requested, opened.input)
    const call = responsesCallOf(deps, ctx, body, opened, continues)
    if (call instanceof InferenceError) return yield* call
    yield* deps.inference.run(call)
  })

/**
 * A compaction asked with the trigger (`POST /v1/responses`): the conversation summarised and
 * answered as one `compaction` item, streamed when the request streams (docs/agents.md, "Codex
 * compaction"). The summary's own call carries the usage row.
 */
const answerCompaction = (
  deps: RouteDeps,
  compaction: ResponsesCompactionShape,
  ctx: HttpRequestContext,
  body: Record<string, unknown>,
  model: string,
  input: ReadonlyArray<unknown>
) =>
  Effect.map(compaction.compact(body, model, ctx.apiKeyId), (c) => {
    const response = compactionResponse(c, model)
    // Remembered as any response is, without its trigger: previous_response_id may follow it.
    deps.responses.remember(
      response.id,
      input.filter((i) => obj(i)?.["type"] !== TRIGGER_TYPE),
      response.output
    )
    if (body["stream"] !== true) return sendJson(ctx, 200, response)
    startStream(ctx, responseHeaders(ctx, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" }))
    writeStream(ctx, compactionSse(c, model))
    endStream(ctx, "")
  })

/**
 * `POST /v1/responses/compact` (Codex before its trigger form, and OpenAI's compaction endpoint):
 * the user messages of the input, then one `compaction` item holding the sealed summary. A
 * connection with `compaction: "upstream"` gets the request as it came (its items bound to it, as
 * reasoning state is).
 */
export const compact = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const compaction = deps.compaction
    if (compaction === undefined)
      return yield* new InferenceError({ status: 404, kind: "not_found", code: "not_found", message: "compaction is not served here" })
    const requested = str(body["model"])
    if (!requested) return yield* badRequest("model must be a non-empty string", "model")
    if (body["input"] !== undefined && !Array.isArray(body["input"]) && typeof body["input"] !== "string")
      return yield* badRequest("input must be a string or an array of items", "input")
    const target = yield* deps.inference.resolve(splitNoThinking(requested).model, openAiResponses)
    if (upstreamCompacts(target.connection)) return yield* compactUpstream(deps, ctx, body, target)
    const opened = compaction.openItems(body)
    if (opened instanceof InferenceError) return yield* opened
    const made = yield* compaction.compact(opened, requested, ctx.apiKeyId)
    sendJson(ctx, 200, compactEndpointAnswer(made, body["input"]))
  })

/** `/responses/compact` passed through to a connection that compacts itself; the items it answers sealed with it. */
const compactUpstream = Effect.fnUntraced(function* (
  deps: RouteDeps,
  ctx: HttpRequestContext,
  body: Record<string, unknown>,
  target: ResolvedTarget
) {
  const res = yield* deps.inference.send(
    target,
    "openai-responses",
    body,
    { stream: false, readWhole: true, custom: { path: "/responses/compact", json: { ...body, model: target.model } } },
    openAiResponses
  )
  if (res.status >= 400) return yield* (yield* deps.inference.readFailure(res, openAiResponses, openAiResponses, target.connection)).error
  const text = yield* Effect.mapError(deps.inference.wholeText(res, openAiResponses, target.connection), (f) => f.error)
  let answer: unknown
  try {
    answer = JSON.parse(text)
  } catch {
    return yield* new InferenceError({
      status: 502,
      kind: "upstream",
      code: "bad_upstream_answer",
      message: `${target.connection.name} answered /responses/compact with a body that is not JSON`
    })
  }
  sealAnswer("openai-responses", answer, target.connection.id)
  sendJson(ctx, 200, answer)
})

// ---------------------------------------------------------------- embeddings and models

/** The embeddings parameters whose values are checked (docs/formats.md). */
const EMBEDDINGS_PARAMS = params({ dimensions: integer(1), encoding_format: oneOf("float", "base64"), user: string })

export const embeddings = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const model = str(body["model"])
    if (!model) return yield* badRequest("model must be a non-empty string", "model")
    const input = body["input"]
    const inputs =
      typeof input === "string"
        ? [input]
        : Array.isArray(input) && input.length > 0 && input.every((i) => typeof i === "string")
          ? (input as Array<string>)
          : undefined
    if (!inputs) return yield* badRequest("input must be a string or a non-empty array of strings", "input")
    yield* tryDecode(openAiChat, () => checkParams(body, EMBEDDINGS_PARAMS))
    const dimensions = typeof body["dimensions"] === "number" ? body["dimensions"] : undefined
    const result = yield* embed(deps.inference, deps.accounting, ctx, openAiChat, model, inputs, dimensions)
    sendJson(ctx, 200, openAiEmbeddings(result, body["encoding_format"] === "base64"))
  })

export const listModels = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const entries = catalogEntries(yield* deps.connections)
    sendJson(
      ctx,
      200,
      openAiModelList(entries, yield* deps.flag("MODEL_CATALOG_INCLUDE_NAMES"), yield* deps.virtualModels, deps.bridgeDefaults?.())
    )
  })

export const retrieveModel = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const id = params["model"] ?? ""
    const entry = catalogEntries(yield* deps.connections).find((e) => e.id === id)
    const includeNames = yield* deps.flag("MODEL_CATALOG_INCLUDE_NAMES")
    if (entry) return sendJson(ctx, 200, modelObject(entry, includeNames, deps.bridgeDefaults?.()))
    const virtual = (yield* deps.virtualModels).find((v) => v.id.toLowerCase() === id.toLowerCase())
    if (virtual) return sendJson(ctx, 200, virtualModelObject(virtual, includeNames, deps.bridgeDefaults?.()))
    return yield* new InferenceError({
      status: 404,
      kind: "not_found",
      code: "model_not_found",
      message: `The model '${id}' does not exist`,
      param: "model"
    })
  })

export const openAiRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => {
  const withBody =
    (h: (ctx: HttpRequestContext, body: Record<string, unknown>) => Effect.Effect<void, InferenceError>) => (ctx: HttpRequestContext) =>
      withJsonObject(ctx, (body) => h(ctx, body))
  const responsesCommon = responsesCall(deps)
  return [
    { method: "POST", path: "/v1/chat/completions", format: openAiChat, handle: withBody(chatCompletions(deps)), common: chatCall },
    { method: "POST", path: "/v1/completions", format: openAiChat, handle: withBody(completions(deps)) },
    { method: "POST", path: "/v1/responses", format: openAiResponses, handle: withBody(responses(deps)), common: responsesCommon },
    { method: "POST", path: "/responses", format: openAiResponses, handle: withBody(responses(deps)), common: responsesCommon },
    { method: "POST", path: "/api/v1/responses", format: openAiResponses, handle: withBody(responses(deps)), common: responsesCommon },
    { method: "POST", path: "/v1/responses/compact", format: openAiResponses, handle: withBody(compact(deps)) },
    { method: "POST", path: "/responses/compact", format: openAiResponses, handle: withBody(compact(deps)) },
    { method: "POST", path: "/api/v1/responses/compact", format: openAiResponses, handle: withBody(compact(deps)) },
    { method: "POST", path: "/v1/embeddings", format: openAiChat, handle: withBody(embeddings(deps)) },
    { method: "GET", path: "/v1/models", format: openAiChat, handle: listModels(deps) },
    { method: "GET", path: /^\/v1\/models\/(?<model>[^:]+)$/, format: openAiChat, handle: retrieveModel(deps) }
  ]
}
