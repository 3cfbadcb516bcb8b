import {
  type CanonicalError,
  type CanonicalRequest,
  type CanonicalResponse,
  type ContentBlock,
  type ErrorKind,
  errorKindForStatus,
  type Message,
  newId,
  parseArguments,
  type ResponseFormat,
  type StopReason,
  type StreamEvent,
  type TextBlock,
  type ToolChoice,
  type ToolDefinition,
  type ToolUseBlock,
  type Usage,
  stopWithCalls,
  wholeUsage
} from "./canonical.js"
import { arr, num, obj, repairToolHistory, resultText, str, tryJson } from "./common.js"
import { fallbackMessage } from "./common.js"
import { listField, RequestDecodeError, type StreamDecoder, type StreamEncoder, type WireFormat } from "./format.js"
import { sseData } from "./frames.js"
import { isEmptyObjectSchema, sanitizeGeminiSchema } from "./gemini-schema.js"

/**
 * Google's documented value for a functionCall whose thought signature is unknown (history
 * written by another model, or by a client that dropped it): accepted instead of a 400.
 */
export const SKIP_SIGNATURE = "skip_thought_signature_validator"

// ---------------------------------------------------------------- requests

const decodeParts = (parts: ReadonlyArray<unknown>, pendingCalls: Array<ToolUseBlock>, counter: { n: number }): Array<ContentBlock> => {
  const out: Array<ContentBlock> = []
  for (const raw of parts) {
    const p = obj(raw)
    if (!p) continue
    const signature = str(p["thoughtSignature"]) ?? str(p["thought_signature"])
    if (typeof p["text"] === "string") {
      const prev = out[out.length - 1]
      // A signature-only thought part (how the gateway streams one) signs the thought text before it.
      if (p["text"] === "" && signature && prev?.type === "reasoning" && !prev.signature) out[out.length - 1] = { ...prev, signature }
      else if (p["thought"] === true) out.push({ type: "reasoning", text: p["text"], ...(signature ? { signature } : {}) })
      else if (p["text"] !== "") out.push({ type: "text", text: p["text"] })
      else if (signature) out.push({ type: "reasoning", text: "", signature })
      continue
    }
    const inline = obj(p["inlineData"]) ?? obj(p["inline_data"])
    if (inline) {
      const mediaType = str(inline["mimeType"]) ?? str(inline["mime_type"]) ?? "application/octet-stream"
      if (mediaType.startsWith("image/")) out.push({ type: "image", source: { kind: "base64", mediaType, data: str(inline["data"]) ?? "" } })
      continue
    }
    const file = obj(p["fileData"]) ?? obj(p["file_data"])
    if (file) {
      const uri = str(file["fileUri"]) ?? str(file["file_uri"])
      if (uri) out.push({ type: "image", source: { kind: "url", url: uri } })
      continue
    }
    const call = obj(p["functionCall"]) ?? obj(p["function_call"])
    if (call) {
      const id = str(call["id"]) ?? `call_${counter.n++}`
      const block: ToolUseBlock = { type: "tool_use", id, name: str(call["name"]) ?? "", input: call["args"] ?? {}, ...(signature ? { signature } : {}) }
      pendingCalls.push(block)
      out.push(block)
      continue
    }
    const response = obj(p["functionResponse"]) ?? obj(p["function_response"])
    if (response) {
      const name = str(response["name"]) ?? ""
      const id = str(response["id"])
      // Results without ids answer the earliest open call of the same name.
      const match = id ? pendingCalls.find((c) => c.id === id) : pendingCalls.find((c) => c.name === name)
      if (match) pendingCalls.splice(pendingCalls.indexOf(match), 1)
      const payload = response["response"]
      const po = obj(payload)
      const text =
        po && Object.keys(po).length === 1 && typeof (po["result"] ?? po["output"] ?? po["content"]) === "string"
          ? ((po["result"] ?? po["output"] ?? po["content"]) as string)
          : JSON.stringify(payload ?? {})
      out.push({
        type: "tool_result",
        toolUseId: match?.id ?? id ?? `call_${counter.n++}`,
        name,
        content: [{ type: "text", text }],
        ...(po && "error" in po && Object.keys(po).length === 1 ? { isError: true } : {})
      })
    }
  }
  return out
}

