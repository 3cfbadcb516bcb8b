import {
  type CanonicalError,
  type CanonicalRequest,
  type CanonicalResponse,
  type ContentBlock,
  type ErrorKind,
  errorKindForStatus,
  type ImageBlock,
  type Message,
  newId,
  parseArguments,
  type ResponseFormat,
  type StopReason,
  type StreamEvent,
  type TextBlock,
  type ToolChoice,
  type ToolDefinition,
  type ToolResultBlock,
  type Usage,
  stopWithCalls,
  wholeUsage
} from "./canonical.js"
import {
  arr,
  CUSTOM_TOOL_PARAMETERS,
  customToolInput,
  idWithSignature,
  imageSourceFromUrl,
  imageSourceToUrl,
  nowSeconds,
  num,
  obj,
  repairToolHistory,
  resultText,
  splitSignedId,
  str,
  tryJson
} from "./common.js"
import { fallbackMessage } from "./common.js"
import { listField, RequestDecodeError, type StreamDecoder, type StreamEncoder, type WireFormat } from "./format.js"
import { sseData } from "./frames.js"

// ---------------------------------------------------------------- requests

const contentBlocks = (content: unknown, where: string): Array<TextBlock | ImageBlock> => {
  if (content === null || content === undefined) return []
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }]
  if (!Array.isArray(content)) throw new RequestDecodeError(`${where}.content must be a string or an array of parts`, `${where}.content`)
  const out: Array<TextBlock | ImageBlock> = []
  content.forEach((part, i) => {
    const p = obj(part)
    const type = str(p?.["type"])
    if (type === "text" || type === "input_text" || type === "output_text") {
      out.push({ type: "text", text: str(p?.["text"]) ?? "" })
    } else if (type === "image_url") {
      const image = p?.["image_url"]
      const url = typeof image === "string" ? image : str(obj(image)?.["url"])
      if (!url) throw new RequestDecodeError(`${where}.content.${i}.image_url.url is required`, `${where}.content`)
      const detail = str(obj(image)?.["detail"])
      out.push({ type: "image", source: imageSourceFromUrl(url), ...(detail ? { detail } : {}) })
    } else if (type === "refusal") {
      out.push({ type: "text", text: str(p?.["refusal"]) ?? "" })
    }
    // input_audio and file parts have no canonical counterpart yet: left out.
  })
  return out
}

const decodeToolChoice = (v: unknown): ToolChoice | undefined => {
  if (v === "auto") return { type: "auto" }
  if (v === "none") return { type: "none" }
  if (v === "required" || v === "any") return { type: "required" }
  const name = str(obj(obj(v)?.["function"])?.["name"]) ?? str(obj(obj(v)?.["custom"])?.["name"]) ?? str(obj(v)?.["name"])
  return name ? { type: "tool", name } : undefined
}

const decodeResponseFormat = (v: unknown): ResponseFormat | undefined => {
  const rf = obj(v)
  const type = str(rf?.["type"])
  if (type === "json_object") return { type: "json_object" }
  if (type === "text") return { type: "text" }
  if (type === "json_schema") {
    const js = obj(rf?.["json_schema"]) ?? {}
    const strict = js["strict"]
    return {
      type: "json_schema",
      name: str(js["name"]) ?? "response",
      schema: obj(js["schema"]) ?? {},
      ...(typeof strict === "boolean" ? { strict } : {})
    }
  }
  return undefined
}

const EFFORTS = new Set(["minimal", "low", "medium", "high"])

const decodeRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model must be a non-empty string", "model")
  const rawMessages = body["messages"]
  if (!Array.isArray(rawMessages) || rawMessages.length === 0) {
    throw new RequestDecodeError("messages must be a non-empty array", "messages")
  }
  const system: Array<TextBlock> = []
  const messages: Array<Message> = []
  const callNames = new Map<string, string>()
  rawMessages.forEach((raw, i) => {
    const m = obj(raw)
    const where = `messages.${i}`
    const role = str(m?.["role"])
    if (role === "system" || role === "developer") {
      system.push(...contentBlocks(m?.["content"], where).filter((b): b is TextBlock => b.type === "text"))
    } else if (role === "user") {
      messages.push({ role: "user", content: contentBlocks(m?.["content"], where) })
    } else if (role === "assistant") {
      const content: Array<ContentBlock> = []
      const reasoning = str(m?.["reasoning_content"]) ?? str(m?.["reasoning"])
      if (reasoning) content.push({ type: "reasoning", text: reasoning })
      content.push(...contentBlocks(m?.["content"], where))
      for (const call of arr(m?.["tool_calls"])) {
        const c = obj(call)
        const custom = obj(c?.["custom"])
        const fn = obj(c?.["function"])
        const name = str(custom?.["name"]) ?? str(fn?.["name"])
        if (!name) throw new RequestDecodeError(`${where}.tool_calls[].function.name is required`, `${where}.tool_calls`)
        const { id, signature } = splitSignedId(str(c?.["id"]) ?? newId("call_"))
        callNames.set(id, name)
        const args = fn?.["arguments"]
        content.push({
          type: "tool_use",
          id,
          name,
          input: custom ? { input: str(custom["input"]) ?? "" } : typeof args === "string" ? parseArguments(args) : (args ?? {}),
          ...(signature ? { signature } : {})
        })
      }
      const legacy = obj(m?.["function_call"])
      if (legacy && str(legacy["name"])) {
        const id = newId("call_")
        callNames.set(id, str(legacy["name"])!)
        content.push({ type: "tool_use", id, name: str(legacy["name"])!, input: parseArguments(str(legacy["arguments"]) ?? "") })
      }
      messages.push({ role: "assistant", content })
    } else if (role === "tool" || role === "function") {
      const rawId = str(m?.["tool_call_id"])
      const id = rawId ? splitSignedId(rawId).id : undefined
      const name = str(m?.["name"]) ?? (id ? callNames.get(id) : undefined)
      const toolUseId = id ?? [...callNames.entries()].reverse().find(([, n]) => n === name)?.[0] ?? newId("call_")
      const result: ToolResultBlock = {
        type: "tool_result",
        toolUseId,
        ...(name ? { name } : {}),
        content: contentBlocks(m?.["content"], where)
      }
      const last = messages[messages.length - 1]
      if (last?.role === "tool") messages[messages.length - 1] = { role: "tool", content: [...last.content, result] }
      else messages.push({ role: "tool", content: [result] })
    } else {
      throw new RequestDecodeError(
        `${where}.role must be one of system, developer, user, assistant, tool`,
        `${where}.role`
      )
    }
  })

  const tools: Array<ToolDefinition> = []
  for (const t of listField(body, "tools")) {
    const custom = obj(t)?.["type"] === "custom" ? obj(obj(t)?.["custom"]) : undefined
    if (custom && str(custom["name"])) {
      const description = str(custom["description"])
      tools.push({ name: str(custom["name"])!, ...(description ? { description } : {}), parameters: CUSTOM_TOOL_PARAMETERS })
      continue
    }
    const fn = obj(obj(t)?.["function"])
    const name = str(fn?.["name"])
    if (!name) continue // non-function tools (e.g. web_search) have no canonical form
    const description = str(fn?.["description"])
    const strict = fn?.["strict"]
    tools.push({
      name,
      ...(description ? { description } : {}),
      parameters: obj(fn?.["parameters"]) ?? { type: "object", properties: {} },
      ...(typeof strict === "boolean" ? { strict } : {})
    })
  }
  for (const f of arr(body["functions"])) {
    const fn = obj(f)
    const name = str(fn?.["name"])
    if (name) tools.push({ name, description: str(fn?.["description"]) ?? "", parameters: obj(fn?.["parameters"]) ?? { type: "object", properties: {} } })
  }

  const stop = body["stop"]
  const effort = str(body["reasoning_effort"]) ?? str(obj(body["reasoning"])?.["effort"])
  const toolChoice = decodeToolChoice(body["tool_choice"] ?? body["function_call"])
  const responseFormat = decodeResponseFormat(body["response_format"])
  const streamValue = body["stream"]
  if (streamValue !== undefined && streamValue !== null && typeof streamValue !== "boolean") {
    throw new RequestDecodeError("stream must be a boolean", "stream")
  }
  const maxTokens = num(body["max_completion_tokens"]) ?? num(body["max_tokens"])
  return {
    model,
    system,
    messages,
    tools,
    ...(toolChoice ? { toolChoice } : {}),
    ...(typeof body["parallel_tool_calls"] === "boolean" ? { parallelToolCalls: body["parallel_tool_calls"] } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(num(body["temperature"]) !== undefined ? { temperature: num(body["temperature"])! } : {}),
    ...(num(body["top_p"]) !== undefined ? { topP: num(body["top_p"])! } : {}),
    ...(num(body["top_k"]) !== undefined ? { topK: num(body["top_k"])! } : {}),
    ...(typeof stop === "string" ? { stop: [stop] } : Array.isArray(stop) ? { stop: stop.filter((s): s is string => typeof s === "string") } : {}),
    ...(num(body["seed"]) !== undefined ? { seed: num(body["seed"])! } : {}),
    ...(num(body["presence_penalty"]) !== undefined ? { presencePenalty: num(body["presence_penalty"])! } : {}),
    ...(num(body["frequency_penalty"]) !== undefined ? { frequencyPenalty: num(body["frequency_penalty"])! } : {}),
    ...(effort === "none"
      ? { reasoning: { enabled: false } }
      : effort && EFFORTS.has(effort)
        ? { reasoning: { enabled: true, effort: effort as "minimal" | "low" | "medium" | "high" } }
        : {}),
    stream: streamValue === true,
    ...(str(body["user"]) ? { user: str(body["user"])! } : {})
  }
}

