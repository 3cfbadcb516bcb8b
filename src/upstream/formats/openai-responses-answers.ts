/** openai-responses: whole responses and errors (streams in openai-responses-stream.ts (encoded) and openai-responses-stream-decoder.ts, requests in openai-responses.ts). */
import {
  type CanonicalError,
  type CanonicalResponse,
  type ContentBlock,
  errorKindForStatus,
  type ImageBlock,
  newId,
  parseArguments,
  type StopReason,
  type TextBlock,
  type Usage,
  stopWithCalls,
  wholeUsage
} from "../../domain/canonical.js"
import { arr, customToolInput, idWithSignature, imageSourceFromUrl, num, obj, str } from "./common.js"
import { RequestDecodeError } from "./format.js"
import { openAiUsage, type OpenAiUsageFields } from "./openai-chat-answers.js"

// ---------------------------------------------------------------- content (requests and responses)

export const contentParts = (content: unknown, where: string): Array<TextBlock | ImageBlock> => {
  if (typeof content === "string") return content ? [{ type: "text", text: content }] : []
  if (!Array.isArray(content)) throw new RequestDecodeError(`${where}.content must be a string or an array`, `${where}.content`)
  return content.flatMap((raw): Array<TextBlock | ImageBlock> => {
    const p = obj(raw)
    switch (str(p?.["type"])) {
      case "input_text":
      case "output_text":
      case "text":
        return [{ type: "text", text: str(p?.["text"]) ?? "" }]
      case "refusal":
        return [{ type: "text", text: str(p?.["refusal"]) ?? "" }]
      case "input_image": {
        const url = str(p?.["image_url"]) ?? str(obj(p?.["image_url"])?.["url"])
        const detail = str(p?.["detail"])
        return url ? [{ type: "image", source: imageSourceFromUrl(url), ...(detail ? { detail } : {}) }] : []
      }
      default:
        return []
    }
  })
}

export const reasoningText = (item: Record<string, unknown>): string =>
  [...arr(item["summary"]), ...arr(item["content"])].map((s) => str(obj(s)?.["text"]) ?? "").join("")

// ---------------------------------------------------------------- responses

const RESPONSES_USAGE: OpenAiUsageFields = {
  input: "input_tokens",
  output: "output_tokens",
  inputDetails: "input_tokens_details",
  outputDetails: "output_tokens_details"
}
export const usageFromResponses = (u: unknown): Partial<Usage> | undefined => openAiUsage(u, RESPONSES_USAGE)

export const usageToResponses = (u: Partial<Usage> | undefined) =>
  u === undefined
    ? null
    : {
        input_tokens: u.inputTokens ?? 0,
        input_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0 },
        output_tokens: u.outputTokens ?? 0,
        output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
        total_tokens: (u.inputTokens ?? 0) + (u.outputTokens ?? 0)
      }

export const decodeOutputItem = (item: Record<string, unknown>): Array<ContentBlock> => {
  switch (str(item["type"])) {
    case "message":
      return contentParts(item["content"] ?? [], "output")
    case "function_call":
      return [
        {
          type: "tool_use",
          id: str(item["call_id"]) ?? newId("call_"),
          name: str(item["name"]) ?? "",
          input: parseArguments(str(item["arguments"]) ?? "")
        }
      ]
    case "custom_tool_call":
      return [
        {
          type: "tool_use",
          id: str(item["call_id"]) ?? newId("call_"),
          name: str(item["name"]) ?? "",
          input: { input: str(item["input"]) ?? "" }
        }
      ]
    case "reasoning": {
      const encrypted = str(item["encrypted_content"])
      const itemId = str(item["id"])
      return [{ type: "reasoning", text: reasoningText(item), ...(encrypted ? { encrypted } : {}), ...(itemId ? { itemId } : {}) }]
    }
    default:
      return []
  }
}

export const stopOf = (body: Record<string, unknown>, hasCalls: boolean): StopReason => {
  const reason = str(obj(body["incomplete_details"])?.["reason"])
  return stopWithCalls(reason === "max_output_tokens" ? "max_tokens" : reason === "content_filter" ? "content_filter" : undefined, hasCalls)
}

/** A `failed` response (or one carrying an error) is an error, never an empty success. */
export const failureOf = (body: Record<string, unknown>): CanonicalError | undefined => {
  const error = obj(body["error"])
  if (str(body["status"]) !== "failed" && !error) return undefined
  const code = str(error?.["code"])
  const status =
    code === "rate_limit_exceeded"
      ? 429
      : code === "invalid_prompt" || code === "invalid_request_error"
        ? 400
        : code === "server_error"
          ? 500
          : 502
  return {
    status,
    kind: errorKindForStatus(status),
    message: str(error?.["message"]) ?? "the upstream response failed",
    code: code ?? null
  }
}

