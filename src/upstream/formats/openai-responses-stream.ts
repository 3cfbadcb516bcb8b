/** openai-responses: streams encoded (decoded in openai-responses-stream-decoder.ts, whole answers in openai-responses-answers.ts, requests in openai-responses.ts). */
import { newId, type StreamEvent, type Usage } from "../../domain/canonical.js"
import { idWithSignature, obj, str } from "./common.js"
import type { StreamEncoder } from "./format.js"
import { sseData } from "./frames.js"
import { type ResponsesEchoOptions, echoOptions, responseObject, toolItem, usageToResponses } from "./openai-responses-answers.js"

/**
 * `,"key":` and the JSON of `value`, a member as JSON.stringify writes it in an object (led by a
 * comma); "" for a value it leaves out (undefined).
 */
const member = (key: string, value: unknown): string => {
  const json = JSON.stringify(value)
  return json === undefined ? "" : `,"${key}":${json}`
}

/** `member` of a request's value echoed in a response, `fallback` (JSON) when the request has none (`??`: undefined or null). */
const echoed = (key: string, value: unknown, fallback: string): string =>
  value === undefined || value === null ? `,"${key}":${fallback}` : member(key, value)

/**
 * The members of a Responses response (`responseObject`) that echo its request, as JSON: those
 * before `model` and those from `parallel_tool_calls` to `truncation`. They stay the same from
 * `response.created` to `response.completed` (the request's instructions and tools, often most of
 * the event's bytes), so a stream makes them once. The same keys, order and values as
 * `responseObject`'s (test/formats.responses-templates.test.ts compares the bytes).
 */
const echoedMembers = (req: Readonly<Record<string, unknown>>): { readonly beforeModel: string; readonly afterOutput: string } => ({
  beforeModel: echoed("instructions", req["instructions"], "null") + echoed("max_output_tokens", req["max_output_tokens"], "null"),
  afterOutput: echoesAfterOutput(req) ? afterOutputOf(req) : PLAIN_AFTER_OUTPUT
})

/** The members from `parallel_tool_calls` to `truncation` (`echoedMembers`). */
const afterOutputOf = (req: Readonly<Record<string, unknown>>): string => {
  const reasoning = obj(req["reasoning"])
  return (
    echoed("parallel_tool_calls", req["parallel_tool_calls"], "true") +
    echoed("previous_response_id", req["previous_response_id"], "null") +
    member("reasoning", { effort: reasoning?.["effort"] ?? null, summary: reasoning?.["summary"] ?? null }) +
    echoed("store", req["store"], "false") +
    echoed("temperature", req["temperature"], "null") +
    echoed("text", req["text"], '{"format":{"type":"text"}}') +
    echoed("tool_choice", req["tool_choice"], '"auto"') +
    echoed("tools", req["tools"], "[]") +
    echoed("top_p", req["top_p"], "null") +
    ',"truncation":"disabled"'
  )
}

/** The request keys `afterOutputOf` echoes: a request with none of them (undefined or null) echoes its defaults. */
const AFTER_OUTPUT_KEYS = [
  "parallel_tool_calls",
  "previous_response_id",
  "reasoning",
  "store",
  "temperature",
  "text",
  "tool_choice",
  "tools",
  "top_p"
] as const

/**
 * `afterOutputOf` a request that sets none of its keys (the usual streamed request: a model, an
 * input, perhaps instructions and a token limit), made once: every such request echoes the same.
 */
const PLAIN_AFTER_OUTPUT = afterOutputOf({})

/** Whether the request sets a key `afterOutputOf` echoes (else its members are `PLAIN_AFTER_OUTPUT`). */
const echoesAfterOutput = (req: Readonly<Record<string, unknown>>): boolean => {
  for (const key of AFTER_OUTPUT_KEYS) if (req[key] !== undefined && req[key] !== null) return true
  return false
}

/**
 * `member("usage", usageToResponses(u))` of a response's usage, written from a template when its
 * counts are finite numbers (always, from the decoders): the same keys in the same order, each
 * count as JSON writes a finite number.
 */