const decodeToolChoice = (config: unknown): ToolChoice | undefined => {
  const fc = obj(obj(config)?.["functionCallingConfig"] ?? obj(config)?.["function_calling_config"])
  const mode = str(fc?.["mode"])?.toUpperCase()
  const allowed = arr(fc?.["allowedFunctionNames"] ?? fc?.["allowed_function_names"]).filter((n): n is string => typeof n === "string")
  if (mode === "NONE") return { type: "none" }
  if (mode === "ANY" || mode === "VALIDATED") return allowed.length === 1 ? { type: "tool", name: allowed[0]! } : { type: "required" }
  if (mode === "AUTO") return { type: "auto" }
  return undefined
}

const decodeRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model is required in the path (models/{model}:generateContent)", "model")
  const contents = body["contents"]
  if (contents !== undefined && !Array.isArray(contents)) throw new RequestDecodeError("contents must be an array", "contents")
  const systemRaw = body["systemInstruction"] ?? body["system_instruction"]
  const system: Array<TextBlock> =
    typeof systemRaw === "string"
      ? [{ type: "text", text: systemRaw }]
      : arr(obj(systemRaw)?.["parts"]).flatMap((p) => (str(obj(p)?.["text"]) ? [{ type: "text" as const, text: str(obj(p)?.["text"])! }] : []))
  const pending: Array<ToolUseBlock> = []
  const counter = { n: 0 }
  const messages: Array<Message> = []
  arr(contents).forEach((c, i) => {
    const co = obj(c)
    const role = str(co?.["role"]) ?? "user"
    const parts = co?.["parts"]
    if (!Array.isArray(parts)) throw new RequestDecodeError(`contents[${i}].parts must be an array`, `contents[${i}].parts`)
    const blocks = decodeParts(parts, pending, counter)
    if (role === "model") {
      messages.push({ role: "assistant", content: blocks })
    } else {
      const results = blocks.filter((b) => b.type === "tool_result")
      const rest = blocks.filter((b) => b.type !== "tool_result")
      if (results.length) messages.push({ role: "tool", content: results })
      if (rest.length) messages.push({ role: "user", content: rest })
    }
  })
  const tools: Array<ToolDefinition> = listField(body, "tools").flatMap((t) =>
    arr(obj(t)?.["functionDeclarations"] ?? obj(t)?.["function_declarations"]).flatMap((d) => {
      const fd = obj(d)
      const name = str(fd?.["name"])
      if (!name) return []
      const description = str(fd?.["description"])
      const parameters = obj(fd?.["parametersJsonSchema"]) ?? obj(fd?.["parameters_json_schema"]) ?? obj(fd?.["parameters"])
      return [{ name, ...(description ? { description } : {}), parameters: lowerTypes(parameters ?? { type: "object", properties: {} }) }]
    })
  )
  const gc = obj(body["generationConfig"]) ?? obj(body["generation_config"]) ?? {}
  const thinking = obj(gc["thinkingConfig"]) ?? obj(gc["thinking_config"])
  const budget = num(thinking?.["thinkingBudget"] ?? thinking?.["thinking_budget"])
  const level = str(thinking?.["thinkingLevel"] ?? thinking?.["thinking_level"])?.toLowerCase()
  const includeThoughts = (thinking?.["includeThoughts"] ?? thinking?.["include_thoughts"]) === true
  const mime = str(gc["responseMimeType"] ?? gc["response_mime_type"])
  const schema = obj(gc["responseJsonSchema"] ?? gc["response_json_schema"]) ?? obj(gc["responseSchema"] ?? gc["response_schema"])
  const responseFormat: ResponseFormat | undefined =
    mime === "application/json" ? (schema ? { type: "json_schema", name: "response", schema: lowerTypes(schema) } : { type: "json_object" }) : undefined
  const toolChoice = decodeToolChoice(body["toolConfig"] ?? body["tool_config"])
  const stop = arr(gc["stopSequences"] ?? gc["stop_sequences"]).filter((s): s is string => typeof s === "string")
  const maxTokens = num(gc["maxOutputTokens"] ?? gc["max_output_tokens"])
  return {
    model,
    system,
    messages,
    tools,
    ...(toolChoice ? { toolChoice } : {}),
    ...(responseFormat ? { responseFormat } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(num(gc["temperature"]) !== undefined ? { temperature: num(gc["temperature"])! } : {}),
    ...(num(gc["topP"] ?? gc["top_p"]) !== undefined ? { topP: num(gc["topP"] ?? gc["top_p"])! } : {}),
    ...(num(gc["topK"] ?? gc["top_k"]) !== undefined ? { topK: num(gc["topK"] ?? gc["top_k"])! } : {}),
    ...(stop.length ? { stop } : {}),
    ...(num(gc["seed"]) !== undefined ? { seed: num(gc["seed"])! } : {}),
    ...(num(gc["presencePenalty"]) !== undefined ? { presencePenalty: num(gc["presencePenalty"])! } : {}),
    ...(num(gc["frequencyPenalty"]) !== undefined ? { frequencyPenalty: num(gc["frequencyPenalty"])! } : {}),
    ...(thinking
      ? {
          reasoning:
            budget === 0
              ? { enabled: false }
              : {
                  enabled: true,
                  includeThoughts,
                  ...(budget !== undefined && budget > 0 ? { budgetTokens: budget } : {}),
                  ...(level === "low" || level === "medium" || level === "high" || level === "minimal" ? { effort: level } : {})
                }
        }
      : {}),
    stream: body["stream"] === true
  }
}