export const decodeResponse = (raw: unknown): CanonicalResponse => {
  const body = obj(raw) ?? {}
  const content = arr(body["output"]).flatMap((i) => (obj(i) ? decodeOutputItem(obj(i)!) : []))
  const usage = usageFromResponses(body["usage"])
  return {
    id: str(body["id"]) ?? newId("resp_"),
    model: str(body["model"]) ?? "",
    created: num(body["created_at"]) ?? Math.floor(Date.now() / 1000),
    content,
    stopReason: stopOf(
      body,
      content.some((b) => b.type === "tool_use")
    ),
    ...(usage ? { usage: wholeUsage(usage) } : {})
  }
}

/** Options of the client request that shape the answer object. */
export interface ResponsesEchoOptions {
  readonly customTools?: ReadonlySet<string>
  readonly request?: Record<string, unknown>
}

export const toolItem = (id: string, name: string, args: string, custom: boolean, status: "in_progress" | "completed", itemId: string) =>
  custom
    ? { id: itemId, type: "custom_tool_call", status, call_id: id, name, input: customToolInput(args) }
    : { id: itemId, type: "function_call", status, call_id: id, name, arguments: args }

/** A Responses response. Streamed as SSE, it is written member by member instead (`responseJson` in openai-responses-stream.ts): a key added here goes there too. */
export const responseObject = (
  id: string,
  created: number,
  model: string,
  status: "in_progress" | "completed" | "incomplete" | "failed",
  output: ReadonlyArray<unknown>,
  usage: Partial<Usage> | undefined,
  options: ResponsesEchoOptions,
  extra: Record<string, unknown> = {}
) => {
  const req = options.request ?? {}
  return {
    id,
    object: "response",
    created_at: created,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: req["instructions"] ?? null,
    max_output_tokens: req["max_output_tokens"] ?? null,
    model,
    output,
    parallel_tool_calls: req["parallel_tool_calls"] ?? true,
    previous_response_id: req["previous_response_id"] ?? null,
    reasoning: { effort: obj(req["reasoning"])?.["effort"] ?? null, summary: obj(req["reasoning"])?.["summary"] ?? null },
    store: req["store"] ?? false,
    temperature: req["temperature"] ?? null,
    text: req["text"] ?? { format: { type: "text" } },
    tool_choice: req["tool_choice"] ?? "auto",
    tools: req["tools"] ?? [],
    top_p: req["top_p"] ?? null,
    truncation: "disabled",
    usage: status === "in_progress" ? null : usageToResponses(usage),
    metadata: req["metadata"] ?? {},
    ...extra
  }
}

export const encodeOutput = (content: ReadonlyArray<ContentBlock>, custom: ReadonlySet<string>): Array<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  let text: Array<Record<string, unknown>> = []
  const flush = () => {
    if (text.length) out.push({ id: newId("msg_"), type: "message", status: "completed", role: "assistant", content: text })
    text = []
  }
  for (const b of content) {
    if (b.type === "text") text.push({ type: "output_text", text: b.text, annotations: [], logprobs: [] })
    else if (b.type === "reasoning") {
      flush()
      out.push({
        id: b.itemId ?? newId("rs_"),
        type: "reasoning",
        summary: b.text ? [{ type: "summary_text", text: b.text }] : [],
        ...(b.encrypted ? { encrypted_content: b.encrypted } : {})
      })
    } else if (b.type === "tool_use") {
      flush()
      out.push(
        toolItem(idWithSignature(b.id, b.signature), b.name, JSON.stringify(b.input ?? {}), custom.has(b.name), "completed", newId("fc_"))
      )
    }
  }
  flush()
  return out
}

export const echoOptions = (o: Readonly<Record<string, unknown>> | undefined): ResponsesEchoOptions => ({
  customTools: (o?.["customTools"] as ReadonlySet<string> | undefined) ?? new Set(),
  request: (o?.["request"] as Record<string, unknown> | undefined) ?? {}
})

export const encodeResponsesResponse = (
  res: CanonicalResponse,
  ctx: { readonly model: string; readonly options?: Readonly<Record<string, unknown>> }
) => {
  const options = echoOptions(ctx.options)
  const incomplete = res.stopReason === "max_tokens" || res.stopReason === "content_filter"
  return responseObject(
    res.id.startsWith("resp_") ? res.id : `resp_${res.id}`,
    res.created,
    ctx.model,
    incomplete ? "incomplete" : "completed",
    encodeOutput(res.content, options.customTools ?? new Set()),
    res.usage,
    options,
    incomplete ? { incomplete_details: { reason: res.stopReason === "max_tokens" ? "max_output_tokens" : "content_filter" } } : {}
  )
}
