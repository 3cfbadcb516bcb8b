/**
 * Where the answer of a request with MCP tools goes (ResponsesMcp.ts): one Responses object, or,
 * streamed, the Responses API's events through the gateway's own Responses stream encoder (the
 * MCP items' `output_item.added`/`done` and their `response.mcp_list_tools.*`, `response.mcp_call.*`,
 * `response.mcp_call_arguments.*` events; the model's items as its usual text, reasoning and call
 * events; `response.completed` holding every item).
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import type { StreamEvent, Usage } from "../../domain/canonical.js"
import { type InferenceError, toCanonical } from "../../kernel/errors.js"
import { decodeOutputItem, responseObject } from "../../upstream/formats/openai-responses-answers.js"
import { ResponsesStreamEncoder } from "../../upstream/formats/openai-responses-stream.js"
import { str } from "../../upstream/formats/common.js"
import { responseEvents } from "../answers.js"
import { endStream, type HttpRequestContext, responseHeaders, sendJson, startStream, writeStream } from "../io.js"
import { listItem, type McpCallItem } from "./responsesTools.js"

/** How the answer ends: completed, or incomplete for a reason (`max_output_tokens`, `content_filter`, `max_tool_rounds`). */
export interface Finish {
  readonly incomplete?: string
}

export interface Sink {
  /** A server's `mcp_list_tools` item (`error`: it could not be listed). */
  readonly list: (label: string, tools: ReadonlyArray<Tool>, error?: string) => void
  /** An `mcp_call` about to run; answers the handle its end takes. */
  readonly callOpened: (item: McpCallItem) => number
  readonly callDone: (handle: number, item: McpCallItem) => void
  readonly approval: (item: Record<string, unknown>) => void
  /** Output items of a model round (messages, reasoning, the calls of the client's own tools), as the round answered them. */
  readonly model: (items: ReadonlyArray<Record<string, unknown>>) => void
  /** A failure: the error answer while nothing went out, else `response.failed` ending the stream. */
  readonly fail: (e: InferenceError) => Effect.Effect<void, InferenceError>
  /** Writes the answer's end with the rounds' usage; answers its output as the client got it (kept for previous_response_id). */
  readonly finish: (how: Finish, usage: Partial<Usage>) => ReadonlyArray<unknown>
}

export const makeSink = (ctx: HttpRequestContext, body: Record<string, unknown>, responseId: string, custom: ReadonlySet<string>): Sink =>
  body["stream"] === true ? streamSink(ctx, body, responseId, custom) : wholeSink(ctx, body, responseId, custom)

const wholeSink = (ctx: HttpRequestContext, body: Record<string, unknown>, responseId: string, custom: ReadonlySet<string>): Sink => {
  const output: Array<unknown> = []
  const created = Math.floor(Date.now() / 1000)
  return {
    list: (label, tools, error) => void output.push(listItem(label, tools, error)),
    callOpened: (item) => output.push(item) - 1,
    callDone: (handle, item) => {
      output[handle] = item
    },
    approval: (item) => void output.push(item),
    model: (items) => void output.push(...items),
    fail: (e) => Effect.fail(e),
    finish: (how, usage) => {
      const answer = responseObject(
        responseId,
        created,
        str(body["model"]) ?? "",
        how.incomplete === undefined ? "completed" : "incomplete",
        output,
        usage,
        { customTools: custom, request: body },
        how.incomplete === undefined ? {} : { incomplete_details: { reason: how.incomplete } }
      )
      sendJson(ctx, 200, answer)
      return output
    }
  }
}

const streamSink = (ctx: HttpRequestContext, body: Record<string, unknown>, responseId: string, custom: ReadonlySet<string>): Sink => {
  const encoder = new ResponsesStreamEncoder(str(body["model"]) ?? "", { customTools: custom, request: body, responseId })
  let started = false
  // Canonical block indices of the model's items, unique over the whole stream.
  let blocks = 0
  const write = (text: string) => {
    if (!started) {
      started = true
      startStream(ctx, responseHeaders(ctx, { "content-type": openAiStreamType, "cache-control": "no-cache", "x-accel-buffering": "no" }))
    }
    if (text !== "") writeStream(ctx, text)
  }
  const events = (item: Record<string, unknown>): ReadonlyArray<StreamEvent> => {
    const content = decodeOutputItem(item)
    const base = blocks
    blocks += content.length
    return responseEvents({ id: responseId, model: "", created: 0, content, stopReason: "end_turn" }).flatMap((ev): Array<StreamEvent> => {
      switch (ev.type) {
        case "start":
        case "usage":
        case "finish":
          return []
        case "block_start":
        case "block_stop":
        case "text_delta":
        case "reasoning_delta":
        case "tool_args_delta":
        case "signature":
          return [{ ...ev, index: ev.index + base }]
        default:
          return [ev]
      }
    })
  }
  return {
    list: (label, tools, error) => {
      const item = listItem(label, tools, error)
      const id = item["id"] as string
      const added = encoder.itemAdded({ ...item, tools: [] })
      write(
        added.text +
          encoder.itemEvent("response.mcp_list_tools.in_progress", added.outputIndex, id) +
          encoder.itemEvent(
            error === undefined ? "response.mcp_list_tools.completed" : "response.mcp_list_tools.failed",
            added.outputIndex,
            id
          ) +
          encoder.itemDone(added.outputIndex, item)
      )
    },
    callOpened: (item) => {
      const added = encoder.itemAdded({ ...item, arguments: "" })
      write(
        added.text +
          encoder.itemEvent("response.mcp_call_arguments.delta", added.outputIndex, item.id, { delta: item.arguments }) +
          encoder.itemEvent("response.mcp_call_arguments.done", added.outputIndex, item.id, { arguments: item.arguments }) +
          encoder.itemEvent("response.mcp_call.in_progress", added.outputIndex, item.id)
      )
      return added.outputIndex
    },
    callDone: (handle, item) =>
      write(
        encoder.itemEvent(item.status === "failed" ? "response.mcp_call.failed" : "response.mcp_call.completed", handle, item.id) +
          encoder.itemDone(handle, item as unknown as Record<string, unknown>)
      ),
    approval: (item) => {
      const added = encoder.itemAdded(item)
      write(added.text + encoder.itemDone(added.outputIndex, item))
    },
    model: (items) => {
      let text = ""
      for (const item of items) for (const ev of events(item)) text += encoder.push(ev)
      write(text)
    },
    fail: (e) => {
      if (!started) return Effect.fail(e)
      endStream(ctx, encoder.push({ type: "error", error: toCanonical(e) }), e.message)
      return Effect.void
    },
    finish: (how, usage) => {
      let text = encoder.push({ type: "usage", usage })
      const reason = how.incomplete
      text +=
        reason === undefined
          ? encoder.push({ type: "finish", stopReason: "end_turn" })
          : reason === "max_output_tokens" || reason === "content_filter"
            ? encoder.push({ type: "finish", stopReason: reason === "max_output_tokens" ? "max_tokens" : "content_filter" })
            : encoder.incomplete(reason)
      write("")
      endStream(ctx, text)
      return encoder.result().output
    }
  }
}

const openAiStreamType = "text/event-stream; charset=utf-8"
