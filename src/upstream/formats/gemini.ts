/** The gemini wire format: requests here; responses, errors and streams in gemini-answers.ts. */
import { geminiJsonSchema } from "./structured.js"
import type {
  CanonicalRequest,
  Message,
  ResponseFormat,
  TextBlock,
  ToolChoice,
  ToolDefinition,
  ToolUseBlock
} from "../../domain/canonical.js"
import { answerProblem, arr, num, obj, repairToolHistory, resultText, str, tryJson } from "./common.js"
import { listField, RequestDecodeError, type WireFormat } from "./format.js"
import {
  array,
  boolean,
  checkParams,
  integer,
  number,
  object,
  type Param,
  params,
  requireParam,
  string,
  stringOrObject,
  strings
} from "./params.js"
import { isEmptyObjectSchema, sanitizeGeminiSchema } from "./gemini-schema.js"

/**
 * Google's documented value for a functionCall whose thought signature is unknown (history
 * written by another model, or by a client that dropped it): accepted instead of a 400.
 */
export const SKIP_SIGNATURE = "skip_thought_signature_validator"
import {
  GeminiStreamDecoder,
  GeminiStreamEncoder,
  decodeError,
  decodeResponse,
  encodeGeminiError,
  encodeResponse,
  errorIn200,
  isErrorBody,
  usageFromGemini,
  decodeParts
} from "./gemini-answers.js"

// ---------------------------------------------------------------- requests

const decodeToolChoice = (config: unknown): ToolChoice | undefined => {
  const fc = obj(obj(config)?.["functionCallingConfig"] ?? obj(config)?.["function_calling_config"])
  const mode = str(fc?.["mode"])?.toUpperCase()
  const allowed = arr(fc?.["allowedFunctionNames"] ?? fc?.["allowed_function_names"]).filter((n): n is string => typeof n === "string")
  if (mode === "NONE") return { type: "none" }
  if (mode === "ANY" || mode === "VALIDATED") return allowed.length === 1 ? { type: "tool", name: allowed[0]! } : { type: "required" }
  if (mode === "AUTO") return { type: "auto" }
  return undefined
}

/** Gemini reads each field in camelCase and in snake_case: both spellings are checked. */
const bothSpellings = (known: ReadonlyArray<Param>): ReadonlyArray<Param> =>
  known.flatMap((p) => {
    const snake = p.key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
    return snake === p.key ? [p] : [p, { ...p, key: snake }]
  })

/** The generateContent parameters whose values are checked (docs/formats.md); `contents` is required. */
const REQUEST_PARAMS = bothSpellings(
  params({ systemInstruction: stringOrObject, toolConfig: object, safetySettings: array, cachedContent: string, generationConfig: object })
)
const GENERATION_PARAMS = bothSpellings(
  params({
    temperature: number(0, 2),
    topP: number(0, 1),
    topK: integer(0),
    maxOutputTokens: integer(1),
    candidateCount: integer(1),
    stopSequences: strings,
    presencePenalty: number(-2, 2),
    frequencyPenalty: number(-2, 2),
    seed: integer(),
    responseMimeType: string,
    responseSchema: object,
    responseJsonSchema: object,
    responseModalities: array,
    responseLogprobs: boolean,
    logprobs: integer(0),
    thinkingConfig: object
  })
)
const THINKING_PARAMS = bothSpellings(params({ thinkingBudget: integer(-1), includeThoughts: boolean, thinkingLevel: string }))

const checkRequestParams = (body: Record<string, unknown>): void => {
  requireParam(body, "contents", array)
  checkParams(body, REQUEST_PARAMS)
  const gcKey = body["generationConfig"] != null ? "generationConfig" : "generation_config"
  const gc = obj(body[gcKey])
  if (!gc) return
  checkParams(gc, GENERATION_PARAMS, `${gcKey}.`)
  const tcKey = gc["thinkingConfig"] != null ? "thinkingConfig" : "thinking_config"
  const thinking = obj(gc[tcKey])
  if (thinking) checkParams(thinking, THINKING_PARAMS, `${gcKey}.${tcKey}.`)
}

const decodeRequest = (body: Record<string, unknown>): CanonicalRequest => {
  const model = str(body["model"])
  if (!model) throw new RequestDecodeError("model is required in the path (models/{model}:generateContent)", "model")
  checkRequestParams(body)
  const contents = body["contents"]
  const systemRaw = body["systemInstruction"] ?? body["system_instruction"]
  const system: Array<TextBlock> =
    typeof systemRaw === "string"
      ? [{ type: "text", text: systemRaw }]
      : arr(obj(systemRaw)?.["parts"]).flatMap((p) =>
          str(obj(p)?.["text"]) ? [{ type: "text" as const, text: str(obj(p)?.["text"])! }] : []
        )
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
    mime === "application/json"
      ? schema
        ? { type: "json_schema", name: "response", schema: lowerTypes(schema) }
        : { type: "json_object" }
      : undefined
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
  return ext === "png"
    ? "image/png"
    : ext === "gif"
      ? "image/gif"
      : ext === "webp"
        ? "image/webp"
        : ext === "pdf"
          ? "application/pdf"
          : "image/jpeg"
}

const resultPayload = (text: string, isError: boolean | undefined): Record<string, unknown> => {
  const parsed = tryJson(text)
  if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) && !isError) return parsed as Record<string, unknown>
  return isError ? { error: text } : { result: text }
}

