/**
 * The `summarize` engine's pure parts: where the conversation is cut (in steps of `keepLastTurns`, so one summary and
 * prompt-cache prefix serves several turns), the transcript, and the body with the summary in (docs/compression.md#summarize).
 */
import * as Schema from "effect/Schema"
import { strict } from "../../domain/parse.js"
import type { FormatId } from "../../domain/canonical.js"
import { segmentsOf } from "./walk.js"

export const SummarizeConfig = Schema.Struct({
  /** The model that writes summaries (any model id the gateway serves: `provider/model`, a combo). Null: the engine is off. */
  model: Schema.optionalWith(Schema.NullOr(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300))), { default: () => null }),
  /** Conversations with fewer entries are left whole. */
  minTurns: Schema.optionalWith(Schema.Int.pipe(Schema.between(4, 10_000)), { default: () => 16 }),
  /** The newest entries always sent as they are; the cut moves in steps of this many. */
  keepLastTurns: Schema.optionalWith(Schema.Int.pipe(Schema.between(2, 1_000)), { default: () => 8 }),
  /** The summary's length the model is asked for (max_tokens). */
  maxSummaryTokens: Schema.optionalWith(Schema.Int.pipe(Schema.between(50, 8_000)), { default: () => 800 }),
  /**
   * `background` (default): a request whose summary is not ready yet goes whole, and the summary is
   * made for the next turns; `wait`: the request waits for it (up to `timeoutMs`, then goes whole).
   */
  mode: Schema.optionalWith(Schema.Literal("background", "wait"), { default: () => "background" as const }),
  timeoutMs: Schema.optionalWith(Schema.Int.pipe(Schema.between(1_000, 300_000)), { default: () => 30_000 })
}).annotations(strict)
export type SummarizeConfig = typeof SummarizeConfig.Type

type Body = Readonly<Record<string, unknown>>
const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined

/** The conversation array of a body and its key, when the format has one. */
const conversation = (
  format: FormatId,
  endpoint: string,
  body: Body
): { readonly key: string; readonly list: ReadonlyArray<unknown> } | undefined => {
  const key =
    format === "gemini"
      ? Array.isArray(body["contents"])
        ? "contents"
        : undefined
      : format === "openai-responses"
        ? "input"
        : endpoint === "api.generate" || endpoint === "completions"
          ? undefined
          : "messages"
  if (!key) return undefined
  const list = body[key]
  return Array.isArray(list) ? { key, list } : undefined
}

const isSystem = (format: FormatId, m: unknown) => {
  const role = obj(m)?.["role"]
  return (format === "openai-chat" || format === "ollama" || format === "openai-responses") && (role === "system" || role === "developer")
}

/** A user's own message (not a tool result): the only place a cut may land. */
const isUserTurn = (format: FormatId, m: unknown): boolean => {
  const o = obj(m)
  if (!o) return false
  switch (format) {
    case "openai-chat":
    case "ollama":
      return o["role"] === "user"
    case "anthropic":
      return (
        o["role"] === "user" &&
        (typeof o["content"] === "string" || (Array.isArray(o["content"]) && !o["content"].some((b) => obj(b)?.["type"] === "tool_result")))
      )
    case "openai-responses":
      return (o["type"] === "message" || o["type"] === undefined) && o["role"] === "user"
    case "gemini":
      return o["role"] === "user" && Array.isArray(o["parts"]) && !o["parts"].some((p) => obj(p)?.["functionResponse"] !== undefined)
  }
}

export interface Cut {
  readonly key: string
  /** Leading system entries kept in place. */
  readonly lead: number
  /** Entries [lead, end) are summarised. */
  readonly end: number
  /** The older part as a transcript (role: text), what the summary is made of and keyed by. */
  readonly transcript: string
}

/** Where this request's conversation is cut, or undefined when it is too short (or has no safe place). */
export const cutOf = (format: FormatId, endpoint: string, body: Body, c: SummarizeConfig): Cut | undefined => {
  const conv = conversation(format, endpoint, body)
  if (!conv) return undefined
  let lead = 0
  while (lead < conv.list.length && isSystem(format, conv.list[lead])) lead++
  const n = conv.list.length - lead
  if (n < c.minTurns) return undefined
  // Stepped: the cut only moves every keepLastTurns entries.
  let end = lead + Math.floor((n - c.keepLastTurns) / c.keepLastTurns) * c.keepLastTurns
  while (end > lead && !isUserTurn(format, conv.list[end])) end--
  if (end - lead < 2) return undefined
  const older = conv.list.slice(lead, end)
  const part = { ...body, [conv.key]: older }
  const lines = segmentsOf(format, endpoint, part)
    .filter((s) => s.segment.role !== "system")
    .map(
      (s) => `${s.segment.kind === "tool-result" ? `tool${s.segment.toolName ? ` ${s.segment.toolName}` : ""}` : s.segment.role}: ${s.text}`
    )
  if (lines.length === 0) return undefined
  return { key: conv.key, lead, end, transcript: lines.join("\n\n") }
}

const ACK = "Understood; I will continue from this summary."

/** The body with the cut part replaced by the summary (a user message and an acknowledgement). */
export const withSummary = (format: FormatId, body: Body, cut: Cut, summary: string): Record<string, unknown> => {
  const list = body[cut.key] as ReadonlyArray<unknown>
  const text = `Summary of the earlier part of this conversation (made by the gateway to save context):\n\n${summary.trim()}`
  const pair: ReadonlyArray<unknown> =
    format === "gemini"
      ? [
          { role: "user", parts: [{ text }] },
          { role: "model", parts: [{ text: ACK }] }
        ]
      : format === "openai-responses"
        ? [
            { type: "message", role: "user", content: text },
            { type: "message", role: "assistant", content: ACK }
          ]
        : [
            { role: "user", content: text },
            { role: "assistant", content: ACK }
          ]
  return { ...body, [cut.key]: [...list.slice(0, cut.lead), ...pair, ...list.slice(cut.end)] }
}

/** What the summarising model is asked. */
export const summaryPrompt = (transcript: string) =>
  [
    "Summarise the earlier part of a conversation between a user and a coding assistant, so the assistant can continue without it.",
    "Keep every decision, requirement, file path, identifier, command, error and open task exactly; drop pleasantries and repetition.",
    "Answer with the summary only.",
    "",
    "<conversation>",
    transcript,
    "</conversation>"
  ].join("\n")