/** Gemini schemas may spell types in capitals (`OBJECT`); JSON Schema wants lower case. */
const lowerTypes = (schema: Record<string, unknown>): Record<string, unknown> => {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk)
    if (v === null || typeof v !== "object") return v
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, k === "type" && typeof x === "string" ? x.toLowerCase() : walk(x)])
    )
  }
  return walk(schema) as Record<string, unknown>
}

const guessMime = (url: string): string => {
  const ext = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(url)?.[1]?.toLowerCase()
  return ext === "png" ? "image/png" : ext === "gif" ? "image/gif" : ext === "webp" ? "image/webp" : ext === "pdf" ? "application/pdf" : "image/jpeg"
}

const resultPayload = (text: string, isError: boolean | undefined): Record<string, unknown> => {
  const parsed = tryJson(text)
  if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) && !isError) return parsed as Record<string, unknown>
  return isError ? { error: text } : { result: text }
}

const THINKING_BUDGET = { minimal: 512, low: 1024, medium: 8192, high: 24_576 } as const

export const encodeGeminiRequest = (req: CanonicalRequest): Record<string, unknown> => {
  const contents: Array<{ role: string; parts: Array<Record<string, unknown>> }> = []
  for (const m of repairToolHistory(req.messages)) {
    const parts: Array<Record<string, unknown>> = []
    let firstCall = true
    for (const b of m.content) {
      switch (b.type) {
        case "text":
          if (b.text !== "") parts.push({ text: b.text })
          break
        case "image":
          parts.push(
            b.source.kind === "base64"
              ? { inlineData: { mimeType: b.source.mediaType, data: b.source.data } }
              : { fileData: { mimeType: guessMime(b.source.url), fileUri: b.source.url } }
          )
          break
        case "reasoning":
          // Thoughts go back only with their signature (Gemini's own); others are dropped.
          if (m.role === "assistant" && b.signature && !b.encrypted && !b.redacted) parts.push({ text: b.text, thought: true, thoughtSignature: b.signature })
          break
        case "tool_use":
          parts.push({
            functionCall: { name: b.name, args: obj(b.input) ?? {} },
            // Only the first call of a step carries the signature; without one, the documented bypass.
            ...(b.signature ? { thoughtSignature: b.signature } : firstCall ? { thoughtSignature: SKIP_SIGNATURE } : {})
          })
          firstCall = false
          break
        case "tool_result":
          parts.push({ functionResponse: { name: b.name ?? "tool", response: resultPayload(resultText(b), b.isError) } })
          break
      }
    }
    if (parts.length === 0) continue
    const role = m.role === "assistant" ? "model" : "user"
    const last = contents[contents.length - 1]
    if (last && last.role === role) last.parts.push(...parts)
    else contents.push({ role, parts })
  }
  if (contents.length === 0) contents.push({ role: "user", parts: [{ text: " " }] })

  const body: Record<string, unknown> = { contents }
  const systemText = req.system.map((b) => b.text).join("\n\n")
  if (systemText) body["systemInstruction"] = { parts: [{ text: systemText }] }
  if (req.tools.length > 0) {
    body["tools"] = [
      {
        functionDeclarations: req.tools.map((t) => {
          const parameters = sanitizeGeminiSchema(t.parameters)
          return { name: t.name, ...(t.description ? { description: t.description } : {}), ...(isEmptyObjectSchema(parameters) ? {} : { parameters }) }
        })
      }
    ]
  }
  if (req.toolChoice && req.tools.length > 0) {
    const tc = req.toolChoice
    body["toolConfig"] = {
      functionCallingConfig:
        tc.type === "tool" ? { mode: "ANY", allowedFunctionNames: [tc.name] } : { mode: tc.type === "required" ? "ANY" : tc.type === "none" ? "NONE" : "AUTO" }
    }
  }
  const gc: Record<string, unknown> = {}
  if (req.maxTokens !== undefined) gc["maxOutputTokens"] = req.maxTokens
  if (req.temperature !== undefined) gc["temperature"] = req.temperature
  if (req.topP !== undefined) gc["topP"] = req.topP
  if (req.topK !== undefined) gc["topK"] = req.topK
  if (req.stop?.length) gc["stopSequences"] = req.stop.slice(0, 5)
  if (req.seed !== undefined) gc["seed"] = req.seed
  if (req.presencePenalty !== undefined) gc["presencePenalty"] = req.presencePenalty
  if (req.frequencyPenalty !== undefined) gc["frequencyPenalty"] = req.frequencyPenalty
  if (req.responseFormat?.type === "json_object") gc["responseMimeType"] = "application/json"
  if (req.responseFormat?.type === "json_schema") {
    gc["responseMimeType"] = "application/json"
    gc["responseSchema"] = sanitizeGeminiSchema(req.responseFormat.schema)
  }
  if (req.reasoning) {
    if (!req.reasoning.enabled) {
      // Pro models cannot turn thinking off; flash models take a zero budget.
      if (/flash/i.test(req.model)) gc["thinkingConfig"] = { thinkingBudget: 0 }
    } else {
      const budget = req.reasoning.budgetTokens ?? (req.reasoning.effort ? THINKING_BUDGET[req.reasoning.effort] : undefined)
      gc["thinkingConfig"] = { includeThoughts: req.reasoning.includeThoughts !== false, ...(budget !== undefined ? { thinkingBudget: budget } : {}) }
    }
  }
  if (Object.keys(gc).length > 0) body["generationConfig"] = gc
  return body
}

