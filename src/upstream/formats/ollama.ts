import {
  type CanonicalError,
  type CanonicalRequest,
  type CanonicalResponse,
  type ContentBlock,
  errorKindForStatus,
  type ImageBlock,
  type Message,
  newId,
  parseArguments,
  type ResponseFormat,
  type StopReason,
  type StreamEvent,
  type TextBlock,
  type ToolDefinition,
  type ToolUseBlock,
  type Usage,
  stopWithCalls
} from "../../domain/canonical.js"
import { arr, num, obj, repairToolHistory, resultText, str, tryJson } from "./common.js"
import { answerProblem, fallbackMessage, malformedStream } from "./common.js"
import { listField, RequestDecodeError, SequentialBlocks, type StreamDecoder, type StreamEncoder, type WireFormat } from "./format.js"
import { array, boolean, checkParams, either, integer, number, object, params, string, stringOrObject, stringOrStrings } from "./params.js"
import { ndjsonLine } from "./frames.js"

// ---------------------------------------------------------------- requests

/** Ollama images are bare base64; the media type is read from the magic bytes. */
const mediaTypeOf = (b64: string): string => {
  const head = Buffer.from(b64.slice(0, 24), "base64")
  if (head[0] === 0x89 && head[1] === 0x50) return "image/png"
  if (head[0] === 0xff && head[1] === 0xd8) return "image/jpeg"
  if (head[0] === 0x47 && head[1] === 0x49) return "image/gif"
  if (head.subarray(8, 12).toString("ascii") === "WEBP") return "image/webp"
  return "image/png"
}

const images = (v: unknown): Array<ImageBlock> =>
  arr(v).flatMap((i) =>
    typeof i === "string" && i ? [{ type: "image" as const, source: { kind: "base64" as const, mediaType: mediaTypeOf(i), data: i } }] : []
  )

const decodeFormat = (v: unknown): ResponseFormat | undefined =>
  v === "json" ? { type: "json_object" } : obj(v) ? { type: "json_schema", name: "response", schema: obj(v)! } : undefined

/** `think`: true/false, or an effort level for models that take one. */
const decodeThink = (v: unknown): { reasoning?: CanonicalRequest["reasoning"] } =>
  v === true
    ? { reasoning: { enabled: true, includeThoughts: true } }
    : v === false
      ? { reasoning: { enabled: false } }
      : v === "low" || v === "medium" || v === "high"
        ? { reasoning: { enabled: true, includeThoughts: true, effort: v } }
        : {}

/** The parameters of /api/chat and /api/generate whose values are checked (docs/formats.md). */
const COMMON_PARAMS = {
  stream: boolean,
  think: either(boolean, string),
  format: stringOrObject,
  options: object,
  keep_alive: either(string, number())
}
const CHAT_PARAMS = params(COMMON_PARAMS)
const GENERATE_PARAMS = params({
  ...COMMON_PARAMS,
  prompt: string,
  system: string,
  suffix: string,
  template: string,
  raw: boolean,
  images: array,
  context: array
})
/** `options`, the model parameters (also taken by /api/embed). */
export const OPTIONS_PARAMS = params({
  temperature: number(0),
  top_p: number(0, 1),
  min_p: number(0, 1),
  top_k: integer(0),
  num_predict: integer(),
  num_ctx: integer(1),
  seed: integer(),
  stop: stringOrStrings,
  presence_penalty: number(),
  frequency_penalty: number(),
  repeat_penalty: number(),
  repeat_last_n: integer()
})

const checkOllamaParams = (body: Record<string, unknown>, known: typeof CHAT_PARAMS): void => {
  checkParams(body, known)
  const options = obj(body["options"])
  if (options) checkParams(options, OPTIONS_PARAMS, "options.")
}

const decodeOptions = (body: Record<string, unknown>) => {
  const o = obj(body["options"]) ?? {}
  const stop = o["stop"]
  const maxTokens = num(o["num_predict"])
  return {
    ...(maxTokens !== undefined && maxTokens > 0 ? { maxTokens } : {}),
    ...(num(o["temperature"]) !== undefined ? { temperature: num(o["temperature"])! } : {}),
    ...(num(o["top_p"]) !== undefined ? { topP: num(o["top_p"])! } : {}),
    ...(num(o["top_k"]) !== undefined ? { topK: num(o["top_k"])! } : {}),
    ...(typeof stop === "string"
      ? { stop: [stop] }
      : Array.isArray(stop)
        ? { stop: stop.filter((s): s is string => typeof s === "string") }
        : {}),
    ...(num(o["seed"]) !== undefined ? { seed: num(o["seed"])! } : {}),
    ...(num(o["presence_penalty"]) !== undefined ? { presencePenalty: num(o["presence_penalty"])! } : {}),
    ...(num(o["frequency_penalty"]) !== undefined ? { frequencyPenalty: num(o["frequency_penalty"])! } : {})
  }
}

