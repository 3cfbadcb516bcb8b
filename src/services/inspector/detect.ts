/**
 * The kind detector (spec document 3, "Kind detection"): whether an intercepted request is an LLM
 * call, from four signals: the host (a registry of known LLM API hosts), the path (chat
 * completions, messages, generate content, responses...), the body's shape (`messages[]`,
 * `contents[]`, `prompt`, `input`) and the user-agent (a coding agent or an AI SDK). Also which
 * client tool sent it, and which wire format its body is in. Plain functions, no I/O.
 */
import type { FormatId } from "../../domain/canonical.js"
import type { DetectedKind } from "./types.js"

/** Known LLM API hosts and the provider each is (18; a subdomain of one counts as it). */
export const LLM_HOSTS: ReadonlyArray<readonly [host: string, provider: string]> = [
  ["api.openai.com", "openai"],
  ["api.anthropic.com", "anthropic"],
  ["generativelanguage.googleapis.com", "gemini"],
  ["aiplatform.googleapis.com", "vertex"],
  ["openrouter.ai", "openrouter"],
  ["api.mistral.ai", "mistral"],
  ["api.groq.com", "groq"],
  ["api.deepseek.com", "deepseek"],
  ["api.x.ai", "xai"],
  ["api.together.xyz", "together"],
  ["api.fireworks.ai", "fireworks"],
  ["api.cohere.com", "cohere"],
  ["api.perplexity.ai", "perplexity"],
  ["openai.azure.com", "azure"],
  ["bedrock-runtime.amazonaws.com", "bedrock"],
  ["api.githubcopilot.com", "github-copilot"],
  ["chatgpt.com", "codex"],
  ["cloudcode-pa.googleapis.com", "gemini-cli"]
]

/** The provider of an LLM host (a registry host or a subdomain of one), else undefined. */
export const providerOfHost = (host: string): string | undefined => {
  const h = host.toLowerCase()
  for (const [known, provider] of LLM_HOSTS) if (h === known || h.endsWith(`.${known}`)) return provider
  return undefined
}

/** Path patterns of LLM APIs, with the wire format and API kind each means. */
const PATHS: ReadonlyArray<readonly [RegExp, FormatId | null, string]> = [
  [/\/chat\/completions$/, "openai-chat", "chat.completions"],
  [/\/v1\/messages$|\/messages$/, "anthropic", "messages"],
  [/:(stream)?[gG]enerateContent$/, "gemini", "generateContent"],
  [/\/responses$/, "openai-responses", "responses"],
  [/\/api\/chat$/, "ollama", "api.chat"],
  [/\/api\/generate$/, "ollama", "api.generate"],
  [/\/completions$/, null, "completions"],
  [/\/embeddings$|:embedContent$|:batchEmbedContents$|\/api\/embed(dings)?$/, null, "embeddings"],
  [/\/images\/(generations|edits)$/, null, "images"],
  [/\/audio\/(speech|transcriptions|translations)$/, null, "audio"],
  [/\/messages\/count_tokens$|:countTokens$/, null, "count_tokens"]
]

export interface PathKind {
  readonly format: FormatId | null
  readonly apiKind: string
}

/** The LLM API a path is, if it is one. */
export const pathKind = (path: string): PathKind | undefined => {
  const p = path.split("?")[0]!
  for (const [re, format, apiKind] of PATHS) if (re.test(p)) return { format, apiKind }
  return undefined
}

/**
 * Whether a request may be an LLM call before its body is read: an LLM API path, a registry host,
 * or a custom host marked `llm`. The capture modes keep such a request's bodies (bounded) even with
 * nobody looking, since its model, tokens and cost are read from them; the buffer keeps the bodies
 * themselves only while someone looks.
 */
export const mayBeLlm = (host: string, path: string, kind?: DetectedKind): boolean =>
  kind === "llm" || pathKind(path) !== undefined || providerOfHost(host) !== undefined

