/** openai-chat streams decoded: chunks → canonical events, with a fast read of the usual text-only chunk (the answers are in openai-chat-answers.ts). */
import { newId, type StopReason, type StreamEvent, stopWithCalls } from "../../domain/canonical.js"
import { arr, malformedStream, nowSeconds, num, obj, str, tryJson } from "./common.js"
import { SequentialBlocks, type StreamDecoder } from "./format.js"
import { JsonReader, READER_PAUSE, TextTemplate } from "./json-reader.js"
import { decodeOpenAiError, STOP_FROM, usageFromOpenAi } from "./openai-chat-answers.js"

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

/** Upstream tool index → canonical block; block → call id; call id → upstream index; the blocks of custom tool calls, whose JSON arguments are closed when the block ends. */
interface ToolCalls {
  readonly toolBlocks: Map<number, number>
  readonly idOfBlock: Map<number, string>
  readonly keyOfId: Map<string, number>
  readonly customBlocks: Set<number>
}

/** OpenAI chat chunks → canonical events. Blocks are made sequential (one open at a time). */
export class ChatStreamDecoder extends SequentialBlocks implements StreamDecoder {
  private started = false
  /**
   * The stream's tool calls, made at the first one: most streams have none, and the decoder is made
   * for every stream (a same-format relay's preview too), so its three maps and set are not.
   */
  private calls: ToolCalls | undefined
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
        this.calls ??= { toolBlocks: new Map(), idOfBlock: new Map(), keyOfId: new Map(), customBlocks: new Set() }
        const { toolBlocks, idOfBlock, keyOfId, customBlocks } = this.calls
        const call = obj(tc) ?? {}
        const custom = obj(call["custom"])
        const fn = obj(call["function"]) ?? (custom ? { name: custom["name"] } : undefined)
        const id = str(call["id"]) || undefined
        // Some servers omit `index` (Gemini's OpenAI endpoint) or number every call 0: a call
        // with an id not seen before is a new call; a piece without index or id continues the open one.
        const explicit = num(call["index"])
        const toolIndex =
          explicit ??
          (id !== undefined ? (keyOfId.get(id) ?? -(toolBlocks.size + 1)) : this.open?.kind === "tool" ? this.open.toolIndex! : 0)
        const known = toolBlocks.get(toolIndex)
        if (known === undefined || (id !== undefined && idOfBlock.get(known) !== id)) {
          this.close(out)
          const index = this.next++
          const callId = id ?? newId("call_")
          toolBlocks.set(toolIndex, index)
          idOfBlock.set(index, callId)
          keyOfId.set(callId, toolIndex)
          this.sawTools = true
          this.open = { kind: "tool", index, toolIndex }
          out.push({ type: "block_start", index, block: { type: "tool_use", id: callId, name: str(fn?.["name"]) ?? "" } })
          if (custom) {
            // A custom call's text input becomes the canonical {"input": "..."} arguments.
            customBlocks.add(index)
            out.push({ type: "tool_args_delta", index, partialJson: '{"input":"' })
          }
        }
        if (custom) {
          const input = str(custom["input"])
          const open = this.open
          if (input && open !== undefined && open.index === toolBlocks.get(toolIndex))
            out.push({ type: "tool_args_delta", index: open.index, partialJson: JSON.stringify(input).slice(1, -1) })
          continue
        }
        const args = str(fn?.["arguments"])
        const index = toolBlocks.get(toolIndex)!
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

  /** The usual chunk read in place from a run of frames (StreamDecoder, `textFrameOf`). */
  textFrameAt(frames: string, from: number, crlf: boolean): number {
    const end = this.textFrameOf(this.template, !this.done && this.started, frames, from, crlf)
    if (end !== -1) this.recognized = true
    return end
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
    if (this.open && this.calls?.customBlocks.delete(this.open.index))
      out.push({ type: "tool_args_delta", index: this.open.index, partialJson: '"}' })
    super.close(out)
  }
}
