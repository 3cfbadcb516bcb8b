/** anthropic: content blocks, whole responses and errors (streams in anthropic-stream-decoder.ts (decoded) and anthropic-stream-encoder.ts (encoded), requests in anthropic.ts). */
import {
  type CanonicalError,
  type CanonicalResponse,
  type ContentBlock,
  type ErrorKind,
  errorKindForStatus,
  type ImageBlock,
  newId,
  type StopReason,
  type TextBlock,
  type Usage,
  wholeUsage
} from "../../domain/canonical.js"
import { arr, idWithSignature, num, obj, splitSignedId, str } from "./common.js"
import { fallbackMessage, messageIn200 } from "./common.js"
import { RequestDecodeError } from "./format.js"

/** Anthropic requires max_tokens; used when the client did not say. */
export const DEFAULT_MAX_TOKENS = 8192

// ---------------------------------------------------------------- content (requests and responses)

export const decodeImage = (b: Record<string, unknown>): ImageBlock | undefined => {
  const source = obj(b["source"])
  if (str(source?.["type"]) === "base64") {
    return {
      type: "image",
      source: { kind: "base64", mediaType: str(source?.["media_type"]) ?? "image/png", data: str(source?.["data"]) ?? "" }
    }
  }
  if (str(source?.["type"]) === "url") return { type: "image", source: { kind: "url", url: str(source?.["url"]) ?? "" } }
  return undefined
}

export const decodeBlocks = (content: unknown, where: string): Array<ContentBlock> => {
  if (typeof content === "string") return content ? [{ type: "text", text: content }] : []
  if (!Array.isArray(content))
    throw new RequestDecodeError(`${where}.content must be a string or an array of content blocks`, `${where}.content`)
  const out: Array<ContentBlock> = []
  for (const raw of content) {
    const b = obj(raw)
    if (!b) continue
    switch (str(b["type"])) {
      case "text":
        out.push({ type: "text", text: str(b["text"]) ?? "" })
        break
      case "image": {
        const image = decodeImage(b)
        if (image) out.push(image)
        break
      }
      case "tool_use":
      case "server_tool_use": {
        const { id, signature } = splitSignedId(str(b["id"]) ?? newId("toolu_"))
        out.push({ type: "tool_use", id, name: str(b["name"]) ?? "", input: b["input"] ?? {}, ...(signature ? { signature } : {}) })
        break
      }
      case "tool_result": {
        const inner = b["content"]
        const parts =
          typeof inner === "string"
            ? [{ type: "text" as const, text: inner }]
            : arr(inner).flatMap((p): Array<TextBlock | ImageBlock> => {
                const po = obj(p)
                if (str(po?.["type"]) === "text") return [{ type: "text", text: str(po?.["text"]) ?? "" }]
                if (str(po?.["type"]) === "image" && po) {
                  const image = decodeImage(po)
                  return image ? [image] : []
                }
                return []
              })
        out.push({
          type: "tool_result",
          toolUseId: splitSignedId(str(b["tool_use_id"]) ?? "").id,
          content: parts,
          ...(b["is_error"] === true ? { isError: true } : {})
        })
        break
      }
      case "thinking":
        out.push({ type: "reasoning", text: str(b["thinking"]) ?? "", ...(str(b["signature"]) ? { signature: str(b["signature"])! } : {}) })
        break
      case "redacted_thinking":
        out.push({ type: "reasoning", text: "", redacted: str(b["data"]) ?? "" })
        break
      case "document": {
        // Plain-text documents keep their text; other documents have no canonical form yet.
        const source = obj(b["source"])
        if (str(source?.["type"]) === "text") out.push({ type: "text", text: str(source?.["data"]) ?? "" })
        break
      }
    }
  }
  return out
}

// ---------------------------------------------------------------- responses

export const STOP_FROM: Record<string, StopReason> = {
  end_turn: "end_turn",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  tool_use: "tool_use",
  pause_turn: "end_turn",
  refusal: "refusal",
  model_context_window_exceeded: "max_tokens"
}

export const STOP_TO: Record<StopReason, string> = {
  end_turn: "end_turn",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  tool_use: "tool_use",
  content_filter: "refusal",
  refusal: "refusal"
}

