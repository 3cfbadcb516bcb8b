/** The openai-responses wire format: requests here; responses and errors in openai-responses-answers.ts, streams encoded in openai-responses-stream.ts and decoded in openai-responses-stream-decoder.ts. */
import { strictSchema } from "./structured.js"
import {
  type CanonicalRequest,
  type ContentBlock,
  type Message,
  newId,
  parseArguments,
  type ResponseFormat,
  type TextBlock,
  type ToolChoice,
  type ToolDefinition
} from "../../domain/canonical.js"
import {
  answerProblem,
  arr,
  CUSTOM_TOOL_PARAMETERS,
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
import { encodeOpenAiError, decodeOpenAiError, isOpenAiErrorBody } from "./openai-chat.js"
import { array, boolean, checkParams, integer, number, object, params, string, stringOrArray, stringOrObject } from "./params.js"
import { ResponsesStreamEncoder } from "./openai-responses-stream.js"
import { ResponsesStreamDecoder } from "./openai-responses-stream-decoder.js"
import {
  decodeResponse,
  encodeResponsesResponse,
  failureOf,
  usageFromResponses,
  contentParts,
  reasoningText
} from "./openai-responses-answers.js"

// ---------------------------------------------------------------- requests

/** Flattens an input (string or items) into canonical messages, system text apart. */
export const decodeInput = (input: unknown, system: Array<TextBlock>): Array<Message> => {
  if (typeof input === "string") return input ? [{ role: "user", content: [{ type: "text", text: input }] }] : []
  if (input !== undefined && !Array.isArray(input)) throw new RequestDecodeError("input must be a string or an array of items", "input")
  const messages: Array<Message> = []
  const push = (role: Message["role"], block: ContentBlock) => {
    const last = messages[messages.length - 1]
    // Calls and reasoning join the assistant turn they belong to; results join one tool message.
    if (last && last.role === role && (role === "assistant" || role === "tool")) {
      messages[messages.length - 1] = { role, content: [...last.content, block] }
    } else messages.push({ role, content: [block] })
  }
  arr(input).forEach((raw, i) => {
    const item = obj(raw)
    if (!item) return
    const where = `input.${i}`
    const type = str(item["type"]) ?? "message"
    switch (type) {
      case "message": {
        const role = str(item["role"])
        const parts = contentParts(item["content"], where)
        if (role === "system" || role === "developer") system.push(...parts.filter((p): p is TextBlock => p.type === "text"))
        else if (role === "user") messages.push({ role: "user", content: parts })
        else if (role === "assistant") for (const p of parts) push("assistant", p)
        else throw new RequestDecodeError(`${where}.role must be user, assistant, system or developer`, `${where}.role`)
        break
      }
      case "function_call": {
        const { id, signature } = splitSignedId(str(item["call_id"]) ?? newId("call_"))
        push("assistant", {
          type: "tool_use",
          id,
          name: str(item["name"]) ?? "",
          input: parseArguments(str(item["arguments"]) ?? ""),
          ...(signature ? { signature } : {})
        })
        break
      }
      case "custom_tool_call": {
        const { id, signature } = splitSignedId(str(item["call_id"]) ?? newId("call_"))
        push("assistant", {
          type: "tool_use",
          id,
          name: str(item["name"]) ?? "",
          input: { input: str(item["input"]) ?? "" },
          ...(signature ? { signature } : {})
        })
        break
      }
      case "function_call_output":
      case "custom_tool_call_output": {
        const output = item["output"]
        const content = typeof output === "string" ? [{ type: "text" as const, text: output }] : contentParts(output, `${where}.output`)
        push("tool", { type: "tool_result", toolUseId: splitSignedId(str(item["call_id"]) ?? "").id, content })
        break
      }
      case "reasoning": {
        const encrypted = str(item["encrypted_content"])
        const itemId = str(item["id"])
        push("assistant", {
          type: "reasoning",
          text: reasoningText(item),
          ...(encrypted ? { encrypted } : {}),
          ...(itemId ? { itemId } : {})
        })
        break
      }
      // item_reference, web_search_call and other server-side items have no canonical form.
    }
  })
  return messages
}

export const decodeTools = (tools: unknown): { tools: Array<ToolDefinition>; custom: Set<string> } => {
  const out: Array<ToolDefinition> = []
  const custom = new Set<string>()
  for (const raw of arr(tools)) {
    const t = obj(raw)
    const type = str(t?.["type"])
    const name = str(t?.["name"])
    const description = str(t?.["description"])
    if (type === "function" && name) {
      const strict = t?.["strict"]
      out.push({
        name,
        ...(description ? { description } : {}),
        parameters: obj(t?.["parameters"]) ?? { type: "object", properties: {} },
        ...(typeof strict === "boolean" ? { strict } : {})
      })
    } else if (type === "custom" && name) {
      custom.add(name)
      out.push({ name, ...(description ? { description } : {}), parameters: CUSTOM_TOOL_PARAMETERS })
    }
    // namespace, web_search, file_search, local_shell, mcp: server-side tools without a canonical form.
  }
  return { tools: out, custom }
}

const decodeToolChoice = (v: unknown): ToolChoice | undefined => {
  if (v === "auto") return { type: "auto" }
  if (v === "none") return { type: "none" }
  if (v === "required") return { type: "required" }
  const name = str(obj(v)?.["name"])
  return name ? { type: "tool", name } : undefined
}

const decodeTextFormat = (text: unknown): ResponseFormat | undefined => {
  const f = obj(obj(text)?.["format"])
  switch (str(f?.["type"])) {
    case "json_object":
      return { type: "json_object" }
    case "json_schema": {
      const strict = f?.["strict"]
      return {
        type: "json_schema",
        name: str(f?.["name"]) ?? "response",
        schema: obj(f?.["schema"]) ?? {},
        ...(typeof strict === "boolean" ? { strict } : {})
      }
    }
    default:
      return undefined
  }
}

const EFFORTS = new Set(["minimal", "low", "medium", "high"])

/** The Responses parameters whose values are checked (docs/formats.md). */
const RESPONSES_PARAMS = params({
  input: stringOrArray,
  instructions: string,
  temperature: number(0, 2),
  top_p: number(0, 1),
  max_output_tokens: integer(1),
  max_tool_calls: integer(1),
  top_logprobs: integer(0, 20),
  stream: boolean,
  store: boolean,
  background: boolean,
  parallel_tool_calls: boolean,
  tool_choice: stringOrObject,
  reasoning: object,
  text: object,
  metadata: object,
  include: array,
  previous_response_id: string,
  truncation: string,
  user: string,
  safety_identifier: string,
  prompt_cache_key: string,
  service_tier: string,
  stream_options: object
})

export const decodeResponsesRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model must be a non-empty string", "model")
  checkParams(body, RESPONSES_PARAMS)
  const system: Array<TextBlock> = []
  const instructions = str(body["instructions"])
  if (instructions) system.push({ type: "text", text: instructions })
  const messages = decodeInput(body["input"], system)
  const { tools } = decodeTools(listField(body, "tools"))
  const reasoning = obj(body["reasoning"])
  const effort = str(reasoning?.["effort"])
  const toolChoice = decodeToolChoice(body["tool_choice"])
  const responseFormat = decodeTextFormat(body["text"])
  const maxTokens = num(body["max_output_tokens"])
  const user = str(body["user"]) ?? str(body["safety_identifier"])
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
    ...(effort === "none"
      ? { reasoning: { enabled: false } }
      : effort && EFFORTS.has(effort)
        ? {
            reasoning: {
              enabled: true,
              effort: effort as "minimal" | "low" | "medium" | "high",
              includeThoughts: reasoning?.["summary"] !== undefined
            }
          }
        : reasoning?.["summary"] !== undefined
          ? { reasoning: { enabled: true, includeThoughts: true } }
          : {}),
    stream: body["stream"] === true,
    ...(user ? { user } : {})
  }
}

