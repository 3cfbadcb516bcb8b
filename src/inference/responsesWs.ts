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
import { mergeUsage, newId, type Usage } from "../formats/canonical.js"
import { obj, str, tryJson } from "../formats/common.js"
import { SseParser } from "../formats/frames.js"
import { openAiResponses } from "../formats/openai-responses.js"
import { scrubSecrets } from "../observability/redact.js"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../http/untrusted.js"
import { Connections } from "../providers/Connections.js"
import { authenticateInference } from "./auth.js"
import { InferenceRoutes, newRequestId } from "./dispatch.js"
import { errorBody, type InferenceError } from "./errors.js"
import { gatewayHeaders, type RequestContext } from "./io.js"
import { normalizePassthrough } from "./passthrough.js"
import { mayBeError } from "./relays.js"
import { secretsOf } from "./sending.js"
import { ResponseStore } from "./responseStore.js"
import { type StreamProgress, StreamWatchdog } from "./stream.js"
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
 * Responses over WebSocket, on the HTTP port at /v1/responses, /responses and /api/v1/responses.
 * Each `response.create` frame becomes one streamed `POST /responses` to a connection that
 * speaks the Responses API natively; the answer's events go back one JSON frame each.
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

            const target = yield* deps.inference.resolve(splitNoThinking(model).model, openAiResponses)
            if (!target.connection.formats.includes("openai-responses")) {
              return send(
                JSON.stringify({
                  type: "error",
                  status: 400,
                  error: {
                    type: "invalid_request_error",
                    code: "upstream_ws_provider_required",
                    message: `${model} is served by ${target.connection.name} (${target.connection.format}); the WebSocket transport needs a Responses-API upstream. Use POST /v1/responses for other models.`
                  }
                })
              )
            }
            // Always expanded here (the connection's own store), but the answering server's own stored items are kept.
            const expanded = yield* store.expand(body, openAiResponses, true, { id: target.connection.id, storesResponses: false })
            // Refused as POST /v1/responses refuses it, with the same message.
            yield* decodeResponsesRequest(expanded.body, typeof body["previous_response_id"] === "string" && body["previous_response_id"] !== "")
            // Budgets and token limits hold here as on HTTP.
            const budget = deps.accounting.budget(apiKeyId)
            if (!budget.ok) {
              return send(JSON.stringify({ type: "error", status: 429, error: { type: "rate_limit_error", code: "budget_exhausted", message: `the ${budget.window} budget of this API key is spent` } }))
            }
            const limit = deps.accounting.tokenLimit(apiKeyId, { provider: target.connection.provider.id, model: target.model, requestedModel: model, connection: target.connection.name })
            if (!limit.ok) {
              return send(JSON.stringify({ type: "error", status: 429, error: { type: "rate_limit_error", code: "token_limit_exceeded", message: `token limit reached: ${limit.limit.maxTokens} tokens per ${limit.limit.window}` } }))
            }
            // What the usage row says: set once the answer is known.
            let status = 0
            let failure: string | null = null
            let usage: Partial<Usage> | undefined
            // The connection's own silence limit, as over HTTP.
            const silenceMs = target.connection.timeouts?.idleMs
            const progress: StreamProgress = { headersAt: Date.now(), lastChunkAt: Date.now(), firstContentAt: 0, ...(silenceMs !== undefined ? { silenceMs } : {}) }
            const untrack = deps.inference.track(ctx, "responses.ws")
            const row = Effect.suspend(() => {
              untrack()
              return deps.accounting.finish({
                requestId: ctx.requestId,
                apiKeyId,
                connectionId: target.connection.id,
                provider: target.connection.provider.id,
                model: target.model,
                endpoint: "responses.ws",
                stream: true,
                status: status || 499,
                usage: { input: usage?.inputTokens ?? null, output: usage?.outputTokens ?? null, cached: usage?.cachedInputTokens ?? null, reasoning: usage?.reasoningTokens ?? null },
                latencyMs: Date.now() - ctx.startedAt,
                ttftMs: progress.firstContentAt ? progress.firstContentAt - ctx.startedAt : null,
                error: status ? failure : (failure ?? "client closed the request"),
                requestedModel: model
              })
            })
            const upstreamBody = normalizePassthrough("openai-responses", { ...expanded.body, stream: true }, target.connection)
            const res = yield* deps.inference.send(target, "openai-responses", upstreamBody, { stream: true }, openAiResponses).pipe(
              Effect.tapError((e) => Effect.suspend(() => ((status = e.status), (failure = e.message), row)))
            )
            if (res.status < 200 || res.status >= 300) {
              const error = yield* deps.inference.failure(res, openAiResponses, openAiResponses, target.connection)
              status = error.status
              failure = error.message
              yield* row
              return yield* Effect.fail(error)
            }
            status = 200

            const parser = new SseParser()
            const pump = Effect.async<void>((resume) => {
              let done = false
              const finish = () => {
                if (done) return false
                done = true
                unwatch()
                return true
              }
              const unwatch = watchdog.watch({
                state: progress,
                stalled: (e) => {
                  if (!finish()) return
                  res.body.destroy()
                  failure = e.message
                  send(JSON.stringify({ type: "error", status: 504, error: { type: "timeout_error", code: "upstream_stalled", message: e.message } }))
                  resume(Effect.void)
                }
              })
              const onFrame = (data: string) => {
                if (data === "[DONE]") return
                progress.firstContentAt ||= Date.now()
                const u = openAiResponses.usageOf({ data })
                if (u) usage = mergeUsage(usage, u)
                if (data.includes("\"response.failed\"")) failure = "the upstream reported response.failed"
                if (data.includes("\"response.completed\"")) {
                  const r = obj(obj(tryJson(data))?.["response"])
                  if (r && typeof r["id"] === "string") store.remember(r["id"], expanded.input, (r["output"] as Array<unknown>) ?? [], { connectionId: target.connection.id, stored: body["store"] !== false })
                }
                // An error the upstream reports goes on without the connection's key.
                send(mayBeError({ data }) ? scrubSecrets(data, secretsOf(target.connection)) : data)
              }
              res.body.on("data", (chunk: Buffer) => {
                progress.lastChunkAt = Date.now()
                let frames
                try {
                  frames = parser.push(chunk)
                } catch (e) {
                  // An event past the parser's size limit: the stream is given up, not held.
                  if (!finish()) return
                  res.body.destroy()
                  failure = `upstream stream could not be parsed: ${(e as Error).message}`
                  send(JSON.stringify({ type: "error", status: 502, error: { type: "upstream_error", code: "stream_interrupted", message: failure } }))
                  return resume(Effect.void)
                }
                for (const f of frames) onFrame(f.data)
              })
              res.body.once("end", () => {
                if (!finish()) return
                for (const f of parser.end()) onFrame(f.data)
                resume(Effect.void)
              })
              res.body.once("error", (err: Error) => {
                if (!finish()) return
                failure = `upstream stream ended unexpectedly: ${err.message}`
                send(JSON.stringify({ type: "error", status: 502, error: { type: "upstream_error", code: "stream_interrupted", message: failure } }))
                resume(Effect.void)
              })
              return Effect.sync(() => {
                finish()
                res.body.destroy()
              })
            })
            yield* pump.pipe(Effect.ensuring(row))
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
