/**
 * What the inspector buffer (buffer.ts) shows and says, needing none of its state: the list filter and
 * what it keeps (`select`), an entry's summary (the feed's events and lists), recording sessions and
 * their view, the replay's route and way in, the inspector's errors, what it tells the node's other
 * processes (share.ts).
 */
import type { FormatId } from "../../domain/canonical.js"
import type { InterceptedRequest } from "./types.js"

export type EntrySummary = Omit<
  InterceptedRequest,
  "requestBody" | "responseBody" | "conversation" | "upstream" | "requestHeaders" | "responseHeaders"
> & {
  readonly hasBodies: boolean
}

export type FeedEvent =
  | { readonly type: "new"; readonly entry: EntrySummary }
  | { readonly type: "update"; readonly entry: EntrySummary }
  | { readonly type: "clear" }

export interface ListFilter {
  readonly profile?: "llm" | "all" | undefined
  readonly host?: string | undefined
  readonly agent?: string | undefined
  readonly status?: string | undefined
  readonly source?: string | undefined
  readonly sessionId?: string | undefined
  readonly limit?: number | undefined
}

export interface SessionView {
  readonly id: string
  readonly name: string | null
  readonly state: "recording" | "saved"
  readonly startedAt: number
  readonly stoppedAt: number | null
  readonly count: number
  /** Entries left out past the session's limit (INSPECTOR_BUFFER_SIZE). */
  readonly dropped: number
}

/** The list filter's `status` (in-flight, error, 2xx, 404, ok, failed); the CLI's live tail filters by it too. */
export const statusMatches = (status: InterceptedRequest["status"], want: string): boolean => {
  if (want === "in-flight" || want === "error") return status === want
  if (/^[1-5]xx$/.test(want)) return typeof status === "number" && Math.floor(status / 100) === Number(want[0])
  if (/^\d{3}$/.test(want)) return status === Number(want)
  if (want === "ok") return typeof status === "number" && status < 400
  if (want === "failed") return status === "error" || (typeof status === "number" && status >= 400)
  return true
}

const matches = (e: InterceptedRequest, f: ListFilter): boolean =>
  (f.profile !== "llm" || e.detectedKind === "llm" || e.llm !== null) &&
  (f.host === undefined || e.host === f.host || e.host.endsWith(`.${f.host}`)) &&
  (f.agent === undefined || e.agent === f.agent) &&
  (f.status === undefined || statusMatches(e.status, f.status)) &&
  (f.source === undefined || e.source === f.source)

/** The entries of `list` (oldest first) that `filter` keeps: the newest `limit` of them. */
export const select = (list: ReadonlyArray<InterceptedRequest>, filter: ListFilter): ReadonlyArray<InterceptedRequest> => {
  const hit = list.filter((e) => matches(e, filter))
  return filter.limit !== undefined && hit.length > filter.limit ? hit.slice(hit.length - filter.limit) : hit
}

export const summaryOf = (e: InterceptedRequest): EntrySummary => {
  const { requestBody, responseBody, conversation: _c, upstream: _u, requestHeaders: _rq, responseHeaders: _rs, ...rest } = e
  return { ...rest, hasBodies: requestBody !== null || responseBody !== null }
}

export interface RecordingSession {
  readonly id: string
  name: string | null
  readonly startedAt: number
  readonly entries: Map<string, InterceptedRequest>
  dropped: number
}

export class InspectorError extends Error {
  constructor(
    readonly status: 400 | 404 | 409 | 502,
    readonly code: string,
    message: string
  ) {
    super(message)
  }
}

/** The gateway route a captured LLM call replays through. */
export const replayPath = (format: FormatId | null, apiKind: string | null, model: string | null, stream: boolean): string | undefined => {
  switch (format) {
    case "openai-chat":
      return "/v1/chat/completions"
    case "openai-responses":
      return "/v1/responses"
    case "anthropic":
      return "/v1/messages"
    case "gemini":
      return model
        ? `/v1beta/models/${encodeURIComponent(model)}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`
        : undefined
    case "ollama":
      return apiKind === "api.generate" ? "/api/generate" : "/api/chat"
    default:
      return apiKind === "completions" ? "/v1/completions" : apiKind === "embeddings" ? "/v1/embeddings" : undefined
  }
}

/** The replay's way into the gateway's own routes (bound by the server's layer: OwnRoutes). */
export type Replayer = (path: string, body: string, requestId: string) => Promise<{ readonly status: number }>

/**
 * What the buffer tells the other processes of its node under `--workers` (share.ts carries it):
 * an entry as it is now (`fresh` the first time), a clear, whether someone here looks (bodies
 * are then kept everywhere), a recording session started, stopped or renamed here.
 */
export type ShareOut =
  | {
      readonly t: "entry"
      readonly fresh: boolean
      readonly entry: InterceptedRequest
      readonly format: FormatId | null
      readonly provider: string | null
    }
  | { readonly t: "clear" }
  | { readonly t: "watching"; readonly on: boolean }
  | {
      readonly t: "session"
      readonly op: "start" | "stop" | "rename"
      readonly id: string
      readonly name: string | null
      readonly startedAt: number
    }
