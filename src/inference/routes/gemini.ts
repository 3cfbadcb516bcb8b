import * as Effect from "effect/Effect"
import { arr, num, obj, str } from "../../upstream/formats/common.js"
import { gemini, GeminiStreamEncoder } from "../../upstream/formats/gemini.js"
import { checkParams, integer, invalidParam, object, params, requireParam, string } from "../../upstream/formats/params.js"
import { countRequestTokens } from "../../upstream/formats/tokens.js"
import { catalogEntries, geminiModel, splitNoThinking, virtualGeminiModel } from "../../upstream/providers/catalogEntries.js"
import { countUpstream } from "../countTokens.js"
import { embed } from "../embeddings.js"
import { badRequest, InferenceError, tryDecode } from "../../kernel/errors.js"
import { readJsonObject, type HttpRequestContext, sendJson } from "../io.js"
import type { RouteDeps } from "./openai.js"
import { decodedAs, type RouteDef } from "./types.js"

/** Requests from Google's SDKs and CLI (they share `/v1/models` with OpenAI clients). */
export const isGoogleClient = (ctx: HttpRequestContext): boolean =>
  ctx.req.headers["x-goog-api-key"] !== undefined || ctx.req.headers["x-goog-api-client"] !== undefined || ctx.query.has("key")

/** The model of a path parameter (already percent-decoded by the dispatcher), without a `models/` prefix. */
const modelFromPath = (m: string): string => (m.startsWith("models/") ? m.slice("models/".length) : m)

const decode = (body: Record<string, unknown>) => tryDecode(gemini, () => gemini.decodeRequest(body))

const generate = Effect.fnUntraced(function* (deps: RouteDeps, ctx: HttpRequestContext, rawModel: string, stream: boolean) {
  const body = { ...(yield* readJsonObject(ctx)), model: modelFromPath(rawModel) }
  const canonical = yield* decode(body)
  const { model, noThinking } = splitNoThinking(canonical.model)
  // Without alt=sse Google answers a stream as one JSON array written as it grows (what its SDKs
  // read then); the upstream is still asked with alt=sse and its events are re-framed.
  const jsonArray = stream && ctx.query.get("alt") !== "sse"
  yield* deps.inference.run({
    ctx,
    format: gemini,
    body,
    model,
    stream,
    endpoint: stream ? "streamGenerateContent" : "generateContent",
    decode: decodedAs(body, canonical, gemini.decodeRequest),
    noThinking,
    ...(jsonArray ? { jsonArrayStream: true, streamEncoder: () => new GeminiStreamEncoder(model, true) } : {})
  })
})

const countTokens = Effect.fnUntraced(function* (deps: RouteDeps, ctx: HttpRequestContext, rawModel: string) {
  const raw = yield* readJsonObject(ctx)
  // countTokens takes either contents directly or a whole generateContentRequest.
  const inner = obj(raw["generateContentRequest"]) ?? raw
  const body = { ...inner, model: modelFromPath(rawModel) }
  const canonical = yield* decode(body)
  // A Gemini upstream counts (through the guarded attempt); for any other model, or when none answers, the gateway does.
  const { model: _m, ...payload } = body
  const counted = yield* countUpstream(deps.inference, ctx, gemini, splitNoThinking(canonical.model).model, {
    able: (c) => c.connection.format === "gemini",
    prepare: () => ({ format: "gemini", body: payload }),
    read: (json) => num(obj(json)?.["totalTokens"])
  }).pipe(Effect.orElseSucceed(() => undefined))
  if (counted !== undefined) return sendJson(ctx, 200, { totalTokens: counted })
  sendJson(ctx, 200, { totalTokens: yield* Effect.promise(() => countRequestTokens(canonical)) })
})

const textOfContent = (content: unknown): string =>
  arr(obj(content)?.["parts"])
    .map((p) => str(obj(p)?.["text"]) ?? "")
    .join("")

/** The embedContent parameters whose values are checked (each request of a batch too); `content` is required. */
const EMBED_PARAMS = params({ outputDimensionality: integer(1), taskType: string, title: string })

/** The requests of an embedContent (one) or batchEmbedContents call, each checked. */
const embedRequests = (body: Record<string, unknown>, batch: boolean): ReadonlyArray<Record<string, unknown>> => {
  if (batch) requireParam(body, "requests", { expected: "an array of requests", ok: Array.isArray })
  const requests = batch ? arr(body["requests"]) : [body]
  return requests.map((r, i) => {
    const prefix = batch ? `requests[${i}].` : ""
    const request = obj(r)
    if (!request) throw invalidParam(`requests[${i}]`, object.expected, r)
    requireParam(request, "content", object, prefix)
    checkParams(request, EMBED_PARAMS, prefix)
    return request
  })
}

