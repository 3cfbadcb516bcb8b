import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { describeParseError } from "../domain/parse.js"
import { type Connection, Connections } from "../providers/Connections.js"
import { checkProviderUrl } from "../providers/urlPolicy.js"
import { sendOpenAiChat } from "../upstream/openaiChat.js"
import { UpstreamHttp } from "../upstream/UpstreamHttp.js"
import { NO_USAGE, openAiUsage, Usage } from "../usage/Usage.js"
import { badRequest, InferenceError } from "./errors.js"
import { readJsonObject, type RequestContext } from "./io.js"
import { openAiStreamUsage, type RelayOutcome, relayJson, relaySse, SseUsageScanner, upstreamFailure } from "./relay.js"

/**
 * The part of a chat-completions body the gateway itself relies on. Everything else is the
 * upstream's business and is passed through untouched.
 */
const ChatCompletionsRequest = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1, { message: () => "model must be a non-empty string" })),
  messages: Schema.Array(
    Schema.Struct({
      role: Schema.Literal("system", "developer", "user", "assistant", "tool", "function")
    })
  ).pipe(Schema.minItems(1, { message: () => "messages must hold at least one message" })),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean))
})

const validate = Schema.decodeUnknownEither(ChatCompletionsRequest, { errors: "first" })

export const openAiStreamError = (message: string): string =>
  `data: ${JSON.stringify({ error: { message, type: "upstream_error", code: "stream_interrupted", param: null } })}\n\n`

const transportFailure = (connection: Connection, e: { readonly kind: string; readonly message: string }) =>
  new InferenceError({
    status: e.kind === "timeout" ? 504 : 502,
    type: "upstream_error",
    code: e.kind === "timeout" ? "upstream_timeout" : "upstream_unreachable",
    message: `${connection.name}: ${e.kind === "timeout" ? "upstream timed out" : "upstream unreachable"} (${e.message})`
  })

/** `POST /v1/chat/completions` to an OpenAI-compatible upstream: same format in and out. */
export const makeChatCompletions = Effect.gen(function* () {
  const connections = yield* Connections
  const http = yield* UpstreamHttp
  const usage = yield* Usage

  return (ctx: RequestContext) =>
    Effect.gen(function* () {
      const body = yield* readJsonObject(ctx)
      const checked = validate(body)
      if (Either.isLeft(checked)) {
        const issue = describeParseError(checked.left)
        return yield* badRequest(`invalid chat completions request: ${issue}`, issue.split(":")[0] ?? null)
      }
      const stream = checked.right.stream === true
      const target = yield* connections.resolve(checked.right.model).pipe(
        Effect.mapError((e) => new InferenceError({ status: 404, type: "invalid_request_error", code: "model_not_found", message: e.message, param: "model" }))
      )
      const { connection } = target
      let outcome: RelayOutcome = { status: 0, usage: NO_USAGE, ttftMs: null, error: null }
      yield* Effect.gen(function* () {
        if (connection.provider.format !== "openai") {
          return yield* new InferenceError({
            status: 501,
            type: "invalid_request_error",
            code: "format_not_supported",
            message: `provider ${connection.provider.id} speaks the ${connection.provider.format} format; translation to it is not built yet (OpenAI-compatible providers work today)`
          })
        }
        if (connection.keyError) {
          return yield* new InferenceError({ status: 503, type: "upstream_error", code: "provider_misconfigured", message: `${connection.name}: ${connection.keyError}` })
        }
        const verdict = checkProviderUrl(connection.effectiveBaseUrl ?? "", yield* connections.urlPolicy)
        if (!verdict.ok) {
          return yield* new InferenceError({ status: 403, type: "permission_error", code: "provider_url_blocked", message: `${connection.name}: ${verdict.reason}` })
        }
        const payload = JSON.stringify({ ...body, model: target.model })
        const res = yield* sendOpenAiChat(http, connection, payload, stream).pipe(
          Effect.mapError((e) => transportFailure(connection, e))
        )
        if (res.status < 200 || res.status >= 300) {
          return yield* Effect.flatMap(upstreamFailure(res, connection.name), Effect.fail)
        }
        const isSse = String(res.headers["content-type"] ?? "").includes("text/event-stream")
        outcome =
          stream && isSse
            ? yield* relaySse(ctx, res, new SseUsageScanner(openAiStreamUsage), openAiStreamError)
            : yield* relayJson(ctx, res, (b) => openAiUsage((b as { usage?: unknown }).usage))
      }).pipe(
        Effect.tapError((e) => Effect.sync(() => (outcome = { status: e.status, usage: NO_USAGE, ttftMs: null, error: e.message }))),
        Effect.ensuring(
          Effect.suspend(() =>
            usage.record({
              requestId: ctx.requestId,
              apiKeyId: ctx.apiKeyId,
              connectionId: connection.id,
              provider: connection.provider.id,
              model: target.model,
              endpoint: "chat.completions",
              stream,
              status: outcome.status || 499,
              usage: outcome.usage,
              latencyMs: Date.now() - ctx.startedAt,
              ttftMs: outcome.ttftMs,
              error: outcome.status ? outcome.error : (outcome.error ?? "client closed the request")
            })
          )
        ),
        Effect.annotateLogs({ provider: connection.provider.id, connection: connection.name, model: target.model })
      )
    })
})
