/**
 * The provider catalog: static data describing each upstream the gateway knows how to call.
 * Connections (in the database) point at one of these ids. Prices are USD per 1M tokens as
 * published by each vendor when this catalog was written; the pricing endpoint lets operators
 * override them.
 */
export * from "./modelSpec.js"
import { chat, embedding, media, type ModelKind, type ModelSpec, type ProviderSpec, type WireFormat } from "./modelSpec.js"
import { MEDIA_PROVIDERS } from "./mediaProviders.js"
import { OAUTH_PROVIDERS } from "./oauthProviders.js"
import { CC_COMPATIBLE_PROVIDER } from "./ccCompatible.js"

// ---------------------------------------------------------------- image models (docs/media.md, "Images")
// Prices as the vendors published them when this was written, none confirmed against a live price page.

/** gpt-image-2 per image by quality and size (OpenAI's image guide as quoted elsewhere; unconfirmed). */
const GPT_IMAGE_2_BY: Record<string, number> = {
  "low:1024x1024": 0.006,
  "medium:1024x1024": 0.053,
  "high:1024x1024": 0.211,
  "low:1024x1536": 0.005,
  "medium:1024x1536": 0.041,
  "high:1024x1536": 0.165,
  "low:1536x1024": 0.005,
  "medium:1536x1024": 0.041,
  "high:1536x1024": 0.165
}
/**
 * GPT image models: text input $5/1M (cached $1.25), image output $30/1M (image input, $8/1M,
 * is priced as text input: the usage the gateway keeps does not tell them apart). Priced per
 * token when the upstream reports usage (OpenAI does), else per image.
 */
const gptImage = (id: string, name: string, perImage?: number, perImageBy?: Record<string, number>): ModelSpec =>
  media(id, name, "image", {
    input: 5,
    cachedInput: 1.25,
    output: 30,
    ...(perImage !== undefined ? { perImage } : {}),
    ...(perImageBy ? { perImageBy } : {})
  })
const OPENAI_IMAGE_MODELS: ReadonlyArray<ModelSpec> = [
  gptImage("gpt-image-2", "GPT Image 2", 0.053, GPT_IMAGE_2_BY),
  gptImage("gpt-image-2.5-sunburst", "GPT Image 2.5 Sunburst"),
  // Per image at 1024x1024 by quality (a third-party quote).
  gptImage("gpt-image-2.5-flare", "GPT Image 2.5 Flare", 0.013, { low: 0.006, medium: 0.013, high: 0.053, xhigh: 0.094, max: 0.211 }),
  gptImage("gpt-image-2.6-sunburst", "GPT Image 2.6 Sunburst"),
  gptImage("gpt-image-2.6-flare", "GPT Image 2.6 Flare")
]
/** Gemini image output (generateContent) per image: 1K, 2K and 4K by `imageConfig.imageSize`; Imagen (`:predict`) per image. */
const GEMINI_IMAGE_MODELS: ReadonlyArray<ModelSpec> = [
  media("gemini-3.1-flash-image", "Gemini 3.1 Flash Image", "image", { perImage: 0.067 }),
  media("gemini-3-pro-image", "Gemini 3 Pro Image", "image", { perImage: 0.134, perImageBy: { "1K": 0.134, "2K": 0.134, "4K": 0.24 } }),
  // Imagen 4 on the Gemini API may be shut down (reported in 2026); kept for the :predict shape.
  media("imagen-4.0-generate-001", "Imagen 4", "image", { perImage: 0.04 })
]

/**
 * Realtime models (`/v1/realtime`, docs/realtime.md): served over the realtime WebSocket only, text
 * tokens priced like chat, audio tokens at their own prices (USD per 1M, OpenAI's published prices
 * when this was written; unconfirmed).
 */
const realtimeModel = (
  id: string,
  name: string,
  text: { readonly input: number; readonly cachedInput: number; readonly output: number },
  audio: { readonly input: number; readonly cachedInput: number; readonly output: number }
): ModelSpec => {
  const spec = chat(id, name, 32_000, 4_096, text.input, text.output, { audio: true, realtime: true }, { cachedInput: text.cachedInput })
  return { ...spec, pricing: { ...spec.pricing, audioInput: audio.input, cachedAudioInput: audio.cachedInput, audioOutput: audio.output } }
}
const OPENAI_REALTIME_MODELS: ReadonlyArray<ModelSpec> = [
  realtimeModel("gpt-realtime", "GPT Realtime", { input: 4, cachedInput: 0.4, output: 16 }, { input: 32, cachedInput: 0.4, output: 64 }),
  realtimeModel(
    "gpt-realtime-mini",
    "GPT Realtime mini",
    { input: 0.6, cachedInput: 0.06, output: 2.4 },
    { input: 10, cachedInput: 0.3, output: 20 }
  )
]

