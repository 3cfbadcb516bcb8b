/** The openai-chat wire format: requests here; responses, errors and streams in openai-chat-answers.ts. */
import { strictSchema } from "./structured.js"
import {
  type CanonicalRequest,
  type ContentBlock,
  type ImageBlock,
  type Message,
  newId,
  parseArguments,
  type ResponseFormat,
  type TextBlock,
  type ToolChoice,
  type ToolDefinition,
  type ToolResultBlock
} from "../../domain/canonical.js"
import {
  answerProblem,
  arr,
  CUSTOM_TOOL_PARAMETERS,
  imageSourceFromUrl,
  imageSourceToUrl,
  num,
  obj,
  repairToolHistory,
  resultText,
  splitSignedId,
  str,
  tryJson
} from "./common.js"
import { listField, type ProviderQuirks, RequestDecodeError, type WireFormat } from "./format.js"
import { array, boolean, checkParams, integer, number, object, params, string, stringOrObject, stringOrStrings } from "./params.js"
import {
  ChatStreamDecoder,
  ChatStreamEncoder,
  customToolsOf,
  decodeOpenAiError,
  decodeResponse,
  encodeOpenAiError,
  encodeResponse,
  errorIn200,
  isOpenAiErrorBody,
  usageFromOpenAi
} from "./openai-chat-answers.js"

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

/**
 * The chat completions parameters whose values are checked (docs/formats.md); legacy
 * completions share them (its route checks its own `logprobs`, an integer there, and leaves it out).
 */
export const CHAT_PARAMS = params({
  temperature: number(0, 2),
  top_p: number(0, 1),
  max_tokens: integer(1),
  max_completion_tokens: integer(1),
  n: integer(1),
  presence_penalty: number(-2, 2),
  frequency_penalty: number(-2, 2),
  stream: boolean,
  stop: stringOrStrings,
  seed: integer(),
  logprobs: boolean,
  top_logprobs: integer(0, 20),
  logit_bias: object,
  stream_options: object,
  response_format: object,
  tool_choice: stringOrObject,
  function_call: stringOrObject,
  functions: array,
  parallel_tool_calls: boolean,
  user: string,
  reasoning_effort: string,
  metadata: object,
  store: boolean
})

const decodeRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model must be a non-empty string", "model")
  const rawMessages = body["messages"]
  if (!Array.isArray(rawMessages) || rawMessages.length === 0) {
    throw new RequestDecodeError("messages must be a non-empty array", "messages")
  }
  checkParams(body, CHAT_PARAMS)
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
      throw new RequestDecodeError(`${where}.role must be one of system, developer, user, assistant, tool`, `${where}.role`)
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
    if (name)
      tools.push({
        name,
        description: str(fn?.["description"]) ?? "",
        parameters: obj(fn?.["parameters"]) ?? { type: "object", properties: {} }
      })
  }

  const stop = body["stop"]
  const effort = str(body["reasoning_effort"]) ?? str(obj(body["reasoning"])?.["effort"])
  const toolChoice = decodeToolChoice(body["tool_choice"] ?? body["function_call"])
  const responseFormat = decodeResponseFormat(body["response_format"])
  const streamValue = body["stream"]
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
    ...(typeof stop === "string"
      ? { stop: [stop] }
      : Array.isArray(stop)
        ? { stop: stop.filter((s): s is string => typeof s === "string") }
        : {}),
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

/**
 * The quirks of the upstream a request is encoded for: the output-token limit's field, and
 * earlier reasoning sent back as `reasoning_content` on assistant turns with tool calls
 * (DeepSeek's thinking mode rejects a tool-call history without it; OpenAI rejects the field).
 */
export type ChatEncodeOptions = Pick<ProviderQuirks, "maxTokensField" | "reasoningContent" | "strictSchemas">

/** A chat body passed through: usage is asked for on every stream (the gateway drops that chunk if the client did not ask). */
const passthroughBody = (body: Record<string, unknown>): Record<string, unknown> =>
  body["stream"] === true ? { ...body, stream_options: { ...(obj(body["stream_options"]) ?? {}), include_usage: true } } : body

