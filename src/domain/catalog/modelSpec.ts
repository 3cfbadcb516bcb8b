/**
 * What the provider catalog is made of: the provider and model spec types, and the builders of
 * model specs (`chat`, `embedding`, `media`) the catalog modules share.
 */
import type { FormatId } from "../canonical.js"
import type * as Redacted from "effect/Redacted"

export type WireFormat = FormatId
/**
 * `xi-api-key`: ElevenLabs; `token`: `Authorization: Token <key>` (Deepgram); `x-api-key`:
 * Anthropic, Exa and Serper (header names are case-insensitive: Serper's `X-API-KEY` is the same
 * header); `x-subscription-token`: Brave Search.
 */
export type AuthStyle = "bearer" | "x-api-key" | "x-goog-api-key" | "xi-api-key" | "x-subscription-token" | "token" | "none"
/** Breaker and cooldown profiles differ per class (spec document 1). */
export type AuthClass = "apikey" | "oauth" | "local"
export const PROVIDER_CATEGORIES = ["cloud", "aggregator", "local", "custom"] as const
export type ProviderCategory = (typeof PROVIDER_CATEGORIES)[number]
/** What a model does: chat and embeddings, the media modalities (docs/media.md) and web search (docs/search.md). */
export type ModelKind = "chat" | "embedding" | "image" | "video" | "music" | "speech" | "transcription" | "rerank" | "moderation" | "search"

export interface ModelCapabilities {
  readonly tools: boolean
  readonly vision: boolean
  readonly reasoning: boolean
  readonly json: boolean
  /** Audio input (or output, for media models); unset: false (docs/bridge.md). */
  readonly audio?: boolean
  /** PDF documents as input (a chat `file` part, a Responses `input_file`, an Anthropic `document` block); unset: false. */
  readonly pdf?: boolean
  /** Served over a realtime WebSocket (`/v1/realtime`, docs/realtime.md); unset: false. */
  readonly realtime?: boolean
}

export interface ModelPricing {
  readonly input: number
  readonly output: number
  readonly cachedInput?: number
  /** USD per generated image (media models). */
  readonly perImage?: number
  /** USD per image by kind (`"quality:size"`, `"quality"`, Gemini's `"4K"`), before `perImage` (src/services/accounting/cost.ts
   * `imagePrice`). */
  readonly perImageBy?: Readonly<Record<string, number>>
  /** USD per second of audio or video. */
  readonly perSecond?: number
  /** USD per character of speech input. */
  readonly perCharacter?: number
  /** USD per search unit (rerank; web search: one request, or Tavily's credits). */
  readonly perSearch?: number
  /** USD per 1M audio input tokens (realtime models; docs/realtime.md). */
  readonly audioInput?: number
  /** USD per 1M cached audio input tokens; default `audioInput`. */
  readonly cachedAudioInput?: number
  /** USD per 1M audio output tokens. */
  readonly audioOutput?: number
}

export interface ModelSpec {
  readonly id: string
  readonly name: string
  readonly kind: ModelKind
  readonly contextWindow: number
  readonly maxOutput: number
  readonly capabilities: ModelCapabilities
  readonly pricing: ModelPricing
  readonly tier: "free" | "standard" | "premium"
  /**
   * Listed as `claude-3-gateway-no-thinking/<provider>/<model>`: forced on or off here,
   * otherwise derived (Anthropic models that reason).
   */
  readonly noThinkingAlias?: boolean
}

/**
 * How a provider's accounts sign in with OAuth (docs/operations.md, "OAuth connections"): the
 * endpoints (the vendor's public ones; each can be overridden per connection or by environment
 * variable), the public client id, scopes, the flows it supports and how the access token is sent.
 */
export interface OAuthSpec {
  /** Authorization-code endpoint (PKCE flow). */
  readonly authorizeUrl?: string
  readonly tokenUrl: string
  /** RFC 8628 device authorization endpoint (device flow). */
  readonly deviceAuthorizationUrl?: string
  /** Public client id (no client secret: PKCE and the device flow are for public clients). */
  readonly clientId: string
  readonly scopes: ReadonlyArray<string>
  readonly flows: ReadonlyArray<"pkce" | "device">
  /** Where the vendor's own client has the browser sent back; the code is then pasted (headless). */
  readonly redirectUri?: string
  /** Body encoding of token requests: form (RFC 6749) or JSON (Anthropic's console). */
  readonly tokenRequest: "form" | "json"
  /** The device flow sends a PKCE challenge too (Qwen). */
  readonly devicePkce?: boolean
  /** Extra authorize-URL parameters the vendor expects. */
  readonly authorizeParams?: Readonly<Record<string, string>>
  /** The access token goes upstream as `Authorization: Bearer <token>`, with these headers beside it. */
  readonly tokenUse: "bearer"
  readonly upstreamHeaders?: Readonly<Record<string, string>>
}

