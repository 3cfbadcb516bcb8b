import type { ImageSource, Message, StreamEvent, TextBlock, ToolResultBlock, ToolUseBlock } from "../../domain/canonical.js"

/** `data:image/png;base64,...` → base64 source; anything else is a URL. */
export const imageSourceFromUrl = (url: string): ImageSource => {
  const m = /^data:([^;,]+)?(;base64)?,(.*)$/s.exec(url)
  if (m && m[2]) return { kind: "base64", mediaType: m[1] ?? "application/octet-stream", data: m[3] ?? "" }
  return { kind: "url", url }
}

export const imageSourceToUrl = (source: ImageSource): string =>
  source.kind === "url" ? source.url : `data:${source.mediaType};base64,${source.data}`

/**
 * Gemini's thoughtSignature must come back with its functionCall. Client formats without a
 * place for it carry it inside the tool-call id, the one field every client echoes back:
 * `<id>__ts__<base64url of the signature's bytes>` (only [A-Za-z0-9_-], valid in every format's
 * id; the signature comes back byte for byte, whatever its own encoding).
 */
const SIGNATURE_MARK = "__ts__"

export const idWithSignature = (id: string, signature: string | undefined): string =>
  signature ? `${id}${SIGNATURE_MARK}${Buffer.from(signature, "utf8").toString("base64url")}` : id

/** The id as the upstream issued it, and the signature it carries (exactly as received). */
export const splitSignedId = (id: string): { readonly id: string; readonly signature?: string } => {
  const at = id.indexOf(SIGNATURE_MARK)
  if (at === -1) return { id }
  return { id: id.slice(0, at), signature: Buffer.from(id.slice(at + SIGNATURE_MARK.length), "base64url").toString("utf8") }
}

const toolUses = (m: Message): Array<ToolUseBlock> => m.content.filter((b): b is ToolUseBlock => b.type === "tool_use")
const toolResults = (m: Message): Array<ToolResultBlock> => m.content.filter((b): b is ToolResultBlock => b.type === "tool_result")

/**
 * Makes tool history valid for every target format: each assistant message with tool calls is
 * followed by exactly one `tool` message answering all of them; results that answer no call
 * become plain user text (so nothing the client sent is lost); calls without a result get an
 * explicit "no result" result; results carry the tool's name.
 */
export const repairToolHistory = (input: ReadonlyArray<Message>): Array<Message> => {
  const messages = joinAssistantTurns(input)
  const out: Array<Message> = []
  let pending: Array<ToolUseBlock> = []
  let answered = new Map<string, ToolResultBlock>()

  const flushPending = () => {
    if (pending.length === 0) return
    out.push({
      role: "tool",
      content: pending.map(
        (call) =>
          answered.get(call.id) ?? {
            type: "tool_result",
            toolUseId: call.id,
            name: call.name,
            content: [{ type: "text", text: "(no result was recorded for this tool call)" }],
            isError: true
          }
      )
    })
    pending = []
    answered = new Map()
  }

  for (const m of messages) {
    const results = toolResults(m)
    if (results.length > 0) {
      const others = m.content.filter((b) => b.type !== "tool_result")
      const orphans: Array<TextBlock> = []
      for (const r of results) {
        const call = pending.find((c) => c.id === r.toolUseId)
        if (call) answered.set(call.id, { ...r, name: r.name ?? call.name })
        else orphans.push({ type: "text", text: `Result of tool call ${r.toolUseId}${r.name ? ` (${r.name})` : ""}: ${resultText(r)}` })
      }
      if (pending.length > 0 && answered.size === pending.length) flushPending()
      const rest = [...orphans, ...others]
      if (rest.length > 0) {
        flushPending()
        out.push({ role: m.role === "tool" ? "user" : m.role, content: rest })
      }
      continue
    }
    if (m.content.length === 0) continue
    flushPending()
    out.push(m)
    if (m.role === "assistant") pending = toolUses(m)
  }
  flushPending()
  return mergeAdjacent(out)
}

/**
 * One assistant turn may arrive as several consecutive assistant messages: @google/genai's chat
 * keeps every streamed chunk as its own `model` entry (one tool call, one piece of text, one
 * signature each). Empty messages are dropped and consecutive assistant messages joined, so
 * parallel calls stay one turn; at each seam, text continues text, and unsigned reasoning
 * continues into the reasoning that follows it (which carries the signature for the whole).
 */
