import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import {
  type CanonicalError,
  type CanonicalRequest,
  type CanonicalResponse,
  errorKindForStatus,
  type FormatId,
  mergeUsage,
  type StreamEvent,
  type Usage
} from "../formats/canonical.js"
import { obj, str, tryJson } from "../formats/common.js"
import { RequestDecodeError, type StreamEncoder, type WireFormat } from "../formats/format.js"
import type { Frame } from "../formats/frames.js"
import { failureOf, ResponsesStreamEncoder } from "../formats/openai-responses.js"
import { encodeChatRequest } from "../formats/openai-chat.js"
import { FORMATS } from "../formats/registry.js"
import { Connections, type ResolvedTarget } from "../providers/Connections.js"
import { checkProviderUrl } from "../providers/urlPolicy.js"
import { upstreamRequest } from "../upstream/executors.js"
import { readUpstreamBody, UpstreamHttp, type UpstreamResponse } from "../upstream/UpstreamHttp.js"
import { Usage as UsageService } from "../usage/Usage.js"
import { clientError, InferenceError } from "./errors.js"
import { gatewayHeaders, type RequestContext } from "./io.js"
import { noThinkingBody, normalizePassthrough } from "./passthrough.js"
import type { Origin } from "./responseStore.js"
import { relayStream } from "./stream.js"
import { StreamTimeouts } from "./timeouts.js"

/** One inference request as a route hands it over. */
export interface InferenceCall {
  readonly ctx: RequestContext
  /** The client's wire format. */
  readonly format: WireFormat
  /** The client's body, parsed (Gemini routes add `model` from the path). */
  readonly body: Record<string, unknown>
  /** The model id as the client asked for it. */
  readonly model: string
  readonly stream: boolean
  /** Usage label: `chat.completions`, `messages`, `responses`, `generateContent`, `api.chat`, ... */
  readonly endpoint: string
  /** Shapes the answer (OpenAI `stream_options`, Responses echo fields, Ollama generate mode). */
  readonly encodeOptions?: Readonly<Record<string, unknown>>
  /** The request in canonical form, when the route decodes it itself (`/api/generate`, `/v1/completions`). */
  readonly decode?: (body: Record<string, unknown>) => CanonicalRequest
  /** The answer in the client's shape, when the route's shape differs from its format's default. */
  readonly encodeResponse?: (res: CanonicalResponse) => unknown
  readonly streamEncoder?: () => StreamEncoder
  /** Reasoning off (the no-thinking alias). */
  readonly noThinking?: boolean
  /** Whether the route may pass the body through unchanged when the upstream speaks its format. */
  readonly passthrough?: boolean
  /** Called with the response id and output once the answer is complete (Responses state). */
  /** A Responses answer completed; `origin` is set when the upstream produced it itself (pass-through). */
  readonly onCompleted?: (result: { readonly id: string; readonly output: ReadonlyArray<unknown>; readonly origin?: Origin }) => void
}

export interface InferenceShape {
  readonly run: (call: InferenceCall) => Effect.Effect<void, InferenceError>
  /** Resolves a model id to a connection, as a 404 in the client's terms when it cannot. */
  readonly resolve: (model: string, format: WireFormat) => Effect.Effect<ResolvedTarget, InferenceError>
  /** Sends one prepared request to a connection, checking the outbound URL policy first. */
  readonly send: (
    target: ResolvedTarget,
    format: FormatId,
    body: Record<string, unknown>,
    options: { readonly stream: boolean; readonly op?: "generate" | "count_tokens" | "embed"; readonly forward?: Readonly<Record<string, string>> },
    clientFormat: WireFormat
  ) => Effect.Effect<UpstreamResponse, InferenceError>
  /** An upstream error answer, read and rendered for the client. */
  readonly failure: (res: UpstreamResponse, upstream: WireFormat, client: WireFormat) => Effect.Effect<InferenceError>
}

/** Whether a parsed body is an error object in `format`'s own shape. */
const isErrorShape = (format: FormatId, body: unknown): boolean => {
  const b = obj(body)
  if (!b) return false
  return format === "ollama" ? typeof b["error"] === "string" : format === "anthropic" ? b["type"] === "error" || obj(b["error"]) !== undefined : obj(b["error"]) !== undefined
}