const usageMember = (u: Partial<Usage> | undefined): string => {
  const usage = usageToResponses(u)
  if (usage === null) return ',"usage":null'
  const { input_tokens: input, output_tokens: output, total_tokens: total } = usage
  const cached = usage.input_tokens_details.cached_tokens
  const reasoning = usage.output_tokens_details.reasoning_tokens
  if (!(finite(input) && finite(output) && finite(total) && finite(cached) && finite(reasoning))) return member("usage", usage)
  return `,"usage":{"input_tokens":${input},"input_tokens_details":{"cached_tokens":${cached}},"output_tokens":${output},"output_tokens_details":{"reasoning_tokens":${reasoning}},"total_tokens":${total}}`
}

/** A finite number, written by a template literal as JSON writes it (-0 as 0, exponents the same). */
const finite = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n)

/** An event as SSE, named by its type. */
const sseEvent = (e: Record<string, unknown>): string => sseData(e, e["type"] as string)

/**
 * Canonical events → Responses SSE events, in the order the openai SDK's ResponseStream
 * needs: created, in_progress, then per item added / part added / deltas / done, and a
 * `response.completed` holding the whole output (ids matching the streamed items).
 */
export class ResponsesStreamEncoder implements StreamEncoder {
  private seq = 0
  private id = newId("resp_")
  private created = Math.floor(Date.now() / 1000)
  private usage: Partial<Usage> | undefined
  /** The usage event's object merged last into `usage`. */
  private usageMerged: Partial<Usage> | undefined
  private outputIndex = 0
  private readonly output: Array<Record<string, unknown>> = []
  private readonly blocks = new Map<
    number,
    {
      outputIndex: number
      itemId: string
      kind: "text" | "reasoning" | "tool"
      text: string
      encrypted?: string
      call?: { id: string; name: string }
      /** What follows the sequence number in this block's text delta events (`textDelta`), made at its first. */
      deltaMiddle?: string
    }
  >()
  private readonly options: ResponsesEchoOptions
  /** Over WebSocket each event is one JSON frame instead of an SSE event. */
  private readonly frame: (event: Record<string, unknown>) => string
  /** Events go out as SSE (no `frame` given): a text delta's is written from a template (`textDelta`). */
  private readonly sse: boolean

  constructor(
    private readonly model: string,
    options: Readonly<Record<string, unknown>> | undefined,
    frame?: (event: Record<string, unknown>) => string
  ) {
    this.frame = frame ?? sseEvent
    this.sse = frame === undefined
    this.options = echoOptions(options)
    const fixed = str(options?.["responseId"])
    if (fixed) this.id = fixed
  }

  /**
   * Continues a stream relayed unchanged from a Responses upstream (to report its failure): same
   * response id, sequence numbers after the last one relayed, no second `response.created`.
   */
  static continuing(model: string, responseId: string, lastSequence: number): ResponsesStreamEncoder {
    const encoder = new ResponsesStreamEncoder(model, { responseId })
    encoder.started = true
    encoder.seq = lastSequence + 1
    return encoder
  }

  result(): { readonly id: string; readonly output: ReadonlyArray<unknown> } {
    return { id: this.id, output: this.output.filter((o) => o !== undefined) }
  }

  private emit(type: string, fields: Record<string, unknown>): string {
    return this.frame({ type, sequence_number: this.seq++, ...fields })
  }

  private response(status: "in_progress" | "completed" | "incomplete" | "failed", extra: Record<string, unknown> = {}) {
    return responseObject(
      this.id,
      this.created,
      this.model,
      status,
      status === "in_progress" ? [] : this.output,
      this.usage,
      this.options,
      extra
    )
  }

  /** A response that generates nothing (Codex's prewarm, `generate: false`). */
  empty(): string {
    this.started = true
    return (
      this.emit("response.created", { response: this.response("in_progress") }) +
      this.emit("response.completed", { response: this.response("completed") })
    )
  }

  /** Whether `response.created` went out: the openai SDK needs it before any other event. */
  private started = false

