/** The anthropic wire format: requests here; responses and errors in anthropic-answers.ts, streams in anthropic-stream-decoder.ts (decoded) and anthropic-stream-encoder.ts (encoded). */
import { anthropicOutputSchema, requestedSchema } from "./structured.js"
import type { CanonicalRequest, ImageBlock, Message, TextBlock, ToolChoice, ToolDefinition } from "../../domain/canonical.js"
import { answerProblem, arr, num, obj, repairToolHistory, str, tryJson } from "./common.js"
import { listField, RequestDecodeError, type WireFormat } from "./format.js"
import { boolean, checkParams, integer, number, object, params, string, strings } from "./params.js"

/** Anthropic requires max_tokens; used when the client did not say. */
export const DEFAULT_MAX_TOKENS = 8192
import { AnthropicStreamDecoder } from "./anthropic-stream-decoder.js"
import { AnthropicStreamEncoder } from "./anthropic-stream-encoder.js"
import {
  decodeError,
  decodeResponse,
  encodeAnthropicError,
  encodeResponse,
  errorIn200,
  isErrorBody,
  usageFromAnthropic,
  decodeBlocks
} from "./anthropic-answers.js"

// ---------------------------------------------------------------- requests

const textBlocks = (v: unknown): Array<TextBlock> => {
  if (typeof v === "string") return v ? [{ type: "text", text: v }] : []
  return arr(v).flatMap((b) => {
    const text = str(obj(b)?.["text"])
    return text ? [{ type: "text" as const, text }] : []
  })
}

const decodeToolChoice = (v: unknown): ToolChoice | undefined => {
  const tc = obj(v)
  switch (str(tc?.["type"])) {
    case "auto":
      return { type: "auto" }
    case "any":
      return { type: "required" }
    case "none":
      return { type: "none" }
    case "tool":
      return str(tc?.["name"]) ? { type: "tool", name: str(tc?.["name"])! } : undefined
    default:
      return undefined
  }
}

/**
 * The Messages parameters whose values are checked (docs/formats.md). `max_tokens` is required by
 * `/v1/messages` only (count_tokens takes none): its route checks that it is there.
 */
export const MESSAGES_MAX_TOKENS = integer(1)
const MESSAGES_PARAMS = params({
  max_tokens: MESSAGES_MAX_TOKENS,
  temperature: number(0, 1),
  top_p: number(0, 1),
  top_k: integer(0),
  stream: boolean,
  stop_sequences: strings,
  tool_choice: object,
  thinking: object,
  metadata: object,
  service_tier: string,
  output_config: object,
  output_format: object
})
const THINKING_PARAMS = params({ type: string, budget_tokens: integer(1) })

const decodeRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model: Field required", "model")
  const rawMessages = body["messages"]
  if (!Array.isArray(rawMessages)) throw new RequestDecodeError("messages: Field required", "messages")
  checkParams(body, MESSAGES_PARAMS)
  if (obj(body["thinking"])) checkParams(obj(body["thinking"])!, THINKING_PARAMS, "thinking.")
  const rawSystem = body["system"]
  if (rawSystem !== undefined && rawSystem !== null && typeof rawSystem !== "string" && !Array.isArray(rawSystem)) {
    throw new RequestDecodeError("system must be a string or an array of text blocks", "system")
  }
  const system = textBlocks(rawSystem)
  const messages: Array<Message> = []
  rawMessages.forEach((raw, i) => {
    const m = obj(raw)
    const role = str(m?.["role"])
    const where = `messages.${i}`
    if (role === "system") {
      // Claude Code puts a system message inside messages; Anthropic only accepts it in `system`.
      system.push(...decodeBlocks(m?.["content"], where).filter((b): b is TextBlock => b.type === "text"))
      return
    }
    if (role !== "user" && role !== "assistant") {
      throw new RequestDecodeError(`${where}.role: Input should be 'user' or 'assistant'`, `${where}.role`)
    }
    const blocks = decodeBlocks(m?.["content"], where)
    if (role === "user") {
      const results = blocks.filter((b) => b.type === "tool_result")
      const rest = blocks.filter((b) => b.type !== "tool_result")
      if (results.length > 0) messages.push({ role: "tool", content: results })
      if (rest.length > 0) messages.push({ role: "user", content: rest })
    } else {
      messages.push({ role: "assistant", content: blocks })
    }
  })
  const tools: Array<ToolDefinition> = listField(body, "tools").flatMap((t) => {
    const to = obj(t)
    const name = str(to?.["name"])
    // Server tools (web_search_...) carry a `type` and no schema: no canonical counterpart.
    if (!name || !obj(to?.["input_schema"])) return []
    const description = str(to?.["description"])
    return [{ name, ...(description ? { description } : {}), parameters: obj(to?.["input_schema"])! }]
  })
  const thinking = obj(body["thinking"])
  const thinkingType = str(thinking?.["type"])
  const toolChoice = decodeToolChoice(body["tool_choice"])
  const disableParallel = obj(body["tool_choice"])?.["disable_parallel_tool_use"]
  const stop = arr(body["stop_sequences"]).filter((s): s is string => typeof s === "string")
  const maxTokens = num(body["max_tokens"])
  const user = str(obj(body["metadata"])?.["user_id"])
  const schema = requestedSchema("anthropic", body)
  return {
    model,
    ...(schema ? { responseFormat: { type: "json_schema" as const, name: "response", schema } } : {}),
    system,
    messages,
    tools,
    ...(toolChoice ? { toolChoice } : {}),
    ...(typeof disableParallel === "boolean" ? { parallelToolCalls: !disableParallel } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(num(body["temperature"]) !== undefined ? { temperature: num(body["temperature"])! } : {}),
    ...(num(body["top_p"]) !== undefined ? { topP: num(body["top_p"])! } : {}),
    ...(num(body["top_k"]) !== undefined ? { topK: num(body["top_k"])! } : {}),
    ...(stop.length ? { stop } : {}),
    ...(thinkingType === "enabled" || thinkingType === "adaptive"
      ? {
          reasoning: {
            enabled: true,
            includeThoughts: true,
            ...(num(thinking?.["budget_tokens"]) !== undefined ? { budgetTokens: num(thinking?.["budget_tokens"])! } : {})
          }
        }
      : thinkingType === "disabled"
        ? { reasoning: { enabled: false } }
        : {}),
    stream: body["stream"] === true,
    ...(user ? { user } : {})
  }
}

const encodeImage = (b: ImageBlock) =>
  b.source.kind === "base64"
    ? { type: "image", source: { type: "base64", media_type: b.source.mediaType, data: b.source.data } }
    : { type: "image", source: { type: "url", url: b.source.url } }

/**
 * Extended-thinking budgets for a messages upstream, by effort level (docs/formats.md, "Reasoning
 * budgets"). The thinking and the answer share `max_tokens`, and Anthropic wants `budget_tokens`
 * of at least 1024 and below `max_tokens`; a budget that takes all of it leaves the answer nothing.
 */
export const THINKING_BUDGETS = { minimal: 1024, low: 2048, medium: 8192, high: 24_000 } as const
/** Thinking asked for without a level or a budget (Gemini's dynamic -1, Anthropic's adaptive). */
export const DEFAULT_THINKING_BUDGET = 4096
/** Added to the budget for the answer when the client set no output limit. */
export const ANSWER_ALLOWANCE = 8000
/** The most `max_tokens` the gateway sets on its own: the smallest output limit of Claude models that think (Opus 4). */
export const MAX_TOKENS_CEILING = 32_000
const MIN_BUDGET = 1024
/** What a client's own output limit keeps for the answer when the gateway picks the budget. */
const answerRoom = (maxTokens: number) => Math.max(MIN_BUDGET, Math.floor(maxTokens / 4))

/**
 * `max_tokens` and the thinking budget of a request with thinking on (no budget: thinking stays off,
 * rather than send a request Anthropic refuses). A limit the client set is kept: a budget it gave is
 * kept below it, a level's budget is cut to leave a quarter (at least 1024) for the answer. Without
 * a limit, `max_tokens` is the budget plus the answer allowance.
 */
