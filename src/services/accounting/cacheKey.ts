import { createHash } from "node:crypto"
import type { CanonicalRequest, ContentBlock, Message } from "../../domain/canonical.js"

/**
 * Response cache keys. Cacheable only when the answer is reproducible (`temperature === 0` or a `seed`) and whole
 * (not streamed) (docs/accounting.md#what-is-cached-and-why).
 */
export const cacheable = (req: CanonicalRequest): boolean => (req.temperature === 0 || typeof req.seed === "number") && req.stream !== true

export interface CacheKeyInput {
  /** The client's wire format (the stored body is in this format). */
  readonly format: string
  /** The model id as the client requested it (combo names included), before routing. */
  readonly model: string
  readonly req: CanonicalRequest
  /**
   * What else decides the answer and the shape it is stored in: the endpoint (chat and legacy
   * completions share a format), the no-thinking alias, and the body's fields outside the
   * canonical form (`n`, `logprobs`, `previous_response_id`, ...). Part of the key and the params.
   */
  readonly extra?: unknown
  /** Scopes similarity matches (never exact ones) to one API key: a near prompt must not borrow another tenant's answer. */
  readonly similarityScope?: string | null
}

/**
 * JSON with object keys sorted at every level and no whitespace; `undefined` members are
 * dropped (as JSON.stringify does), `undefined` in arrays becomes `null`.
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") {
    return value === undefined ? "null" : JSON.stringify(value)
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const record = value as Record<string, unknown>
  const parts: Array<string> = []
  for (const k of Object.keys(record).sort()) {
    const v = record[k]
    if (v === undefined || typeof v === "function") continue
    parts.push(`${JSON.stringify(k)}:${canonicalJson(v)}`)
  }
  return `{${parts.join(",")}}`
}

const sha256Hex = (text: string): string => createHash("sha256").update(text).digest("hex")

/** A content block with only answer-relevant variation: text loses trailing whitespace. */
const normBlock = (b: ContentBlock): unknown => {
  switch (b.type) {
    case "text":
      return { type: "text", text: b.text.trimEnd() }
    case "image":
      return { type: "image", source: b.source, detail: b.detail }
    case "tool_use":
      return { type: "tool_use", id: b.id, name: b.name, input: b.input, signature: b.signature }
    case "tool_result":
      return { type: "tool_result", toolUseId: b.toolUseId, name: b.name, content: b.content.map(normBlock), isError: b.isError }
    case "reasoning":
      return { type: "reasoning", text: b.text.trimEnd(), signature: b.signature, redacted: b.redacted, encrypted: b.encrypted }
  }
}

const normMessages = (messages: ReadonlyArray<Message>): unknown =>
  messages.map((m) => ({ role: m.role, content: m.content.map(normBlock) }))

/** Everything in the key except the messages (the basis of `cacheParams`). */
const normParams = ({ format, model, req }: CacheKeyInput) => ({
  format,
  model,
  system: req.system
    .map((b) => b.text)
    .join("\n")
    .trimEnd(),
  tools: req.tools.map((t) => ({ name: t.name, description: t.description, parameters: t.parameters, strict: t.strict })),
  toolChoice: req.toolChoice,
  parallelToolCalls: req.parallelToolCalls,
  responseFormat: req.responseFormat,
  maxTokens: req.maxTokens,
  temperature: req.temperature,
  topP: req.topP,
  topK: req.topK,
  stop: req.stop,
  seed: req.seed,
  presencePenalty: req.presencePenalty,
  frequencyPenalty: req.frequencyPenalty,
  reasoning: req.reasoning
})

/**
 * SHA-256 hex of the canonical JSON of the normalised request: client format, requested
 * model, system text, messages, tools, tool choice, response format and every sampling
 * parameter. The stream flag and the end-user id do not change the answer and are left out.
 */
export const cacheKey = (input: CacheKeyInput): string =>
  sha256Hex(canonicalJson({ v: 2, ...normParams(input), extra: input.extra ?? null, messages: normMessages(input.req.messages) }))

/**
 * SHA-256 hex of everything in the key except the messages. Similarity matching only compares
 * entries with equal params, so a similar prompt never borrows an answer produced with other
 * tools, system text, temperature or token limit.
 */
export const cacheParams = (input: CacheKeyInput): string =>
  sha256Hex(canonicalJson({ v: 2, ...normParams(input), extra: input.extra ?? null, scope: input.similarityScope ?? null }))

const blockText = (b: ContentBlock): string => {
  switch (b.type) {
    case "text":
      return b.text
    case "image":
      return "[image]"
    case "tool_use":
      return `[tool call ${b.name} ${canonicalJson(b.input)}]`
    case "tool_result":
      return b.content.map(blockText).join("")
    case "reasoning":
      return ""
  }
}

/**
 * The text used for similarity: the system text, then each message's text, one line per
 * message, role-prefixed ("system: ...\nuser: ...\nassistant: ..."). Images count as
 * "[image]", tool calls as "[tool call name {args}]", tool results by their text; reasoning is left out.
 */
export const promptText = (req: CanonicalRequest): string => {
  const lines: Array<string> = []
  const system = req.system
    .map((b) => b.text)
    .join("\n")
    .trim()
  if (system !== "") lines.push(`system: ${system}`)
  for (const m of req.messages) lines.push(`${m.role}: ${m.content.map(blockText).join("").trim()}`)
  return lines.join("\n")
}