/** Without the reasoning fields (the no-thinking alias). */
const withoutThinking = (body: Record<string, unknown>): Record<string, unknown> => {
  const { reasoning: _r, reasoning_effort: _e, ...rest } = body
  return rest
}

export const encodeChatRequest = (req: CanonicalRequest, options: ChatEncodeOptions = {}): Record<string, unknown> => {
  const messages: Array<Record<string, unknown>> = []
  const systemText = req.system.map((b) => b.text).join("\n\n")
  if (systemText) messages.push({ role: "system", content: systemText })
  for (const m of repairToolHistory(req.messages)) {
    if (m.role === "user") {
      messages.push({ role: "user", content: partsOf(m.content) })
    } else if (m.role === "assistant") {
      const text = m.content
        .filter((b): b is TextBlock => b.type === "text")
        .map((b) => b.text)
        .join("")
      const calls = m.content.flatMap((b) =>
        b.type === "tool_use" ? [{ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }] : []
      )
      const reasoning =
        options.reasoningContent && calls.length
          ? m.content.flatMap((b) => (b.type === "reasoning" && b.text ? [b.text] : [])).join("")
          : ""
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
      function: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        parameters: t.parameters,
        ...(t.strict !== undefined ? { strict: t.strict } : {})
      }
    }))
  }
  if (req.toolChoice && (req.tools.length > 0 || req.toolChoice.type === "none")) {
    body["tool_choice"] =
      req.toolChoice.type === "tool" ? { type: "function", function: { name: req.toolChoice.name } } : req.toolChoice.type
  }
  if (req.parallelToolCalls !== undefined && req.tools.length > 0) body["parallel_tool_calls"] = req.parallelToolCalls
  if (req.responseFormat) {
    const rf = req.responseFormat
    const strict = rf.type === "json_schema" && rf.strict === undefined && options.strictSchemas ? strictSchema(rf.schema) : undefined
    body["response_format"] =
      rf.type === "json_schema"
        ? {
            type: "json_schema",
            json_schema: {
              name: rf.name,
              schema: strict ?? rf.schema,
              ...(strict ? { strict: true } : rf.strict !== undefined ? { strict: rf.strict } : {})
            }
          }
        : { type: rf.type }
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

const USAGE_OBJECT = /"usage"\s*:\s*\{/

export const openAiChat: WireFormat = {
  id: "openai-chat",
  streamContentType: "text/event-stream; charset=utf-8",
  framing: "sse",
  decodeRequest,
  encodeRequest: (req, quirks) => encodeChatRequest(req, quirks),
  passthroughBody,
  withoutThinking,
  asStream: (body) => ({ ...body, stream: true }),
  // Several choices, log probabilities, audio output and web-search annotations have no canonical form.
  collectable: (body) =>
    !(typeof body["n"] === "number" && body["n"] > 1) &&
    body["logprobs"] !== true &&
    body["top_logprobs"] === undefined &&
    body["audio"] === undefined &&
    !(Array.isArray(body["modalities"]) && body["modalities"].includes("audio")) &&
    body["web_search_options"] === undefined,
  decodeResponse,
  encodeResponse,
  streamDecoder: () => new ChatStreamDecoder(),
  streamEncoder: (ctx) =>
    new ChatStreamEncoder(ctx.model, obj(ctx.options?.["stream_options"])?.["include_usage"] === true, customToolsOf(ctx.options)),
  encodeError: encodeOpenAiError,
  decodeError: decodeOpenAiError,
  isErrorBody: isOpenAiErrorBody,
  errorIn200,
  answerProblem: answerProblem(
    (b) => obj(obj(arr(b["choices"])[0])?.["message"]) !== undefined,
    "a chat completion (no choices[0].message)"
  ),
  usageOf: (frame) => (USAGE_OBJECT.test(frame.data) ? usageFromOpenAi(obj(tryJson(frame.data))?.["usage"]) : undefined),
  usageOfResponse: (body) => usageFromOpenAi(obj(body)?.["usage"])
}

export { usageFromOpenAi, encodeOpenAiError, decodeOpenAiError, isOpenAiErrorBody } from "./openai-chat-answers.js"