// ---------------------------------------------------------------- responses

const STOP_FROM: Record<string, StopReason> = {
  STOP: "end_turn",
  MAX_TOKENS: "max_tokens",
  SAFETY: "content_filter",
  RECITATION: "content_filter",
  PROHIBITED_CONTENT: "content_filter",
  BLOCKLIST: "content_filter",
  SPII: "content_filter",
  IMAGE_SAFETY: "content_filter",
  LANGUAGE: "content_filter"
}

const STOP_TO: Record<StopReason, string> = {
  end_turn: "STOP",
  stop_sequence: "STOP",
  tool_use: "STOP",
  max_tokens: "MAX_TOKENS",
  content_filter: "SAFETY",
  refusal: "SAFETY"
}

export const usageFromGemini = (u: unknown): Partial<Usage> | undefined => {
  const usage = obj(u)
  if (!usage) return undefined
  const prompt = num(usage["promptTokenCount"])
  const candidates = num(usage["candidatesTokenCount"])
  const thoughts = num(usage["thoughtsTokenCount"])
  const cached = num(usage["cachedContentTokenCount"])
  const toolPrompt = num(usage["toolUsePromptTokenCount"])
  if (prompt === undefined && candidates === undefined && thoughts === undefined) return undefined
  // Gemini counts thoughts apart from candidates; canonical output includes reasoning.
  return {
    inputTokens: (prompt ?? 0) + (toolPrompt ?? 0),
    outputTokens: (candidates ?? 0) + (thoughts ?? 0),
    ...(cached ? { cachedInputTokens: cached } : {}),
    ...(thoughts ? { reasoningTokens: thoughts } : {})
  }
}

