/** anthropic: streams encoded (decoded in anthropic-stream-decoder.ts, whole answers in anthropic-answers.ts, requests in anthropic.ts). */
import { newId, type StreamEvent, type Usage } from "../../domain/canonical.js"
import { encodeAnthropicError, STOP_TO, usageToAnthropic } from "./anthropic-answers.js"
import { idWithSignature } from "./common.js"
import type { StreamEncoder } from "./format.js"
import { sseData } from "./frames.js"

/**
 * The JSON of `usageToAnthropic(u)`, written from a template (its four counts, in its key order):
 * a stream's message_start and message_delta carry it.
 */
const anthropicUsageJson = (u: Partial<Usage> | undefined): string => {
  const usage = usageToAnthropic(u)
  return `{"input_tokens":${JSON.stringify(usage.input_tokens)},"output_tokens":${JSON.stringify(usage.output_tokens)},"cache_creation_input_tokens":${JSON.stringify(usage.cache_creation_input_tokens)},"cache_read_input_tokens":${JSON.stringify(usage.cache_read_input_tokens)}}`
}

/** A text block's content_block_start, from a template: the same bytes as sseData of its object. */
const textBlockStart = (index: number): string =>
  `event: content_block_start\ndata: {"type":"content_block_start","index":${index},"content_block":{"type":"text","text":""}}\n\n`

/** content_block_stop, from a template: the same bytes as sseData of { type, index }. */
const blockStop = (index: number): string => `event: content_block_stop\ndata: {"type":"content_block_stop","index":${index}}\n\n`

/** What follows a text delta's JSON text in its event (`AnthropicStreamEncoder.textDelta`). */
const TEXT_DELTA_END = "}}\n\n"

const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n'

/** Canonical events → Anthropic SSE (`event:` lines included: the SDK needs them). */
export class AnthropicStreamEncoder implements StreamEncoder {
  /** The message id: the upstream's (from `start`), or one made when the stream has none (made only then). */
  private givenId: string | undefined
  private get id(): string {
    this.givenId ??= newId("msg_")
    return this.givenId
  }
  private usage: Partial<Usage> = {}
  /** The usage event's object merged last into `usage`. */
  private usageMerged: Partial<Usage> | undefined
  private started = false
  private readonly openBlocks = new Set<number>()
  private readonly blockIndex = new Map<number, number>()

  constructor(private readonly model: string) {}

  /**
   * `message_start`, written from a template: the same bytes as `sseData` of its object
   * ({ type, message: { id, type, role, model, content: [], stop_reason: null, stop_sequence: null, usage } }).
   */
  private start(): string {
    if (this.started) return ""
    this.started = true
    return `event: message_start\ndata: {"type":"message_start","message":{"id":${JSON.stringify(this.id)},"type":"message","role":"assistant","model":${JSON.stringify(this.model)},"content":[],"stop_reason":null,"stop_sequence":null,"usage":${anthropicUsageJson(this.usage)}}}\n\n`
  }

  /** The bytes of a text delta's event before its text, for the block `textHeadIndex` (`textDelta`). */
  private textHead = ""
  private textHeadIndex = -1

  /**
   * A text delta's event around the JSON of its text, the part before made once per block rather
   * than per delta (a string made of fewer pieces): the same bytes as sseData of its object.
   */
  private textDelta(index: number, json: string): string {
    if (index !== this.textHeadIndex) {
      this.textHeadIndex = index
      this.textHead = `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":{"type":"text_delta","text":`
    }
    return this.textHead + json + TEXT_DELTA_END
  }

  /** `push` of a text delta given its text's JSON literal too (StreamEncoder), once `message_start` went out. */
  pushText(index: number, _text: string, json: string): string | undefined {
    return this.started ? this.textDelta(this.idx(index), json) : undefined
  }

  private idx(canonical: number): number {
    let i = this.blockIndex.get(canonical)
    if (i === undefined) {
      i = this.blockIndex.size
      this.blockIndex.set(canonical, i)
    }
    return i
  }

  push(ev: StreamEvent): string {
    switch (ev.type) {
      case "start":
        if (ev.id) this.givenId = ev.id.startsWith("msg_") ? ev.id : `msg_${ev.id}`
        return ""
      case "usage":
        // A Gemini upstream repeats one usage object on every chunk: merged again, it changes nothing.
        if (ev.usage !== this.usageMerged) this.usage = { ...this.usage, ...ev.usage }
        this.usageMerged = ev.usage
        return ""
      case "block_start": {
        const index = this.idx(ev.index)
        this.openBlocks.add(index)
        if (ev.block.type === "text") return this.start() + textBlockStart(index)
        const block =
          ev.block.type === "reasoning"
            ? ev.block.redacted !== undefined
              ? { type: "redacted_thinking", data: ev.block.redacted }
              : { type: "thinking", thinking: "", signature: "" }
            : { type: "tool_use", id: idWithSignature(ev.block.id, ev.block.signature), name: ev.block.name, input: {} }
        return this.start() + sseData({ type: "content_block_start", index, content_block: block }, "content_block_start")
      }
      case "text_delta":
        // Written from a template (the same bytes as the object's JSON): the stream's most frequent event.
        return this.start() + this.textDelta(this.idx(ev.index), JSON.stringify(ev.text))
      case "reasoning_delta":
        return (
          this.start() +
          sseData(
            { type: "content_block_delta", index: this.idx(ev.index), delta: { type: "thinking_delta", thinking: ev.text } },
            "content_block_delta"
          )
        )
      case "signature":
        // An OpenAI encrypted reasoning blob is not an Anthropic signature.
        return ev.encrypted
          ? ""
          : sseData(
              { type: "content_block_delta", index: this.idx(ev.index), delta: { type: "signature_delta", signature: ev.signature } },
              "content_block_delta"
            )
      case "tool_args_delta":
        return ev.partialJson
          ? sseData(
              { type: "content_block_delta", index: this.idx(ev.index), delta: { type: "input_json_delta", partial_json: ev.partialJson } },
              "content_block_delta"
            )
          : ""
      case "block_stop": {
        const index = this.idx(ev.index)
        this.openBlocks.delete(index)
        return blockStop(index)
      }
      case "finish": {
        let out = this.start()
        for (const index of this.openBlocks) out += blockStop(index)
        this.openBlocks.clear()
        // message_delta from a template: the same bytes as sseData of { type, delta: { stop_reason, stop_sequence }, usage }.
        const reason = STOP_TO[ev.stopReason]
        const stopReason = reason === undefined ? "" : `"stop_reason":${JSON.stringify(reason)},`
        return `${out}event: message_delta\ndata: {"type":"message_delta","delta":{${stopReason}"stop_sequence":${JSON.stringify(ev.stopSequence ?? null)}},"usage":${anthropicUsageJson(this.usage)}}\n\n${MESSAGE_STOP}`
      }
      case "error":
        return sseData(encodeAnthropicError(ev.error), "error")
    }
  }

  end(): string {
    return ""
  }
}