const V = { vision: true }
const R = { reasoning: true }
const VR = { vision: true, reasoning: true }
// Input modalities besides images (docs/bridge.md): PDF documents (OpenAI's file parts, Anthropic's
// document blocks, Gemini's inline data) and audio (Gemini's inline data), as each vendor documents.
const VP = { vision: true, pdf: true }
const VRP = { vision: true, reasoning: true, pdf: true }
const VRPA = { vision: true, reasoning: true, pdf: true, audio: true }

export const PROVIDERS: ReadonlyArray<ProviderSpec> = [
  {
    id: "openai",
    name: "OpenAI",
    format: "openai-chat",
    alsoSpeaks: ["openai-responses"],
    baseUrl: "https://api.openai.com/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://platform.openai.com/docs/api-reference",
    offers: ["chat", "embedding", "image", "video", "speech", "transcription", "moderation"],
    quirks: { maxTokensField: "max_completion_tokens", openAiResponsesFields: true, storesResponses: true, strictSchemas: true },
    models: [
      chat("gpt-5", "GPT-5", 400_000, 128_000, 1.25, 10, VRP, { cachedInput: 0.125 }),
      chat("gpt-5-mini", "GPT-5 mini", 400_000, 128_000, 0.25, 2, VRP, { cachedInput: 0.025 }),
      chat("gpt-5-nano", "GPT-5 nano", 400_000, 128_000, 0.05, 0.4, VRP, { cachedInput: 0.005 }),
      chat("gpt-4.1", "GPT-4.1", 1_047_576, 32_768, 2, 8, VP, { cachedInput: 0.5 }),
      chat("gpt-4.1-mini", "GPT-4.1 mini", 1_047_576, 32_768, 0.4, 1.6, VP, { cachedInput: 0.1 }),
      chat("gpt-4o", "GPT-4o", 128_000, 16_384, 2.5, 10, VP, { cachedInput: 1.25 }),
      chat("gpt-4o-mini", "GPT-4o mini", 128_000, 16_384, 0.15, 0.6, VP, { cachedInput: 0.075 }),
      chat("o3", "o3", 200_000, 100_000, 2, 8, VRP, { cachedInput: 0.5 }),
      chat("o4-mini", "o4-mini", 200_000, 100_000, 1.1, 4.4, VRP, { cachedInput: 0.275 }),
      // Moderation is free at OpenAI (docs/media.md, "Rerank, moderation and model lists").
      media("omni-moderation-latest", "Omni Moderation", "moderation"),
      embedding("text-embedding-3-small", "Text Embedding 3 Small", 8191, 0.02),
      embedding("text-embedding-3-large", "Text Embedding 3 Large", 8191, 0.13),
      ...OPENAI_IMAGE_MODELS,
      ...OPENAI_REALTIME_MODELS,
      // Audio (docs/media.md, "Audio"). /v1/audio/speech models shut down 2027-01-06, whisper-1
      // and gpt-4o(-mini)-transcribe 2027-02-26 (OpenAI's deprecations page). Per-character
      // speech prices and the token prices of the transcribe models are from memory (unconfirmed);
      // the transcribe models' per-second price applies only when no tokens are reported.
      media("gpt-4o-mini-tts", "GPT-4o mini TTS", "speech", { perCharacter: 0.6 / 1e6 }),
      media("tts-1", "TTS-1", "speech", { perCharacter: 15 / 1e6 }),
      media("tts-1-hd", "TTS-1 HD", "speech", { perCharacter: 30 / 1e6 }),
      media("gpt-transcribe", "GPT Transcribe", "transcription", { perSecond: 0.0045 / 60 }),
      media("gpt-4o-transcribe", "GPT-4o Transcribe", "transcription", { input: 6, output: 10, perSecond: 0.006 / 60 }),
      media("gpt-4o-mini-transcribe", "GPT-4o mini Transcribe", "transcription", { input: 3, output: 5, perSecond: 0.003 / 60 }),
      media("whisper-1", "Whisper", "transcription", { perSecond: 0.006 / 60 }),
      // Video (jobs, docs/media.md): OpenAI shut Sora 2 and its /v1/videos API down on 2026-09-24;
      // listed for the OpenAI-compatible servers that still speak it. $0.10/s and $0.30/s at 720p.
      media("sora-2", "Sora 2 (shut down at OpenAI 2026-09-24)", "video", { perSecond: 0.1 }),
      media("sora-2-pro", "Sora 2 Pro (shut down at OpenAI 2026-09-24)", "video", { perSecond: 0.3 })
    ]
  },
  {
    id: "anthropic",
    name: "Anthropic",
    format: "anthropic",
    baseUrl: "https://api.anthropic.com",
    authStyle: "x-api-key",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.anthropic.com/en/api/messages",
    offers: ["chat"],
    models: [
      chat("claude-opus-4-1", "Claude Opus 4.1", 200_000, 32_000, 15, 75, VRP, { cachedInput: 1.5 }),
      chat("claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000, 64_000, 3, 15, VRP, { cachedInput: 0.3 }),
      chat("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, 64_000, 1, 5, VRP, { cachedInput: 0.1 }),
      chat("claude-3-5-haiku-latest", "Claude Haiku 3.5", 200_000, 8192, 0.8, 4, VP, { cachedInput: 0.08 })
    ]
  },
  {
    id: "gemini",
    name: "Google Gemini",
    format: "gemini",
    baseUrl: "https://generativelanguage.googleapis.com",
    authStyle: "x-goog-api-key",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://ai.google.dev/api",
    offers: ["chat", "embedding", "image", "video", "music", "speech", "transcription"],
    models: [
      chat("gemini-2.5-pro", "Gemini 2.5 Pro", 1_048_576, 65_536, 1.25, 10, VRPA, { cachedInput: 0.31 }),
      chat("gemini-2.5-flash", "Gemini 2.5 Flash", 1_048_576, 65_536, 0.3, 2.5, VRPA, { cachedInput: 0.075 }),
      chat("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", 1_048_576, 65_536, 0.1, 0.4, VRPA, { cachedInput: 0.025 }),
      embedding("text-embedding-004", "Text Embedding 004", 2048, 0),
      ...GEMINI_IMAGE_MODELS,
      // Speech: priced by the tokens Gemini reports (text in, audio out; unconfirmed). Any Gemini
      // chat model also transcribes (audio input to generateContent), priced by its tokens.
      media("gemini-2.5-flash-preview-tts", "Gemini 2.5 Flash TTS (preview)", "speech", { input: 0.5, output: 10 }),
      media("gemini-2.5-pro-preview-tts", "Gemini 2.5 Pro TTS (preview)", "speech", { input: 1, output: 20 }),
      // Video and music (jobs, docs/media.md). Prices per second are third-party figures, unconfirmed:
      // Veo 3.1 $0.40/s (720p/1080p), Fast $0.15/s, Lite $0.08/s (1080p); Lyria 3 Clip $0.04 per
      // 30 s clip; Lyria 2 (Vertex's lyria-002 shape) $0.06 per 30 s. Lyria 3 Pro is priced per
      // song ($0.08, not per second): unpriced here, set a per-second override if wanted.
      media("veo-3.1-generate-preview", "Veo 3.1", "video", { perSecond: 0.4 }),
      media("veo-3.1-fast-generate-preview", "Veo 3.1 Fast", "video", { perSecond: 0.15 }),
      media("veo-3.1-lite-generate-preview", "Veo 3.1 Lite", "video", { perSecond: 0.08 }),
      media("lyria-3-clip-preview", "Lyria 3 Clip", "music", { perSecond: 0.04 / 30 }),
      media("lyria-3-pro-preview", "Lyria 3 Pro", "music"),
      media("lyria-002", "Lyria 2", "music", { perSecond: 0.06 / 30 })
    ]
  },
  {
    id: "ollama",
    name: "Ollama",
    format: "ollama",
    baseUrl: "http://127.0.0.1:11434",
    authStyle: "none",
    authClass: "local",
    category: "local",
    requiresApiKey: false,
    requiresBaseUrl: false,
    docsUrl: "https://github.com/ollama/ollama/blob/main/docs/api.md",
    offers: ["chat", "embedding"],
    models: [
      chat("llama3.2", "Llama 3.2", 131_072, 8192, 0, 0),
      chat("qwen2.5-coder", "Qwen2.5 Coder", 32_768, 8192, 0, 0),
      chat("gpt-oss:20b", "gpt-oss 20B", 131_072, 32_768, 0, 0, R),
      embedding("nomic-embed-text", "Nomic Embed Text", 8192, 0)
    ]
  },
  {
    id: "openrouter",
    name: "OpenRouter",
    format: "openai-chat",
    baseUrl: "https://openrouter.ai/api/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "aggregator",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://openrouter.ai/docs/api-reference/overview",
    offers: ["chat", "embedding", "image"],
    models: [
      chat("openai/gpt-4o-mini", "OpenAI: GPT-4o mini", 128_000, 16_384, 0.15, 0.6, VP),
      chat("anthropic/claude-sonnet-4.5", "Anthropic: Claude Sonnet 4.5", 200_000, 64_000, 3, 15, VRP),
      chat("google/gemini-2.5-flash", "Google: Gemini 2.5 Flash", 1_048_576, 65_536, 0.3, 2.5, VRPA),
      chat("meta-llama/llama-3.3-70b-instruct:free", "Meta: Llama 3.3 70B (free)", 131_072, 8192, 0, 0)
    ]
  },
  {
    id: "groq",
    name: "Groq",
    format: "openai-chat",
    baseUrl: "https://api.groq.com/openai/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://console.groq.com/docs/api-reference",
    offers: ["chat", "speech", "transcription"],
    models: [
      chat("llama-3.3-70b-versatile", "Llama 3.3 70B Versatile", 131_072, 32_768, 0.59, 0.79),
      chat("llama-3.1-8b-instant", "Llama 3.1 8B Instant", 131_072, 131_072, 0.05, 0.08),
      chat("openai/gpt-oss-120b", "gpt-oss 120B", 131_072, 65_536, 0.15, 0.75, R),
      media("whisper-large-v3", "Whisper Large v3", "transcription", { perSecond: 0.111 / 3600 }),
      media("whisper-large-v3-turbo", "Whisper Large v3 Turbo", "transcription", { perSecond: 0.04 / 3600 })
    ]
  },
  {
    id: "deepseek",
    name: "DeepSeek",
    format: "openai-chat",
    baseUrl: "https://api.deepseek.com/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://api-docs.deepseek.com/",
    offers: ["chat"],
    quirks: { reasoningContent: true },
    models: [
      chat("deepseek-chat", "DeepSeek Chat", 128_000, 8192, 0.27, 1.1, {}, { cachedInput: 0.07 }),
      chat("deepseek-reasoner", "DeepSeek Reasoner", 128_000, 65_536, 0.55, 2.19, R, { cachedInput: 0.14 })
    ]
  },
  {
    id: "mistral",
    name: "Mistral AI",
    format: "openai-chat",
    baseUrl: "https://api.mistral.ai/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.mistral.ai/api/",
    offers: ["chat", "embedding", "moderation", "transcription"],
    models: [
      chat("mistral-large-latest", "Mistral Large", 131_072, 32_768, 2, 6),
      chat("mistral-small-latest", "Mistral Small", 131_072, 32_768, 0.1, 0.3, V),
      chat("codestral-latest", "Codestral", 256_000, 32_768, 0.3, 0.9),
      // Billed by Mistral per token (about $0.10/1M, unverified); the gateway reports moderation at 0 (spec).
      media("mistral-moderation-latest", "Mistral Moderation", "moderation"),
      embedding("mistral-embed", "Mistral Embed", 8192, 0.1)
    ]
  },
  {
    id: "xai",
    name: "xAI",
    format: "openai-chat",
    baseUrl: "https://api.x.ai/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.x.ai/docs/api-reference",
    offers: ["chat", "image"],
    models: [
      chat("grok-4", "Grok 4", 256_000, 64_000, 3, 15, VR, { cachedInput: 0.75 }),
      chat("grok-code-fast-1", "Grok Code Fast 1", 256_000, 10_000, 0.2, 1.5, R, { cachedInput: 0.02 }),
      chat("grok-3-mini", "Grok 3 mini", 131_072, 32_768, 0.3, 0.5, R, { cachedInput: 0.075 })
    ]
  },
  {
    id: "together",
    name: "Together AI",
    format: "openai-chat",
    baseUrl: "https://api.together.xyz/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.together.ai/reference",
    offers: ["chat", "embedding", "image", "rerank"],
    models: [
      chat("meta-llama/Llama-3.3-70B-Instruct-Turbo", "Llama 3.3 70B Instruct Turbo", 131_072, 8192, 0.88, 0.88),
      chat("deepseek-ai/DeepSeek-V3", "DeepSeek V3", 131_072, 8192, 1.25, 1.25),
      chat("Qwen/Qwen2.5-Coder-32B-Instruct", "Qwen2.5 Coder 32B", 32_768, 8192, 0.8, 0.8)
    ]
  },
  {
    id: "fireworks",
    name: "Fireworks AI",
    format: "openai-chat",
    baseUrl: "https://api.fireworks.ai/inference/v1",
    authStyle: "bearer",
    authClass: "apikey",
    category: "cloud",
    requiresApiKey: true,
    requiresBaseUrl: false,
    docsUrl: "https://docs.fireworks.ai/api-reference",
    offers: ["chat", "embedding", "image"],
    models: [
      chat("accounts/fireworks/models/llama-v3p3-70b-instruct", "Llama 3.3 70B Instruct", 131_072, 16_384, 0.9, 0.9),
      chat("accounts/fireworks/models/deepseek-v3", "DeepSeek V3", 131_072, 16_384, 0.9, 0.9),
      chat("accounts/fireworks/models/qwen2p5-coder-32b-instruct", "Qwen2.5 Coder 32B", 32_768, 16_384, 0.9, 0.9)
    ]
  },
  ...MEDIA_PROVIDERS,
  ...OAUTH_PROVIDERS,
  {
    id: "openai-compatible",
    name: "OpenAI-compatible (custom base URL)",
    format: "openai-chat",
    baseUrl: null,
    authStyle: "bearer",
    authClass: "apikey",
    category: "custom",
    requiresApiKey: false,
    requiresBaseUrl: true,
    docsUrl: "https://platform.openai.com/docs/api-reference/chat",
    offers: ["chat", "embedding", "image", "video", "music", "speech", "transcription", "rerank", "moderation"],
    models: []
  },
  CC_COMPATIBLE_PROVIDER
]

/**
 * Whether `model` at this provider can do `kind`: the catalog's word for a model it lists,
 * otherwise what the provider's API offers (chat and embeddings when it does not say).
 */
export const modelDoes = (provider: ProviderSpec, model: string, kind: ModelKind): boolean => {
  const known = provider.models.find((m) => m.id === model)
  if (known) return known.kind === kind
  return (provider.offers ?? ["chat", "embedding"]).includes(kind)
}

/**
 * What `model` at this provider is, for model lists: the catalog's kind for a model it lists,
 * otherwise chat where the provider serves chat, else the first modality its API offers.
 */
export const kindOf = (provider: ProviderSpec, model: string): ModelKind => {
  const known = provider.models.find((m) => m.id === model)
  if (known) return known.kind
  const offers = provider.offers ?? ["chat", "embedding"]
  return offers.includes("chat") ? "chat" : (offers[0] ?? "chat")
}

/** Whether a connection to this provider can be spoken to in `format` without translation. */
export const speaks = (provider: ProviderSpec, format: WireFormat): boolean =>
  provider.format === format || (provider.alsoSpeaks?.includes(format) ?? false)

/** Models listed with the no-thinking alias: reasoning Anthropic models, unless a spec says otherwise. */
export const hasNoThinkingAlias = (provider: ProviderSpec, model: ModelSpec): boolean =>
  model.noThinkingAlias ?? (provider.format === "anthropic" && model.capabilities.reasoning)

const BY_ID = new Map(PROVIDERS.map((p) => [p.id, p]))

export const findProvider = (id: string): ProviderSpec | undefined => BY_ID.get(id.toLowerCase())

/** Case-insensitive search over id, name and model ids, used by `gateway providers available --search`. */
export const searchProviders = (query: {
  readonly search?: string | undefined
  readonly category?: string | undefined
}): ReadonlyArray<ProviderSpec> => {
  const q = query.search?.trim().toLowerCase()
  return PROVIDERS.filter(
    (p) =>
      (!query.category || p.category === query.category.toLowerCase()) &&
      (!q ||
        p.id.includes(q) ||
        p.name.toLowerCase().includes(q) ||
        p.models.some((m) => m.id.toLowerCase().includes(q) || m.name.toLowerCase().includes(q)))
  )
}
