import type { FormatId } from "../formats/canonical.js"
import { obj } from "../formats/common.js"
import { SKIP_SIGNATURE } from "../formats/gemini.js"
import type { Connection } from "../providers/Connections.js"

/** An input item without client-side fields (and Codex's metadata, for servers other than OpenAI). */
const cleanInputItem = (item: unknown, compatible: boolean): unknown => {
  const o = obj(item)
  if (!o) return item
  const { parsed_arguments: _pa, internal_chat_message_metadata_passthrough: meta, ...kept } = o
  const dropMeta = compatible && meta !== undefined
  const content = Array.isArray(kept["content"]) ? (kept["content"] as Array<unknown>).map((p) => (obj(p) && "parsed" in obj(p)! ? (({ parsed: _p, ...rest }) => rest)(obj(p)!) : p)) : kept["content"]
  if (!("parsed_arguments" in o) && !dropMeta && content === kept["content"]) return item
  return { ...kept, ...(dropMeta ? {} : meta !== undefined ? { internal_chat_message_metadata_passthrough: meta } : {}), ...(content !== undefined ? { content } : {}) }
}

/** Same-format bodies still need a few fixes before they go upstream. */
export const normalizePassthrough = (format: FormatId, body: Record<string, unknown>, connection: Connection): Record<string, unknown> => {
  if (format === "anthropic" && Array.isArray(body["messages"])) {
    // Claude Code puts a `role: "system"` message inside messages; Anthropic only takes `system`.
    const system: Array<unknown> = typeof body["system"] === "string" ? [{ type: "text", text: body["system"] }] : [...((body["system"] as Array<unknown>) ?? [])]
    const messages: Array<unknown> = []
    for (const m of body["messages"] as Array<Record<string, unknown>>) {
      if (m?.["role"] !== "system") messages.push(m)
      else if (typeof m["content"] === "string") system.push({ type: "text", text: m["content"] })
      else if (Array.isArray(m["content"])) system.push(...(m["content"] as Array<unknown>))
    }
    return messages.length === (body["messages"] as Array<unknown>).length ? body : { ...body, system, messages }
  }
  if (format === "openai-responses") {
    // Items sent back from an earlier output can carry fields the SDK adds on the client side
    // (`parsed_arguments`, `parsed`); every Responses server rejects them.
    const input = Array.isArray(body["input"]) ? (body["input"] as Array<unknown>).map((item) => cleanInputItem(item, connection.provider.id !== "openai")) : body["input"]
    if (connection.provider.id === "openai") return { ...body, input }
    // Fields only OpenAI's own API knows; compatible servers reject them.
    const { client_metadata: _cm, prompt_cache_key: _pk, safety_identifier: _si, service_tier: _st, ...rest } = body
    return {
      ...rest,
      input,
      ...(Array.isArray(body["tools"]) ? { tools: (body["tools"] as Array<unknown>).filter((t) => obj(t)?.["type"] !== "namespace") } : {})
    }
  }
  if (format === "gemini" && Array.isArray(body["contents"])) {
    // A functionCall without its thought signature (history from another model, or a client
    // that dropped it) gets Google's bypass value on the first call of the turn, as Gemini 3 requires.
    let changed = false
    const contents = (body["contents"] as Array<unknown>).map((c) => {
      const co = obj(c)
      const parts = co?.["parts"]
      if (co?.["role"] !== "model" || !Array.isArray(parts)) return c
      const first = parts.findIndex((p) => obj(p)?.["functionCall"] !== undefined)
      if (first === -1 || obj(parts[first])?.["thoughtSignature"]) return c
      changed = true
      return { ...co, parts: parts.map((p, i) => (i === first ? { ...obj(p), thoughtSignature: SKIP_SIGNATURE } : p)) }
    })
    return changed ? { ...body, contents } : body
  }
  if (format === "openai-chat" && body["stream"] === true) {
    // Ask for usage on every stream; the gateway drops that chunk if the client did not ask.
    return { ...body, stream_options: { ...(obj(body["stream_options"]) ?? {}), include_usage: true } }
  }
  return body
}

/** The no-thinking alias, applied to a body that passes through. */
export const noThinkingBody = (format: FormatId, body: Record<string, unknown>): Record<string, unknown> => {
  if (format === "anthropic") return { ...body, thinking: { type: "disabled" } }
  if (format === "openai-chat") {
    const { reasoning: _r, reasoning_effort: _e, ...rest } = body
    return rest
  }
  if (format === "openai-responses") {
    const { reasoning: _r, ...rest } = body
    return rest
  }
  return body
}

