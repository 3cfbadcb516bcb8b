/** openai-chat: responses, errors and streams (the requests are in openai-chat.ts). */
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
  type TextBlock,
  type Usage,
  stopWithCalls,
  wholeUsage
} from "../../domain/canonical.js"
import { arr, customToolInput, idWithSignature, malformedStream, nowSeconds, num, obj, str, tryJson } from "./common.js"
import { fallbackMessage, messageIn200 } from "./common.js"
import { SequentialBlocks, type StreamDecoder, type StreamEncoder } from "./format.js"
import { sseData } from "./frames.js"
import { JsonReader, READER_PAUSE, TextTemplate } from "./json-reader.js"

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

// ---------------------------------------------------------------- streams

const chunkReader = new JsonReader()

/**
 * The text of a chat chunk that carries nothing else the decoder reads (json-reader.ts): one
 * choice, its delta's `content` a string or absent, no reasoning or tool calls in the delta, no
 * `finish_reason`, no `usage` or `error`; the chunk's other keys (id, model, ...) are only read
 * from the first chunk. Undefined for any other chunk (it is parsed in full).
 */
const contentOnlyChunk = (data: string): string | undefined => {
  const r = chunkReader.reset(data)
  let text: string | undefined
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("choices")) {
      if (text !== undefined || !r.array() || !r.element(true) || !r.object()) return undefined
      let delta: string | undefined
      for (let f = true; r.member(f); f = false) {
        if (r.isKey("delta")) {
          if (delta !== undefined) return undefined
          delta = contentOnlyDelta(r)
          if (delta === undefined) return undefined
        } else if (r.isKey("finish_reason")) r.null()
        else r.skip()
      }
      if (delta === undefined || r.element(false)) return undefined
      text = delta
    } else if (r.isKey("usage")) r.null()
    else if (r.isKey("error")) return undefined
    else r.skip()
  }
  return r.done() ? text : undefined
}

/** The `content` of a delta without reasoning or tool calls ("" when it has none), or undefined. */
const contentOnlyDelta = (r: JsonReader): string | undefined => {
  let content: string | undefined
  let seen = false
  if (!r.object()) return undefined
  for (let first = true; r.member(first); first = false) {
    if (r.isKey("content")) {
      if (seen) return undefined
      seen = true
      content = r.isNull() ? undefined : r.string()
      if (r.failed) return undefined
    } else if (r.isKey("reasoning_content") || r.isKey("reasoning") || r.isKey("tool_calls")) r.null()
    else r.skip()
  }
  return r.failed ? undefined : (content ?? "")
}

/** OpenAI chat chunks → canonical events. Blocks are made sequential (one open at a time). */
export class ChatStreamDecoder extends SequentialBlocks implements StreamDecoder {
  private started = false
  /** Upstream tool index → canonical block; block → call id; call id → upstream index. */
  private readonly toolBlocks = new Map<number, number>()
  private readonly idOfBlock = new Map<number, string>()
  private readonly keyOfId = new Map<string, number>()
  /** Blocks of custom tool calls, whose JSON arguments are closed when the block ends. */
  private readonly customBlocks = new Set<number>()
  private finishReason: StopReason | undefined
  private sawTools = false
  private done = false
  /** A chunk of this format came (`choices` or `usage`): a stream without one is not a chat completion. */
  private recognized = false

