/** openai-chat streams encoded: canonical events → chat completion chunks, the usual ones written from templates (the answers are in openai-chat-answers.ts). */
import { newId, type StreamEvent, type Usage, wholeUsage } from "../../domain/canonical.js"
import { customToolInput, idWithSignature, nowSeconds } from "./common.js"
import type { StreamEncoder } from "./format.js"
import { sseData } from "./frames.js"
import { encodeOpenAiError, STOP_TO, usageToOpenAi } from "./openai-chat-answers.js"

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
  /** The answer's tool calls, made at the first one (most streams have none; an encoder is made for each). */
  private calls:
    | {
        readonly toolIndex: Map<number, number>
        /** Tool blocks that have not streamed any argument yet (they get "{}" when they end). */
        readonly noArgs: Set<number>
        /** Arguments of calls to custom tools, sent whole as `custom.input` when the call ends. */
        readonly customArgs: Map<number, string>
      }
    | undefined
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
  private textChunk(text: string, json?: string): string {
    if (this.textHead === undefined) {
      const head = this.chunkHead()
      if (head === undefined) return this.chunk({ content: text })
      this.textHead = `${head}{"content":`
    }
    return this.textHead + (json ?? JSON.stringify(text)) + TEXT_CHUNK_END
  }

  /** `push` of a text delta given its text's JSON literal too (StreamEncoder), once the role went out. */
  pushText(_index: number, text: string, json: string): string | undefined {
    if (!this.sentRole) return undefined
    return text === "" ? "" : this.textChunk(text, json)
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
          this.calls ??= { toolIndex: new Map(), noArgs: new Set(), customArgs: new Map() }
          const { toolIndex, noArgs, customArgs } = this.calls
          const i = toolIndex.size
          toolIndex.set(ev.index, i)
          const id = idWithSignature(ev.block.id, ev.block.signature)
          if (this.customTools.has(ev.block.name)) {
            customArgs.set(ev.index, "")
            return this.chunk(this.withRole({ tool_calls: [{ index: i, id, type: "custom", custom: { name: ev.block.name, input: "" } }] }))
          }
          noArgs.add(ev.index)
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
        const calls = this.calls
        const i = calls?.toolIndex.get(ev.index)
        if (calls === undefined || i === undefined || !ev.partialJson) return ""
        const custom = calls.customArgs.get(ev.index)
        if (custom !== undefined) {
          calls.customArgs.set(ev.index, custom + ev.partialJson)
          return ""
        }
        calls.noArgs.delete(ev.index)
        return this.chunk({ tool_calls: [{ index: i, function: { arguments: ev.partialJson } }] })
      }
      case "block_stop": {
        // A call without arguments (Anthropic streams `partial_json: ""`) still gets a JSON object.
        const calls = this.calls
        if (calls === undefined) return ""
        const i = calls.toolIndex.get(ev.index)
        const custom = calls.customArgs.get(ev.index)
        if (i !== undefined && custom !== undefined) {
          calls.customArgs.delete(ev.index)
          return this.chunk({ tool_calls: [{ index: i, custom: { input: customToolInput(custom) } }] })
        }
        if (i === undefined || !calls.noArgs.delete(ev.index)) return ""
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
