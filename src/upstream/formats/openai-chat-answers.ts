/** openai-chat whole answers and errors: decoded and encoded (the requests are in openai-chat.ts, the streams in openai-chat-stream-decoder.ts and openai-chat-stream-encoder.ts). */
import {
  type CanonicalError,
  type CanonicalResponse,
  type ContentBlock,
  type ErrorKind,
  errorKindForStatus,
  newId,
  parseArguments,
  type StopReason,
  type TextBlock,
  type Usage,
  stopWithCalls,
  wholeUsage
} from "../../domain/canonical.js"
import { arr, customToolInput, idWithSignature, nowSeconds, num, obj, str } from "./common.js"
import { fallbackMessage, messageIn200 } from "./common.js"

// ---------------------------------------------------------------- responses

export const STOP_FROM: Record<string, StopReason> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  function_call: "tool_use",
  content_filter: "content_filter"
}

export const STOP_TO: Record<StopReason, string> = {
  end_turn: "stop",
  stop_sequence: "stop",
  max_tokens: "length",
  tool_use: "tool_calls",
  content_filter: "content_filter",
  refusal: "content_filter"
}

/** An OpenAI usage object, read with one API's field names (chat completions' or Responses'). */
/** The usage fields of an OpenAI answer's family: its token counts and their `_details` objects. */
export interface OpenAiUsageFields {
  readonly input: string
  readonly output: string
  readonly inputDetails: string
  readonly outputDetails: string
}

/** One object with the fields that are there (a usage is read once per answer: no spreads of conditional objects). */
export const openAiUsage = (u: unknown, fields: OpenAiUsageFields): Partial<Usage> | undefined => {
  const usage = obj(u)
  if (!usage) return undefined
  const input = num(usage[fields.input])
  const output = num(usage[fields.output])
  if (input === undefined && output === undefined) return undefined
  const cached = num(obj(usage[fields.inputDetails])?.["cached_tokens"])
  const reasoning = num(obj(usage[fields.outputDetails])?.["reasoning_tokens"])
  const out: { -readonly [K in keyof Usage]?: Usage[K] } = {}
  if (input !== undefined) out.inputTokens = input
  if (output !== undefined) out.outputTokens = output
  if (cached) out.cachedInputTokens = cached
  if (reasoning) out.reasoningTokens = reasoning
  return out
}

const CHAT_USAGE: OpenAiUsageFields = {
  input: "prompt_tokens",
  output: "completion_tokens",
  inputDetails: "prompt_tokens_details",
  outputDetails: "completion_tokens_details"
}
export const usageFromOpenAi = (u: unknown): Partial<Usage> | undefined => openAiUsage(u, CHAT_USAGE)

export const usageToOpenAi = (u: Usage | undefined) =>
  u === undefined
    ? undefined
    : {
        prompt_tokens: u.inputTokens,
        completion_tokens: u.outputTokens,
        total_tokens: u.inputTokens + u.outputTokens,
        ...(u.cachedInputTokens !== undefined ? { prompt_tokens_details: { cached_tokens: u.cachedInputTokens } } : {}),
        ...(u.reasoningTokens !== undefined ? { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } } : {})
      }

export const decodeResponse = (raw: unknown): CanonicalResponse => {
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
export const customToolsOf = (options: Readonly<Record<string, unknown>> | undefined): ReadonlySet<string> =>
  (options?.["customTools"] as ReadonlySet<string> | undefined) ?? new Set()

export const encodeResponse = (
  res: CanonicalResponse,
  ctx: { readonly model: string; readonly options?: Readonly<Record<string, unknown>> }
) => {
  const text = res.content
    .filter((b): b is TextBlock => b.type === "text")
    .map((b) => b.text)
    .join("")
  const reasoning = res.content.flatMap((b) => (b.type === "reasoning" && b.text ? [b.text] : [])).join("")
  const custom = customToolsOf(ctx.options)
  const calls = res.content.flatMap(
    (b): Array<Record<string, unknown>> =>
      b.type !== "tool_use"
        ? []
        : custom.has(b.name)
          ? [
              {
                id: idWithSignature(b.id, b.signature),
                type: "custom",
                custom: { name: b.name, input: customToolInput(JSON.stringify(b.input ?? {})) }
              }
            ]
          : [
              {
                id: idWithSignature(b.id, b.signature),
                type: "function",
                function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) }
              }
            ]
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
          refusal: null,
          // As OpenAI's own answers carry them (URL citations of web search; none here).
          annotations: []
        },
        logprobs: null,
        finish_reason: STOP_TO[res.stopReason]
      }
    ],
    ...(res.usage ? { usage: usageToOpenAi(res.usage) } : {})
  }
}

// ---------------------------------------------------------------- errors

export const TYPE_BY_KIND: Record<ErrorKind, string> = {
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

/** An OpenAI error object (`{error: {...}}`), as chat completions and the Responses API answer it. */
export const isOpenAiErrorBody = (body: unknown): boolean => obj(obj(body)?.["error"]) !== undefined

/** A 200 with an `error` and no `choices`. */
export const errorIn200 = (body: unknown): CanonicalError | undefined => {
  const b = obj(body)
  return b?.["error"] && !Array.isArray(b["choices"]) ? { status: 502, kind: "upstream", message: messageIn200(b["error"]) } : undefined
}
