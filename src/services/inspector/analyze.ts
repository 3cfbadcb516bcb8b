/**
 * What the inspector reads of an LLM call (metadata and the normalized conversation), with the gateway's own format decoders, stream
 * parsers and `StreamCollector`: no second set of parsers (docs/inspector.md#what-an-entry-holds).
 */
import { createHash } from "node:crypto"
import type { CanonicalRequest, CanonicalResponse, ContentBlock, FormatId, Usage } from "../../domain/canonical.js"
import { StreamCollector } from "../../upstream/formats/collect.js"
import { type Frame, NdjsonParser, SseParser } from "../../upstream/formats/frames.js"
import { FORMATS } from "../../upstream/formats/registry.js"
import type { Conversation, Turn, TurnBlock } from "./types.js"

/** Raw events kept of a stream the inspector cannot merge. */
const MAX_RAW_EVENTS = 500

/** 12 hex characters of the SHA-256 of the system prompt (spec document 3, `contextKey`). */
export const contextKeyOf = (system: string | null): string | null =>
  system === null || system === "" ? null : createHash("sha256").update(system, "utf8").digest("hex").slice(0, 12)

const textOf = (blocks: ReadonlyArray<{ readonly type: string; readonly text?: string }>): string =>
  blocks
    .filter((b) => b.type === "text")
    .map((b) => b.text ?? "")
    .join("\n")

const blockOf = (b: ContentBlock): TurnBlock | undefined => {
  switch (b.type) {
    case "text":
      return { type: "text", text: b.text }
    case "reasoning":
      return b.text === "" ? undefined : { type: "reasoning", text: b.text }
    case "tool_use":
      return { type: "tool_use", id: b.id, name: b.name, input: b.input }
    case "tool_result":
      return { type: "tool_result", toolUseId: b.toolUseId, content: textOf(b.content), ...(b.isError ? { isError: true } : {}) }
    case "image":
      return { type: "image", mediaType: b.source.kind === "base64" ? b.source.mediaType : null }
  }
}

const blocksOf = (content: ReadonlyArray<ContentBlock>): ReadonlyArray<TurnBlock> => content.flatMap((b) => blockOf(b) ?? [])

/** The request's turns: the system prompt first (as one turn), then the messages. */
export const requestTurns = (req: CanonicalRequest): ReadonlyArray<Turn> => {
  const turns: Array<Turn> = []
  const system = textOf(req.system)
  if (system !== "") turns.push({ role: "system", blocks: [{ type: "text", text: system }] })
  for (const m of req.messages) turns.push({ role: m.role, blocks: blocksOf(m.content) })
  return turns
}

/** The system prompt a request carries (the first system message, the `system` field, the system instruction). */
export const systemOf = (req: CanonicalRequest): string | null => {
  const s = textOf(req.system)
  return s === "" ? null : s
}

export interface RequestReading {
  readonly canonical: CanonicalRequest | undefined
  readonly model: string | null
  readonly stream: boolean
}

/** A Gemini path's model (`/v1beta/models/gemini-2.5-pro:streamGenerateContent`). */
const modelOfPath = (path: string): string | null => {
  const m = /\/models\/([^/:?]+)(?::|$)/.exec(path)
  return m ? decodeURIComponent(m[1]!) : null
}

/** A request body read by its wire format; undefined canonical when it does not decode. */
export const readRequest = (format: FormatId | null, body: unknown, path: string): RequestReading => {
  const b = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined
  const model = (typeof b?.["model"] === "string" ? b["model"] : null) ?? modelOfPath(path)
  const stream = b?.["stream"] === true || /:streamGenerateContent/.test(path)
  if (format === null || b === undefined) return { canonical: undefined, model, stream }
  try {
    // Gemini carries its model in the path: the decoder wants one in the body.
    const decodable = format === "gemini" && b["model"] === undefined ? { ...b, model: model ?? "" } : b
    return { canonical: FORMATS[format].decodeRequest(decodable), model, stream }
  } catch {
    return { canonical: undefined, model, stream }
  }
}

export interface AnswerReading {
  readonly turns: ReadonlyArray<Turn>
  readonly usage: Partial<Usage> | undefined
  readonly model: string | null
  readonly rawEvents?: ReadonlyArray<Frame>
}

const answerTurns = (res: CanonicalResponse): ReadonlyArray<Turn> =>
  res.content.length === 0 ? [] : [{ role: "assistant", blocks: blocksOf(res.content) }]

/**
 * A stream's text merged into the final message by its format's own parser, decoder and the
 * collector; a format the inspector does not know (or a stream that does not decode) keeps its
 * raw events, bounded.
 */
export const mergeStream = (format: FormatId | null, text: string, framing: "sse" | "ndjson"): AnswerReading => {
  const parser = framing === "ndjson" ? new NdjsonParser() : new SseParser()
  let frames: Array<Frame>
  try {
    frames = parser.push(text)
    frames.push(...parser.end())
  } catch {
    return { turns: [], usage: undefined, model: null, rawEvents: [] }
  }
  const raw = () => frames.slice(0, MAX_RAW_EVENTS)
  if (format === null) return { turns: [], usage: undefined, model: null, rawEvents: raw() }
  try {
    const decoder = FORMATS[format].streamDecoder()
    const collector = new StreamCollector()
    for (const f of frames) {
      if (f.data === "[DONE]") continue
      collector.push(decoder.push(f))
    }
    collector.push(decoder.end())
    const res = collector.result("")
    return { turns: answerTurns(res), usage: res.usage, model: res.model || null }
  } catch {
    return { turns: [], usage: undefined, model: null, rawEvents: raw() }
  }
}

/** A whole answer decoded by its format. */
export const readAnswer = (format: FormatId | null, body: unknown): AnswerReading => {
  if (format === null || body === undefined) return { turns: [], usage: undefined, model: null }
  const f = FORMATS[format]
  try {
    if (f.isErrorBody(body)) return { turns: [], usage: undefined, model: null }
    const res = f.decodeResponse(body)
    return { turns: answerTurns(res), usage: res.usage ?? f.usageOfResponse(body), model: res.model || null }
  } catch {
    try {
      return { turns: [], usage: f.usageOfResponse(body), model: null }
    } catch {
      return { turns: [], usage: undefined, model: null }
    }
  }
}

/** The conversation of a request and its answer. */
export const conversationOf = (request: RequestReading, answer: AnswerReading | undefined): Conversation => {
  const system = request.canonical ? systemOf(request.canonical) : null
  return {
    request: request.canonical ? requestTurns(request.canonical) : [],
    response: answer?.turns ?? [],
    contextKey: contextKeyOf(system),
    ...(answer?.rawEvents !== undefined ? { rawEvents: answer.rawEvents } : {})
  }
}