/** Rate-limit hints worth passing to the client with an error. */
const hintHeaders = (headers: UpstreamResponse["headers"]): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && (name === "retry-after" || name.startsWith("x-ratelimit-") || name.startsWith("anthropic-ratelimit-"))) {
      out[name] = Array.isArray(value) ? value.join(", ") : String(value)
    }
  }
  return out
}

/** A 200 whose body is an error (some upstreams do this) is an error, never an empty success. */
const errorIn200 = (format: FormatId, body: unknown): CanonicalError | undefined => {
  const b = obj(body)
  if (!b) return undefined
  const message = (e: unknown): string =>
    typeof e === "string" ? e : (obj(e)?.["message"] as string | undefined) ?? "the upstream answered 200 with an error body"
  switch (format) {
    case "openai-chat":
      return b["error"] && !Array.isArray(b["choices"]) ? { status: 502, kind: "upstream", message: message(b["error"]) } : undefined
    case "openai-responses":
      return failureOf(b)
    case "anthropic":
      return b["type"] === "error" ? { status: 502, kind: "upstream", message: message(b["error"]) } : undefined
    case "gemini":
      return b["error"] ? { status: (obj(b["error"])?.["code"] as number | undefined) ?? 502, kind: "upstream", message: message(b["error"]) } : undefined
    case "ollama":
      return typeof b["error"] === "string" ? { status: 502, kind: "upstream", message: b["error"] } : undefined
  }
}

/** Collects canonical events into a response (for clients that did not stream). */
export const collectEvents = (events: ReadonlyArray<StreamEvent>): CanonicalResponse => {
  const blocks = new Map<number, { type: string; text: string; id?: string; name?: string; signature?: string; redacted?: string; itemId?: string; encrypted?: boolean }>()
  let start = { id: "", model: "", created: Math.floor(Date.now() / 1000) }
  let usage: Partial<Usage> | undefined
  let stop: CanonicalResponse["stopReason"] = "end_turn"
  for (const ev of events) {
    if (ev.type === "start") start = ev
    else if (ev.type === "block_start") blocks.set(ev.index, { text: "", ...ev.block })
    else if (ev.type === "text_delta" || ev.type === "reasoning_delta") blocks.get(ev.index)!.text += ev.text
    else if (ev.type === "tool_args_delta") blocks.get(ev.index)!.text += ev.partialJson
    else if (ev.type === "signature") Object.assign(blocks.get(ev.index)!, { signature: ev.signature, encrypted: ev.encrypted })
    else if (ev.type === "usage") usage = mergeUsage(usage, ev.usage)
    else if (ev.type === "finish") stop = ev.stopReason
  }
  return {
    ...start,
    content: [...blocks.values()].map((b) =>
      b.type === "tool_use"
        ? { type: "tool_use" as const, id: b.id!, name: b.name!, input: tryJson(b.text || "{}") ?? {}, ...(b.signature ? { signature: b.signature } : {}) }
        : b.type === "reasoning"
          ? { type: "reasoning" as const, text: b.text, ...(b.signature ? (b.encrypted ? { encrypted: b.signature } : { signature: b.signature }) : {}), ...(b.redacted !== undefined ? { redacted: b.redacted } : {}), ...(b.itemId ? { itemId: b.itemId } : {}) }
          : { type: "text" as const, text: b.text }
    ),
    stopReason: stop,
    ...(usage ? { usage: { inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0, ...usage } } : {})
  }
}

const responseEvents = (res: CanonicalResponse): Array<StreamEvent> => {
  const events: Array<StreamEvent> = [{ type: "start", id: res.id, model: res.model, created: res.created }]
  res.content.forEach((b, index) => {
    if (b.type === "text") events.push({ type: "block_start", index, block: { type: "text" } }, { type: "text_delta", index, text: b.text })
    else if (b.type === "reasoning") {
      events.push({ type: "block_start", index, block: { type: "reasoning", ...(b.redacted !== undefined ? { redacted: b.redacted } : {}), ...(b.itemId ? { itemId: b.itemId } : {}) } })
      if (b.text) events.push({ type: "reasoning_delta", index, text: b.text })
      if (b.signature || b.encrypted) events.push({ type: "signature", index, signature: (b.encrypted ?? b.signature)!, ...(b.encrypted ? { encrypted: true } : {}) })
    } else if (b.type === "tool_use") {
      events.push({ type: "block_start", index, block: { type: "tool_use", id: b.id, name: b.name, ...(b.signature ? { signature: b.signature } : {}) } }, { type: "tool_args_delta", index, partialJson: JSON.stringify(b.input ?? {}) })
    } else return
    events.push({ type: "block_stop", index })
  })
  if (res.usage) events.push({ type: "usage", usage: res.usage })
  events.push({ type: "finish", stopReason: res.stopReason, ...(res.stopSequence ? { stopSequence: res.stopSequence } : {}) })
  return events
}