  push(frame: { data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    if (frame.data === "[DONE]") return this.end()
    if (this.started) {
      // The stream's usual chunk, read without JSON.parse (the same events as below).
      const text = this.usualText(frame.data)
      if (text !== undefined) {
        this.recognized = true
        // A text block already open (every chunk but the first): the one event as an array of
        // one, not an empty array grown by a push (its first push allocates room for 17).
        if (!text) return []
        if (this.open?.kind === "text") return [{ type: "text_delta", index: this.open.index, text }]
        const out: Array<StreamEvent> = []
        this.ensure("text", out)
        out.push({ type: "text_delta", index: this.open!.index, text })
        return out
      }
    }
    const chunk = obj(tryJson(frame.data))
    if (!chunk) return []
    const out: Array<StreamEvent> = []
    const err = chunk["error"]
    if (err) {
      this.done = true
      return [{ type: "error", error: decodeOpenAiError(500, chunk, frame.data) }]
    }
    if (!this.recognized) this.recognized = Array.isArray(chunk["choices"]) || obj(chunk["usage"]) !== undefined
    if (!this.started) {
      this.started = true
      out.push({
        type: "start",
        id: str(chunk["id"]) ?? newId("chatcmpl-"),
        model: str(chunk["model"]) ?? "",
        created: num(chunk["created"]) ?? nowSeconds()
      })
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
          explicit ??
          (id !== undefined ? (this.keyOfId.get(id) ?? -(this.toolBlocks.size + 1)) : this.open?.kind === "tool" ? this.open.toolIndex! : 0)
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
          if (input && open !== undefined && open.index === this.toolBlocks.get(toolIndex))
            out.push({ type: "tool_args_delta", index: open.index, partialJson: JSON.stringify(input).slice(1, -1) })
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

  /** The usual chunk's bytes around its text, and how many chunks go to JSON.parse before the reader tries again. */
  private readonly template = new TextTemplate()
  private readerPause = 0

  /** The text of a chunk that carries nothing else (`contentOnlyChunk`), else undefined. */
  private usualText(data: string): string | undefined {
    const known = this.template.text(data)
    if (known !== undefined) return known
    if (this.readerPause > 0) {
      this.readerPause--
      return undefined
    }
    const text = contentOnlyChunk(data)
    if (text === undefined) this.readerPause = READER_PAUSE
    else this.template.learn(data, chunkReader)
    return text
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    // Nothing but frames of no chat completion (HTML, another format), or nothing at all: no answer, not an empty one.
    if (!this.recognized) return [malformedStream("chat completion chunk")]
    const out: Array<StreamEvent> = []
    if (!this.started) out.push({ type: "start", id: newId("chatcmpl-"), model: "", created: nowSeconds() })
    this.close(out)
    out.push({ type: "finish", stopReason: stopWithCalls(this.finishReason, this.sawTools) })
    return out
  }

  protected override close(out: Array<StreamEvent>) {
    // A custom tool call's text input closes its {"input": "..."} arguments first.
    if (this.open && this.customBlocks.delete(this.open.index))
      out.push({ type: "tool_args_delta", index: this.open.index, partialJson: '"}' })
    super.close(out)
  }
}

/** What follows a text delta's JSON text in its chunk (`ChatStreamEncoder.textChunk`). */
const TEXT_CHUNK_END = '},"logprobs":null,"finish_reason":null}]}\n\n'

/** Canonical events → OpenAI chat chunks. The first chunk carries `role` (the SDK's helpers need it). */
export class ChatStreamEncoder implements StreamEncoder {
  /** The completion id: the upstream's (from `start`), or one made when the stream has none (made only then). */
  private givenId: string | undefined
  private get id(): string {
    this.givenId ??= newId("chatcmpl-")
    return this.givenId
  }
  private created = nowSeconds()
  private readonly toolIndex = new Map<number, number>()
  /** Tool blocks that have not streamed any argument yet (they get "{}" when they end). */
  private readonly noArgs = new Set<number>()
  /** Arguments of calls to custom tools, sent whole as `custom.input` when the call ends. */
  private readonly customArgs = new Map<number, string>()
  private usage: Partial<Usage> | undefined
  /** The usage event's object merged last into `usage`. */
  private usageMerged: Partial<Usage> | undefined
  private sentRole = false

  constructor(
    private readonly model: string,
    private readonly includeUsage: boolean,
    private readonly customTools: ReadonlySet<string> = new Set()
  ) {}

  /** The start of a chunk's JSON up to its delta (id, created and model are the stream's), made once (`chunkHead`). */
  private head: string | undefined

  /**
   * `head`, made at the first chunk after the stream's start; undefined when `created` is not a
   * number JSON writes as itself or the model not a string (the chunk is then written from its object).
   */
  private chunkHead(): string | undefined {
    if (this.head === undefined) {
      if (typeof this.created !== "number" || !Number.isFinite(this.created) || typeof this.model !== "string") return undefined
      this.head = `data: {"id":${JSON.stringify(this.id)},"object":"chat.completion.chunk","created":${this.created},"model":${JSON.stringify(this.model)},"choices":[{"index":0,"delta":`
    }
    return this.head
  }

  /** `chunkHead` and the delta's start, before a text delta's JSON text (`textChunk`), made with the head. */
  private textHead: string | undefined

  /**
   * A text delta's chunk from a template: the same bytes as `chunk({ content })`, the stream's most
   * frequent event, written around the JSON of its text (a string of three pieces).
   */
  private textChunk(text: string): string {
    if (this.textHead === undefined) {
      const head = this.chunkHead()
      if (head === undefined) return this.chunk({ content: text })
      this.textHead = `${head}{"content":`
    }
    return this.textHead + JSON.stringify(text) + TEXT_CHUNK_END
  }

  /**
   * A chunk: `sseData` of { id, object, created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason }] },
   * written around the stream's `chunkHead` and the JSON of the delta (the same bytes).
   */
  private chunk(delta: Record<string, unknown>, finish: string | null = null): string {
    const head = this.chunkHead()
    if (head !== undefined && finish !== undefined)
      return `${head}${JSON.stringify(delta)},"logprobs":null,"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}}]}\n\n`
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
        if (ev.id) this.givenId = ev.id.startsWith("chatcmpl") ? ev.id : `chatcmpl-${ev.id}`
        this.created = ev.created
        this.head = undefined
        this.textHead = undefined
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
              tool_calls: [
                {
                  index: i,
                  id: idWithSignature(ev.block.id, ev.block.signature),
                  type: "function",
                  function: { name: ev.block.name, arguments: "" }
                }
              ]
            })
          )
        }
        return ""
      case "text_delta":
        if (!ev.text) return ""
        return this.sentRole ? this.textChunk(ev.text) : this.chunk(this.withRole({ content: ev.text }))
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
        // A Gemini upstream repeats one usage object on every chunk: merged again, it changes nothing.
        if (ev.usage !== this.usageMerged) this.usage = { ...this.usage, ...ev.usage }
        this.usageMerged = ev.usage
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