const partsOf = (blocks: ReadonlyArray<ContentBlock>): string | Array<Record<string, unknown>> => {
  const parts: Array<Record<string, unknown>> = []
  for (const b of blocks) {
    if (b.type === "text") parts.push({ type: "text", text: b.text })
    else if (b.type === "image") {
      parts.push({ type: "image_url", image_url: { url: imageSourceToUrl(b.source), ...(b.detail ? { detail: b.detail } : {}) } })
    }
  }
  return parts.every((p) => p["type"] === "text") ? parts.map((p) => p["text"] as string).join("") : parts
}

/** Options of the upstream a request is encoded for. */
export interface ChatEncodeOptions {
  /** OpenAI's own API wants max_completion_tokens; compatible servers mostly know max_tokens only. */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens"
  /**
   * Send earlier reasoning back as `reasoning_content` on assistant turns with tool calls:
   * DeepSeek's thinking mode rejects a tool-call history without it; OpenAI rejects the field.
   */
  readonly reasoningContent?: boolean
}

export const encodeChatRequest = (req: CanonicalRequest, options: ChatEncodeOptions = {}): Record<string, unknown> => {
  const messages: Array<Record<string, unknown>> = []
  const systemText = req.system.map((b) => b.text).join("\n\n")
  if (systemText) messages.push({ role: "system", content: systemText })
  for (const m of repairToolHistory(req.messages)) {
    if (m.role === "user") {
      messages.push({ role: "user", content: partsOf(m.content) })
    } else if (m.role === "assistant") {
      const text = m.content.filter((b): b is TextBlock => b.type === "text").map((b) => b.text).join("")
      const calls = m.content.flatMap((b) =>
        b.type === "tool_use" ? [{ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }] : []
      )
      const reasoning = options.reasoningContent && calls.length ? m.content.flatMap((b) => (b.type === "reasoning" && b.text ? [b.text] : [])).join("") : ""
      messages.push({
        role: "assistant",
        content: text === "" && calls.length > 0 ? null : text,
        ...(reasoning ? { reasoning_content: reasoning } : {}),
        ...(calls.length ? { tool_calls: calls } : {})
      })
    } else {
      for (const r of m.content) {
        if (r.type !== "tool_result") continue
        messages.push({ role: "tool", tool_call_id: r.toolUseId, content: resultText(r) })
      }
    }
  }
  const body: Record<string, unknown> = { model: req.model, messages }
  if (req.tools.length > 0) {
    body["tools"] = req.tools.map((t) => ({
      type: "function",
      function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.parameters, ...(t.strict !== undefined ? { strict: t.strict } : {}) }
    }))
  }
  if (req.toolChoice && (req.tools.length > 0 || req.toolChoice.type === "none")) {
    body["tool_choice"] =
      req.toolChoice.type === "tool" ? { type: "function", function: { name: req.toolChoice.name } } : req.toolChoice.type
  }
  if (req.parallelToolCalls !== undefined && req.tools.length > 0) body["parallel_tool_calls"] = req.parallelToolCalls
  if (req.responseFormat) {
    body["response_format"] =
      req.responseFormat.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: { name: req.responseFormat.name, schema: req.responseFormat.schema, ...(req.responseFormat.strict !== undefined ? { strict: req.responseFormat.strict } : {}) }
          }
        : { type: req.responseFormat.type }
  }
  if (req.maxTokens !== undefined) body[options.maxTokensField ?? "max_tokens"] = req.maxTokens
  if (req.temperature !== undefined) body["temperature"] = req.temperature
  if (req.topP !== undefined) body["top_p"] = req.topP
  if (req.stop?.length) body["stop"] = req.stop
  if (req.seed !== undefined) body["seed"] = req.seed
  if (req.presencePenalty !== undefined) body["presence_penalty"] = req.presencePenalty
  if (req.frequencyPenalty !== undefined) body["frequency_penalty"] = req.frequencyPenalty
  if (req.reasoning?.enabled && req.reasoning.effort) body["reasoning_effort"] = req.reasoning.effort
  if (req.user) body["user"] = req.user
  if (req.stream) {
    body["stream"] = true
    body["stream_options"] = { include_usage: true }
  }
  return body
}

