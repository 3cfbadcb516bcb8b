import * as Effect from "effect/Effect"
import { str } from "../../upstream/formats/common.js"
import { decodeGenerateRequest, encodeOllamaResponse, ollama, OllamaStreamEncoder, OPTIONS_PARAMS } from "../../upstream/formats/ollama.js"
import { boolean, checkParams, either, integer, number, object, params, string } from "../../upstream/formats/params.js"
import { VERSION } from "../../kernel/version.js"
import { catalogEntries, ollamaModel, splitNoThinking, virtualOllamaModel } from "../../upstream/providers/catalogEntries.js"
import { embed } from "../embeddings.js"
import { badRequest, InferenceError, tryDecode } from "../../kernel/errors.js"
import { readJsonObject, type HttpRequestContext, sendJson } from "../io.js"
import type { RouteDeps } from "./openai.js"
import { decodedAs, type RouteDef } from "./types.js"

const decode = <A>(f: () => A) => tryDecode(ollama, f)

/** The parameters of /api/embed and /api/embeddings whose values are checked, `options` with those of chat. */
const EMBED_PARAMS = params({ truncate: boolean, dimensions: integer(1), keep_alive: either(string, number()), options: object })
const checkEmbedParams = (body: Record<string, unknown>): void => {
  checkParams(body, EMBED_PARAMS)
  const options = body["options"]
  if (options !== undefined && options !== null) checkParams(options as Record<string, unknown>, OPTIONS_PARAMS, "options.")
}

/**
 * Ollama clients often add the default tag (`model:latest`). An Ollama upstream understands it;
 * for any other upstream, or a model the gateway lists without a tag, it is dropped.
 */
const untagged = (deps: RouteDeps, model: string) =>
  model.endsWith(":latest")
    ? deps.inference.resolve(model, ollama).pipe(
        Effect.map((t) => (t.connection.format === "ollama" ? model : model.slice(0, -":latest".length))),
        Effect.orElseSucceed(() => model.slice(0, -":latest".length))
      )
    : Effect.succeed(model)

const chat = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const body = yield* readJsonObject(ctx)
    const canonical = yield* decode(() => ollama.decodeRequest(body))
    const { model, noThinking } = splitNoThinking(yield* untagged(deps, canonical.model))
    yield* deps.inference.run({
      ctx,
      format: ollama,
      body,
      model,
      stream: canonical.stream,
      endpoint: "api.chat",
      decode: decodedAs(body, canonical, ollama.decodeRequest),
      noThinking
    })
  })

const generate = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const body = yield* readJsonObject(ctx)
    const canonical = yield* decode(() => decodeGenerateRequest(body))
    const model = yield* untagged(deps, canonical.model)
    if (canonical.messages.length === 0) {
      // An empty prompt loads the model in Ollama: answer done at once, nothing generated.
      return sendJson(ctx, 200, { model, created_at: new Date().toISOString(), response: "", done: true, done_reason: "load" })
    }
    yield* deps.inference.run({
      ctx,
      format: ollama,
      body,
      model,
      stream: canonical.stream,
      endpoint: "api.generate",
      decode: decodedAs(body, canonical, decodeGenerateRequest),
      passthrough: false,
      encodeResponse: (res) => encodeOllamaResponse(res, { model }, "generate"),
      streamEncoder: () => new OllamaStreamEncoder(model, "generate")
    })
  })

const embedRoute = (deps: RouteDeps, legacy: boolean) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const body = yield* readJsonObject(ctx)
    const model = str(body["model"])
    if (!model) return yield* badRequest("model is required", "model")
    const input = legacy ? body["prompt"] : body["input"]
    const inputs =
      typeof input === "string"
        ? [input]
        : Array.isArray(input) && input.length > 0 && input.every((i) => typeof i === "string")
          ? (input as Array<string>)
          : undefined
    if (!inputs)
      return yield* badRequest(
        legacy ? "prompt must be a string" : "input must be a string or an array of strings",
        legacy ? "prompt" : "input"
      )
    yield* decode(() => checkEmbedParams(body))
    const result = yield* embed(deps.inference, deps.accounting, ctx, ollama, yield* untagged(deps, model), inputs)
    sendJson(
      ctx,
      200,
      legacy
        ? { embedding: result.vectors[0] }
        : {
            model,
            embeddings: result.vectors,
            total_duration: (Date.now() - ctx.startedAt) * 1_000_000,
            load_duration: 0,
            prompt_eval_count: result.inputTokens
          }
    )
  })

const tags = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    sendJson(ctx, 200, {
      models: [...catalogEntries(yield* deps.connections).map(ollamaModel), ...(yield* deps.virtualModels).map(virtualOllamaModel)]
    })
  })

const show = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const body = yield* readJsonObject(ctx)
    const name = str(body["model"]) ?? str(body["name"]) ?? ""
    const entry = catalogEntries(yield* deps.connections).find((e) => e.id === name || `${e.id}:latest` === name)
    if (!entry) return yield* new InferenceError({ status: 404, kind: "not_found", code: null, message: `model '${name}' not found` })
    sendJson(ctx, 200, {
      license: "",
      modelfile: `# served by the gateway through ${entry.connection.name}\nFROM ${entry.modelId}\n`,
      parameters: "",
      template: "",
      details: ollamaModel(entry).details,
      model_info: {
        "general.architecture": entry.connection.provider.id,
        ...(entry.spec ? { "general.context_length": entry.spec.contextWindow } : {})
      },
      capabilities: [
        "completion",
        ...(entry.spec?.capabilities.tools ? ["tools"] : []),
        ...(entry.spec?.capabilities.vision ? ["vision"] : []),
        ...(entry.spec?.capabilities.reasoning ? ["thinking"] : [])
      ]
    })
  })

export const ollamaRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/api/chat", format: ollama, handle: chat(deps) },
  { method: "POST", path: "/v1/api/chat", format: ollama, handle: chat(deps) },
  { method: "POST", path: "/api/generate", format: ollama, handle: generate(deps) },
  { method: "GET", path: "/api/tags", format: ollama, handle: tags(deps) },
  { method: "POST", path: "/api/embed", format: ollama, handle: embedRoute(deps, false) },
  { method: "POST", path: "/api/embeddings", format: ollama, handle: embedRoute(deps, true) },
  { method: "POST", path: "/api/show", format: ollama, handle: show(deps) },
  { method: "GET", path: "/api/version", format: ollama, handle: (ctx) => Effect.sync(() => sendJson(ctx, 200, { version: VERSION })) },
  { method: "GET", path: "/api/ps", format: ollama, handle: (ctx) => Effect.sync(() => sendJson(ctx, 200, { models: [] })) }
]