  push(ev: StreamEvent): string {
    if (ev.type !== "start" && !this.started)
      return this.push({ type: "start", id: this.id, model: this.model, created: this.created }) + this.push(ev)
    switch (ev.type) {
      case "start":
        if (this.started) return ""
        this.started = true
        this.created = ev.created
        return this.opening()
      case "block_start": {
        const outputIndex = this.outputIndex++
        if (ev.block.type === "text") {
          const itemId = newId("msg_")
          this.blocks.set(ev.index, { outputIndex, itemId, kind: "text", text: "" })
          if (this.sse) return this.textOpened(itemId, outputIndex)
          return (
            this.emit("response.output_item.added", {
              output_index: outputIndex,
              item: { id: itemId, type: "message", status: "in_progress", role: "assistant", content: [] }
            }) +
            this.emit("response.content_part.added", {
              item_id: itemId,
              output_index: outputIndex,
              content_index: 0,
              part: { type: "output_text", text: "", annotations: [], logprobs: [] }
            })
          )
        }
        if (ev.block.type === "reasoning") {
          const itemId = ev.block.itemId ?? newId("rs_")
          this.blocks.set(ev.index, { outputIndex, itemId, kind: "reasoning", text: "" })
          return (
            this.emit("response.output_item.added", { output_index: outputIndex, item: { id: itemId, type: "reasoning", summary: [] } }) +
            this.emit("response.reasoning_summary_part.added", {
              item_id: itemId,
              output_index: outputIndex,
              summary_index: 0,
              part: { type: "summary_text", text: "" }
            })
          )
        }
        const itemId = newId("fc_")
        const call = { id: idWithSignature(ev.block.id, ev.block.signature), name: ev.block.name }
        this.blocks.set(ev.index, { outputIndex, itemId, kind: "tool", text: "", call })
        return this.emit("response.output_item.added", {
          output_index: outputIndex,
          item: toolItem(call.id, call.name, "", this.options.customTools?.has(call.name) ?? false, "in_progress", itemId)
        })
      }
      case "text_delta": {
        const b = this.blocks.get(ev.index)
        if (!b || !ev.text) return ""
        b.text += ev.text
        if (this.sse) return this.textDelta(b, JSON.stringify(ev.text))
        return this.emit("response.output_text.delta", {
          item_id: b.itemId,
          output_index: b.outputIndex,
          content_index: 0,
          delta: ev.text,
          logprobs: []
        })
      }
      case "reasoning_delta": {
        const b = this.blocks.get(ev.index)
        if (!b || !ev.text) return ""
        b.text += ev.text
        return this.emit("response.reasoning_summary_text.delta", {
          item_id: b.itemId,
          output_index: b.outputIndex,
          summary_index: 0,
          delta: ev.text
        })
      }
      case "signature": {
        const b = this.blocks.get(ev.index)
        if (b && ev.encrypted) b.encrypted = ev.signature
        return ""
      }
      case "tool_args_delta": {
        const b = this.blocks.get(ev.index)
        if (!b || !ev.partialJson) return ""
        b.text += ev.partialJson
        if (this.options.customTools?.has(b.call?.name ?? "")) return "" // custom tool input goes out whole
        return this.emit("response.function_call_arguments.delta", {
          item_id: b.itemId,
          output_index: b.outputIndex,
          delta: ev.partialJson
        })
      }
      case "block_stop":
        return this.close(ev.index)
      case "usage":
        // A Gemini upstream repeats one usage object on every chunk: merged again, it changes nothing.
        if (ev.usage !== this.usageMerged) this.usage = { ...this.usage, ...ev.usage }
        this.usageMerged = ev.usage
        return ""
      case "finish": {
        let out = ""
        for (const index of [...this.blocks.keys()]) out += this.close(index)
        const incomplete = ev.stopReason === "max_tokens" || ev.stopReason === "content_filter"
        return incomplete
          ? out +
              this.emit("response.incomplete", {
                response: this.response("incomplete", {
                  incomplete_details: { reason: ev.stopReason === "max_tokens" ? "max_output_tokens" : "content_filter" }
                })
              })
          : this.sse
            ? out + this.sseTemplate("response.completed", `,"response":${this.responseJson("completed")}`)
            : out + this.emit("response.completed", { response: this.response("completed") })
      }
      case "error":
        return this.emit("response.failed", {
          response: this.response("failed", {
            error: {
              code: ev.error.code ?? (ev.error.kind === "rate_limit" ? "rate_limit_exceeded" : "server_error"),
              message: ev.error.message
            }
          })
        })
    }
  }

  /** `push` of a text delta given its text's JSON literal too (StreamEncoder): as SSE once the response began. */
  pushText(index: number, text: string, json: string): string | undefined {
    const b = this.started && this.sse ? this.blocks.get(index) : undefined
    if (b === undefined) return undefined
    if (text === "") return ""
    b.text += text
    return this.textDelta(b, json)
  }