// ---------------------------------------------------------------- responses

const STOP_FROM: Record<string, StopReason> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  function_call: "tool_use",
  content_filter: "content_filter"
}

const STOP_TO: Record<StopReason, string> = {
  end_turn: "stop",
  stop_sequence: "stop",
  max_tokens: "length",
  tool_use: "tool_calls",
  content_filter: "content_filter",
  refusal: "content_filter"
}

export const usageFromOpenAi = (u: unknown): Partial<Usage> | undefined => {
  const usage = obj(u)
  if (!usage) return undefined
  const input = num(usage["prompt_tokens"])
  const output = num(usage["completion_tokens"])
  if (input === undefined && output === undefined) return undefined
  const cached = num(obj(usage["prompt_tokens_details"])?.["cached_tokens"])
  const reasoning = num(obj(usage["completion_tokens_details"])?.["reasoning_tokens"])
  return {
    ...(input !== undefined ? { inputTokens: input } : {}),
    ...(output !== undefined ? { outputTokens: output } : {}),
    ...(cached ? { cachedInputTokens: cached } : {}),
    ...(reasoning ? { reasoningTokens: reasoning } : {})
  }
}

const usageToOpenAi = (u: Usage | undefined) =>
  u === undefined
    ? undefined
    : {
        prompt_tokens: u.inputTokens,
        completion_tokens: u.outputTokens,
        total_tokens: u.inputTokens + u.outputTokens,
        ...(u.cachedInputTokens !== undefined ? { prompt_tokens_details: { cached_tokens: u.cachedInputTokens } } : {}),
        ...(u.reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } } : {})
      }

const decodeResponse = (raw: unknown): CanonicalResponse => {
  const body = obj(raw) ?? {}
  const choice = obj(arr(body["choices"])[0]) ?? {}
  const message = obj(choice["message"]) ?? {}
  const content: Array<ContentBlock> = []
  const reasoning = str(message["reasoning_content"]) ?? str(message["reasoning"])
  if (reasoning) content.push({ type: "reasoning", text: reasoning })
  const text = str(message["content"])
  if (text) content.push({ type: "text", text })
  for (const call of arr(message["tool_calls"])) {
    const c = obj(call)
    const custom = obj(c?.["custom"])
    const fn = obj(c?.["function"])
    const args = fn?.["arguments"]
    content.push({
      type: "tool_use",
      id: str(c?.["id"]) ?? newId("call_"),
      name: str(custom?.["name"]) ?? str(fn?.["name"]) ?? "",
      input: custom ? { input: str(custom["input"]) ?? "" } : typeof args === "string" ? parseArguments(args) : (args ?? {})
    })
  }
  const hasCalls = content.some((b) => b.type === "tool_use")
  const finish = str(choice["finish_reason"])
  const usage = usageFromOpenAi(body["usage"])
  return {
    id: str(body["id"]) ?? newId("chatcmpl-"),
    model: str(body["model"]) ?? "",
    created: num(body["created"]) ?? nowSeconds(),
    content,
    stopReason: stopWithCalls(STOP_FROM[finish ?? ""], hasCalls),
    ...(usage ? { usage: wholeUsage(usage) } : {})
  }
}

/** Names of the custom tools the client declared (their calls go back as `type: "custom"`). */
const customToolsOf = (options: Readonly<Record<string, unknown>> | undefined): ReadonlySet<string> =>
  (options?.["customTools"] as ReadonlySet<string> | undefined) ?? new Set()