const decodeTools = (v: unknown): Array<ToolDefinition> =>
  arr(v).flatMap((t) => {
    const fn = obj(obj(t)?.["function"])
    const name = str(fn?.["name"])
    if (!name) return []
    const description = str(fn?.["description"])
    return [{ name, ...(description ? { description } : {}), parameters: obj(fn?.["parameters"]) ?? { type: "object", properties: {} } }]
  })

const decodeChatRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model is required", "model")
  const raw = body["messages"]
  if (raw !== undefined && !Array.isArray(raw)) throw new RequestDecodeError("messages must be an array", "messages")
  checkOllamaParams(body, CHAT_PARAMS)
  const system: Array<TextBlock> = []
  const messages: Array<Message> = []
  const open: Array<ToolUseBlock> = []
  arr(raw).forEach((r, i) => {
    const m = obj(r)
    const role = str(m?.["role"])
    const content = str(m?.["content"]) ?? ""
    if (role === "system") {
      if (content) system.push({ type: "text", text: content })
    } else if (role === "user") {
      messages.push({ role: "user", content: [...(content ? [{ type: "text" as const, text: content }] : []), ...images(m?.["images"])] })
    } else if (role === "assistant") {
      const blocks: Array<ContentBlock> = []
      const thinking = str(m?.["thinking"])
      if (thinking) blocks.push({ type: "reasoning", text: thinking })
      if (content) blocks.push({ type: "text", text: content })
      for (const c of arr(m?.["tool_calls"])) {
        const fn = obj(obj(c)?.["function"])
        const args = fn?.["arguments"]
        const call: ToolUseBlock = {
          type: "tool_use",
          id: str(obj(c)?.["id"]) ?? newId("call_"),
          name: str(fn?.["name"]) ?? "",
          input: typeof args === "string" ? parseArguments(args) : (args ?? {})
        }
        open.push(call)
        blocks.push(call)
      }
      messages.push({ role: "assistant", content: blocks })
    } else if (role === "tool") {
      // Ollama results name the tool (`tool_name`); they answer the earliest open call of it.
      const name = str(m?.["tool_name"]) ?? str(m?.["name"])
      const id = str(m?.["tool_call_id"])
      const match = open.find((c) => (id ? c.id === id : name ? c.name === name : true))
      if (match) open.splice(open.indexOf(match), 1)
      const result = {
        type: "tool_result" as const,
        toolUseId: match?.id ?? id ?? newId("call_"),
        ...((name ?? match?.name) ? { name: name ?? match!.name } : {}),
        content: [{ type: "text" as const, text: content }]
      }
      const last = messages[messages.length - 1]
      if (last?.role === "tool") messages[messages.length - 1] = { role: "tool", content: [...last.content, result] }
      else messages.push({ role: "tool", content: [result] })
    } else {
      throw new RequestDecodeError(`messages[${i}].role must be system, user, assistant or tool`, `messages[${i}].role`)
    }
  })
  const format = decodeFormat(body["format"])
  return {
    model,
    system,
    messages,
    tools: decodeTools(listField(body, "tools")),
    ...(format ? { responseFormat: format } : {}),
    ...decodeOptions(body),
    ...decodeThink(body["think"]),
    // Ollama streams unless told not to.
    stream: body["stream"] !== false
  }
}

/** `/api/generate`: a prompt (and optional system) instead of messages. */
export const decodeGenerateRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model is required", "model")
  checkOllamaParams(body, GENERATE_PARAMS)
  const prompt = str(body["prompt"]) ?? ""
  const system = str(body["system"])
  const format = decodeFormat(body["format"])
  return {
    model,
    system: system ? [{ type: "text", text: system }] : [],
    messages:
      prompt || body["images"]
        ? [{ role: "user", content: [...(prompt ? [{ type: "text" as const, text: prompt }] : []), ...images(body["images"])] }]
        : [],
    tools: [],
    ...(format ? { responseFormat: format } : {}),
    ...decodeOptions(body),
    ...decodeThink(body["think"]),
    stream: body["stream"] !== false
  }
}