  /**
   * A text delta's SSE event written from a template, the stream's most frequent event: the same
   * bytes as `emit("response.output_text.delta", {...})` (keys in the same order, each value's
   * JSON), given the JSON of its text.
   */
  private textDelta(b: { itemId: string; outputIndex: number; deltaMiddle?: string }, json: string): string {
    b.deltaMiddle ??= `,"item_id":${JSON.stringify(b.itemId)},"output_index":${b.outputIndex},"content_index":0,"delta":`
    return `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":${this.seq++}${b.deltaMiddle}${json},"logprobs":[]}\n\n`
  }

  /** An SSE event written by hand: `fields` is the JSON of its fields after `type` and `sequence_number`, each led by a comma. */
  private sseTemplate(type: string, fields: string): string {
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++}${fields}}\n\n`
  }

  /**
   * A text block's `response.output_item.added` and `response.content_part.added` as SSE, written
   * from templates: the same bytes as the objects `push` emits otherwise (keys in the same order).
   */
  private textOpened(itemId: string, outputIndex: number): string {
    const id = JSON.stringify(itemId)
    return (
      this.sseTemplate(
        "response.output_item.added",
        `,"output_index":${outputIndex},"item":{"id":${id},"type":"message","status":"in_progress","role":"assistant","content":[]}`
      ) +
      this.sseTemplate(
        "response.content_part.added",
        `,"item_id":${id},"output_index":${outputIndex},"content_index":0,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}`
      )
    )
  }

  /**
   * A text block's `response.output_text.done`, `response.content_part.done` and
   * `response.output_item.done` as SSE, written from templates around the JSON of its whole text,
   * made once rather than once per event: the same bytes as the objects `close` emits otherwise.
   */
  private textClosed(b: { itemId: string; outputIndex: number; text: string }, item: Record<string, unknown>): string {
    const id = JSON.stringify(b.itemId)
    const text = JSON.stringify(b.text)
    const part = `{"type":"output_text","text":${text},"annotations":[],"logprobs":[]}`
    const itemJson = `{"id":${id},"type":"message","status":"completed","role":"assistant","content":[${part}]}`
    this.itemJson.set(item, itemJson)
    return (
      this.sseTemplate(
        "response.output_text.done",
        `,"item_id":${id},"output_index":${b.outputIndex},"content_index":0,"text":${text},"logprobs":[]`
      ) +
      this.sseTemplate("response.content_part.done", `,"item_id":${id},"output_index":${b.outputIndex},"content_index":0,"part":${part}`) +
      this.sseTemplate("response.output_item.done", `,"output_index":${b.outputIndex},"item":${itemJson}`)
    )
  }

  /** The JSON of output items written from templates (`textClosed`), by item: `outputJson` reuses it. */
  private readonly itemJson = new Map<unknown, string>()
  /** The response's members that echo the request, as JSON (`echoedMembers`), made at the first `responseJson`. */
  private echoed: { readonly beforeModel: string; readonly afterOutput: string } | undefined

  /**
   * The response as JSON for `response.created`, `response.in_progress` and `response.completed`
   * as SSE, written member by member: the same bytes as `JSON.stringify(this.response(status))`
   * without the object. The members echoing the request are made into JSON once a stream
   * (`echoedMembers`), the output from its items' JSON (`outputJson`).
   */
  private responseJson(status: "in_progress" | "completed"): string {
    this.echoed ??= echoedMembers(this.options.request ?? {})
    const usage = status === "in_progress" ? ',"usage":null' : usageMember(this.usage)
    return (
      `{"id":${JSON.stringify(this.id)},"object":"response"${member("created_at", this.created)},"status":"${status}",` +
      `"background":false,"error":null,"incomplete_details":null${this.echoed.beforeModel}${member("model", this.model)}` +
      `,"output":${status === "in_progress" ? "[]" : this.outputJson()}${this.echoed.afterOutput}${usage}` +
      `${echoed("metadata", this.options.request?.["metadata"], "{}")}}`
    )
  }

  /** `JSON.stringify(this.output)`, each item's JSON taken from `itemJson` when it was written from a template. */
  private outputJson(): string {
    const items: Array<string> = []
    for (let i = 0; i < this.output.length; i++) {
      const item = this.output[i]
      items.push(item === undefined ? "null" : (this.itemJson.get(item) ?? JSON.stringify(item)))
    }
    return `[${items.join(",")}]`
  }

  /**
   * `response.created` and `response.in_progress`: as SSE, their response (the same, and the
   * largest part of them) is made into JSON once, and each event written around it (the same bytes
   * as `emit(type, { response })`).
   */
  private opening(): string {
    if (!this.sse)
      return (
        this.emit("response.created", { response: this.response("in_progress") }) +
        this.emit("response.in_progress", { response: this.response("in_progress") })
      )
    const response = this.responseJson("in_progress")
    const event = (type: string) => `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.seq++},"response":${response}}\n\n`
    return event("response.created") + event("response.in_progress")
  }

  /** `response.created` unless it went out (the openai SDK needs it before any other event). */
  private begin(): string {
    return this.started ? "" : this.push({ type: "start", id: this.id, model: this.model, created: this.created })
  }

  /**
   * An output item the gateway makes itself (an MCP tool listing or call, an approval request):
   * `response.output_item.added` with the item as announced; answers its output index, which its
   * progress events (`itemEvent`) and its end (`itemDone`) name.
   */
  itemAdded(item: Record<string, unknown>): { readonly text: string; readonly outputIndex: number } {
    const head = this.begin()
    const outputIndex = this.outputIndex++
    return { text: head + this.emit("response.output_item.added", { output_index: outputIndex, item }), outputIndex }
  }

  /** One progress event of an item opened with `itemAdded` (`response.mcp_call.in_progress`, ...). */
  itemEvent(type: string, outputIndex: number, itemId: string, fields: Record<string, unknown> = {}): string {
    return this.emit(type, { item_id: itemId, output_index: outputIndex, ...fields })
  }

  /** The end of an item opened with `itemAdded`: `response.output_item.done` with the whole item, kept in the output. */
  itemDone(outputIndex: number, item: Record<string, unknown>): string {
    this.output[outputIndex] = item
    return this.emit("response.output_item.done", { output_index: outputIndex, item })
  }

  /** Ends the stream as `response.incomplete` with the gateway's own reason (the open items closed first). */
  incomplete(reason: string): string {
    let out = this.begin()
    for (const index of [...this.blocks.keys()]) out += this.close(index)
    return out + this.emit("response.incomplete", { response: this.response("incomplete", { incomplete_details: { reason } }) })
  }

  private close(index: number): string {
    const b = this.blocks.get(index)
    if (!b) return ""
    this.blocks.delete(index)
    if (b.kind === "text") {
      const part = { type: "output_text", text: b.text, annotations: [], logprobs: [] }
      const item = { id: b.itemId, type: "message", status: "completed", role: "assistant", content: [part] }
      this.output[b.outputIndex] = item
      if (this.sse) return this.textClosed(b, item)
      return (
        this.emit("response.output_text.done", {
          item_id: b.itemId,
          output_index: b.outputIndex,
          content_index: 0,
          text: b.text,
          logprobs: []
        }) +
        this.emit("response.content_part.done", { item_id: b.itemId, output_index: b.outputIndex, content_index: 0, part }) +
        this.emit("response.output_item.done", { output_index: b.outputIndex, item })
      )
    }
    if (b.kind === "reasoning") {
      const summary = b.text ? [{ type: "summary_text", text: b.text }] : []
      const item = { id: b.itemId, type: "reasoning", summary, ...(b.encrypted ? { encrypted_content: b.encrypted } : {}) }
      this.output[b.outputIndex] = item
      return (
        this.emit("response.reasoning_summary_text.done", {
          item_id: b.itemId,
          output_index: b.outputIndex,
          summary_index: 0,
          text: b.text
        }) +
        this.emit("response.reasoning_summary_part.done", {
          item_id: b.itemId,
          output_index: b.outputIndex,
          summary_index: 0,
          part: { type: "summary_text", text: b.text }
        }) +
        this.emit("response.output_item.done", { output_index: b.outputIndex, item })
      )
    }
    const custom = this.options.customTools?.has(b.call!.name) ?? false
    const item = toolItem(b.call!.id, b.call!.name, b.text || "{}", custom, "completed", b.itemId)
    this.output[b.outputIndex] = item
    return (
      (custom
        ? ""
        : this.emit("response.function_call_arguments.done", {
            item_id: b.itemId,
            output_index: b.outputIndex,
            arguments: b.text || "{}"
          })) + this.emit("response.output_item.done", { output_index: b.outputIndex, item })
    )
  }

  end(): string {
    return ""
  }
}
