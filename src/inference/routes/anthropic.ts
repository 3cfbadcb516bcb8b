import * as Effect from "effect/Effect"
import { anthropic, MESSAGES_MAX_TOKENS } from "../../upstream/formats/anthropic.js"
import type { CanonicalRequest } from "../../domain/canonical.js"
import { num, obj } from "../../upstream/formats/common.js"
import { requireParam } from "../../upstream/formats/params.js"
import { countRequestTokens } from "../../upstream/formats/tokens.js"
import { splitNoThinking } from "../../upstream/providers/catalogEntries.js"
import { countUpstream } from "../countTokens.js"
import { clientError, decodeFailure, InferenceError, tryDecode } from "../../kernel/errors.js"
import { readJsonObject, type HttpRequestContext, sendJson } from "../io.js"
import type { InferenceCall } from "../call.js"
import type { RouteDeps } from "./openai.js"
import { decodedAs, type RouteDef } from "./types.js"

/** `messages` also requires `max_tokens` (Anthropic does; count_tokens takes none). */
const decode = (body: Record<string, unknown>, messages = false) =>
  tryDecode(anthropic, () => {
    const canonical = anthropic.decodeRequest(body)
    if (messages) requireParam(body, "max_tokens", MESSAGES_MAX_TOKENS)
    return canonical
  })

/** `POST /v1/messages`: the call, or the 400 that refuses the body (the route's and the common path's). */
export const messagesCall = (ctx: HttpRequestContext, body: Record<string, unknown>): InferenceCall | InferenceError => {
  let canonical: CanonicalRequest
  try {
    canonical = anthropic.decodeRequest(body)
    requireParam(body, "max_tokens", MESSAGES_MAX_TOKENS)
  } catch (e) {
    return decodeFailure(anthropic, e)
  }
  if (canonical.messages.length === 0) {
    return clientError(anthropic, {
      status: 400,
      kind: "invalid_request",
      message: "messages: at least one message is required",
      param: "messages"
    })
  }
  const { model, noThinking } = splitNoThinking(canonical.model)
  return {
    ctx,
    format: anthropic,
    body,
    model,
    stream: canonical.stream,
    endpoint: "messages",
    decode: decodedAs(body, canonical, anthropic.decodeRequest),
    noThinking
  }
}

/** `POST /v1/messages` (`?beta=true` too: the query is ignored). */
const messages = (deps: RouteDeps) => (ctx: HttpRequestContext) =>
  Effect.flatMap(readJsonObject(ctx), (body) => {
    const call = messagesCall(ctx, body)
    return call instanceof InferenceError ? Effect.fail(call) : deps.inference.run(call)
  })

/**
 * `POST /v1/messages/count_tokens`: an Anthropic upstream counts exactly (the plan's
 * Anthropic-speaking candidates, through the guarded attempt); otherwise the gateway counts with
 * its tokenizer. A model id /v1/messages would refuse (unknown: 404 `model_not_found`; malformed:
 * 400) is refused the same way; one whose targets are only unavailable for now (cooling down,
 * breaker open) or failing still gets a local count.
 */
const countTokens = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const body = yield* readJsonObject(ctx)
    const canonical: CanonicalRequest = yield* decode(body)
    const { model } = splitNoThinking(canonical.model)
    const counted = yield* countUpstream(deps.inference, ctx, anthropic, model, {
      able: (c) => c.connection.formats.includes("anthropic"),
      prepare: (c) => ({ format: "anthropic", body: { ...body, model: c.model } }),
      read: (json) => num(obj(json)?.["input_tokens"])
    }).pipe(
      // 400 and 404 are about the model id itself; anything else only about its targets.
      Effect.catchAll((e) => (e.status === 400 || e.status === 404 ? Effect.fail(e) : Effect.succeed(undefined)))
    )
    if (counted !== undefined) return sendJson(ctx, 200, { input_tokens: counted })
    sendJson(ctx, 200, { input_tokens: yield* Effect.promise(() => countRequestTokens(canonical)) })
  })

export const anthropicRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/v1/messages", format: anthropic, handle: messages(deps), common: messagesCall },
  { method: "POST", path: "/v1/messages/count_tokens", format: anthropic, handle: countTokens(deps) }
]