export const encodeOllamaRequest = (req: CanonicalRequest): Record<string, unknown> => {
  const messages: Array<Record<string, unknown>> = []
  const systemText = req.system.map((b) => b.text).join("\n\n")
  if (systemText) messages.push({ role: "system", content: systemText })
  for (const m of repairToolHistory(req.messages)) {
    if (m.role === "tool") {
      for (const r of m.content)
        if (r.type === "tool_result") messages.push({ role: "tool", content: resultText(r), ...(r.name ? { tool_name: r.name } : {}) })
      continue
    }
    const text = m.content
      .filter((b): b is TextBlock => b.type === "text")
      .map((b) => b.text)
      .join("")
    const imgs = m.content.flatMap((b) => (b.type === "image" && b.source.kind === "base64" ? [b.source.data] : []))
    const calls = m.content.flatMap((b) => (b.type === "tool_use" ? [{ function: { name: b.name, arguments: obj(b.input) ?? {} } }] : []))
    const thinking = m.content.flatMap((b) => (b.type === "reasoning" && b.text ? [b.text] : [])).join("")
    messages.push({
      role: m.role,
      content: text,
      ...(imgs.length ? { images: imgs } : {}),
      ...(m.role === "assistant" && thinking ? { thinking } : {}),
      ...(calls.length ? { tool_calls: calls } : {})
    })
  }
  const options: Record<string, unknown> = {}
  if (req.maxTokens !== undefined) options["num_predict"] = req.maxTokens
  if (req.temperature !== undefined) options["temperature"] = req.temperature
  if (req.topP !== undefined) options["top_p"] = req.topP
  if (req.topK !== undefined) options["top_k"] = req.topK
  if (req.stop?.length) options["stop"] = req.stop
  if (req.seed !== undefined) options["seed"] = req.seed
  if (req.presencePenalty !== undefined) options["presence_penalty"] = req.presencePenalty
  if (req.frequencyPenalty !== undefined) options["frequency_penalty"] = req.frequencyPenalty
  return {
    model: req.model,
    messages,
    stream: req.stream,
    ...(req.tools.length
      ? {
          tools: req.tools.map((t) => ({
            type: "function",
            function: { name: t.name, description: t.description ?? "", parameters: t.parameters }
          }))
        }
      : {}),
    ...(req.responseFormat?.type === "json_object"
      ? { format: "json" }
      : req.responseFormat?.type === "json_schema"
        ? { format: req.responseFormat.schema }
        : {}),
    ...(Object.keys(options).length ? { options } : {}),
    ...(req.reasoning
      ? {
          think: req.reasoning.enabled ? (req.reasoning.effort && req.reasoning.effort !== "minimal" ? req.reasoning.effort : true) : false
        }
      : {})
  }
}

// ---------------------------------------------------------------- responses

const usageFromOllama = (body: Record<string, unknown>): Partial<Usage> | undefined => {
  const input = num(body["prompt_eval_count"])
  const output = num(body["eval_count"])
  if (input === undefined && output === undefined) return undefined
  return { inputTokens: input ?? 0, outputTokens: output ?? 0 }
}

const stopFrom = (reason: string | undefined, calls: boolean): StopReason =>
  stopWithCalls(reason === "length" ? "max_tokens" : undefined, calls)

const decodeResponse = (raw: unknown): CanonicalResponse => {
  const body = obj(raw) ?? {}
  const message = obj(body["message"])
  const content: Array<ContentBlock> = []
  const thinking = str(message?.["thinking"]) ?? str(body["thinking"])
  if (thinking) content.push({ type: "reasoning", text: thinking })
  const text = str(message?.["content"]) ?? str(body["response"])
  if (text) content.push({ type: "text", text })
  for (const c of arr(message?.["tool_calls"])) {
    const fn = obj(obj(c)?.["function"])
    const args = fn?.["arguments"]
    content.push({
      type: "tool_use",
      id: str(obj(c)?.["id"]) ?? newId("call_"),
      name: str(fn?.["name"]) ?? "",
      input: typeof args === "string" ? parseArguments(args) : (args ?? {})
    })
  }
  const usage = usageFromOllama(body)
  return {
    id: newId("ollama-"),
    model: str(body["model"]) ?? "",
    created: Math.floor(Date.now() / 1000),
    content,
    stopReason: stopFrom(
      str(body["done_reason"]),
      content.some((b) => b.type === "tool_use")
    ),
    ...(usage ? { usage: { inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0 } } : {})
  }
}

