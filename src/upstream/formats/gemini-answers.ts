/** gemini: responses, errors and streams (the requests are in gemini.ts). */
import {
  type CanonicalError,
  type CanonicalResponse,
  type ContentBlock,
  type ErrorKind,
  errorKindForStatus,
  newId,
  parseArguments,
  type StopReason,
  type StreamEvent,
  type ToolUseBlock,
  type Usage,
  stopWithCalls,
  wholeUsage
} from "../../domain/canonical.js"
import { arr, malformedStream, num, obj, str, tryJson } from "./common.js"
import { fallbackMessage, messageIn200 } from "./common.js"
import { SequentialBlocks, type StreamDecoder, type StreamEncoder } from "./format.js"
import { sseData } from "./frames.js"
import { JsonReader, READER_PAUSE, TextTemplate } from "./json-reader.js"

/**
 * Google's documented value for a functionCall whose thought signature is unknown (history
 * written by another model, or by a client that dropped it): accepted instead of a 400.
 */
export const SKIP_SIGNATURE = "skip_thought_signature_validator"

// ---------------------------------------------------------------- content (requests and responses)

export const decodeParts = (
  parts: ReadonlyArray<unknown>,
  pendingCalls: Array<ToolUseBlock>,
  counter: { n: number }
): Array<ContentBlock> => {
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
      if (mediaType.startsWith("image/"))
        out.push({ type: "image", source: { kind: "base64", mediaType, data: str(inline["data"]) ?? "" } })
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
      const block: ToolUseBlock = {
        type: "tool_use",
        id,
        name: str(call["name"]) ?? "",
        input: call["args"] ?? {},
        ...(signature ? { signature } : {})
      }
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

// ---------------------------------------------------------------- responses

export const STOP_FROM: Record<string, StopReason> = {
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

export const STOP_TO: Record<StopReason, string> = {
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
  return usageFromCounts(prompt, candidates, thoughts, cached, toolPrompt)
}

/** Usage from the counts of a `usageMetadata` (each absent when it is not a finite number). */
const usageFromCounts = (
  prompt: number | undefined,
  candidates: number | undefined,
  thoughts: number | undefined,
  cached: number | undefined,
  toolPrompt: number | undefined
): Partial<Usage> | undefined => {
  if (prompt === undefined && candidates === undefined && thoughts === undefined) return undefined
  // Gemini counts thoughts apart from candidates; canonical output includes reasoning.
  return {
    inputTokens: (prompt ?? 0) + (toolPrompt ?? 0),
    outputTokens: (candidates ?? 0) + (thoughts ?? 0),
    ...(cached ? { cachedInputTokens: cached } : {}),
    ...(thoughts ? { reasoningTokens: thoughts } : {})
  }
}

export const usageToGemini = (u: Partial<Usage> | undefined) => {
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

export const blockingFinish = (body: Record<string, unknown>): string | undefined => str(obj(body["promptFeedback"])?.["blockReason"])

export const decodeResponse = (raw: unknown): CanonicalResponse => {
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
    stopReason: stopWithCalls(
      blockingFinish(body) ? "content_filter" : STOP_FROM[finish ?? ""],
      content.some((b) => b.type === "tool_use")
    ),
    ...(usage ? { usage: wholeUsage(usage) } : {})
  }
}

export const encodePart = (b: ContentBlock): Record<string, unknown> | undefined => {
  switch (b.type) {
    case "text":
      return { text: b.text }
    case "reasoning":
      return { text: b.text, thought: true, ...(b.signature && !b.encrypted ? { thoughtSignature: b.signature } : {}) }
    case "tool_use":
      return {
        functionCall: { id: b.id, name: b.name, args: obj(b.input) ?? {} },
        ...(b.signature ? { thoughtSignature: b.signature } : {})
      }
    default:
      return undefined
  }
}

export const encodeResponse = (res: CanonicalResponse, ctx: { readonly model: string }) => ({
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

export const STATUS_BY_KIND: Record<ErrorKind, string> = {
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

export const decodeError = (status: number, body: unknown, text: string): CanonicalError => {
  const e = obj(arr(body)[0] ?? body)?.["error"]
  const eo = obj(e)
  return {
    status,
    kind: errorKindForStatus(status),
    message: str(eo?.["message"]) ?? fallbackMessage(status, text),
    code: str(eo?.["status"]) ?? null
  }
}

/** A Google error object (`{error: {...}}`). */
export const isErrorBody = (body: unknown): boolean => obj(obj(body)?.["error"]) !== undefined

/** A 200 with an `error`: its `code` is the status Google meant. */
export const errorIn200 = (body: unknown): CanonicalError | undefined => {
  const b = obj(body)
  return b?.["error"]
    ? { status: (obj(b["error"])?.["code"] as number | undefined) ?? 502, kind: "upstream", message: messageIn200(b["error"]) }
    : undefined
}

// ---------------------------------------------------------------- streams

const chunkReader = new JsonReader()

/** The counts of the last `usageMetadata` read by `textOnlyChunk` (undefined: absent). */
const counts = {
  prompt: undefined as number | undefined,
  candidates: undefined as number | undefined,
  thoughts: undefined as number | undefined,
  cached: undefined as number | undefined,
  toolPrompt: undefined as number | undefined,
  /** Whether the chunk had a `usageMetadata` object. */
  present: false
}

/**
 * The text of a chunk that carries nothing else the decoder reads (json-reader.ts): one
 * candidate with one part, plain text (no thought, signature or call), no `finishReason`, no
 * `error` or `promptFeedback`; its `usageMetadata`'s counts in `counts`. The chunk's other keys
 * (responseId, modelVersion) are only read from the first chunk. Undefined for any other chunk
 * (it is parsed in full).
 */
const textOnlyChunk = (data: string): string | undefined => {
  const r = chunkReader.reset(data)
  let text: string | undefined
  counts.present = false
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("candidates")) {
      if (text !== undefined || !r.array() || !r.element(true)) return undefined
      text = textOnlyCandidate(r)
      // Candidates after the first are not read.
      for (let more = r.element(false); more; more = r.element(false)) r.skip()
    } else if (r.isKey("usageMetadata")) {
      if (counts.present || !readCounts(r)) return undefined
    } else if (r.isKey("error") || r.isKey("promptFeedback")) return undefined
    else r.skip()
  }
  return r.done() ? text : undefined
}

/** The text of a candidate whose content is one plain text part, without a finishReason. */
const textOnlyCandidate = (r: JsonReader): string | undefined => {
  let text: string | undefined
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("content")) {
      if (text !== undefined || !r.object()) return undefined
      for (let f = true; r.member(f); f = false) {
        if (r.isKey("parts")) {
          if (text !== undefined || !r.array() || !r.element(true)) return undefined
          text = textOnlyPart(r)
          if (text === undefined || r.element(false)) return undefined
        } else r.skip()
      }
    } else if (r.isKey("finishReason")) r.null()
    else r.skip()
  }
  return r.failed ? undefined : text
}

/** The text of a part that is plain text (no `thought`, `thoughtSignature` or `functionCall`). */
const textOnlyPart = (r: JsonReader): string | undefined => {
  let text: string | undefined
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("text")) {
      if (text !== undefined) return undefined
      text = r.string()
    } else if (r.isKey("thought") || r.isKey("thoughtSignature") || r.isKey("functionCall")) return undefined
    else r.skip()
  }
  return r.failed ? undefined : text
}