const usageToGemini = (u: Partial<Usage> | undefined) => {
  if (!u) return undefined
  const thoughts = u.reasoningTokens ?? 0
  const input = u.inputTokens ?? 0
  const output = u.outputTokens ?? 0
  return {
    promptTokenCount: input,
    candidatesTokenCount: Math.max(0, output - thoughts),
    totalTokenCount: input + output,
    ...(thoughts ? { thoughtsTokenCount: thoughts } : {}),
    ...(u.cachedInputTokens ? { cachedContentTokenCount: u.cachedInputTokens } : {})
  }
}

const blockingFinish = (body: Record<string, unknown>): string | undefined => str(obj(body["promptFeedback"])?.["blockReason"])

const decodeResponse = (raw: unknown): CanonicalResponse => {
  const body = obj(raw) ?? {}
  const candidate = obj(arr(body["candidates"])[0]) ?? {}
  const content = decodeParts(arr(obj(candidate["content"])?.["parts"]), [], { n: 0 }).map((b) =>
    b.type === "tool_use" && /^call_\d+$/.test(b.id) ? { ...b, id: newId("call_") } : b
  )
  const finish = str(candidate["finishReason"])
  const usage = usageFromGemini(body["usageMetadata"])
  return {
    id: str(body["responseId"]) ?? newId("gen-"),
    model: str(body["modelVersion"]) ?? "",
    created: Math.floor(Date.now() / 1000),
    content,
    stopReason: stopWithCalls(blockingFinish(body) ? "content_filter" : STOP_FROM[finish ?? ""], content.some((b) => b.type === "tool_use")),
    ...(usage ? { usage: wholeUsage(usage) } : {})
  }
}

const encodePart = (b: ContentBlock): Record<string, unknown> | undefined => {
  switch (b.type) {
    case "text":
      return { text: b.text }
    case "reasoning":
      return { text: b.text, thought: true, ...(b.signature && !b.encrypted ? { thoughtSignature: b.signature } : {}) }
    case "tool_use":
      return { functionCall: { id: b.id, name: b.name, args: obj(b.input) ?? {} }, ...(b.signature ? { thoughtSignature: b.signature } : {}) }
    default:
      return undefined
  }
}