const joinAssistantTurns = (messages: ReadonlyArray<Message>): Array<Message> => {
  const out: Array<Message> = []
  for (const m of messages) {
    if (m.content.length === 0) continue
    const last = out[out.length - 1]
    if (!last || last.role !== "assistant" || m.role !== "assistant") {
      out.push(m)
      continue
    }
    const content = [...last.content]
    const tail = content[content.length - 1]
    const [head, ...rest] = m.content
    if (tail?.type === "text" && head?.type === "text") content[content.length - 1] = { type: "text", text: tail.text + head.text }
    else if (
      tail?.type === "reasoning" &&
      head?.type === "reasoning" &&
      !tail.signature &&
      !tail.redacted &&
      !tail.encrypted &&
      !head.redacted &&
      !head.encrypted
    )
      content[content.length - 1] = { ...head, text: tail.text + head.text }
    else content.push(head!)
    out[out.length - 1] = { role: "assistant", content: [...content, ...rest] }
  }
  return out
}

/** Adjacent messages of the same role (user, user) become one; tool messages stay separate. */
const mergeAdjacent = (messages: ReadonlyArray<Message>): Array<Message> => {
  const out: Array<Message> = []
  for (const m of messages) {
    const last = out[out.length - 1]
    if (last && last.role === m.role && m.role !== "tool" && !toolUses(last).length) {
      out[out.length - 1] = { role: m.role, content: [...last.content, ...m.content] }
    } else out.push(m)
  }
  return out
}

export const resultText = (r: ToolResultBlock): string => r.content.map((c) => (c.type === "text" ? c.text : "[image]")).join("\n")

/** Reads a number field that may be absent or null. */
export const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined)

export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)

export const obj = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined

export const arr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])

export const nowSeconds = (): number => Math.floor(Date.now() / 1000)

/** Parses a JSON text, or undefined. */
/** The message of an error inside a 2xx answer: the error itself when it is a string, else its `message`. */
export const messageIn200 = (e: unknown): string =>
  typeof e === "string" ? e : ((obj(e)?.["message"] as string | undefined) ?? "the upstream answered 200 with an error body")

export const tryJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * A format's `answerProblem`: undefined when a whole 2xx answer carries what every answer of the
 * format has (`has`), else what is missing (`what`) and the keys the body had instead (names
 * only, never values).
 */
export const answerProblem =
  (has: (body: Record<string, unknown>) => boolean, what: string) =>
  (raw: unknown): string | undefined => {
    const body = obj(raw)
    if (body !== undefined && has(body)) return undefined
    const keys = body === undefined ? [] : Object.keys(body).slice(0, 8)
    const found =
      body === undefined
        ? Array.isArray(raw)
          ? "an array"
          : raw === null
            ? "null"
            : `a ${typeof raw}`
        : keys.length === 0
          ? "an empty object"
          : `an object with ${keys.map((k) => JSON.stringify(k.slice(0, 40))).join(", ")}`
    return `upstream answered 200 with JSON that is not ${what} (${found})`
  }

/**
 * What a stream decoder ends with when the stream carried no event of its format at all (HTML,
 * another format, garbage): the 200 did not keep its promise. Not a cut (`stream_interrupted`):
 * nothing of an answer ever began.
 */
export const malformedStream = (what: string): StreamEvent => ({
  type: "error",
  error: {
    status: 502,
    kind: "upstream",
    message: `upstream answered 200 with a stream that carried no ${what}`,
    code: "upstream_malformed"
  }
})

/** The message of an upstream error that has no structured one: status and the start of the body. */
export const fallbackMessage = (status: number, text: string): string => {
  const body = text.trim().slice(0, 500)
  return `upstream answered HTTP ${status}${body ? `: ${body}` : ""}`
}

/**
 * A custom tool (free-form text input, OpenAI's `type: "custom"`) in canonical form: a function
 * with one string argument, `input`.
 */
export const CUSTOM_TOOL_PARAMETERS = {
  type: "object",
  properties: { input: { type: "string", description: "The tool input." } },
  required: ["input"]
}

/** The text input of a call to a custom tool, from its canonical arguments (JSON text). */
export const customToolInput = (args: string): string => {
  const parsed = tryJson(args)
  return str(obj(parsed)?.["input"]) ?? args
}
