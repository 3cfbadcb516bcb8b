/** openai-responses: streams decoded (encoded in openai-responses-stream.ts, whole answers in openai-responses-answers.ts). */
import { newId, type StreamEvent } from "../../domain/canonical.js"
import { malformedStream, num, obj, str, tryJson } from "./common.js"
import type { StreamDecoder } from "./format.js"
import { failureOf, stopOf, usageFromResponses } from "./openai-responses-answers.js"

/** Responses SSE events → canonical events. */
export class ResponsesStreamDecoder implements StreamDecoder {
  private readonly items = new Map<number, { index: number; kind: "text" | "tool" | "reasoning"; open: boolean }>()
  private next = 0
  private done = false
  private started = false
  private sawTools = false
  /** An event of a Responses stream came (`response.*`, `error`). */
  private recognized = false

  push(frame: { event?: string; data: string }): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    const ev = obj(tryJson(frame.data))
    if (!ev) return []
    const type = str(ev["type"]) ?? frame.event
    if (!this.recognized && type !== undefined && (type.startsWith("response.") || type === "error")) this.recognized = true
    const out: Array<StreamEvent> = []
    const outputIndex = num(ev["output_index"]) ?? 0
    switch (type) {
      case "response.created":
      case "response.in_progress": {
        if (this.started) break
        this.started = true
        const r = obj(ev["response"]) ?? {}
        out.push({
          type: "start",
          id: str(r["id"]) ?? newId("resp_"),
          model: str(r["model"]) ?? "",
          created: num(r["created_at"]) ?? Math.floor(Date.now() / 1000)
        })
        break
      }
      case "response.output_item.added": {
        const item = obj(ev["item"]) ?? {}
        const itemType = str(item["type"])
        if (itemType === "function_call" || itemType === "custom_tool_call") {
          const index = this.next++
          this.sawTools = true
          this.items.set(outputIndex, { index, kind: "tool", open: true })
          out.push({
            type: "block_start",
            index,
            block: { type: "tool_use", id: str(item["call_id"]) ?? newId("call_"), name: str(item["name"]) ?? "" }
          })
          const args = str(item["arguments"])
          if (args) out.push({ type: "tool_args_delta", index, partialJson: args })
        } else if (itemType === "reasoning") {
          const index = this.next++
          this.items.set(outputIndex, { index, kind: "reasoning", open: true })
          const itemId = str(item["id"])
          out.push({ type: "block_start", index, block: { type: "reasoning", ...(itemId ? { itemId } : {}) } })
        }
        break
      }
      case "response.output_text.delta":
      case "response.refusal.delta": {
        let entry = this.items.get(outputIndex)
        if (!entry) {
          entry = { index: this.next++, kind: "text", open: true }
          this.items.set(outputIndex, entry)
          out.push({ type: "block_start", index: entry.index, block: { type: "text" } })
        }
        const delta = str(ev["delta"])
        if (delta) out.push({ type: "text_delta", index: entry.index, text: delta })
        break
      }
      case "response.function_call_arguments.delta":
      case "response.custom_tool_call_input.delta": {
        const entry = this.items.get(outputIndex)
        const delta = str(ev["delta"])
        if (entry && delta)
          out.push({
            type: "tool_args_delta",
            index: entry.index,
            partialJson: type.startsWith("response.custom") ? JSON.stringify(delta).slice(1, -1) : delta
          })
        break
      }
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta": {
        const entry = this.items.get(outputIndex)
        const delta = str(ev["delta"])
        if (entry && delta) out.push({ type: "reasoning_delta", index: entry.index, text: delta })
        break
      }
      case "response.output_item.done": {
        const entry = this.items.get(outputIndex)
        const item = obj(ev["item"]) ?? {}
        if (entry?.kind === "reasoning" && str(item["encrypted_content"])) {
          out.push({ type: "signature", index: entry.index, signature: str(item["encrypted_content"])!, encrypted: true })
        }
        if (entry?.open) {
          entry.open = false
          out.push({ type: "block_stop", index: entry.index })
        }
        break
      }
      case "response.completed":
      case "response.incomplete": {
        const r = obj(ev["response"]) ?? {}
        this.done = true
        for (const entry of this.items.values()) {
          if (entry.open) out.push({ type: "block_stop", index: entry.index })
          entry.open = false
        }
        const usage = usageFromResponses(r["usage"])
        if (usage) out.push({ type: "usage", usage })
        out.push({ type: "finish", stopReason: stopOf(r, this.sawTools) })
        break
      }
      case "response.failed": {
        this.done = true
        out.push({
          type: "error",
          error: failureOf(obj(ev["response"]) ?? {}) ?? { status: 502, kind: "upstream", message: "the upstream response failed" }
        })
        break
      }
      case "error": {
        this.done = true
        const code = str(ev["code"])
        out.push({
          type: "error",
          error: {
            status: code === "rate_limit_exceeded" ? 429 : 502,
            kind: code === "rate_limit_exceeded" ? "rate_limit" : "upstream",
            message: str(ev["message"]) ?? "upstream error",
            code: code ?? null
          }
        })
        break
      }
    }
    return out
  }

  end(): ReadonlyArray<StreamEvent> {
    if (this.done) return []
    this.done = true
    if (!this.recognized) return [malformedStream("Responses event")]
    return [
      {
        type: "error",
        error: { status: 502, kind: "upstream", message: "upstream stream ended before response.completed", code: "stream_interrupted" }
      }
    ]
  }
}