const encodeResponse = (res: CanonicalResponse, ctx: { readonly model: string }) => ({
  candidates: [
    {
      content: { role: "model", parts: res.content.flatMap((b) => encodePart(b) ?? []) },
      finishReason: STOP_TO[res.stopReason],
      index: 0
    }
  ],
  ...(res.usage ? { usageMetadata: usageToGemini(res.usage) } : {}),
  modelVersion: ctx.model,
  responseId: res.id
})

// ---------------------------------------------------------------- errors

const STATUS_BY_KIND: Record<ErrorKind, string> = {
  invalid_request: "INVALID_ARGUMENT",
  authentication: "UNAUTHENTICATED",
  permission: "PERMISSION_DENIED",
  not_found: "NOT_FOUND",
  too_large: "INVALID_ARGUMENT",
  rate_limit: "RESOURCE_EXHAUSTED",
  timeout: "DEADLINE_EXCEEDED",
  overloaded: "UNAVAILABLE",
  upstream: "INTERNAL",
  server: "INTERNAL"
}

export const encodeGeminiError = (e: CanonicalError) => ({
  error: { code: e.status, message: e.message, status: STATUS_BY_KIND[e.kind] }
})

const decodeError = (status: number, body: unknown, text: string): CanonicalError => {
  const e = obj(arr(body)[0] ?? body)?.["error"]
  const eo = obj(e)
  return {
    status,
    kind: errorKindForStatus(status),
    message: str(eo?.["message"]) ?? fallbackMessage(status, text),
    code: str(eo?.["status"]) ?? null
  }
}

// ---------------------------------------------------------------- streams

/** Gemini stream chunks (whole GenerateContentResponse objects) → canonical events. */
class GeminiStreamDecoder implements StreamDecoder {
  private started = false
  private open: { kind: "text" | "reasoning"; index: number } | undefined
  private next = 0
  private finish: string | undefined
  private blocked = false
  private sawTools = false
  private done = false

  push(frame: { data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    const parsed = tryJson(frame.data)
    const chunk = obj(Array.isArray(parsed) ? parsed[0] : parsed)
    if (!chunk) return []
    const out: Array<StreamEvent> = []
    if (chunk["error"]) {
      this.done = true
      const e = obj(chunk["error"]) ?? {}
      const status = num(e["code"]) ?? 500
      return [{ type: "error", error: { status, kind: errorKindForStatus(status), message: str(e["message"]) ?? "upstream error" } }]
    }
    if (!this.started) {
      this.started = true
      out.push({ type: "start", id: str(chunk["responseId"]) ?? newId("gen-"), model: str(chunk["modelVersion"]) ?? "", created: Math.floor(Date.now() / 1000) })
    }
    if (blockingFinish(chunk)) this.blocked = true
    const candidate = obj(arr(chunk["candidates"])[0])
    for (const raw of arr(obj(candidate?.["content"])?.["parts"])) {
      const p = obj(raw)
      if (!p) continue
      const signature = str(p["thoughtSignature"])
      const call = obj(p["functionCall"])
      if (call) {
        this.close(out)
        const index = this.next++
        this.sawTools = true
        out.push({ type: "block_start", index, block: { type: "tool_use", id: str(call["id"]) ?? newId("call_"), name: str(call["name"]) ?? "", ...(signature ? { signature } : {}) } })
        out.push({ type: "tool_args_delta", index, partialJson: JSON.stringify(call["args"] ?? {}) })
        out.push({ type: "block_stop", index })
        continue
      }
      if (typeof p["text"] === "string") {
        const kind = p["thought"] === true ? "reasoning" : "text"
        if (p["text"] !== "") {
          this.ensure(kind, out)
          out.push(kind === "text" ? { type: "text_delta", index: this.open!.index, text: p["text"] } : { type: "reasoning_delta", index: this.open!.index, text: p["text"] })
        }
        if (signature && kind === "reasoning") {
          this.ensure("reasoning", out)
          out.push({ type: "signature", index: this.open!.index, signature })
        }
      }
    }
    const finish = str(candidate?.["finishReason"])
    if (finish) this.finish = finish
    const usage = usageFromGemini(chunk["usageMetadata"])
    if (usage) out.push({ type: "usage", usage })
    return out
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    const out: Array<StreamEvent> = []
    if (!this.started) out.push({ type: "start", id: newId("gen-"), model: "", created: Math.floor(Date.now() / 1000) })
    this.close(out)
    const stopReason = stopWithCalls(this.blocked ? "content_filter" : STOP_FROM[this.finish ?? ""], this.sawTools)
    out.push({ type: "finish", stopReason })
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
    if (this.open) out.push({ type: "block_stop", index: this.open.index })
    this.open = undefined
  }
}

/** Canonical events → Gemini stream chunks (`data:` lines, alt=sse). Tool calls go out whole. */
class GeminiStreamEncoder implements StreamEncoder {
  private id = newId("gen-")
  private usage: Partial<Usage> | undefined
  private readonly tools = new Map<number, { id: string; name: string; signature?: string; args: string }>()
  private readonly reasoning = new Map<number, string>()