const encodeResponse = (res: CanonicalResponse, ctx: { readonly model: string; readonly options?: Readonly<Record<string, unknown>> }) => {
  const text = res.content.filter((b): b is TextBlock => b.type === "text").map((b) => b.text).join("")
  const reasoning = res.content.flatMap((b) => (b.type === "reasoning" && b.text ? [b.text] : [])).join("")
  const custom = customToolsOf(ctx.options)
  const calls = res.content.flatMap((b): Array<Record<string, unknown>> =>
    b.type !== "tool_use"
      ? []
      : custom.has(b.name)
        ? [{ id: idWithSignature(b.id, b.signature), type: "custom", custom: { name: b.name, input: customToolInput(JSON.stringify(b.input ?? {})) } }]
        : [{ id: idWithSignature(b.id, b.signature), type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }]
  )
  return {
    id: res.id.startsWith("chatcmpl") ? res.id : `chatcmpl-${res.id}`,
    object: "chat.completion",
    created: res.created,
    model: ctx.model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text === "" && calls.length > 0 ? null : text,
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          ...(calls.length ? { tool_calls: calls } : {}),
          refusal: null
        },
        logprobs: null,
        finish_reason: STOP_TO[res.stopReason]
      }
    ],
    ...(res.usage ? { usage: usageToOpenAi(res.usage) } : {})
  }
}

// ---------------------------------------------------------------- errors

const TYPE_BY_KIND: Record<ErrorKind, string> = {
  invalid_request: "invalid_request_error",
  authentication: "authentication_error",
  permission: "permission_error",
  not_found: "invalid_request_error",
  too_large: "invalid_request_error",
  rate_limit: "rate_limit_error",
  timeout: "timeout_error",
  overloaded: "server_error",
  upstream: "upstream_error",
  server: "server_error"
}

export const encodeOpenAiError = (e: CanonicalError) => ({
  error: { message: e.message, type: TYPE_BY_KIND[e.kind], code: e.code ?? null, param: e.param ?? null }
})

/** Reads the error of any OpenAI-style upstream: `{error: {...}}`, `{error: "..."}`, `{message}`, `{detail}`. */
export const decodeOpenAiError = (status: number, body: unknown, text: string): CanonicalError => {
  const b = obj(body)
  const e = b?.["error"]
  const eo = obj(e)
  const message =
    str(eo?.["message"]) ??
    (typeof e === "string" ? e : undefined) ??
    str(b?.["message"]) ??
    (typeof b?.["detail"] === "string" ? (b["detail"] as string) : undefined) ??
    fallbackMessage(status, text)
  const code = eo?.["code"]
  return {
    status,
    kind: errorKindForStatus(status),
    message,
    code: code === undefined || code === null ? null : String(code),
    param: str(eo?.["param"]) ?? null
  }
}

// ---------------------------------------------------------------- streams

/** OpenAI chat chunks → canonical events. Blocks are made sequential (one open at a time). */
class ChatStreamDecoder implements StreamDecoder {
  private started = false
  private open: { kind: "text" | "reasoning" | "tool"; index: number; toolIndex?: number } | undefined
  private next = 0
  /** Upstream tool index → canonical block; block → call id; call id → upstream index. */
  private readonly toolBlocks = new Map<number, number>()
  private readonly idOfBlock = new Map<number, string>()
  private readonly keyOfId = new Map<string, number>()
  /** Blocks of custom tool calls, whose JSON arguments are closed when the block ends. */
  private readonly customBlocks = new Set<number>()
  private finishReason: StopReason | undefined
  private sawTools = false
  private done = false

