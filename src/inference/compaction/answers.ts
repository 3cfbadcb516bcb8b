/**
 * The answers to Codex's compaction requests, in the shapes Codex reads (docs/agents.md, "Codex
 * compaction"): a Responses response whose one output item is the compaction (the trigger form,
 * whole or as its stream's events), and the `/responses/compact` object (the user messages kept,
 * then the compaction item, as OpenAI answers it).
 */
import { newId } from "../../domain/canonical.js"
import { userMessages } from "./items.js"
import type { Compacted } from "./ResponsesCompaction.js"

/** The Responses response of a compaction: status `completed`, exactly one output item. */
export const compactionResponse = (c: Compacted, model: string, status: "in_progress" | "completed" = "completed") => ({
  id: newId("resp_"),
  object: "response",
  created_at: Math.floor(Date.now() / 1000),
  status,
  model,
  output: status === "completed" ? [c.item] : [],
  usage: status === "completed" ? c.usage : null,
  error: null,
  incomplete_details: null
})

/**
 * The events of a streamed compaction, in order: created, in progress, the item added and done,
 * completed (with the item in `output`): what a Responses stream of one item carries.
 */
export const compactionEvents = (c: Compacted, model: string): ReadonlyArray<Record<string, unknown>> => {
  const done = compactionResponse(c, model)
  const started = { ...done, status: "in_progress", output: [], usage: null }
  return [
    { type: "response.created", sequence_number: 0, response: started },
    { type: "response.in_progress", sequence_number: 1, response: started },
    { type: "response.output_item.added", sequence_number: 2, output_index: 0, item: c.item },
    { type: "response.output_item.done", sequence_number: 3, output_index: 0, item: c.item },
    { type: "response.completed", sequence_number: 4, response: done }
  ]
}

/** The events as SSE (`event:` lines, as OpenAI sends them). */
export const compactionSse = (c: Compacted, model: string): string =>
  compactionEvents(c, model)
    .map((e) => `event: ${String(e["type"])}\ndata: ${JSON.stringify(e)}\n\n`)
    .join("")

/** `POST /responses/compact`'s answer: the input's user messages, then the one compaction item. */
export const compactEndpointAnswer = (c: Compacted, input: unknown) => ({
  id: newId("resp_"),
  object: "response.compaction",
  created_at: Math.floor(Date.now() / 1000),
  output: [...userMessages(input), c.item],
  usage: c.usage
})