const timing = (usage: Partial<Usage> | undefined, started: number) => {
  const total = Math.max(1, Date.now() - started) * 1_000_000
  return {
    total_duration: total,
    load_duration: 0,
    prompt_eval_count: usage?.inputTokens ?? 0,
    prompt_eval_duration: 0,
    eval_count: usage?.outputTokens ?? 0,
    eval_duration: total
  }
}

/** The calls of an answer, each with its position (`function.index`), as Ollama writes parallel calls. */
const toolCallsOf = (blocks: ReadonlyArray<ContentBlock>) =>
  blocks
    .filter((b): b is Extract<ContentBlock, { type: "tool_use" }> => b.type === "tool_use")
    .map((b, index) => ({ id: b.id, function: { index, name: b.name, arguments: obj(b.input) ?? {} } }))

/** `mode: "generate"` answers `/api/generate` (`response` instead of `message`). */
export const encodeOllamaResponse = (res: CanonicalResponse, ctx: { readonly model: string }, mode: "chat" | "generate" = "chat") => {
  const text = res.content
    .filter((b): b is TextBlock => b.type === "text")
    .map((b) => b.text)
    .join("")
  const thinking = res.content.flatMap((b) => (b.type === "reasoning" && b.text ? [b.text] : [])).join("")
  const calls = toolCallsOf(res.content)
  const base = { model: ctx.model, created_at: new Date().toISOString() }
  const tail = { done: true, done_reason: res.stopReason === "max_tokens" ? "length" : "stop", ...timing(res.usage, Date.now()) }
  return mode === "generate"
    ? { ...base, response: text, ...(thinking ? { thinking } : {}), ...tail }
    : {
        ...base,
        message: { role: "assistant", content: text, ...(thinking ? { thinking } : {}), ...(calls.length ? { tool_calls: calls } : {}) },
        ...tail
      }
}

// ---------------------------------------------------------------- errors

export const encodeOllamaError = (e: CanonicalError) => ({ error: e.message })

const decodeError = (status: number, body: unknown, text: string): CanonicalError => {
  const e = obj(body)?.["error"]
  return {
    status,
    kind: errorKindForStatus(status),
    message: typeof e === "string" ? e : (str(obj(e)?.["message"]) ?? fallbackMessage(status, text))
  }
}

// ---------------------------------------------------------------- streams

/** NDJSON chunks → canonical events. Tool calls arrive whole. */
class OllamaStreamDecoder extends SequentialBlocks implements StreamDecoder {
  private started = false
  private sawTools = false
  private done = false
  /** A line of this format came (`message`, `response` or `done`). */
  private recognized = false

  push(frame: { data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    const chunk = obj(tryJson(frame.data))
    if (!chunk) return []
    if (typeof chunk["error"] === "string") {
      this.done = true
      return [{ type: "error", error: { status: 500, kind: "upstream", message: chunk["error"] } }]
    }
    if (!this.recognized)
      this.recognized = obj(chunk["message"]) !== undefined || typeof chunk["response"] === "string" || typeof chunk["done"] === "boolean"
    const out: Array<StreamEvent> = []
    if (!this.started) {
      this.started = true
      out.push({ type: "start", id: newId("ollama-"), model: str(chunk["model"]) ?? "", created: Math.floor(Date.now() / 1000) })
    }
    const message = obj(chunk["message"])
    const thinking = str(message?.["thinking"]) ?? str(chunk["thinking"])
    if (thinking) {
      this.ensure("reasoning", out)
      out.push({ type: "reasoning_delta", index: this.open!.index, text: thinking })
    }
    const text = str(message?.["content"]) ?? str(chunk["response"])
    if (text) {
      this.ensure("text", out)
      out.push({ type: "text_delta", index: this.open!.index, text })
    }
    for (const c of arr(message?.["tool_calls"])) {
      const fn = obj(obj(c)?.["function"])
      this.close(out)
      const index = this.next++
      this.sawTools = true
      const args = fn?.["arguments"]
      out.push({
        type: "block_start",
        index,
        block: { type: "tool_use", id: str(obj(c)?.["id"]) ?? newId("call_"), name: str(fn?.["name"]) ?? "" }
      })
      out.push({ type: "tool_args_delta", index, partialJson: typeof args === "string" ? args : JSON.stringify(args ?? {}) })
      out.push({ type: "block_stop", index })
    }
    if (chunk["done"] === true) {
      this.done = true
      this.close(out)
      const usage = usageFromOllama(chunk)
      if (usage) out.push({ type: "usage", usage })
      out.push({ type: "finish", stopReason: stopFrom(str(chunk["done_reason"]), this.sawTools) })
    }
    return out
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    if (!this.recognized) return [malformedStream("Ollama chat line")]
    return [
      {
        type: "error",
        error: { status: 502, kind: "upstream", message: "upstream stream ended before its final (done) line", code: "stream_interrupted" }
      }
    ]
  }
}

/** Canonical events → NDJSON lines; `generate` mode writes `response` instead of `message`. */
export class OllamaStreamEncoder implements StreamEncoder {
  private usage: Partial<Usage> | undefined
  private readonly started = Date.now()
  private readonly tools = new Map<number, { id: string; name: string; args: string }>()