  push(frame: { data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    if (frame.data === "[DONE]") return this.end()
    const chunk = obj(tryJson(frame.data))
    if (!chunk) return []
    const out: Array<StreamEvent> = []
    const err = chunk["error"]
    if (err) {
      this.done = true
      return [{ type: "error", error: decodeOpenAiError(500, chunk, frame.data) }]
    }
    if (!this.started) {
      this.started = true
      out.push({ type: "start", id: str(chunk["id"]) ?? newId("chatcmpl-"), model: str(chunk["model"]) ?? "", created: num(chunk["created"]) ?? nowSeconds() })
    }
    const choice = obj(arr(chunk["choices"])[0])
    const delta = obj(choice?.["delta"])
    if (delta) {
      const reasoning = str(delta["reasoning_content"]) ?? str(delta["reasoning"])
      if (reasoning) {
        this.ensure("reasoning", out)
        out.push({ type: "reasoning_delta", index: this.open!.index, text: reasoning })
      }
      const text = str(delta["content"])
      if (text) {
        this.ensure("text", out)
        out.push({ type: "text_delta", index: this.open!.index, text })
      }
      for (const tc of arr(delta["tool_calls"])) {
        const call = obj(tc) ?? {}
        const custom = obj(call["custom"])
        const fn = obj(call["function"]) ?? (custom ? { name: custom["name"] } : undefined)
        const id = str(call["id"]) || undefined
        // Some servers omit `index` (Gemini's OpenAI endpoint) or number every call 0: a call
        // with an id not seen before is a new call; a piece without index or id continues the open one.
        const explicit = num(call["index"])
        const toolIndex =
          explicit ?? (id !== undefined ? (this.keyOfId.get(id) ?? -(this.toolBlocks.size + 1)) : this.open?.kind === "tool" ? this.open.toolIndex! : 0)
        const known = this.toolBlocks.get(toolIndex)
        if (known === undefined || (id !== undefined && this.idOfBlock.get(known) !== id)) {
          this.close(out)
          const index = this.next++
          const callId = id ?? newId("call_")
          this.toolBlocks.set(toolIndex, index)
          this.idOfBlock.set(index, callId)
          this.keyOfId.set(callId, toolIndex)
          this.sawTools = true
          this.open = { kind: "tool", index, toolIndex }
          out.push({ type: "block_start", index, block: { type: "tool_use", id: callId, name: str(fn?.["name"]) ?? "" } })
          if (custom) {
            // A custom call's text input becomes the canonical {"input": "..."} arguments.
            this.customBlocks.add(index)
            out.push({ type: "tool_args_delta", index, partialJson: '{"input":"' })
          }
        }
        if (custom) {
          const input = str(custom["input"])
          const open = this.open
          if (input && open !== undefined && open.index === this.toolBlocks.get(toolIndex)) out.push({ type: "tool_args_delta", index: open.index, partialJson: JSON.stringify(input).slice(1, -1) })
          continue
        }
        const args = str(fn?.["arguments"])
        const index = this.toolBlocks.get(toolIndex)!
        // Deltas for a call that is no longer the open block (interleaved streams) are dropped
        // rather than sent into another block; OpenAI streams calls one after another.
        if (args && this.open?.index === index) out.push({ type: "tool_args_delta", index, partialJson: args })
      }
    }
    const finish = str(choice?.["finish_reason"])
    if (finish) this.finishReason = STOP_FROM[finish] ?? "end_turn"
    const usage = usageFromOpenAi(chunk["usage"])
    if (usage) out.push({ type: "usage", usage })
    return out
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    const out: Array<StreamEvent> = []
    if (!this.started) out.push({ type: "start", id: newId("chatcmpl-"), model: "", created: nowSeconds() })
    this.close(out)
    out.push({ type: "finish", stopReason: stopWithCalls(this.finishReason, this.sawTools) })
    return out
  }

  private ensure(kind: "text" | "reasoning", out: Array<StreamEvent>) {
    if (this.open?.kind === kind) return
    this.close(out)
    const index = this.next++
    this.open = { kind, index }
    out.push({ type: "block_start", index, block: { type: kind } })
  }

  private close(out: Array<StreamEvent>) {
    if (this.open && this.customBlocks.delete(this.open.index)) out.push({ type: "tool_args_delta", index: this.open.index, partialJson: '"}' })
    if (this.open) out.push({ type: "block_stop", index: this.open.index })
    this.open = undefined
  }
}

/** Canonical events → OpenAI chat chunks. The first chunk carries `role` (the SDK's helpers need it). */
class ChatStreamEncoder implements StreamEncoder {
  private id = newId("chatcmpl-")
  private created = nowSeconds()
  private readonly toolIndex = new Map<number, number>()
  /** Tool blocks that have not streamed any argument yet (they get "{}" when they end). */
  private readonly noArgs = new Set<number>()
  /** Arguments of calls to custom tools, sent whole as `custom.input` when the call ends. */
  private readonly customArgs = new Map<number, string>()
  private usage: Partial<Usage> | undefined
  private sentRole = false