export const encodeResponsesRequest = (req: CanonicalRequest, quirks?: ProviderQuirks): Record<string, unknown> => {
  const input: Array<Record<string, unknown>> = []
  for (const m of repairToolHistory(req.messages)) {
    if (m.role === "user") {
      input.push({
        type: "message",
        role: "user",
        content: m.content.flatMap(
          (b): Array<Record<string, unknown>> =>
            b.type === "text"
              ? [{ type: "input_text", text: b.text }]
              : b.type === "image"
                ? [{ type: "input_image", image_url: imageSourceToUrl(b.source), detail: b.detail ?? "auto" }]
                : []
        )
      })
    } else if (m.role === "assistant") {
      let text: Array<Record<string, unknown>> = []
      const flush = () => {
        if (text.length) input.push({ type: "message", role: "assistant", content: text })
        text = []
      }
      for (const b of m.content) {
        if (b.type === "text" && b.text) text.push({ type: "output_text", text: b.text, annotations: [] })
        else if (b.type === "reasoning" && b.encrypted) {
          // Only OpenAI's own reasoning (encrypted) can go back to an OpenAI upstream.
          flush()
          input.push({
            type: "reasoning",
            ...(b.itemId ? { id: b.itemId } : {}),
            summary: b.text ? [{ type: "summary_text", text: b.text }] : [],
            encrypted_content: b.encrypted
          })
        } else if (b.type === "tool_use") {
          flush()
          input.push({ type: "function_call", call_id: b.id, name: b.name, arguments: JSON.stringify(b.input ?? {}) })
        }
      }
      flush()
    } else {
      for (const r of m.content)
        if (r.type === "tool_result") input.push({ type: "function_call_output", call_id: r.toolUseId, output: resultText(r) })
    }
  }
  const body: Record<string, unknown> = { model: req.model, input }
  const instructions = req.system.map((b) => b.text).join("\n\n")
  if (instructions) body["instructions"] = instructions
  if (req.tools.length) {
    // Responses function tools default to strict: say false unless asked, or most schemas fail.
    body["tools"] = req.tools.map((t) => ({
      type: "function",
      name: t.name,
      ...(t.description ? { description: t.description } : {}),
      parameters: t.parameters,
      strict: t.strict ?? false
    }))
  }
  if (req.toolChoice && req.tools.length)
    body["tool_choice"] = req.toolChoice.type === "tool" ? { type: "function", name: req.toolChoice.name } : req.toolChoice.type
  if (req.parallelToolCalls !== undefined && req.tools.length) body["parallel_tool_calls"] = req.parallelToolCalls
  if (req.responseFormat) {
    const rf = req.responseFormat
    const strict = rf.type === "json_schema" && rf.strict === undefined && quirks?.strictSchemas ? strictSchema(rf.schema) : undefined
    body["text"] = {
      format:
        rf.type === "json_schema"
          ? {
              type: "json_schema",
              name: rf.name,
              schema: strict ?? rf.schema,
              ...(strict ? { strict: true } : rf.strict !== undefined ? { strict: rf.strict } : {})
            }
          : { type: rf.type }
    }
  }
  if (req.maxTokens !== undefined) body["max_output_tokens"] = req.maxTokens
  if (req.temperature !== undefined) body["temperature"] = req.temperature
  if (req.topP !== undefined) body["top_p"] = req.topP
  if (req.reasoning) {
    body["reasoning"] = req.reasoning.enabled
      ? { ...(req.reasoning.effort ? { effort: req.reasoning.effort } : {}), ...(req.reasoning.includeThoughts ? { summary: "auto" } : {}) }
      : { effort: "none" }
    if (req.reasoning.enabled) body["include"] = ["reasoning.encrypted_content"]
  }
  if (req.user) body["user"] = req.user
  body["store"] = false
  if (req.stream) body["stream"] = true
  return body
}