const THINKING_BUDGET = { minimal: 512, low: 1024, medium: 8192, high: 24_576 } as const
/** The smallest budget every thinking Gemini model takes (Flash-Lite's minimum). */
const MIN_THINKING_BUDGET = 512

/**
 * The thinking budget for an effort level. Thoughts count toward `maxOutputTokens`: under a limit
 * the client set, the level's budget leaves a quarter of it (at least 1024) for the answer.
 */
const levelBudget = (effort: keyof typeof THINKING_BUDGET, maxTokens: number | undefined): number =>
  maxTokens === undefined
    ? THINKING_BUDGET[effort]
    : Math.max(MIN_THINKING_BUDGET, Math.min(THINKING_BUDGET[effort], maxTokens - Math.max(1024, Math.floor(maxTokens / 4))))

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
          if (m.role === "assistant" && b.signature && !b.encrypted && !b.redacted)
            parts.push({ text: b.text, thought: true, thoughtSignature: b.signature })
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
          return {
            name: t.name,
            ...(t.description ? { description: t.description } : {}),
            ...(isEmptyObjectSchema(parameters) ? {} : { parameters })
          }
        })
      }
    ]
  }
  if (req.toolChoice && req.tools.length > 0) {
    const tc = req.toolChoice
    body["toolConfig"] = {
      functionCallingConfig:
        tc.type === "tool"
          ? { mode: "ANY", allowedFunctionNames: [tc.name] }
          : { mode: tc.type === "required" ? "ANY" : tc.type === "none" ? "NONE" : "AUTO" }
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
    // JSON Schema itself (recursive $ref included), not the OpenAPI subset of responseSchema.
    gc["responseMimeType"] = "application/json"
    gc["responseJsonSchema"] = geminiJsonSchema(req.responseFormat.schema)
  }
  if (req.reasoning) {
    if (!req.reasoning.enabled) {
      // Pro models cannot turn thinking off; flash models take a zero budget.
      if (/flash/i.test(req.model)) gc["thinkingConfig"] = { thinkingBudget: 0 }
    } else {
      const budget = req.reasoning.budgetTokens ?? (req.reasoning.effort ? levelBudget(req.reasoning.effort, req.maxTokens) : undefined)
      gc["thinkingConfig"] = {
        includeThoughts: req.reasoning.includeThoughts !== false,
        ...(budget !== undefined ? { thinkingBudget: budget } : {})
      }
    }
  }
  if (Object.keys(gc).length > 0) body["generationConfig"] = gc
  return body
}

// ---------------------------------------------------------------- pass-through

/**
 * A functionCall without its thought signature (history from another model, or a client that
 * dropped it) gets Google's bypass value on the first call of the turn, as Gemini 3 requires.
 */
const passthroughBody = (body: Record<string, unknown>): Record<string, unknown> => {
  if (!Array.isArray(body["contents"])) return body
  let changed = false
  const contents = (body["contents"] as Array<unknown>).map((c) => {
    const co = obj(c)
    const parts = co?.["parts"]
    if (co?.["role"] !== "model" || !Array.isArray(parts)) return c
    const first = parts.findIndex((p) => obj(p)?.["functionCall"] !== undefined)
    if (first === -1 || obj(parts[first])?.["thoughtSignature"]) return c
    changed = true
    return { ...co, parts: parts.map((p, i) => (i === first ? { ...obj(p), thoughtSignature: SKIP_SIGNATURE } : p)) }
  })
  return changed ? { ...body, contents } : body
}

export const gemini: WireFormat = {
  id: "gemini",
  streamContentType: "text/event-stream; charset=utf-8",
  framing: "sse",
  decodeRequest,
  encodeRequest: encodeGeminiRequest,
  passthroughBody,
  // The no-thinking alias changes nothing in a Gemini body that passes through.
  withoutThinking: (body) => body,
  // A stream is asked for by the method (streamGenerateContent), not in the body.
  asStream: (body) => body,
  // Several candidates, log probabilities and grounding (search, code execution, URL context) have no canonical form.
  collectable: (body) => {
    const config = obj(body["generationConfig"])
    const count = config?.["candidateCount"]
    return (
      !(typeof count === "number" && count > 1) &&
      config?.["responseLogprobs"] !== true &&
      !(
        Array.isArray(body["tools"]) &&
        body["tools"].some((t) =>
          ["googleSearch", "google_search", "googleSearchRetrieval", "codeExecution", "code_execution", "urlContext", "url_context"].some(
            (k) => obj(t)?.[k] !== undefined
          )
        )
      )
    )
  },
  decodeResponse,
  encodeResponse,
  streamDecoder: () => new GeminiStreamDecoder(),
  streamEncoder: (ctx) => new GeminiStreamEncoder(ctx.model),
  encodeError: encodeGeminiError,
  decodeError,
  isErrorBody,
  errorIn200,
  // A prompt blocked before any candidate says so in promptFeedback instead.
  answerProblem: answerProblem(
    (b) => Array.isArray(b["candidates"]) || obj(b["promptFeedback"]) !== undefined,
    "a generateContent answer (no candidates)"
  ),
  usageOf: (frame) => (frame.data.includes("usageMetadata") ? usageFromGemini(obj(tryJson(frame.data))?.["usageMetadata"]) : undefined),
  usageOfResponse: (body) => usageFromGemini(obj(body)?.["usageMetadata"])
}

export { usageFromGemini, encodeGeminiError, GeminiStreamEncoder, JsonArrayFraming } from "./gemini-answers.js"