export interface ProviderSpec {
  readonly id: string
  readonly name: string
  /** The wire format the gateway speaks to this provider by default. */
  readonly format: WireFormat
  /** Other formats the provider serves natively (a client in one of them is passed through). */
  readonly alsoSpeaks?: ReadonlyArray<WireFormat>
  /** Follows each vendor SDK's convention: includes `/v1` for OpenAI-compatible upstreams, bare origin otherwise. */
  readonly baseUrl: string | null
  readonly authStyle: AuthStyle
  readonly authClass: AuthClass
  readonly category: ProviderCategory
  readonly requiresApiKey: boolean
  readonly requiresBaseUrl: boolean
  readonly docsUrl: string
  readonly models: ReadonlyArray<ModelSpec>
  /**
   * The kinds of model the provider's API serves (its media endpoints among them): a model the
   * catalog does not list is taken to be able to do any of these. Default: chat and embeddings.
   */
  readonly offers?: ReadonlyArray<ModelKind>
  /** Where this provider's dialect of its formats differs (read by the format modules); none when absent. */
  readonly quirks?: ProviderQuirks
  /** Accounts sign in with OAuth (`authClass: "oauth"`); the access token is the connection's credential. */
  readonly oauth?: OAuthSpec
  /**
   * Set on a provider node (`/api/provider-nodes`, src/upstream/providers/nodeRecords.ts): the model-id
   * prefix clients use and the default headers sent with every call. A node's `authStyle` is
   * used as is, whatever its family.
   */
  readonly node?: { readonly prefix: string; readonly headers: Readonly<Record<string, Redacted.Redacted<string>>> }
  /**
   * A provider that serves one coding client's traffic only and checks that it is that client
   * (`claude-code-compatible`, ENABLE_CC_COMPATIBLE_PROVIDER): the client's headers, sent with every
   * call (`anthropic-beta` merged with a client's own), the key also as `Authorization: Bearer`,
   * and a system-prompt preamble put first in every generate request.
   */
  readonly clientCompat?: {
    readonly headers: Readonly<Record<string, string>>
    readonly bearerToo: boolean
    readonly systemPreamble?: string
  }
}

export type Caps = Partial<ModelCapabilities>
export const chat = (
  id: string,
  name: string,
  contextWindow: number,
  maxOutput: number,
  input: number,
  output: number,
  caps: Caps = {},
  extra: { cachedInput?: number; tier?: ModelSpec["tier"] } = {}
): ModelSpec => ({
  id,
  name,
  kind: "chat",
  contextWindow,
  maxOutput,
  capabilities: { tools: true, vision: false, reasoning: false, json: true, ...caps },
  pricing: extra.cachedInput === undefined ? { input, output } : { input, output, cachedInput: extra.cachedInput },
  tier: extra.tier ?? (input === 0 && output === 0 ? "free" : input >= 2 ? "premium" : "standard")
})
export const embedding = (id: string, name: string, contextWindow: number, input: number): ModelSpec => ({
  id,
  name,
  kind: "embedding",
  contextWindow,
  maxOutput: 0,
  capabilities: { tools: false, vision: false, reasoning: false, json: false },
  pricing: { input, output: 0 },
  tier: input === 0 ? "free" : "standard"
})

/** A media model: its kind and its price per unit (and per 1M tokens where the upstream reports tokens). */
export const media = (
  id: string,
  name: string,
  kind: Exclude<ModelKind, "chat" | "embedding">,
  pricing: Partial<ModelPricing> = {}
): ModelSpec => ({
  id,
  name,
  kind,
  contextWindow: 0,
  maxOutput: 0,
  capabilities: { tools: false, vision: false, reasoning: false, json: false },
  pricing: { input: 0, output: 0, ...pricing },
  tier: Object.values(pricing).some((v) => typeof v === "number" && v > 0) ? "standard" : "free"
})

export interface ProviderQuirks {
  /**
   * Chat completions: the field carrying the output-token limit. OpenAI's own API wants
   * `max_completion_tokens`; compatible servers mostly know `max_tokens` only (the default).
   */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens"
  /** Chat completions: an assistant turn with tool calls sends its reasoning back as `reasoning_content` (DeepSeek requires it). */
  readonly reasoningContent?: boolean
  /**
   * Responses: OpenAI's own Responses API, which takes fields no other Responses server does
   * (`client_metadata`, `prompt_cache_key`, `safety_identifier`, `service_tier`, `namespace`
   * tools, Codex's item metadata). A body passed through to any other server loses them.
   */
  readonly openAiResponsesFields?: boolean
  /** Responses: the upstream keeps what it answered, so a `previous_response_id` of its own can be left to it. */
  readonly storesResponses?: boolean
  /**
   * Chat and Responses: OpenAI's strict structured outputs. A client's JSON Schema that strict
   * mode can take is sent compiled to its rules (docs/structured-outputs.md).
   */
  readonly strictSchemas?: boolean
}