  constructor(
    private readonly model: string,
    private readonly mode: "chat" | "generate" = "chat"
  ) {}

  private line(fields: { content?: string; thinking?: string; tool_calls?: unknown }): string {
    const base = { model: this.model, created_at: new Date().toISOString() }
    if (this.mode === "generate") {
      return ndjsonLine({ ...base, response: fields.content ?? "", ...(fields.thinking ? { thinking: fields.thinking } : {}), done: false })
    }
    return ndjsonLine({
      ...base,
      message: {
        role: "assistant",
        content: fields.content ?? "",
        ...(fields.thinking ? { thinking: fields.thinking } : {}),
        ...(fields.tool_calls ? { tool_calls: fields.tool_calls } : {})
      },
      done: false
    })
  }

  push(ev: StreamEvent): string {
    switch (ev.type) {
      case "text_delta":
        return ev.text ? this.line({ content: ev.text }) : ""
      case "reasoning_delta":
        return ev.text ? this.line({ thinking: ev.text }) : ""
      case "block_start":
        if (ev.block.type === "tool_use") this.tools.set(ev.index, { id: ev.block.id, name: ev.block.name, args: "" })
        return ""
      case "tool_args_delta": {
        const t = this.tools.get(ev.index)
        if (t) t.args += ev.partialJson
        return ""
      }
      case "block_stop": {
        const t = this.tools.get(ev.index)
        if (!t || this.mode === "generate") return ""
        this.tools.delete(ev.index)
        return this.line({ tool_calls: [{ id: t.id, function: { name: t.name, arguments: obj(parseArguments(t.args)) ?? {} } }] })
      }
      case "usage":
        this.usage = { ...this.usage, ...ev.usage }
        return ""
      case "finish": {
        const base = { model: this.model, created_at: new Date().toISOString() }
        const tail = { done: true, done_reason: ev.stopReason === "max_tokens" ? "length" : "stop", ...timing(this.usage, this.started) }
        return ndjsonLine(
          this.mode === "generate" ? { ...base, response: "", ...tail } : { ...base, message: { role: "assistant", content: "" }, ...tail }
        )
      }
      case "error":
        return ndjsonLine(encodeOllamaError(ev.error))
      default:
        return ""
    }
  }

  end(): string {
    return ""
  }
}

export const ollama: WireFormat = {
  id: "ollama",
  streamContentType: "application/x-ndjson",
  framing: "ndjson",
  decodeRequest: decodeChatRequest,
  encodeRequest: encodeOllamaRequest,
  passthroughBody: (body) => body,
  withoutThinking: (body) => body,
  asStream: (body) => ({ ...body, stream: true }),
  collectable: () => true,
  decodeResponse,
  encodeResponse: (res, ctx) => encodeOllamaResponse(res, ctx, "chat"),
  streamDecoder: () => new OllamaStreamDecoder(),
  streamEncoder: (ctx) => new OllamaStreamEncoder(ctx.model, ctx.options?.["mode"] === "generate" ? "generate" : "chat"),
  encodeError: encodeOllamaError,
  decodeError,
  /** Ollama's errors are `{error: "text"}`. */
  isErrorBody: (body) => typeof obj(body)?.["error"] === "string",
  errorIn200: (body) => {
    const error = obj(body)?.["error"]
    return typeof error === "string" ? { status: 502, kind: "upstream", message: error } : undefined
  },
  // /api/chat answers a message; /api/generate a response text.
  answerProblem: answerProblem((b) => obj(b["message"]) !== undefined || typeof b["response"] === "string", "a chat answer (no message)"),
  usageOf: (frame) => (frame.data.includes('"done":true') ? usageFromOllama(obj(tryJson(frame.data)) ?? {}) : undefined),
  usageOfResponse: (body) => usageFromOllama(obj(body) ?? {})
}