  constructor(
    private readonly model: string,
    private readonly includeUsage: boolean,
    private readonly customTools: ReadonlySet<string> = new Set()
  ) {}

  private chunk(delta: Record<string, unknown>, finish: string | null = null): string {
    return sseData({
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
    })
  }

  private withRole(delta: Record<string, unknown>): Record<string, unknown> {
    if (this.sentRole) return delta
    this.sentRole = true
    return { role: "assistant", ...delta }
  }

  push(ev: StreamEvent): string {
    switch (ev.type) {
      case "start":
        if (ev.id) this.id = ev.id.startsWith("chatcmpl") ? ev.id : `chatcmpl-${ev.id}`
        this.created = ev.created
        this.sentRole = true
        return this.chunk({ role: "assistant", content: "" })
      case "block_start":
        if (ev.block.type === "tool_use") {
          const i = this.toolIndex.size
          this.toolIndex.set(ev.index, i)
          const id = idWithSignature(ev.block.id, ev.block.signature)
          if (this.customTools.has(ev.block.name)) {
            this.customArgs.set(ev.index, "")
            return this.chunk(this.withRole({ tool_calls: [{ index: i, id, type: "custom", custom: { name: ev.block.name, input: "" } }] }))
          }
          this.noArgs.add(ev.index)
          return this.chunk(
            this.withRole({
              tool_calls: [{ index: i, id: idWithSignature(ev.block.id, ev.block.signature), type: "function", function: { name: ev.block.name, arguments: "" } }]
            })
          )
        }
        return ""
      case "text_delta":
        return ev.text ? this.chunk(this.withRole({ content: ev.text })) : ""
      case "reasoning_delta":
        return ev.text ? this.chunk(this.withRole({ reasoning_content: ev.text })) : ""
      case "tool_args_delta": {
        const i = this.toolIndex.get(ev.index)
        if (i === undefined || !ev.partialJson) return ""
        const custom = this.customArgs.get(ev.index)
        if (custom !== undefined) {
          this.customArgs.set(ev.index, custom + ev.partialJson)
          return ""
        }
        this.noArgs.delete(ev.index)
        return this.chunk({ tool_calls: [{ index: i, function: { arguments: ev.partialJson } }] })
      }
      case "block_stop": {
        // A call without arguments (Anthropic streams `partial_json: ""`) still gets a JSON object.
        const i = this.toolIndex.get(ev.index)
        const custom = this.customArgs.get(ev.index)
        if (i !== undefined && custom !== undefined) {
          this.customArgs.delete(ev.index)
          return this.chunk({ tool_calls: [{ index: i, custom: { input: customToolInput(custom) } }] })
        }
        if (i === undefined || !this.noArgs.delete(ev.index)) return ""
        return this.chunk({ tool_calls: [{ index: i, function: { arguments: "{}" } }] })
      }
      case "usage":
        this.usage = { ...this.usage, ...ev.usage }
        return ""
      case "finish": {
        let out = this.chunk(this.withRole({}), STOP_TO[ev.stopReason])
        if (this.includeUsage && this.usage) {
          out += sseData({
            id: this.id,
            object: "chat.completion.chunk",
            created: this.created,
            model: this.model,
            choices: [],
            usage: usageToOpenAi(wholeUsage(this.usage))
          })
        }
        return out
      }
      case "error":
        return sseData(encodeOpenAiError(ev.error))
      default:
        return ""
    }
  }

  end(): string {
    return "data: [DONE]\n\n"
  }
}

const USAGE_OBJECT = /"usage"\s*:\s*\{/

export const openAiChat: WireFormat = {
  id: "openai-chat",
  streamContentType: "text/event-stream; charset=utf-8",
  framing: "sse",
  decodeRequest,
  encodeRequest: (req) => encodeChatRequest(req),
  decodeResponse,
  encodeResponse,
  streamDecoder: () => new ChatStreamDecoder(),
  streamEncoder: (ctx) => new ChatStreamEncoder(ctx.model, obj(ctx.options?.["stream_options"])?.["include_usage"] === true, customToolsOf(ctx.options)),
  encodeError: encodeOpenAiError,
  decodeError: decodeOpenAiError,
  usageOf: (frame) => (USAGE_OBJECT.test(frame.data) ? usageFromOpenAi(obj(tryJson(frame.data))?.["usage"]) : undefined),
  usageOfResponse: (body) => usageFromOpenAi(obj(body)?.["usage"])
}
