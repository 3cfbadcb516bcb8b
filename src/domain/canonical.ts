/**
 * The canonical form: every wire format decodes into these types and encodes out of them, so
 * N formats need 2N translators instead of N² pairs. Field names are the gateway's own; the
 * mapping tables per format are in docs/formats.md.
 */

export type FormatId = "openai-chat" | "openai-responses" | "anthropic" | "gemini" | "ollama"

export interface TextBlock {
  readonly type: "text"
  readonly text: string
}

export type ImageSource =
  | { readonly kind: "base64"; readonly mediaType: string; readonly data: string }
  | { readonly kind: "url"; readonly url: string }

export interface ImageBlock {
  readonly type: "image"
  readonly source: ImageSource
  readonly detail?: string
}

/** A call of a tool by the model. `input` is the parsed arguments object. */
export interface ToolUseBlock {
  readonly type: "tool_use"
  readonly id: string
  readonly name: string
  readonly input: unknown
  /** Opaque provider signature that must travel back with the call (Gemini thoughtSignature). */
  readonly signature?: string
}

export interface ToolResultBlock {
  readonly type: "tool_result"
  readonly toolUseId: string
  /** The called tool's name, when known (Gemini and Ollama need it). */
  readonly name?: string
  readonly content: ReadonlyArray<TextBlock | ImageBlock>
  readonly isError?: boolean
}

/**
 * Model reasoning. `signature` is Anthropic's thinking signature or Gemini's thoughtSignature;
 * `redacted` carries Anthropic redacted_thinking data; `encrypted` OpenAI's encrypted_content.
 */
export interface ReasoningBlock {
  readonly type: "reasoning"
  readonly text: string
  readonly signature?: string
  readonly redacted?: string
  readonly encrypted?: string
  /** OpenAI reasoning item id, kept so the item can be sent back. */
  readonly itemId?: string
}

export type ContentBlock = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ReasoningBlock

/**
 * `tool` messages hold only tool results; they follow the assistant message with the calls.
 * System prompts live in `CanonicalRequest.system`, never in `messages`.
 */
export interface Message {
  readonly role: "user" | "assistant" | "tool"
  readonly content: ReadonlyArray<ContentBlock>
}

export interface ToolDefinition {
  readonly name: string
  readonly description?: string
  /** JSON Schema of the arguments object. */
  readonly parameters: Record<string, unknown>
  readonly strict?: boolean
}

export type ToolChoice =
  | { readonly type: "auto" }
  | { readonly type: "none" }
  /** The model must call some tool. */
  | { readonly type: "required" }
  | { readonly type: "tool"; readonly name: string }

export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | { readonly type: "json_schema"; readonly name: string; readonly schema: Record<string, unknown>; readonly strict?: boolean }

export interface Reasoning {
  /** Off: suppress thinking where the upstream allows it. */
  readonly enabled: boolean
  readonly effort?: "minimal" | "low" | "medium" | "high"
  readonly budgetTokens?: number
  /** Ask for reasoning text (summaries / thoughts) in the answer. */
  readonly includeThoughts?: boolean
}

export interface CanonicalRequest {
  readonly model: string
  readonly system: ReadonlyArray<TextBlock>
  readonly messages: ReadonlyArray<Message>
  readonly tools: ReadonlyArray<ToolDefinition>
  readonly toolChoice?: ToolChoice
  readonly parallelToolCalls?: boolean
  readonly responseFormat?: ResponseFormat
  readonly maxTokens?: number
  readonly temperature?: number
  readonly topP?: number
  readonly topK?: number
  readonly stop?: ReadonlyArray<string>
  readonly seed?: number
  readonly presencePenalty?: number
  readonly frequencyPenalty?: number
  readonly reasoning?: Reasoning
  readonly stream: boolean
  /** End-user identifier, when the client sent one. */
  readonly user?: string
}

export type StopReason = "end_turn" | "max_tokens" | "tool_use" | "stop_sequence" | "content_filter" | "refusal"

/**
 * The stop reason of an answer that may hold tool calls. Formats that have no "tool calls"
 * reason of their own (Gemini, Ollama, Responses) or report it loosely get `tool_use` when calls
 * are present, except that a cut (max tokens, content filter) wins: a call cut short must
 * not be run as if it were complete.
 */
export const stopWithCalls = (reason: StopReason | undefined, hasCalls: boolean): StopReason =>
  reason === "max_tokens" || reason === "content_filter" ? reason : hasCalls ? "tool_use" : (reason ?? "end_turn")

export interface Usage {
  readonly inputTokens: number
  readonly outputTokens: number
  /** Input tokens served from the provider's prompt cache (included in inputTokens). */
  readonly cachedInputTokens?: number
  /** Input tokens written to the provider's prompt cache (Anthropic). */
  readonly cacheCreationTokens?: number
  /** Output tokens spent on reasoning (included in outputTokens). */
  readonly reasoningTokens?: number
}

export interface CanonicalResponse {
  readonly id: string
  readonly model: string
  readonly created: number
  readonly content: ReadonlyArray<ContentBlock>
  readonly stopReason: StopReason
  readonly stopSequence?: string
  readonly usage?: Usage
}

