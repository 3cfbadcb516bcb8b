/** The openai-chat wire format: requests here; responses and errors in openai-chat-answers.ts, streams in openai-chat-stream-decoder.ts and openai-chat-stream-encoder.ts. */
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
  customToolsOf,
  decodeOpenAiError,
  decodeResponse,
  encodeOpenAiError,
  encodeResponse,
  errorIn200,
  isOpenAiErrorBody,
  usageFromOpenAi
} from "./openai-chat-answers.js"
import { ChatStreamDecoder } from "./openai-chat-stream-decoder.js"
import { ChatStreamEncoder } from "./openai-chat-stream-encoder.js"

// ---------------------------------------------------------------- requests

/** Where message `i` is, as errors name it (built only for an error: decoding a valid body names nothing). */
const messageAt = (i: number): string => `messages.${i}`

/** The content of message `i` as blocks, added to `out`. */
const pushContent = (out: Array<ContentBlock>, content: unknown, i: number): void => {
  if (content === null || content === undefined) return
  if (typeof content === "string") {
    if (content !== "") out.push({ type: "text", text: content })
    return
  }
  if (!Array.isArray(content)) {
    const where = messageAt(i)
    throw new RequestDecodeError(`${where}.content must be a string or an array of parts`, `${where}.content`)
  }
  for (let j = 0; j < content.length; j++) {
    const p = obj(content[j])
    const type = str(p?.["type"])
    if (type === "text" || type === "input_text" || type === "output_text") {
      out.push({ type: "text", text: str(p?.["text"]) ?? "" })
    } else if (type === "image_url") {
      const image = p?.["image_url"]
      const url = typeof image === "string" ? image : str(obj(image)?.["url"])
      if (!url) {
        const where = messageAt(i)
        throw new RequestDecodeError(`${where}.content.${j}.image_url.url is required`, `${where}.content`)
      }
      const detail = str(obj(image)?.["detail"])
      out.push({ type: "image", source: imageSourceFromUrl(url), ...(detail ? { detail } : {}) })
    } else if (type === "refusal") {
      out.push({ type: "text", text: str(p?.["refusal"]) ?? "" })
    }
    // input_audio and file parts have no canonical counterpart yet: left out.
  }
}

/** The content of message `i` as blocks; a string (the usual content) is one block in an array of its size. */
const contentBlocks = (content: unknown, i: number): Array<TextBlock | ImageBlock> => {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }]
  const out: Array<TextBlock | ImageBlock> = []
  pushContent(out, content, i)
  return out
}

const isText = (b: ContentBlock): b is TextBlock => b.type === "text"

