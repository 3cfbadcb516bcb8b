/**
 * The traffic inspector's data (spec document 3, "Intercepted request", "LLM metadata",
 * "Normalized conversation") and the contract every capture source records through
 * (`InspectorSink`). Types only: the buffer and the analysis are in Inspector.ts, analyze.ts.
 */

/** Where an entry came from (spec document 3, "Capture modes"). */
export type CaptureSource = "agent-bridge" | "custom-host" | "http-proxy" | "system-proxy" | "tproxy" | "mcp" | "realtime"

export type DetectedKind = "llm" | "app" | "unknown" | "custom"

/** One block of a normalized turn. */
export type TurnBlock =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "reasoning"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly type: "tool_result"; readonly toolUseId: string; readonly content: string; readonly isError?: boolean }
  | { readonly type: "image"; readonly mediaType: string | null }

export interface Turn {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly blocks: ReadonlyArray<TurnBlock>
}

/** The conversation an LLM call carries: its turns, and the answer's (merged from a stream's events). */
export interface Conversation {
  readonly request: ReadonlyArray<Turn>
  readonly response: ReadonlyArray<Turn>
  readonly contextKey: string | null
  /** An answer in a stream format the inspector cannot merge: its raw events (bounded). */
  readonly rawEvents?: ReadonlyArray<{ readonly event?: string; readonly data: string }>
}

export interface LlmMeta {
  readonly provider: string | null
  readonly apiKind: string | null
  readonly model: string | null
  /** Number of turns of the request. */
  readonly messages: number
  readonly tokensIn: number | null
  readonly tokensOut: number | null
  readonly streamed: boolean
  readonly mappedTo: string | null
  readonly costEstimateUsd: number | null
}

/** A captured body as kept: text (decoded, masked, maybe truncated) or a note that it was binary. */
export interface CapturedBody {
  /** UTF-8 text of the (decompressed) body; base64 when `encoding` is "base64". */
  readonly text: string
  readonly encoding: "utf8" | "base64"
  /** Bytes on the wire (before decompression). */
  readonly size: number
  readonly truncated: boolean
  /** The content-encoding the body was decoded from (`gzip`, `br`, `zstd`, `deflate`). */
  readonly decodedFrom?: string
  /** Why the body is not what was sent (truncation, an undecodable encoding). */
  readonly notice?: string
}

export interface Timings {
  /** Epoch ms the request started. */
  readonly startedAt: number
  /** Ms to the response's head. */
  readonly ttfbMs: number | null
  /** Ms to the end of the answer. */
  readonly totalMs: number | null
}

/** The upstream side of a gateway request (agent-bridge): what went upstream after translation, and what came back. */
export interface UpstreamExchange {
  readonly attempt: number
  readonly provider: string
  readonly connection: string
  readonly model: string
  readonly url: string | null
  readonly requestBody: CapturedBody | null
  readonly status: number | null
  readonly responseBody: CapturedBody | null
  readonly error: string | null
}

/** One intercepted request as the buffer holds it (what the API shows; secrets already masked). */
export interface InterceptedRequest {
  readonly id: string
  readonly seq: number
  readonly source: CaptureSource
  /** A number once answered; `in-flight` until then; `error` when it failed without an answer. */
  status: number | "in-flight" | "error"
  detectedKind: DetectedKind
  readonly method: string
  /** `https://host/path?query` (query secrets masked). */
  readonly url: string
  readonly host: string
  readonly port: number | null
  readonly path: string
  readonly tls: boolean
  readonly httpVersion: string
  requestHeaders: Readonly<Record<string, string>>
  requestBody: CapturedBody | null
  responseHeaders: Readonly<Record<string, string>> | null
  responseBody: CapturedBody | null
  requestSize: number
  responseSize: number | null
  timings: Timings
  error: string | null
  /** HTTPS through a CONNECT tunnel without interception: only host, port, timing and bytes. */
  readonly tunnelOnly: boolean
  contextKey: string | null
  pid: number | null
  processName: string | null
  /** The client tool, from the user-agent (`codex`, `claude-code`, `openai-node`, ...). */
  agent: string | null
  llm: LlmMeta | null
  conversation: Conversation | null
  upstream: ReadonlyArray<UpstreamExchange>
  annotation: string | null
  /** The entry this one replays, and those that replay it. */
  replayOf: string | null
  replays: ReadonlyArray<string>
  /** Sessions that were recording when it was captured. */
  sessionIds: ReadonlyArray<string>
  /** The gateway's request id (agent-bridge). */
  requestId: string | null
}

/** What a capture source knows when a request starts. */
export interface CaptureStart {
  readonly source: CaptureSource
  readonly method: string
  /** Absolute URL (`http://` or `https://`). */
  readonly url: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** The whole request body when the source has it (bounded by the source). */
  readonly body?: Buffer | undefined
  /** Bytes of the body when `body` is not kept (tunnels, bodies not captured). */
  readonly bodySize?: number
  readonly httpVersion?: string
  /** The client's ephemeral port on 127.0.0.1/::1, for process attribution. */
  readonly clientPort?: number | undefined
  /** The client's connection (its socket), when the source has it: its process is looked up once. */
  readonly connection?: object | undefined
  /** A CONNECT tunnel recorded without interception. */
  readonly tunnelOnly?: boolean
  /** A custom host's kind (from the host form). */
  readonly kind?: DetectedKind | undefined
  /** The gateway's request id (agent-bridge). */
  readonly requestId?: string
}

/** What a capture source knows when the answer ended. */
export interface CaptureEnd {
  readonly status: number
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | number | undefined>>
  /** The whole answer body as received (maybe compressed; the inspector decodes it), bounded by the source. */
  readonly body?: Buffer | undefined
  /** Bytes of the answer when `body` is not kept. */
  readonly bodySize?: number
  /** Ms since start at which the response head arrived. */
  readonly ttfbMs?: number
  /** Bytes the client sent, known only at the end (a tunnel's, a WebSocket's). */
  readonly requestBodySize?: number
}

/**
 * How a capture source records. `begin` returns the entry's id (pushed `in-flight` at once);
 * `end` / `fail` update it in place. Calls never throw and never block: a source calls them from
 * its socket handlers. `wantsBodies` says whether bodies should be kept at all right now (an
 * inspector client connected, a session recording, or INSPECTOR_CAPTURE_BODIES).
 */
export interface InspectorSink {
  readonly begin: (start: CaptureStart) => string
  readonly end: (id: string, end: CaptureEnd) => void
  readonly fail: (id: string, error: string) => void
  readonly wantsBodies: () => boolean
  /** Largest body kept, bytes (INSPECTOR_MAX_BODY_KB × 1024); a source may stop buffering past it (+1 byte to know it was cut). */
  readonly maxBodyBytes: number
  /**
   * A client connection was just accepted: process attribution starts now rather than at the
   * first request, which a short-lived client (curl) may outlive by little (it reads /proc while
   * the client's socket is still open).
   */
  readonly accepted?: (clientPort: number) => void
}