  constructor(private readonly model: string) {}

  private chunk(parts: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}): string {
    return sseData({
      candidates: [{ content: { role: "model", parts }, index: 0, ...extra }],
      ...(extra["finishReason"] && this.usage ? { usageMetadata: usageToGemini(this.usage) } : {}),
      modelVersion: this.model,
      responseId: this.id
    })
  }

  push(ev: StreamEvent): string {
    switch (ev.type) {
      case "start":
        if (ev.id) this.id = ev.id
        return ""
      case "block_start":
        if (ev.block.type === "tool_use") this.tools.set(ev.index, { id: ev.block.id, name: ev.block.name, args: "", ...(ev.block.signature ? { signature: ev.block.signature } : {}) })
        return ""
      case "text_delta":
        return ev.text ? this.chunk([{ text: ev.text }]) : ""
      case "reasoning_delta":
        return ev.text ? this.chunk([{ text: ev.text, thought: true }]) : ""
      case "signature":
        if (!ev.encrypted) this.reasoning.set(ev.index, ev.signature)
        return ""
      case "tool_args_delta": {
        const t = this.tools.get(ev.index)
        if (t) t.args += ev.partialJson
        return ""
      }
      case "block_stop": {
        const t = this.tools.get(ev.index)
        if (t) {
          this.tools.delete(ev.index)
          return this.chunk([{ functionCall: { id: t.id, name: t.name, args: obj(parseArguments(t.args)) ?? {} }, ...(t.signature ? { thoughtSignature: t.signature } : {}) }])
        }
        const signature = this.reasoning.get(ev.index)
        if (signature) {
          this.reasoning.delete(ev.index)
          return this.chunk([{ text: "", thought: true, thoughtSignature: signature }])
        }
        return ""
      }
      case "usage":
        this.usage = { ...this.usage, ...ev.usage }
        return ""
      case "finish":
        return this.chunk([{ text: "" }], { finishReason: STOP_TO[ev.stopReason] })
      case "error":
        return sseData(encodeGeminiError(ev.error))
    }
  }

  end(): string {
    return ""
  }
}

export const gemini: WireFormat = {
  id: "gemini",
  streamContentType: "text/event-stream; charset=utf-8",
  framing: "sse",
  decodeRequest,
  encodeRequest: encodeGeminiRequest,
  decodeResponse,
  encodeResponse,
  streamDecoder: () => new GeminiStreamDecoder(),
  streamEncoder: (ctx) => new GeminiStreamEncoder(ctx.model),
  encodeError: encodeGeminiError,
  decodeError,
  usageOf: (frame) => (frame.data.includes("usageMetadata") ? usageFromGemini(obj(tryJson(frame.data))?.["usageMetadata"]) : undefined),
  usageOfResponse: (body) => usageFromGemini(obj(body)?.["usageMetadata"])
}