export const usageFromAnthropic = (u: unknown): Partial<Usage> | undefined => {
  const usage = obj(u)
  if (!usage) return undefined
  const input = num(usage["input_tokens"])
  const output = num(usage["output_tokens"])
  const read = num(usage["cache_read_input_tokens"])
  const created = num(usage["cache_creation_input_tokens"])
  if (input === undefined && output === undefined) return undefined
  // Anthropic counts cached input apart from input_tokens; canonical input includes it.
  return {
    ...(input !== undefined ? { inputTokens: input + (read ?? 0) + (created ?? 0) } : {}),
    ...(output !== undefined ? { outputTokens: output } : {}),
    ...(read ? { cachedInputTokens: read } : {}),
    ...(created ? { cacheCreationTokens: created } : {})
  }
}

export const usageToAnthropic = (u: Partial<Usage> | undefined) => {
  const cached = u?.cachedInputTokens ?? 0
  const created = u?.cacheCreationTokens ?? 0
  return {
    input_tokens: Math.max(0, (u?.inputTokens ?? 0) - cached - created),
    output_tokens: u?.outputTokens ?? 0,
    cache_creation_input_tokens: created,
    cache_read_input_tokens: cached
  }
}

export const decodeResponse = (raw: unknown): CanonicalResponse => {
  const body = obj(raw) ?? {}
  const content = decodeBlocks(body["content"] ?? [], "content").filter((b) => b.type !== "tool_result")
  const usage = usageFromAnthropic(body["usage"])
  const stopSequence = str(body["stop_sequence"])
  return {
    id: str(body["id"]) ?? newId("msg_"),
    model: str(body["model"]) ?? "",
    created: Math.floor(Date.now() / 1000),
    content,
    stopReason: STOP_FROM[str(body["stop_reason"]) ?? ""] ?? "end_turn",
    ...(stopSequence ? { stopSequence } : {}),
    ...(usage ? { usage: wholeUsage(usage) } : {})
  }
}

export const encodeBlock = (b: ContentBlock): Record<string, unknown> | undefined => {
  switch (b.type) {
    case "text":
      return { type: "text", text: b.text }
    case "tool_use":
      return { type: "tool_use", id: idWithSignature(b.id, b.signature), name: b.name, input: b.input ?? {} }
    case "reasoning":
      return b.redacted
        ? { type: "redacted_thinking", data: b.redacted }
        : { type: "thinking", thinking: b.text, signature: b.encrypted ? "" : (b.signature ?? "") }
    default:
      return undefined
  }
}

export const encodeResponse = (res: CanonicalResponse, ctx: { readonly model: string }) => ({
  id: res.id.startsWith("msg_") ? res.id : `msg_${res.id}`,
  type: "message",
  role: "assistant",
  model: ctx.model,
  content: res.content.flatMap((b) => encodeBlock(b) ?? []),
  stop_reason: STOP_TO[res.stopReason],
  stop_sequence: res.stopSequence ?? null,
  usage: usageToAnthropic(res.usage)
})

// ---------------------------------------------------------------- errors

export const TYPE_BY_KIND: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "not_found_error",
  too_large: "request_too_large",
  rate_limit: "rate_limit_error",
  timeout: "timeout_error",
  overloaded: "overloaded_error",
  upstream: "api_error",
  server: "api_error"
}

export const encodeAnthropicError = (e: CanonicalError) => ({
  type: "error",
  error: { type: TYPE_BY_KIND[e.kind], message: e.message }
})

export const decodeError = (status: number, body: unknown, text: string): CanonicalError => {
  const e = obj(obj(body)?.["error"])
  const message = str(e?.["message"]) ?? fallbackMessage(status, text)
  const type = str(e?.["type"])
  return { status, kind: type === "overloaded_error" ? "overloaded" : errorKindForStatus(status), message, code: type ?? null }
}

/** An Anthropic error object: `{type: "error", error: {...}}` (or an `error` object alone). */
export const isErrorBody = (body: unknown): boolean => {
  const b = obj(body)
  return b !== undefined && (b["type"] === "error" || obj(b["error"]) !== undefined)
}

/** A 200 whose `type` is `error`. */
export const errorIn200 = (body: unknown): CanonicalError | undefined => {
  const b = obj(body)
  return b?.["type"] === "error" ? { status: 502, kind: "upstream", message: messageIn200(b["error"]) } : undefined
}