/** User-agent hints: the client tool (coding agents first, then SDKs). */
const AGENTS: ReadonlyArray<readonly [RegExp, string]> = [
  [/claude-cli|claude-code/i, "claude-code"],
  [/codex/i, "codex"],
  [/gemini-cli|GeminiCLI/i, "gemini-cli"],
  [/opencode/i, "opencode"],
  [/qwen-code|QwenCode/i, "qwen-code"],
  [/kilo-?code/i, "kilo"],
  [/cline/i, "cline"],
  [/cursor/i, "cursor"],
  [/aider/i, "aider"],
  [/continue/i, "continue"],
  [/ai-sdk|vercel/i, "ai-sdk"],
  [/langchain/i, "langchain"],
  [/openai-agents/i, "openai-agents"],
  [/OpenAI\/(JS|Python)|openai-node|openai-python/i, "openai-sdk"],
  [/Anthropic\/(JS|Python)|anthropic-sdk/i, "anthropic-sdk"],
  [/google-genai|goog-api-client|google-api-nodejs/i, "google-sdk"],
  [/ollama/i, "ollama"],
  [/^curl\//i, "curl"]
]

/** The client tool a user-agent names (`claude-code`, `codex`, `openai-sdk`, `curl`...), or null. */
export const agentOf = (userAgent: string | undefined, headers?: Readonly<Record<string, string>>): string | null => {
  // SDKs that say who they are in their own header.
  if (headers?.["x-stainless-lang"] !== undefined && userAgent === undefined) return "openai-sdk"
  if (!userAgent) return null
  for (const [re, name] of AGENTS) if (re.test(userAgent)) return name
  return null
}

/** Whether a parsed body looks like an LLM request (`messages[]`, `contents[]`, `prompt`, `input`). */
export const llmShaped = (body: unknown): boolean => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return false
  const b = body as Record<string, unknown>
  if (Array.isArray(b["messages"]) || Array.isArray(b["contents"])) return true
  if (typeof b["model"] === "string" && (typeof b["prompt"] === "string" || b["input"] !== undefined)) return true
  return typeof b["prompt"] === "string" && ("max_tokens" in b || "temperature" in b || "stream" in b)
}

/** The wire format of a body by its shape, when the path did not say. */
export const formatOfBody = (body: unknown): FormatId | null => {
  if (typeof body !== "object" || body === null) return null
  const b = body as Record<string, unknown>
  if (Array.isArray(b["contents"])) return "gemini"
  if (Array.isArray(b["messages"])) {
    if (
      typeof b["max_tokens"] === "number" &&
      (typeof b["system"] === "string" || Array.isArray(b["system"]) || b["anthropic_version"] !== undefined)
    )
      return "anthropic"
    return "openai-chat"
  }
  if (b["input"] !== undefined && typeof b["model"] === "string") return "openai-responses"
  return null
}

export interface Detection {
  readonly kind: DetectedKind
  readonly provider: string | null
  readonly format: FormatId | null
  readonly apiKind: string | null
  readonly agent: string | null
  /** The signals say LLM call (whatever a custom host's form says). */
  readonly llm: boolean
}

/**
 * The four signals combined. A registry host with an LLM path is `llm`; so is any host with an
 * LLM path and an LLM-shaped body, or an LLM-shaped body sent by a known AI client. A request
 * to a registry host that is none of these (a model list, a login) is `app`; everything else
 * `unknown`. A custom host's own kind (from its form) wins.
 */
export const detect = (input: {
  readonly host: string
  readonly path: string
  readonly body: unknown
  readonly userAgent: string | undefined
  readonly headers?: Readonly<Record<string, string>>
  readonly kind?: DetectedKind | undefined
}): Detection => {
  const provider = providerOfHost(input.host) ?? null
  const byPath = pathKind(input.path)
  const shaped = llmShaped(input.body)
  const agent = agentOf(input.userAgent, input.headers)
  const format = byPath?.format ?? (shaped ? formatOfBody(input.body) : null)
  const apiKind = byPath?.apiKind ?? (shaped ? "chat" : null)
  const llm =
    (provider !== null && byPath !== undefined) || (byPath !== undefined && shaped) || (shaped && agent !== null && agent !== "curl")
  const signals: DetectedKind = llm ? "llm" : provider !== null ? "app" : "unknown"
  const kind = input.kind !== undefined && input.kind !== "unknown" ? input.kind : signals
  return { kind, provider, format, apiKind: llm ? apiKind : null, agent, llm }
}