/**
 * The inference pipeline, one path for every inbound format: resolve the model to a
 * connection; if the upstream speaks the client's format, pass the body through (normalised)
 * and read usage from the answer; otherwise decode into the canonical form, encode for the
 * upstream, and translate the answer back, streams event by event.
 */
export class Inference extends Context.Tag("gateway/Inference")<Inference, InferenceShape>() {
  static readonly layer = Layer.effect(
    Inference,
    Effect.gen(function* () {
      const connections = yield* Connections
      const http = yield* UpstreamHttp
      const usage = yield* UsageService
      const timeouts = yield* StreamTimeouts

      const resolve: InferenceShape["resolve"] = (model, format) =>
        connections.resolve(model).pipe(
          Effect.mapError((e) => clientError(format, { status: 404, kind: "not_found", message: e.message, code: "model_not_found", param: "model" }))
        )

      const failure: InferenceShape["failure"] = (res, upstream, client) =>
        readUpstreamBody(res.body, 1024 * 1024).pipe(
          Effect.map((b) => b.toString("utf8")),
          Effect.orElseSucceed(() => ""),
          Effect.map((text) => {
            const parsed = tryJson(text)
            // Same format: the upstream's own error object is already what the client expects.
            if (upstream.id === client.id && isErrorShape(upstream.id, parsed)) {
              const e = upstream.decodeError(res.status, parsed, text)
              return new InferenceError({ status: res.status, kind: e.kind, code: e.code ?? null, message: e.message, headers: hintHeaders(res.headers), body: parsed })
            }
            return clientError(client, upstream.decodeError(res.status, parsed, text), hintHeaders(res.headers))
          })
        )

      const send: InferenceShape["send"] = (target, format, body, options, clientFormat) =>
        Effect.gen(function* () {
          const { connection } = target
          if (connection.keyError) {
            return yield* clientError(clientFormat, { status: 503, kind: "overloaded", message: `${connection.name}: ${connection.keyError}`, code: "provider_misconfigured" })
          }
          const verdict = checkProviderUrl(connection.effectiveBaseUrl ?? "", yield* connections.urlPolicy)
          if (!verdict.ok) {
            return yield* clientError(clientFormat, { status: 403, kind: "permission", message: `${connection.name}: ${verdict.reason}`, code: "provider_url_blocked" })
          }
          const request = upstreamRequest(connection, format, body, {
            model: target.model,
            stream: options.stream,
            userAgent: http.userAgent,
            ...(options.op ? { op: options.op } : {}),
            ...(options.forward ? { forward: options.forward } : {})
          })
          return yield* http.request({ ...request, headersTimeout: options.stream ? timeouts.streamHeadersMs : timeouts.headersMs }).pipe(
            Effect.mapError((e) =>
              clientError(clientFormat, {
                status: e.kind === "timeout" ? 504 : 502,
                kind: e.kind === "timeout" ? "timeout" : "upstream",
                message: `${connection.name}: ${e.kind === "timeout" ? "upstream timed out" : "upstream unreachable"} (${e.message})`,
                code: e.kind === "timeout" ? "upstream_timeout" : "upstream_unreachable"
              })
            )
          )
        })

      const run = (call: InferenceCall) =>
        Effect.gen(function* () {
          const { ctx, format: client } = call
          const target = yield* resolve(call.model, client)
          const { connection } = target
          const passthrough = (call.passthrough ?? true) && connection.formats.includes(client.id)
          const upstream = passthrough ? client : FORMATS[connection.format]
          const origin: Origin = { connectionId: connection.id, stored: call.body["store"] !== false }
          let outcome: { status: number; usage: Partial<Usage> | undefined; ttftMs: number | null; error: string | null } = {
            status: 0,
            usage: undefined,
            ttftMs: null,
            error: null
          }

          const forward: Record<string, string> = {}
          const beta = ctx.req.headers["anthropic-beta"]
          if (client.id === "anthropic" && upstream.id === "anthropic" && beta) forward["anthropic-beta"] = Array.isArray(beta) ? beta.join(",") : beta

          let body: Record<string, unknown>
          let canonical: CanonicalRequest | undefined
          if (passthrough) {
            body = normalizePassthrough(upstream.id, call.noThinking ? noThinkingBody(upstream.id, call.body) : call.body, connection)
          } else {
            canonical = yield* Effect.try({
              try: () => (call.decode ?? client.decodeRequest)(call.body),
              catch: (e) =>
                e instanceof RequestDecodeError
                  ? clientError(client, { status: 400, kind: "invalid_request", message: e.message, param: e.param })
                  : clientError(client, { status: 400, kind: "invalid_request", message: `the request could not be read: ${(e as Error).message}` })
            })
            const req: CanonicalRequest = { ...canonical, model: target.model, stream: call.stream, ...(call.noThinking ? { reasoning: { enabled: false } } : {}) }
            body =
              upstream.id === "openai-chat"
                ? encodeChatRequest(req, {
                    maxTokensField: connection.provider.id === "openai" ? "max_completion_tokens" : "max_tokens",
                    reasoningContent: connection.provider.id === "deepseek"
                  })
                : upstream.encodeRequest(req)
          }

          yield* Effect.gen(function* () {
            const res = yield* send(target, upstream.id, body, { stream: call.stream, forward }, client)
            if (res.status < 200 || res.status >= 300) return yield* Effect.flatMap(failure(res, upstream, client), Effect.fail)
            const contentType = String(res.headers["content-type"] ?? "")
            const streamed = call.stream && !contentType.includes("application/json")

            if (!streamed) {
              const text = (yield* readUpstreamBody(res.body).pipe(
                Effect.mapError((e) => clientError(client, { status: 502, kind: "upstream", message: `upstream response body could not be read: ${e.message}` }))
              )).toString("utf8")
              const json = tryJson(text)
              const bad = errorIn200(upstream.id, json) ?? (json === undefined ? { status: 502, kind: errorKindForStatus(502), message: `upstream answered 200 with a body that is not JSON: ${text.slice(0, 200)}` } : undefined)
              if (bad) return yield* clientError(client, bad)
              const decoded = upstream.decodeResponse(json)
              outcome = { ...outcome, status: 200, usage: decoded.usage ?? upstream.usageOfResponse(json) }
              if (call.stream) {
                // The client asked for a stream but the upstream answered whole: replay it as events.
                const encoder = call.streamEncoder?.() ?? client.streamEncoder({ model: call.model, requestId: ctx.requestId, ...(call.encodeOptions ? { options: call.encodeOptions } : {}) })
                ctx.res.writeHead(200, { ...gatewayHeaders(ctx.requestId), "content-type": client.streamContentType, "cache-control": "no-cache" })
                ctx.res.end(responseEvents(decoded).map((e) => encoder.push(e)).join("") + encoder.end())
                return
              }
              const answer = passthrough ? json : (call.encodeResponse ?? ((r: CanonicalResponse) => client.encodeResponse(r, { model: call.model, requestId: ctx.requestId, ...(call.encodeOptions ? { options: call.encodeOptions } : {}) })))(decoded)
              const payload = JSON.stringify(answer)
              ctx.res.writeHead(200, { ...gatewayHeaders(ctx.requestId), "content-type": "application/json", "content-length": Buffer.byteLength(payload) })
              ctx.res.end(payload)
              const id = obj(answer)?.["id"]
              if (call.onCompleted && typeof id === "string") call.onCompleted({ id, output: (obj(answer)?.["output"] as Array<unknown>) ?? [], ...(passthrough ? { origin } : {}) })
              return
            }

            let usageSoFar: Partial<Usage> | undefined
            if (passthrough) {
              const dropUsageChunk = upstream.id === "openai-chat" && obj(call.body["stream_options"])?.["include_usage"] !== true
              const completed = upstream.id === "openai-responses" && call.onCompleted
              // A Responses stream that breaks is reported as response.failed of the same response.
              const relayed = { id: undefined as string | undefined, seq: -1 }
              const result = yield* relayStream(
                ctx,
                res,
                upstream.framing,
                {
                  frame: (frame: Frame) => {
                    const u = upstream.usageOf(frame)
                    if (u) usageSoFar = mergeUsage(usageSoFar, u)
                    if (dropUsageChunk && u && /"choices"\s*:\s*\[\s*\]/.test(frame.data)) return ""
                    if (upstream.id === "openai-responses") {
                      const seq = /"sequence_number"\s*:\s*(\d+)/.exec(frame.data)
                      if (seq) relayed.seq = Math.max(relayed.seq, Number(seq[1]))
                      if (relayed.id === undefined && frame.data.includes("\"response.created\"")) relayed.id = str(obj(obj(tryJson(frame.data))?.["response"])?.["id"])
                    }
                    if (completed && frame.data.includes("\"response.completed\"")) {
                      const r = obj(obj(tryJson(frame.data))?.["response"])
                      if (r && typeof r["id"] === "string") call.onCompleted!({ id: r["id"], output: (r["output"] as Array<unknown>) ?? [], origin })
                    }
                    return upstream.framing === "sse" ? (frame.event ? `event: ${frame.event}\n` : "") + `data: ${frame.data}\n\n` : `${frame.data}\n`
                  },
                  end: () => "",
                  broken: (e) =>
                    (upstream.id === "openai-responses" && relayed.id !== undefined
                      ? ResponsesStreamEncoder.continuing(call.model, relayed.id, relayed.seq)
                      : client.streamEncoder({ model: call.model, requestId: ctx.requestId })
                    ).push({ type: "error", error: e })
                },
                String(res.headers["content-type"] ?? client.streamContentType),
                timeouts
              )
              outcome = { status: 200, usage: usageSoFar, ttftMs: result.ttftMs, error: result.error }
              return
            }

            const decoder = upstream.streamDecoder()
            const encoder = call.streamEncoder?.() ?? client.streamEncoder({ model: call.model, requestId: ctx.requestId, ...(call.encodeOptions ? { options: call.encodeOptions } : {}) })
            let failed: string | null = null
            const handle = (events: ReadonlyArray<StreamEvent>): string => {
              let out = ""
              for (const ev of events) {
                if (ev.type === "usage") usageSoFar = mergeUsage(usageSoFar, ev.usage)
                if (ev.type === "error") failed = ev.error.message
                out += encoder.push(ev)
              }
              return out
            }
            const result = yield* relayStream(
              ctx,
              res,
              upstream.framing,
              {
                frame: (frame) => handle(decoder.push(frame)),
                end: () => handle(decoder.end()) + (failed ? "" : encoder.end()),
                broken: (e) => {
                  failed = e.message
                  return encoder.push({ type: "error", error: e })
                }
              },
              client.streamContentType,
              timeouts
            )
            if (call.onCompleted && !failed && encoder.result) call.onCompleted(encoder.result())
            outcome = { status: 200, usage: usageSoFar, ttftMs: result.ttftMs, error: result.error ?? failed }
          }).pipe(
            Effect.tapError((e) => Effect.sync(() => (outcome = { status: e.status, usage: undefined, ttftMs: null, error: e.message }))),
            Effect.ensuring(
              Effect.suspend(() =>
                usage.record({
                  requestId: ctx.requestId,
                  apiKeyId: ctx.apiKeyId,
                  connectionId: connection.id,
                  provider: connection.provider.id,
                  model: target.model,
                  endpoint: call.endpoint,
                  stream: call.stream,
                  status: outcome.status || 499,
                  usage: {
                    input: outcome.usage?.inputTokens ?? null,
                    output: outcome.usage?.outputTokens ?? null,
                    cached: outcome.usage?.cachedInputTokens ?? null,
                    reasoning: outcome.usage?.reasoningTokens ?? null
                  },
                  latencyMs: Date.now() - ctx.startedAt,
                  ttftMs: outcome.ttftMs,
                  error: outcome.status ? outcome.error : (outcome.error ?? "client closed the request")
                })
              )
            ),
            Effect.annotateLogs({ provider: connection.provider.id, connection: connection.name, model: target.model, translation: passthrough ? "passthrough" : `${client.id}->${upstream.id}` })
          )
        })

      return { run, resolve, send, failure }
    })
  )
}
