/**
 * A stream's canonical events put together into the whole answer they make: what a non-streamed
 * request is answered with when the gateway asked its upstream for a stream (docs/formats.md,
 * "Non-streamed answers from streams"). Plain code, no Effect; the inverse of `responseEvents`
 * (src/inference/answers.ts), which turns a whole answer into events.
 */
import {
  type CanonicalError,
  type CanonicalResponse,
  type ContentBlock,
  mergeUsage,
  type StopReason,
  type StreamEvent,
  stopWithCalls,
  type Usage,
  wholeUsage
} from "../../domain/canonical.js"

type Open =
  | { readonly type: "text"; text: string }
  | { readonly type: "reasoning"; text: string; signature?: string; encrypted?: string; redacted?: string; itemId?: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; args: string; readonly signature?: string }

/** Arguments as the model wrote them: parsed when they are JSON, an empty object when there are none. */
const parseArgs = (args: string): unknown => {
  if (args.trim() === "") return {}
  try {
    return JSON.parse(args)
  } catch {
    // A cut call (max tokens) carries what arrived; the client sees it as the upstream wrote it.
    return args
  }
}

export class StreamCollector {
  private id = ""
  private model = ""
  private created = 0
  /** Blocks by index, in the order they began. */
  private readonly blocks = new Map<number, Open>()
  private usage: Partial<Usage> | undefined
  private stop: StopReason | undefined
  private stopSequence: string | undefined
  private failure: CanonicalError | undefined
  /** Content (text, reasoning, a tool call) arrived. */
  began = false

  push(events: ReadonlyArray<StreamEvent>): void {
    for (const ev of events) this.one(ev)
  }

  private one(ev: StreamEvent): void {
    switch (ev.type) {
      case "start":
        if (ev.id) this.id = ev.id
        if (ev.model) this.model = ev.model
        if (ev.created) this.created = ev.created
        return
      case "block_start": {
        const b = ev.block
        this.blocks.set(
          ev.index,
          b.type === "text"
            ? { type: "text", text: "" }
            : b.type === "reasoning"
              ? {
                  type: "reasoning",
                  text: "",
                  ...(b.redacted !== undefined ? { redacted: b.redacted } : {}),
                  ...(b.itemId ? { itemId: b.itemId } : {})
                }
              : { type: "tool_use", id: b.id, name: b.name, args: "", ...(b.signature ? { signature: b.signature } : {}) }
        )
        if (b.type === "tool_use") this.began = true
        return
      }
      case "text_delta": {
        const b = this.blocks.get(ev.index)
        if (b?.type === "text") b.text += ev.text
        else this.blocks.set(ev.index, { type: "text", text: ev.text })
        this.began = true
        return
      }
      case "reasoning_delta": {
        const b = this.blocks.get(ev.index)
        if (b?.type === "reasoning") b.text += ev.text
        else this.blocks.set(ev.index, { type: "reasoning", text: ev.text })
        this.began = true
        return
      }
      case "signature": {
        const b = this.blocks.get(ev.index)
        if (b?.type === "reasoning") {
          if (ev.encrypted) b.encrypted = ev.signature
          else b.signature = ev.signature
        }
        return
      }
      case "tool_args_delta": {
        const b = this.blocks.get(ev.index)
        if (b?.type === "tool_use") b.args += ev.partialJson
        return
      }
      case "block_stop":
        return
      case "usage":
        this.usage = mergeUsage(this.usage, ev.usage)
        return
      case "finish":
        this.stop = ev.stopReason
        this.stopSequence = ev.stopSequence
        this.began = true
        return
      case "error":
        this.failure ??= ev.error
        return
    }
  }

  /** The error the stream reported, if any: the answer is that error, not a partial success. */
  error(): CanonicalError | undefined {
    return this.failure
  }

  /** The stream ended with its final event (a finish): a stream cut before it is no answer. */
  finished(): boolean {
    return this.stop !== undefined
  }

  /** The whole answer the stream made. `fallbackId`: when the stream named none. */
  result(fallbackId: string): CanonicalResponse {
    const content: Array<ContentBlock> = []
    for (const index of [...this.blocks.keys()].sort((a, b) => a - b)) {
      const b = this.blocks.get(index)!
      if (b.type === "text") {
        if (b.text !== "") content.push({ type: "text", text: b.text })
      } else if (b.type === "reasoning") {
        content.push({
          type: "reasoning",
          text: b.text,
          ...(b.signature ? { signature: b.signature } : {}),
          ...(b.encrypted ? { encrypted: b.encrypted } : {}),
          ...(b.redacted !== undefined ? { redacted: b.redacted } : {}),
          ...(b.itemId ? { itemId: b.itemId } : {})
        })
      } else
        content.push({
          type: "tool_use",
          id: b.id,
          name: b.name,
          input: parseArgs(b.args),
          ...(b.signature ? { signature: b.signature } : {})
        })
    }
    const calls = content.some((c) => c.type === "tool_use")
    return {
      id: this.id || fallbackId,
      model: this.model,
      created: this.created || Math.floor(Date.now() / 1000),
      content,
      // As a whole answer's decoder reads it: calls make it a tool_use stop unless a cut wins.
      stopReason: calls ? stopWithCalls(this.stop, true) : (this.stop ?? "end_turn"),
      ...(this.stopSequence !== undefined ? { stopSequence: this.stopSequence } : {}),
      ...(this.usage ? { usage: wholeUsage(this.usage) } : {})
    }
  }
}