export const thinkingPlan = (req: CanonicalRequest): { readonly maxTokens: number; readonly budget?: number } => {
  const explicit = req.reasoning?.budgetTokens
  const wanted = explicit ?? (req.reasoning?.effort ? THINKING_BUDGETS[req.reasoning.effort] : DEFAULT_THINKING_BUDGET)
  const maxTokens = req.maxTokens ?? Math.min(Math.max(wanted, MIN_BUDGET) + ANSWER_ALLOWANCE, MAX_TOKENS_CEILING)
  const budget = Math.min(wanted, explicit !== undefined && req.maxTokens !== undefined ? maxTokens - 1 : maxTokens - answerRoom(maxTokens))
  return budget >= MIN_BUDGET ? { maxTokens, budget } : { maxTokens: req.maxTokens ?? DEFAULT_MAX_TOKENS }
}

export const encodeAnthropicRequest = (req: CanonicalRequest): Record<string, unknown> => {
  const messages: Array<{ role: string; content: Array<Record<string, unknown>> }> = []
  const history = repairToolHistory(req.messages)
  for (const m of history) {
    const content: Array<Record<string, unknown>> = []
    for (const b of m.content) {
      if (b.type === "text") {
        if (b.text !== "") content.push({ type: "text", text: b.text })
      } else if (b.type === "image") content.push(encodeImage(b))
      else if (b.type === "tool_use") {
        content.push({ type: "tool_use", id: b.id, name: b.name, input: b.input ?? {} })
      } else if (b.type === "tool_result") {
        content.push({
          type: "tool_result",
          tool_use_id: b.toolUseId,
          content: b.content.map((p) => (p.type === "text" ? { type: "text", text: p.text || "(empty)" } : encodeImage(p))),
          ...(b.isError ? { is_error: true } : {})
        })
      } else if (b.type === "reasoning" && m.role === "assistant") {
        // Only signed thinking can go back to Anthropic; unsigned reasoning came from elsewhere.
        if (b.redacted) content.push({ type: "redacted_thinking", data: b.redacted })
        else if (b.signature && !b.encrypted) content.push({ type: "thinking", thinking: b.text, signature: b.signature })
      }
    }
    if (content.length === 0) continue
    const role = m.role === "assistant" ? "assistant" : "user"
    const last = messages[messages.length - 1]
    if (last && last.role === role) last.content.push(...content)
    else messages.push({ role, content })
  }
  if (messages.length === 0 || messages[0]!.role !== "user")
    messages.unshift({ role: "user", content: [{ type: "text", text: "(continue)" }] })

  const maxTokens = req.maxTokens ?? DEFAULT_MAX_TOKENS
  const body: Record<string, unknown> = { model: req.model, max_tokens: maxTokens, messages }
  if (req.system.length > 0) body["system"] = req.system.map((b) => ({ type: "text", text: b.text }))
  if (req.tools.length > 0) {
    body["tools"] = req.tools.map((t) => ({
      name: t.name,
      ...(t.description ? { description: t.description } : {}),
      input_schema: t.parameters
    }))
  }
  if (req.toolChoice && req.tools.length > 0) {
    const tc = req.toolChoice
    body["tool_choice"] = {
      type: tc.type === "required" ? "any" : tc.type,
      ...(tc.type === "tool" ? { name: tc.name } : {}),
      ...(req.parallelToolCalls === false && tc.type !== "none" ? { disable_parallel_tool_use: true } : {})
    }
  } else if (req.parallelToolCalls === false && req.tools.length > 0) {
    body["tool_choice"] = { type: "auto", disable_parallel_tool_use: true }
  }
  if (req.stop?.length) body["stop_sequences"] = req.stop
  if (req.topK !== undefined) body["top_k"] = req.topK
  // Structured outputs, Anthropic's own: the schema in its rules (docs/structured-outputs.md).
  if (req.responseFormat?.type === "json_schema")
    body["output_config"] = { format: { type: "json_schema", schema: anthropicOutputSchema(req.responseFormat.schema) } }
  if (req.user) body["metadata"] = { user_id: req.user }

  // Extended thinking: Anthropic rejects a tool-use turn in history whose thinking block is
  // missing (it came from another model, or a client dropped it). Thinking is then left off
  // for this request instead of failing it.
  const toolTurnsSigned = messages
    .filter((m) => m.role === "assistant" && m.content.some((c) => c["type"] === "tool_use"))
    .every((m) => m.content[0]?.["type"] === "thinking" || m.content[0]?.["type"] === "redacted_thinking")
  const plan = req.reasoning?.enabled ? thinkingPlan(req) : undefined
  if (plan?.budget !== undefined && toolTurnsSigned && req.toolChoice?.type !== "required" && req.toolChoice?.type !== "tool") {
    body["max_tokens"] = plan.maxTokens
    body["thinking"] = { type: "enabled", budget_tokens: plan.budget }
  } else {
    // Thinking blocks may only be sent while thinking is on.
    for (const m of messages) m.content = m.content.filter((c) => c["type"] !== "thinking" && c["type"] !== "redacted_thinking")
    if (req.temperature !== undefined) body["temperature"] = Math.min(req.temperature, 1)
    if (req.topP !== undefined) body["top_p"] = req.topP
  }
  for (const m of messages) if (m.content.length === 0) m.content.push({ type: "text", text: "(empty)" })
  if (req.stream) body["stream"] = true
  return body
}