/** Reads a `usageMetadata` object into `counts` (false: not one whose counts are plain numbers). */
const readCounts = (r: JsonReader): boolean => {
  counts.present = true
  counts.prompt = counts.candidates = counts.thoughts = counts.cached = counts.toolPrompt = undefined
  if (!r.object()) return false
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("promptTokenCount")) {
      if (counts.prompt !== undefined) return false
      counts.prompt = finiteCount(r)
    } else if (r.isKey("candidatesTokenCount")) {
      if (counts.candidates !== undefined) return false
      counts.candidates = finiteCount(r)
    } else if (r.isKey("thoughtsTokenCount")) {
      if (counts.thoughts !== undefined) return false
      counts.thoughts = finiteCount(r)
    } else if (r.isKey("cachedContentTokenCount")) {
      if (counts.cached !== undefined) return false
      counts.cached = finiteCount(r)
    } else if (r.isKey("toolUsePromptTokenCount")) {
      if (counts.toolPrompt !== undefined) return false
      counts.toolPrompt = finiteCount(r)
    } else r.skip()
  }
  return !r.failed
}

/** A count that is a finite number (anything else fails the reading: left to JSON.parse). */
const finiteCount = (r: JsonReader): number | undefined => {
  const n = r.number()
  if (Number.isFinite(n)) return n
  r.fail()
  return undefined
}

