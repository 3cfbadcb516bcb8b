/**
 * What a replay sends again (docs/replay.md): the requests of a recorded inspector session, of
 * usage rows whose bodies the inspector kept, or of a JSONL text, each with the answer recorded
 * with it when there is one.
 */
import type { FormatId } from "../../domain/canonical.js"
import { pathKind } from "../inspector/detect.js"
import type { InterceptedRequest } from "../inspector/types.js"
import { type Baseline, type RecordedRequest, SHADOW_HEADER } from "./exchange.js"

/** One request of a replay's source: replayable (with its recorded answer, if any), or why not. */
export type SourceItem =
  | {
      readonly ok: true
      readonly request: Omit<RecordedRequest, "requestId" | "scope">
      readonly origin: string
      readonly recorded: Baseline | null
    }
  | { readonly ok: false; readonly reason: string; readonly note: string }

/** The formats whose answers compare (embeddings and legacy completions do not). */
const COMPARED: ReadonlySet<FormatId> = new Set(["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"])

const streamOf = (format: FormatId, path: string, body: Readonly<Record<string, unknown>>): boolean =>
  format === "gemini" ? path.includes(":streamGenerateContent") : format === "ollama" ? body["stream"] !== false : body["stream"] === true

const asObject = (v: unknown): Record<string, unknown> | undefined =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined

/** A request to `pathAndQuery` with `body`, checked as the router would serve it. */
const requestOf = (
  pathAndQuery: string,
  body: unknown,
  origin: string
):
  | { readonly ok: true; readonly request: Omit<RecordedRequest, "requestId" | "scope"> }
  | { readonly ok: false; readonly reason: string; readonly note: string } => {
  const [path = "", query = ""] = pathAndQuery.split("?", 2)
  const kind = pathKind(path)
  if (kind === undefined || kind.format === null || !COMPARED.has(kind.format) || kind.apiKind === "api.generate")
    return {
      ok: false,
      reason: "not_replayable",
      note: `${origin}: ${path} is not a chat, messages, responses, generate-content or Ollama chat route`
    }
  const object = asObject(body)
  if (object === undefined) return { ok: false, reason: "not_replayable", note: `${origin}: the request body is not a JSON object` }
  const cleanQuery = new URLSearchParams(query)
  // A key in the query is the recorded client's, never reused.
  cleanQuery.delete("key")
  const format: FormatId = kind.format
  return { ok: true, request: { format, path, query: cleanQuery.toString(), body: object, stream: streamOf(format, path, object) } }
}

/** An inspector entry (a session's, a usage row's, or a line of a session's JSONL export). */
export const fromEntry = (e: InterceptedRequest, origin: string): SourceItem => {
  if (e.requestHeaders?.[SHADOW_HEADER] !== undefined)
    return { ok: false, reason: "shadow_call", note: `${origin}: a shadow or replay call itself` }
  if (e.detectedKind !== "llm" || e.llm === null) return { ok: false, reason: "not_replayable", note: `${origin}: not an LLM call` }
  if (e.requestBody === null)
    return {
      ok: false,
      reason: "body_not_kept",
      note: `${origin}: its body was not kept (bodies are kept while a session records or someone looks)`
    }
  if (e.requestBody.truncated || e.requestBody.encoding !== "utf8")
    return { ok: false, reason: "body_truncated", note: `${origin}: its body was truncated or binary` }
  let body: unknown
  try {
    body = JSON.parse(e.requestBody.text)
  } catch {
    return { ok: false, reason: "not_replayable", note: `${origin}: its body is not JSON` }
  }
  let pathAndQuery = e.path
  try {
    const url = new URL(e.url)
    pathAndQuery = `${url.pathname}${url.search}`
  } catch {
    // The path as recorded.
  }
  const checked = requestOf(pathAndQuery, body, origin)
  if (!checked.ok) return checked
  const response = e.responseBody
  const type = String(e.responseHeaders?.["content-type"] ?? "")
  const recorded: Baseline | null =
    e.status === 200 && response !== null && !response.truncated && response.encoding === "utf8" && response.text !== ""
      ? {
          model: e.llm.mappedTo ?? e.llm.model,
          text: response.text,
          streamed: /event-stream|ndjson/.test(type) || (checked.request.format === "gemini" && response.text.trimStart().startsWith("[")),
          latencyMs: e.timings.totalMs,
          ttftMs: /event-stream|ndjson/.test(type) ? e.timings.ttfbMs : null,
          tokens: e.llm.tokensIn === null && e.llm.tokensOut === null ? null : { input: e.llm.tokensIn ?? 0, output: e.llm.tokensOut ?? 0 },
          costUsd: e.llm.costEstimateUsd
        }
      : null
  return { ok: true, request: checked.request, origin, recorded }
}

/** A JSONL line that is not usable: the whole source is refused with this message. */
export class JsonlError extends Error {}

/**
 * The lines of a JSONL text. Each line is one of: an inspector entry (a session's JSONL export);
 * `{"path": "/v1/messages", "body": {...}, "response": <the answer: its JSON, or its stream's text>}`
 * (`path` defaults to `/v1/chat/completions`, `response` is optional); or a bare Chat Completions
 * body. Blank lines are skipped; a line that is none of these refuses the whole text.
 */
export const fromJsonl = (text: string): ReadonlyArray<SourceItem> => {
  const items: Array<SourceItem> = []
  const lines = text.split(/\r?\n/)
  lines.forEach((line, i) => {
    if (line.trim() === "") return
    const origin = `line ${i + 1}`
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch (e) {
      throw new JsonlError(`source.jsonl ${origin} is not JSON: ${(e as Error).message}`)
    }
    const o = asObject(value)
    if (o === undefined) throw new JsonlError(`source.jsonl ${origin} is not a JSON object`)
    if ("requestBody" in o && ("url" in o || "path" in o)) return void items.push(fromEntry(o as unknown as InterceptedRequest, origin))
    if ("body" in o) {
      if (o["path"] !== undefined && typeof o["path"] !== "string") throw new JsonlError(`source.jsonl ${origin}: path must be a string`)
      const path = (o["path"] as string | undefined) ?? "/v1/chat/completions"
      if (!path.startsWith("/")) throw new JsonlError(`source.jsonl ${origin}: path must start with / (got ${JSON.stringify(path)})`)
      const checked = requestOf(path, o["body"], origin)
      if (!checked.ok) throw new JsonlError(`source.jsonl ${checked.note}`)
      const response = o["response"]
      const recorded: Baseline | null =
        response === undefined || response === null
          ? null
          : {
              model: typeof o["model"] === "string" ? o["model"] : null,
              text: typeof response === "string" ? response : JSON.stringify(response),
              streamed: typeof response === "string",
              latencyMs: typeof o["latencyMs"] === "number" ? o["latencyMs"] : null,
              ttftMs: null,
              tokens: null,
              costUsd: typeof o["costUsd"] === "number" ? o["costUsd"] : null
            }
      return void items.push({ ok: true, request: checked.request, origin, recorded })
    }
    if (Array.isArray(o["messages"])) {
      const checked = requestOf("/v1/chat/completions", o, origin)
      if (!checked.ok) throw new JsonlError(`source.jsonl ${checked.note}`)
      return void items.push({ ok: true, request: checked.request, origin, recorded: null })
    }
    throw new JsonlError(
      `source.jsonl ${origin} is neither an inspector entry, {"path", "body", "response"}, nor a Chat Completions body with messages`
    )
  })
  if (items.length === 0) throw new JsonlError("source.jsonl holds no request")
  return items
}