/**
 * Stream events: a message is `start`, then blocks (each `block_start`, deltas, `block_stop`,
 * one block at a time), then `finish`. `usage` may come at any point; the last value wins.
 */
export type StreamEvent =
  | { readonly type: "start"; readonly id: string; readonly model: string; readonly created: number }
  | {
      readonly type: "block_start"
      readonly index: number
      readonly block:
        | { readonly type: "text" }
        | { readonly type: "reasoning"; readonly redacted?: string; readonly itemId?: string }
        | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly signature?: string }
    }
  | { readonly type: "text_delta"; readonly index: number; readonly text: string }
  | { readonly type: "reasoning_delta"; readonly index: number; readonly text: string }
  /** A reasoning block's signature (Anthropic signature_delta, Gemini thoughtSignature, OpenAI encrypted_content). */
  | { readonly type: "signature"; readonly index: number; readonly signature: string; readonly encrypted?: boolean }
  | { readonly type: "tool_args_delta"; readonly index: number; readonly partialJson: string }
  | { readonly type: "block_stop"; readonly index: number }
  | { readonly type: "usage"; readonly usage: Partial<Usage> }
  | { readonly type: "finish"; readonly stopReason: StopReason; readonly stopSequence?: string }
  | { readonly type: "error"; readonly error: CanonicalError }

/** An error in canonical terms; each format renders it in its own shape. */
export interface CanonicalError {
  readonly status: number
  /** One of: invalid_request, authentication, permission, not_found, rate_limit, timeout, overloaded, upstream, server. */
  readonly kind: ErrorKind
  readonly message: string
  readonly code?: string | null
  readonly param?: string | null
  /** The level whose limit refused the request (`organisation`, `team`, `user`, `key`; docs/accounting.md): added as `error.level`. */
  readonly level?: string | null
}

export type ErrorKind =
  | "invalid_request"
  | "authentication"
  | "permission"
  | "not_found"
  | "too_large"
  | "rate_limit"
  | "timeout"
  | "overloaded"
  | "upstream"
  | "server"

export const errorKindForStatus = (status: number): ErrorKind => {
  switch (status) {
    case 400:
    case 409:
    case 422:
      return "invalid_request"
    case 401:
      return "authentication"
    case 403:
      return "permission"
    case 404:
      return "not_found"
    case 408:
    case 504:
      return "timeout"
    case 413:
      return "too_large"
    case 429:
      return "rate_limit"
    case 503:
    case 529:
      return "overloaded"
    default:
      return status >= 500 ? "upstream" : "invalid_request"
  }
}

export const sumUsage = (u: Partial<Usage> | undefined): Usage | undefined =>
  u === undefined || (u.inputTokens === undefined && u.outputTokens === undefined)
    ? undefined
    : {
        inputTokens: u.inputTokens ?? 0,
        outputTokens: u.outputTokens ?? 0,
        ...(u.cachedInputTokens !== undefined ? { cachedInputTokens: u.cachedInputTokens } : {}),
        ...(u.cacheCreationTokens !== undefined ? { cacheCreationTokens: u.cacheCreationTokens } : {}),
        ...(u.reasoningTokens !== undefined ? { reasoningTokens: u.reasoningTokens } : {})
      }

/** Later usage fields win over earlier ones (streams report usage in pieces). */
export const mergeUsage = (a: Partial<Usage> | undefined, b: Partial<Usage>): Partial<Usage> => {
  const out: Record<string, number> = { ...(a as Record<string, number> | undefined) }
  // for...in over a plain object: the keys of Object.entries in the same order, without an array of pairs made per usage event
  const from = b as Record<string, unknown>
  for (const k in from) {
    const v = from[k]
    if (typeof v === "number" && Object.hasOwn(from, k)) out[k] = v
  }
  return out as Partial<Usage>
}

/** Usage as a whole answer counts it: a side the upstream left out is 0. */
export const wholeUsage = (u: Partial<Usage>): Usage => ({ ...u, inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0 })

/** Text of the text blocks, joined. */
export const textOf = (blocks: ReadonlyArray<ContentBlock>): string =>
  blocks
    .filter((b): b is TextBlock => b.type === "text")
    .map((b) => b.text)
    .join("")

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

/**
 * `prefix` and 24 random characters of [a-z0-9]. Made several times a stream (its id, each item's),
 * so written as a loop onto a string rather than an array of 24 joined (the same Math.random calls
 * in the same order, so the same id for the same random numbers).
 */
export const newId = (prefix: string): string => {
  let id = prefix
  for (let i = 0; i < 24; i++) id += ID_ALPHABET[Math.floor(Math.random() * 36)]
  return id
}

/** Parses tool-call arguments; models sometimes stream invalid JSON, which becomes {} rather than a crash. */
export const parseArguments = (raw: string): unknown => {
  if (raw.trim() === "") return {}
  try {
    return JSON.parse(raw)
  } catch {
    return { _raw: raw }
  }
}