// ---------------------------------------------------------------- pass-through

/** An input item without client-side fields (and Codex's metadata, for servers other than OpenAI). */
const cleanInputItem = (item: unknown, compatible: boolean): unknown => {
  const o = obj(item)
  if (!o) return item
  const { parsed_arguments: _pa, internal_chat_message_metadata_passthrough: meta, ...kept } = o
  const dropMeta = compatible && meta !== undefined
  const content = Array.isArray(kept["content"])
    ? (kept["content"] as Array<unknown>).map((p) => (obj(p) && "parsed" in obj(p)! ? (({ parsed: _p, ...rest }) => rest)(obj(p)!) : p))
    : kept["content"]
  if (!("parsed_arguments" in o) && !dropMeta && content === kept["content"]) return item
  return {
    ...kept,
    ...(dropMeta ? {} : meta !== undefined ? { internal_chat_message_metadata_passthrough: meta } : {}),
    ...(content !== undefined ? { content } : {})
  }
}

/**
 * Items sent back from an earlier output can carry fields the SDK adds on the client side
 * (`parsed_arguments`, `parsed`); every Responses server rejects them. Fields only OpenAI's own
 * API knows go too, unless the upstream is that API (`openAiResponsesFields`).
 */
const passthroughBody = (body: Record<string, unknown>, quirks: ProviderQuirks): Record<string, unknown> => {
  const openAi = quirks.openAiResponsesFields === true
  const input = Array.isArray(body["input"])
    ? (body["input"] as Array<unknown>).map((item) => cleanInputItem(item, !openAi))
    : body["input"]
  if (openAi) return { ...body, input }
  const { client_metadata: _cm, prompt_cache_key: _pk, safety_identifier: _si, service_tier: _st, ...rest } = body
  return {
    ...rest,
    input,
    ...(Array.isArray(body["tools"]) ? { tools: (body["tools"] as Array<unknown>).filter((t) => obj(t)?.["type"] !== "namespace") } : {})
  }
}