const embedContent = Effect.fnUntraced(function* (deps: RouteDeps, ctx: HttpRequestContext, rawModel: string, batch: boolean) {
  const body = yield* readJsonObject(ctx)
  const requests = yield* tryDecode(gemini, () => embedRequests(body, batch))
  if (requests.length === 0) return yield* badRequest("requests must hold at least one request", "requests")
  const inputs = requests.map((r) => textOfContent(r["content"]))
  const dimensions = num(requests[0]?.["outputDimensionality"])
  const result = yield* embed(deps.inference, deps.accounting, ctx, gemini, modelFromPath(rawModel), inputs, dimensions)
  const values = result.vectors.map((v) => ({ values: v }))
  sendJson(ctx, 200, batch ? { embeddings: values } : { embedding: values[0] })
})

const METHODS = ["generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"] as const

const method = (deps: RouteDeps) => (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) => {
  const model = params["model"] ?? ""
  switch (params["method"]) {
    case "generateContent":
      return generate(deps, ctx, model, false)
    case "streamGenerateContent":
      return generate(deps, ctx, model, true)
    case "countTokens":
      return countTokens(deps, ctx, model)
    case "embedContent":
      return embedContent(deps, ctx, model, false)
    case "batchEmbedContents":
      return embedContent(deps, ctx, model, true)
    default:
      return Effect.fail(
        new InferenceError({
          status: 404,
          kind: "not_found",
          code: null,
          message: `unknown method ${params["method"]}; supported: ${METHODS.join(", ")}`
        })
      )
  }
}

export const listGeminiModels = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    sendJson(ctx, 200, {
      models: [...catalogEntries(yield* deps.connections).map(geminiModel), ...(yield* deps.virtualModels).map(virtualGeminiModel)]
    })
  })

export const getGeminiModel = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const id = modelFromPath(params["model"] ?? "")
    const entry = catalogEntries(yield* deps.connections).find((e) => e.id === id)
    if (!entry) return yield* new InferenceError({ status: 404, kind: "not_found", code: null, message: `models/${id} is not found` })
    sendJson(ctx, 200, geminiModel(entry))
  })

const CALL = /^\/v1(?:beta)?\/models\/(?<model>.+):(?<method>[A-Za-z]+)$/

/**
 * A call on a model id given without `models/`: `/v1beta/openai-compatible/m1:generateContent`.
 * Google's REST paths put `models/` (or `tunedModels/`) before the id, but the AI SDK's Google
 * provider (`@ai-sdk/google`) puts any id that contains `/` into the path as it is, and every
 * gateway id but a combo's contains one. The id needs a `/` (an id without one is sent with
 * `models/`), and the route comes after every other one, so it takes only paths no real route has.
 */
const BARE_CALL = /^\/v1(?:beta)?\/(?<model>(?!models\/)[^:/]+\/[^:]+):(?<method>[A-Za-z]+)$/

/**
 * `BARE_CALL`: served as the `models/` call when the prefix is a model the gateway serves; any
 * other path of that shape is no route, said in Google's error shape (its clients read that).
 */
const bareCall = (deps: RouteDeps) => {
  const call = method(deps)
  return Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const model = params["model"] ?? ""
    const known = yield* Effect.either(deps.inference.plan(splitNoThinking(model).model, gemini))
    if (known._tag === "Left" && known.left.status === 404) {
      return yield* new InferenceError({
        status: 404,
        kind: "not_found",
        code: "not_found",
        message: `no route for POST ${ctx.path}: ${JSON.stringify(model.slice(0, 200))} is not a model this gateway serves (ids are <provider>/<model>, a combo or an auto id; GET /v1beta/models lists them)`
      })
    }
    return yield* call(ctx, params)
  })
}

export const geminiRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => [
  { method: "POST", path: CALL, format: gemini, handle: method(deps) },
  { method: "GET", path: "/v1beta/models", format: gemini, handle: listGeminiModels(deps) },
  { method: "GET", path: /^\/v1beta\/models\/(?<model>[^:]+)$/, format: gemini, handle: getGeminiModel(deps) }
]

/** `BARE_CALL`'s route: last in the table (src/inference/routes/index.ts), so it shadows none. */
export const geminiBareCallRoute = (deps: RouteDeps): RouteDef => ({
  method: "POST",
  path: BARE_CALL,
  format: gemini,
  summary:
    "The generate-content family (`generateContent`, `streamGenerateContent`, `countTokens`, `embedContent`, `batchEmbedContents`) on a gateway model id given without `models/`, as the AI SDK's Google provider sends it: `/v1beta/openai-compatible/m1:generateContent`.",
  handle: bareCall(deps)
})