/** Gemini stream chunks (whole GenerateContentResponse objects) → canonical events. */
export class GeminiStreamDecoder extends SequentialBlocks implements StreamDecoder {
  private started = false
  private finish: string | undefined
  private blocked = false
  private sawTools = false
  private done = false
  /** A chunk of this format came (`candidates`, `usageMetadata`, `promptFeedback`): a stream without one is no answer. */
  private recognized = false

  push(frame: { data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    if (this.started) {
      // The stream's usual chunk, read without JSON.parse (the same events as below).
      const text = this.usualText(frame.data)
      if (text !== undefined) {
        this.recognized = true
        // A text block already open (every chunk but the first): its events as an array literal,
        // not an empty array grown by pushes (its first push allocates room for 17).
        if (text !== "" && this.open?.kind === "text") {
          const delta: StreamEvent = { type: "text_delta", index: this.open.index, text }
          return this.usualUsage ? [delta, { type: "usage", usage: this.usualUsage }] : [delta]
        }
        const out: Array<StreamEvent> = []
        if (text !== "") {
          this.ensure("text", out)
          out.push({ type: "text_delta", index: this.open!.index, text })
        }
        if (this.usualUsage) out.push({ type: "usage", usage: this.usualUsage })
        return out
      }
    }
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
    if (!this.recognized)
      this.recognized =
        Array.isArray(chunk["candidates"]) || obj(chunk["usageMetadata"]) !== undefined || obj(chunk["promptFeedback"]) !== undefined
    if (!this.started) {
      this.started = true
      out.push({
        type: "start",
        id: str(chunk["responseId"]) ?? newId("gen-"),
        model: str(chunk["modelVersion"]) ?? "",
        created: Math.floor(Date.now() / 1000)
      })
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
        out.push({
          type: "block_start",
          index,
          block: {
            type: "tool_use",
            id: str(call["id"]) ?? newId("call_"),
            name: str(call["name"]) ?? "",
            ...(signature ? { signature } : {})
          }
        })
        out.push({ type: "tool_args_delta", index, partialJson: JSON.stringify(call["args"] ?? {}) })
        out.push({ type: "block_stop", index })
        continue
      }
      if (typeof p["text"] === "string") {
        const kind = p["thought"] === true ? "reasoning" : "text"
        if (p["text"] !== "") {
          this.ensure(kind, out)
          out.push(
            kind === "text"
              ? { type: "text_delta", index: this.open!.index, text: p["text"] }
              : { type: "reasoning_delta", index: this.open!.index, text: p["text"] }
          )
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

  /**
   * The usual chunk's bytes around its text and the usage they carry (the same bytes, the same
   * counts), the usage of the chunk read last, and how many chunks go to JSON.parse before the
   * reader tries again.
   */
  private readonly template = new TextTemplate()
  private templateUsage: Partial<Usage> | undefined

  /** The usage every usual chunk carries (one object, the template's): `push` follows its text with it. */
  get textUsage(): Partial<Usage> | undefined {
    return this.templateUsage
  }

  /**
   * The usual chunk read in place from a run of frames (StreamDecoder, `textFrameOf`): `push`
   * would answer its text, then a usage event of `textUsage` when there is one.
   */
  textFrameAt(frames: string, from: number, crlf: boolean): number {
    const end = this.textFrameOf(this.template, !this.done && this.started, frames, from, crlf)
    if (end === -1) return -1
    this.recognized = true
    this.usualUsage = this.templateUsage
    return end
  }
  private usualUsage: Partial<Usage> | undefined
  private readerPause = 0

  /** The text of a chunk that carries nothing else (`textOnlyChunk`), its usage in `usualUsage`; else undefined. */
  private usualText(data: string): string | undefined {
    const known = this.template.text(data)
    if (known !== undefined) {
      this.usualUsage = this.templateUsage
      return known
    }
    if (this.readerPause > 0) {
      this.readerPause--
      return undefined
    }
    const text = textOnlyChunk(data)
    if (text === undefined) {
      this.readerPause = READER_PAUSE
      return undefined
    }
    this.usualUsage = counts.present
      ? usageFromCounts(counts.prompt, counts.candidates, counts.thoughts, counts.cached, counts.toolPrompt)
      : undefined
    if (this.template.learn(data, chunkReader)) this.templateUsage = this.usualUsage
    return text
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    if (!this.recognized) return [malformedStream("generateContent chunk")]
    const out: Array<StreamEvent> = []
    if (!this.started) out.push({ type: "start", id: newId("gen-"), model: "", created: Math.floor(Date.now() / 1000) })
    this.close(out)
    const stopReason = stopWithCalls(this.blocked ? "content_filter" : STOP_FROM[this.finish ?? ""], this.sawTools)
    out.push({ type: "finish", stopReason })
    return out
  }
}

/**
 * The elements of a Gemini stream read without `alt=sse`: one JSON array written as it grows,
 * `[` before the first chunk, `\r\n,` between chunks, `\r\n]` at the end (Google's own framing).
 */
export class JsonArrayFraming {
  private started = false
  private closed = false

  /** One chunk's JSON as the array's next element ("" once the array is closed). */
  element(json: string): string {
    if (this.closed) return ""
    const prefix = this.started ? "\r\n," : "["
    this.started = true
    return prefix + json
  }

  /** The array's end (`[]` when nothing was written); "" once closed. */
  close(): string {
    if (this.closed) return ""
    this.closed = true
    return this.started ? "\r\n]" : "[]"
  }
}

/**
 * Canonical events → Gemini stream chunks: `data:` lines (alt=sse) or, with `array`, the elements
 * of one JSON array (without alt=sse). Tool calls go out whole.
 */
export class GeminiStreamEncoder implements StreamEncoder {
  private id = newId("gen-")
  private usage: Partial<Usage> | undefined
  private readonly tools = new Map<number, { id: string; name: string; signature?: string; args: string }>()
  private readonly reasoning = new Map<number, string>()
  private readonly array: JsonArrayFraming | undefined

  constructor(
    private readonly model: string,
    array = false
  ) {
    this.array = array ? new JsonArrayFraming() : undefined
  }

  private out(data: unknown): string {
    return this.array ? this.array.element(JSON.stringify(data)) : sseData(data)
  }

  private chunk(parts: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}): string {
    return this.out({
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
        if (ev.block.type === "tool_use")
          this.tools.set(ev.index, {
            id: ev.block.id,
            name: ev.block.name,
            args: "",
            ...(ev.block.signature ? { signature: ev.block.signature } : {})
          })
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
          return this.chunk([
            {
              functionCall: { id: t.id, name: t.name, args: obj(parseArguments(t.args)) ?? {} },
              ...(t.signature ? { thoughtSignature: t.signature } : {})
            }
          ])
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
        // In an array the error is the last element (the relay sends nothing after an error).
        return this.array ? this.out(encodeGeminiError(ev.error)) + this.array.close() : sseData(encodeGeminiError(ev.error))
    }
  }

  end(): string {
    return this.array ? this.array.close() : ""
  }
}