// ---------------------------------------------------------------- pass-through

/**
 * What the canonical form cannot carry back from an Anthropic answer: server tools (web search,
 * web fetch, code execution, MCP servers: their `server_tool_use` and result blocks) and
 * citations of documents.
 */
const anthropicServerSide = (body: Record<string, unknown>): boolean =>
  body["mcp_servers"] !== undefined ||
  body["container"] !== undefined ||
  (Array.isArray(body["tools"]) &&
    body["tools"].some((t) => /^(web_search|web_fetch|code_execution|mcp)/.test(str(obj(t)?.["type"]) ?? ""))) ||
  JSON.stringify(body["messages"] ?? null).includes('"citations"')

/** Claude Code puts a `role: "system"` message inside messages; Anthropic only takes `system`. */
const passthroughBody = (body: Record<string, unknown>): Record<string, unknown> => {
  if (!Array.isArray(body["messages"])) return body
  const system: Array<unknown> =
    typeof body["system"] === "string" ? [{ type: "text", text: body["system"] }] : [...((body["system"] as Array<unknown>) ?? [])]
  const messages: Array<unknown> = []
  for (const m of body["messages"] as Array<Record<string, unknown>>) {
    if (m?.["role"] !== "system") messages.push(m)
    else if (typeof m["content"] === "string") system.push({ type: "text", text: m["content"] })
    else if (Array.isArray(m["content"])) system.push(...(m["content"] as Array<unknown>))
  }
  return messages.length === (body["messages"] as Array<unknown>).length ? body : { ...body, system, messages }
}

export const anthropic: WireFormat = {
  id: "anthropic",
  streamContentType: "text/event-stream; charset=utf-8",
  framing: "sse",
  decodeRequest,
  encodeRequest: encodeAnthropicRequest,
  passthroughBody,
  withoutThinking: (body) => ({ ...body, thinking: { type: "disabled" } }),
  asStream: (body) => ({ ...body, stream: true }),
  collectable: (body) => !anthropicServerSide(body),
  decodeResponse,
  encodeResponse,
  streamDecoder: () => new AnthropicStreamDecoder(),
  streamEncoder: (ctx) => new AnthropicStreamEncoder(ctx.model),
  encodeError: encodeAnthropicError,
  decodeError,
  isErrorBody,
  errorIn200,
  answerProblem: answerProblem((b) => Array.isArray(b["content"]), "a message (no content array)"),
  usageOf: (frame) => {
    if (frame.event !== "message_start" && frame.event !== "message_delta") return undefined
    const ev = obj(tryJson(frame.data))
    return usageFromAnthropic(frame.event === "message_start" ? obj(ev?.["message"])?.["usage"] : ev?.["usage"])
  },
  usageOfResponse: (body) => usageFromAnthropic(obj(body)?.["usage"])
}

export { usageFromAnthropic, encodeAnthropicError } from "./anthropic-answers.js"
