/**
 * Codex's remote compaction, as the gateway serves it for every upstream (docs/agents.md, "Codex
 * compaction"): what a compaction request looks like, the prompt the summary is asked with, and the
 * `compaction` items the gateway issues (the summary sealed with the storage key, marked so the gateway
 * knows its own) and opens again into a message before a request goes upstream. Plain functions over
 * Responses bodies; the service (ResponsesCompaction.ts) holds the key and the calls.
 */
import { arr, obj, str } from "../../upstream/formats/common.js"

/** The mark of a compaction item the gateway sealed: the rest is the storage key's sealing (`v1:` AES-256-GCM). */
export const GATEWAY_ITEM_PREFIX = "gwcmp1:"

/** The item Codex puts last in a `/responses` input to ask for a compaction (its remote compaction v2). */
export const TRIGGER_TYPE = "compaction_trigger"

/**
 * Whether a Responses body asks for a compaction: its input's last item is the trigger. One
 * property read on the last item; a request without it pays nothing more.
 */
export const isCompactionTrigger = (body: Record<string, unknown>): boolean => {
  const input = body["input"]
  if (!Array.isArray(input) || input.length === 0) return false
  const last = input[input.length - 1] as { type?: unknown } | null
  return typeof last === "object" && last !== null && last.type === TRIGGER_TYPE
}

/**
 * The index of the first compaction item the gateway issued in `input`, or -1: one type test
 * per item, and a prefix test on the items of type `compaction`.
 */
export const firstGatewayItem = (input: unknown): number => {
  if (!Array.isArray(input)) return -1
  for (let i = 0; i < input.length; i++) {
    const item = input[i] as { type?: unknown; encrypted_content?: unknown } | null
    if (item !== null && typeof item === "object" && item.type === "compaction") {
      const e = item.encrypted_content
      if (typeof e === "string" && e.startsWith(GATEWAY_ITEM_PREFIX)) return i
    }
  }
  return -1
}

/** Whether an encrypted_content is one the gateway sealed. */
export const isGatewayItem = (encrypted: unknown): boolean => typeof encrypted === "string" && encrypted.startsWith(GATEWAY_ITEM_PREFIX)

/** What a gateway item holds, sealed. */
export interface SealedSummary {
  readonly v: 1
  /** The summary's text. */
  readonly summary: string
  /** The model that wrote it. */
  readonly model: string
  /** When (unix seconds). */
  readonly at: number
}

/** The text a summary goes upstream as, inside a user message, whatever the upstream's format. */
export const summaryMessageText = (summary: string): string =>
  `The conversation so far was compacted to stay within the context window. This is the summary of everything before this point, written for you to continue the work without the earlier transcript:\n\n${summary}`

/** The message an opened gateway item becomes: a user message, which every format carries. */
export const summaryMessage = (summary: string): Record<string, unknown> => ({
  type: "message",
  role: "user",
  content: [{ type: "input_text", text: summaryMessageText(summary) }]
})

/**
 * The instruction a summary is asked with, last in the conversation it summarises. What the next
 * model needs to go on without the transcript: the goal, what was decided, the files, where the
 * work stands, what failed, what is left.
 */
export const COMPACTION_PROMPT = `Your context window is about to be compacted. Write a handoff summary of this conversation for the assistant that will continue it with no access to the transcript above. It replaces the whole transcript, so keep everything needed to go on and nothing else.

Use these sections, each with short bullet points:

1. Goal: what the user asked for, in their terms, with every requirement, constraint and preference they stated (including corrections they made along the way).
2. Decisions: what was decided or agreed and why, including approaches tried and rejected.
3. Files and commands: every file read, created or changed (exact paths) and what changed in it; commands run that matter and what they showed; identifiers, names, versions, URLs and values that will be needed again.
4. Current state: what is done and verified, what is done but unverified, and what the last step was.
5. Errors: errors and failures met (exact messages where useful), what caused them, and whether they are fixed.
6. Open tasks: what is left to do, in order, starting with the very next step.

Be specific and literal: quote paths, names and commands exactly. Do not invent anything that is not in the conversation. Do not call tools. Answer with the summary only.`

/**
 * The body of the request a summary is asked with: the conversation (the trigger left out, gateway
 * items already opened) and the compaction prompt last; the tools stay declared (Anthropic refuses
 * tool calls in a history without them) but none may be called; no reasoning, no storing.
 */
export const summaryRequestBody = (body: Record<string, unknown>, model: string): Record<string, unknown> => {
  const input = arr(body["input"]) ?? (typeof body["input"] === "string" ? [{ type: "message", role: "user", content: body["input"] }] : [])
  const conversation = input.filter((i) => obj(i)?.["type"] !== TRIGGER_TYPE)
  const out: Record<string, unknown> = {
    model,
    stream: false,
    store: false,
    input: [...conversation, { type: "message", role: "user", content: [{ type: "input_text", text: COMPACTION_PROMPT }] }]
  }
  const instructions = str(body["instructions"])
  if (instructions) out["instructions"] = instructions
  const tools = arr(body["tools"])
  if (tools && tools.length > 0) {
    out["tools"] = tools
    out["tool_choice"] = "none"
  }
  return out
}

/** The user messages of a compacted input, as OpenAI's `/responses/compact` keeps them before its compaction item. */
export const userMessages = (input: unknown): Array<unknown> =>
  (arr(input) ?? []).filter((i) => {
    const o = obj(i)
    return o?.["type"] === "message" && o["role"] === "user"
  })

/** The text of a Responses answer's message items. */
export const answerText = (answer: unknown): string =>
  (arr(obj(answer)?.["output"]) ?? [])
    .flatMap((item) => {
      const o = obj(item)
      if (o?.["type"] !== "message") return []
      return (arr(o["content"]) ?? []).flatMap((c) => {
        const part = obj(c)
        return part?.["type"] === "output_text" && typeof part["text"] === "string" ? [part["text"]] : []
      })
    })
    .join("")
    .trim()
