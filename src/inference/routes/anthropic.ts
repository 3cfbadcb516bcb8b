import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { anthropic, MESSAGES_MAX_TOKENS } from "../../formats/anthropic.js"
import type { CanonicalRequest } from "../../formats/canonical.js"
import { num, obj, tryJson } from "../../formats/common.js"
import { requireParam } from "../../formats/params.js"
import { countRequestTokens } from "../../formats/tokens.js"
import { readUpstreamBody } from "../../upstream/UpstreamHttp.js"
import { splitNoThinking } from "../catalog.js"
import { clientError, tryDecode } from "../errors.js"
import { readJsonObject, type RequestContext, sendJson } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/** `messages` also requires `max_tokens` (Anthropic does; count_tokens takes none). */
const decode = (body: Record<string, unknown>, messages = false) =>
  tryDecode(anthropic, () => {
    const canonical = anthropic.decodeRequest(body)
    if (messages) requireParam(body, "max_tokens", MESSAGES_MAX_TOKENS)
    return canonical
  })

/** `POST /v1/messages` (`?beta=true` too: the query is ignored). */
const messages = (deps: RouteDeps) => (ctx: RequestContext) =>
  Effect.gen(function* () {
    const body = yield* readJsonObject(ctx)
    const canonical = yield* decode(body, true)
    if (canonical.messages.length === 0) {
      return yield* clientError(anthropic, { status: 400, kind: "invalid_request", message: "messages: at least one message is required", param: "messages" })
    }
    const { model, noThinking } = splitNoThinking(canonical.model)
    yield* deps.inference.run({ ctx, format: anthropic, body, model, stream: canonical.stream, endpoint: "messages", decode: () => canonical, noThinking })
  })

/**
 * `POST /v1/messages/count_tokens`: an Anthropic upstream counts exactly; otherwise the
 * gateway counts with its tokenizer. A model id /v1/messages would refuse (unknown: 404
 * `model_not_found`; malformed: 400) is refused the same way; one whose targets are only unavailable for now
 * (cooling down, breaker open) still gets a local count.
 */
const countTokens = (deps: RouteDeps) => (ctx: RequestContext) =>
  Effect.gen(function* () {
    const body = yield* readJsonObject(ctx)
    const canonical: CanonicalRequest = yield* decode(body)
    const { model } = splitNoThinking(canonical.model)
    const target = yield* deps.inference.resolve(model, anthropic).pipe(
      // 400 and 404 are about the model id itself; 429 and 503 only about its targets' state.
      Effect.catchAll((e) => (e.status === 400 || e.status === 404 ? Effect.fail(e) : Effect.succeed(undefined))),
      Effect.map(Option.fromNullable)
    )
    if (Option.isSome(target) && target.value.connection.formats.includes("anthropic")) {
      const upstream = yield* deps.inference
        .send(target.value, "anthropic", { ...body, model: target.value.model }, { stream: false, op: "count_tokens" }, anthropic)
        .pipe(
          Effect.flatMap((res) =>
            readUpstreamBody(res.body, 1024 * 1024).pipe(Effect.map((b) => ({ status: res.status, json: tryJson(b.toString("utf8")) })))
          ),
          Effect.option
        )
      const counted = Option.isSome(upstream) && upstream.value.status === 200 ? num(obj(upstream.value.json)?.["input_tokens"]) : undefined
      if (counted !== undefined) return sendJson(ctx, 200, { input_tokens: counted })
    }
    sendJson(ctx, 200, { input_tokens: yield* Effect.promise(() => countRequestTokens(canonical)) })
  })

export const anthropicRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/v1/messages", format: anthropic, handle: messages(deps) },
  { method: "POST", path: "/v1/messages/count_tokens", format: anthropic, handle: countTokens(deps) }
]
