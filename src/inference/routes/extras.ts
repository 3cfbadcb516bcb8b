import * as Effect from "effect/Effect"
import { str } from "../../upstream/formats/common.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { openAiResponses } from "../../upstream/formats/openai-responses.js"
import { findProvider, PROVIDERS } from "../../domain/catalog/catalog.js"
import { VERSION } from "../../kernel/version.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { readJsonObject, type HttpRequestContext, sendJson } from "../io.js"
import { imagesGenerate } from "./images.js"
import { chatCompletions, embeddings, type RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/**
 * The model for a dedicated provider route: the prefix is added when missing. A model that
 * names another connected provider is a 400. Aggregators (OpenRouter) take vendor/model ids.
 */
const providerModel = Effect.fnUntraced(function* (deps: RouteDeps, provider: string, model: string) {
  const all = yield* deps.connections
  const own = all.filter((c) => c.provider.id === provider.toLowerCase() || c.name.toLowerCase() === provider.toLowerCase())
  if (own.length === 0 && !findProvider(provider)) {
    return yield* new InferenceError({
      status: 404,
      kind: "not_found",
      code: "provider_not_found",
      message: `no provider or connection named '${provider}'`
    })
  }
  const slash = model.indexOf("/")
  const first = slash > 0 ? model.slice(0, slash).toLowerCase() : undefined
  if (first === undefined) return `${provider}/${model}`
  if (first === provider.toLowerCase() || own.some((c) => c.name.toLowerCase() === first)) return model
  const aggregator = own.some((c) => c.provider.category === "aggregator") || findProvider(provider)?.category === "aggregator"
  const other = findProvider(first) ?? all.find((c) => c.name.toLowerCase() === first)
  if (other && !aggregator) {
    return yield* badRequest(
      `model '${model}' belongs to '${first}', not to provider '${provider}' of this route`,
      "model",
      "model_provider_mismatch"
    )
  }
  return `${provider}/${model}`
})

const providerRoute = (
  deps: RouteDeps,
  inner: (deps: RouteDeps) => (ctx: HttpRequestContext, body: Record<string, unknown>) => Effect.Effect<void, InferenceError>
) => {
  // Built once with the route table, not once per request.
  const handle = inner(deps)
  return Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const body = yield* readJsonObject(ctx)
    const model = str(body["model"])
    if (!model) return yield* badRequest("model must be a non-empty string", "model")
    yield* handle(ctx, { ...body, model: yield* providerModel(deps, params["provider"] ?? "", model) })
  })
}

/** What sidecar routers may know of the provider registry: no secrets, no accounts, no code. */
const manifest = () => ({
  version: VERSION,
  generatedAt: new Date().toISOString(),
  providers: PROVIDERS.map((p) => ({
    id: p.id,
    name: p.name,
    format: p.format,
    formats: [p.format, ...(p.alsoSpeaks ?? [])],
    baseUrl: p.baseUrl,
    authStyle: p.authStyle,
    authClass: p.authClass,
    category: p.category,
    requiresApiKey: p.requiresApiKey,
    requiresBaseUrl: p.requiresBaseUrl,
    docsUrl: p.docsUrl,
    models: p.models.map((m) => ({
      id: m.id,
      name: m.name,
      kind: m.kind,
      contextWindow: m.contextWindow,
      maxOutput: m.maxOutput,
      capabilities: m.capabilities,
      pricing: m.pricing,
      tier: m.tier
    }))
  }))
})

const WS_PATHS = ["/v1/responses", "/responses", "/api/v1/responses"]

const handshake = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    if (ctx.query.get("handshake") !== "1") {
      return yield* badRequest("this endpoint only answers ?handshake=1; open the WebSocket on /v1/responses", "handshake")
    }
    const enabled = yield* deps.flag("GATEWAY_UPSTREAM_WS_ENABLED")
    sendJson(ctx, 200, {
      ok: true,
      enabled,
      paths: WS_PATHS,
      auth: "Authorization: Bearer <key> on the upgrade request, or ?api_key=<key>",
      note: enabled
        ? "Frames are JSON text. Answers are Responses stream events, one per frame. Use a bare upstream model id."
        : "GATEWAY_UPSTREAM_WS_ENABLED is off: upgrades answer 426, use POST /v1/responses",
      messages: {
        request: { type: "response.create", model: "gpt-5", input: [{ role: "user", content: [{ type: "input_text", text: "say hi" }] }] },
        cancel: { type: "response.cancel", response_id: "resp_..." }
      }
    })
  })

export const extraRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => [
  {
    method: "POST",
    path: /^\/v1\/providers\/(?<provider>[^/]+)\/chat\/completions$/,
    format: openAiChat,
    handle: providerRoute(deps, chatCompletions)
  },
  {
    method: "POST",
    path: /^\/v1\/providers\/(?<provider>[^/]+)\/embeddings$/,
    format: openAiChat,
    handle: providerRoute(deps, embeddings)
  },
  {
    method: "POST",
    path: /^\/v1\/providers\/(?<provider>[^/]+)\/images\/generations$/,
    format: openAiChat,
    handle: providerRoute(deps, imagesGenerate)
  },
  {
    method: "GET",
    path: "/api/v1/provider-plugin-manifest",
    format: openAiChat,
    handle: (ctx) => Effect.sync(() => sendJson(ctx, 200, manifest()))
  },
  { method: "GET", path: "/v1/ws", format: openAiResponses, handle: handshake(deps) },
  // Claude Code probes this without a key before its first request.
  {
    method: "HEAD",
    path: "/api/hello",
    format: openAiChat,
    public: true,
    handle: (ctx) => Effect.sync(() => sendJson(ctx, 200, { ok: true }))
  },
  {
    method: "GET",
    path: "/api/hello",
    format: openAiChat,
    public: true,
    handle: (ctx) => Effect.sync(() => sendJson(ctx, 200, { ok: true }))
  }
]