/** Without `reasoning` (the no-thinking alias). */
const withoutThinking = (body: Record<string, unknown>): Record<string, unknown> => {
  const { reasoning: _r, ...rest } = body
  return rest
}

export const openAiResponses: WireFormat = {
  id: "openai-responses",
  streamContentType: "text/event-stream; charset=utf-8",
  framing: "sse",
  decodeRequest: decodeResponsesRequest,
  encodeRequest: encodeResponsesRequest,
  passthroughBody,
  withoutThinking,
  asStream: (body) => ({ ...body, stream: true }),
  // The stream's terminal event carries the whole response object (taken as it is); a background
  // response answers at once without one.
  collectable: (body) => body["background"] !== true,
  decodeResponse,
  encodeResponse: encodeResponsesResponse,
  streamDecoder: () => new ResponsesStreamDecoder(),
  streamEncoder: (ctx) => new ResponsesStreamEncoder(ctx.model, ctx.options),
  encodeError: encodeOpenAiError,
  decodeError: decodeOpenAiError,
  isErrorBody: isOpenAiErrorBody,
  /** A `failed` response, or one carrying an error. */
  errorIn200: (body) => {
    const b = obj(body)
    return b ? failureOf(b) : undefined
  },
  answerProblem: answerProblem((b) => Array.isArray(b["output"]), "a response (no output array)"),
  usageOf: (frame) => {
    if (!frame.data.includes('"response.completed"') && !frame.data.includes('"response.incomplete"')) return undefined
    return usageFromResponses(obj(obj(tryJson(frame.data))?.["response"])?.["usage"])
  },
  usageOfResponse: (body) => usageFromResponses(obj(body)?.["usage"])
}

export { usageFromResponses, failureOf, encodeResponsesResponse } from "./openai-responses-answers.js"
export { ResponsesStreamEncoder } from "./openai-responses-stream.js"