/** The text blocks of a system (or developer) message's content. */
const systemBlocks = (content: unknown, i: number): Array<TextBlock> => {
  const blocks = contentBlocks(content, i)
  // A string's block (the usual system content) is text already.
  return typeof content === "string" ? (blocks as Array<TextBlock>) : blocks.filter(isText)
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

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * The chat body as a canonical request. It runs on every chat request: one pass over the
 * messages, and nothing built for what the body does not have (no error locations, no map of
 * tool-call names without tool calls, optional fields assigned only when present).
 */
const decodeRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model must be a non-empty string", "model")
  const rawMessages = body["messages"]
  if (!Array.isArray(rawMessages) || rawMessages.length === 0) {
    throw new RequestDecodeError("messages must be a non-empty array", "messages")
  }
  checkParams(body, CHAT_PARAMS)
  // The first system message's blocks, joined by any later one's (most bodies have one).
  let system: Array<TextBlock> | undefined
  const messages: Array<Message> = []
  // Tool-call ids to names, for tool results that name no tool (made at the first tool call).
  let callNames: Map<string, string> | undefined
  for (let i = 0; i < rawMessages.length; i++) {
    const m = obj(rawMessages[i])
    const role = str(m?.["role"])
    if (role === "system" || role === "developer") {
      const blocks = systemBlocks(m?.["content"], i)
      if (system === undefined) system = blocks
      else system.push(...blocks)
    } else if (role === "user") {
      messages.push({ role: "user", content: contentBlocks(m?.["content"], i) })
    } else if (role === "assistant") {
      const content: Array<ContentBlock> = []
      const reasoning = str(m?.["reasoning_content"]) ?? str(m?.["reasoning"])
      if (reasoning) content.push({ type: "reasoning", text: reasoning })
      pushContent(content, m?.["content"], i)
      for (const call of arr(m?.["tool_calls"])) {
        const c = obj(call)
        const custom = obj(c?.["custom"])
        const fn = obj(c?.["function"])
        const name = str(custom?.["name"]) ?? str(fn?.["name"])
        if (!name) {
          const where = messageAt(i)
          throw new RequestDecodeError(`${where}.tool_calls[].function.name is required`, `${where}.tool_calls`)
        }
        const { id, signature } = splitSignedId(str(c?.["id"]) ?? newId("call_"))
        ;(callNames ??= new Map()).set(id, name)
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
        ;(callNames ??= new Map()).set(id, str(legacy["name"])!)
        content.push({ type: "tool_use", id, name: str(legacy["name"])!, input: parseArguments(str(legacy["arguments"]) ?? "") })
      }
      messages.push({ role: "assistant", content })
    } else if (role === "tool" || role === "function") {
      const rawId = str(m?.["tool_call_id"])
      const id = rawId ? splitSignedId(rawId).id : undefined
      const name = str(m?.["name"]) ?? (id ? callNames?.get(id) : undefined)
      const toolUseId =
        id ?? (callNames ? [...callNames.entries()].reverse().find(([, n]) => n === name)?.[0] : undefined) ?? newId("call_")
      const result: ToolResultBlock = {
        type: "tool_result",
        toolUseId,
        ...(name ? { name } : {}),
        content: contentBlocks(m?.["content"], i)
      }
      const last = messages[messages.length - 1]
      if (last?.role === "tool") messages[messages.length - 1] = { role: "tool", content: [...last.content, result] }
      else messages.push({ role: "tool", content: [result] })
    } else {
      const where = messageAt(i)
      throw new RequestDecodeError(`${where}.role must be one of system, developer, user, assistant, tool`, `${where}.role`)
    }
  }

  const tools: Array<ToolDefinition> = []
  // listField refuses a `tools` that is not an array; absent (the usual case) there is nothing to read.
  const rawTools = body["tools"] === undefined || body["tools"] === null ? undefined : listField(body, "tools")
  if (rawTools !== undefined)
    for (const t of rawTools) {
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
  const functions = body["functions"]
  if (Array.isArray(functions))
    for (const f of functions) {
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
  const maxTokens = num(body["max_completion_tokens"]) ?? num(body["max_tokens"])
  const temperature = num(body["temperature"])
  const topP = num(body["top_p"])
  const topK = num(body["top_k"])
  const seed = num(body["seed"])
  const presencePenalty = num(body["presence_penalty"])
  const frequencyPenalty = num(body["frequency_penalty"])
  const user = str(body["user"])
  // Optional fields are assigned only when present, in this order (the order of the object's keys).
  const req: Mutable<Omit<CanonicalRequest, "stream">> & { stream?: boolean } = { model, system: system ?? [], messages, tools }
  if (toolChoice) req.toolChoice = toolChoice
  if (typeof body["parallel_tool_calls"] === "boolean") req.parallelToolCalls = body["parallel_tool_calls"]
  if (responseFormat) req.responseFormat = responseFormat
  if (maxTokens !== undefined) req.maxTokens = maxTokens
  if (temperature !== undefined) req.temperature = temperature
  if (topP !== undefined) req.topP = topP
  if (topK !== undefined) req.topK = topK
  if (typeof stop === "string") req.stop = [stop]
  else if (Array.isArray(stop)) req.stop = stop.filter((s): s is string => typeof s === "string")
  if (seed !== undefined) req.seed = seed
  if (presencePenalty !== undefined) req.presencePenalty = presencePenalty
  if (frequencyPenalty !== undefined) req.frequencyPenalty = frequencyPenalty
  if (effort === "none") req.reasoning = { enabled: false }
  else if (effort && EFFORTS.has(effort)) req.reasoning = { enabled: true, effort: effort as "minimal" | "low" | "medium" | "high" }
  req.stream = body["stream"] === true
  if (user) req.user = user
  return req as CanonicalRequest
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
