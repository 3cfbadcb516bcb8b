import * as http from "node:http"
import { makePng } from "./fakeImages.js"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll } from "vitest"

/**
 * A fake AI upstream for tests: a real HTTP server on 127.0.0.1 that speaks five provider wire formats
 * (OpenAI chat, OpenAI Responses, Anthropic Messages, Gemini v1beta, Ollama native), streaming included,
 * and that rejects invalid requests with 400 the way the real services do (see "Validation" below).
 *
 * Layout of this file: public types · the server class · shared helpers · one answer section per family ·
 * one validation section per family. Every request takes the next queued `Reply` (or the `always` one).
 */

// ─── Public types ─────────────────────────────────────────────────────────────────────────────────

export type Family = "openai-chat" | "openai-responses" | "anthropic" | "gemini" | "ollama"

export interface ToolCallSpec {
  readonly name: string
  /** JSON text of the arguments object. */
  readonly arguments: string
}

export interface Reply {
  /** Non-2xx: answer with that family's error shape (unless `body` is given). */
  readonly status?: number
  readonly headers?: Record<string, string>
  /** Raw body instead of a generated answer (a string is sent as text/plain, anything else as JSON). */
  readonly body?: unknown
  /** Assistant text (default "Hello from upstream"; JSON when the request asks for JSON output). */
  readonly content?: string
  /** Stream the text in this many pieces (default 3). */
  readonly chunks?: number
  /** Answer with these (parallel) tool calls; arguments are streamed in 2 pieces where the format streams them. */
  readonly toolCalls?: ReadonlyArray<ToolCallSpec>
  /** Model thinking before the answer. */
  readonly reasoning?: { readonly text: string; readonly signature?: string }
  /**
   * How the answer ends when not as usual: cut at the output limit (`max_tokens`: chat `length`,
   * Responses `incomplete`, Anthropic `max_tokens`, Gemini `MAX_TOKENS`, Ollama `length`), or
   * refused (`refusal`: chat `content_filter`, Responses a refusal part, Anthropic `refusal`,
   * Gemini `SAFETY`).
   */
  readonly stop?: "max_tokens" | "refusal"
  /** Default { input: 11, output: 7 }. */
  readonly usage?: { readonly input: number; readonly output: number }
  /** Delay before the response headers. */
  readonly delayMs?: number
  /** Extra: delay between the headers and the body of a non-streamed answer. */
  readonly bodyDelayMs?: number
  /** Delay between stream events. */
  readonly chunkDelayMs?: number
  /** Destroy the socket after N stream events (abrupt cut). */
  readonly cutAfterChunks?: number
  /** After N stream events stop sending but keep the connection open (until the client goes away or close()). */
  readonly stallAfterChunks?: number
  /** After N stream events reset the connection (a TCP RST, as a crashed or restarted upstream's host sends). */
  readonly resetAfterChunks?: number
  /** Reset the connection (TCP RST) once the request is read, before any response byte. */
  readonly resetBeforeHeaders?: boolean
  /**
   * A whole (JSON) answer sent in part: its headers and the first `bytes` bytes of its body, after
   * them a reset (TCP RST) or silence with the connection kept open (half-open: until the client
   * goes away or close()).
   */
  readonly partialBody?: { readonly bytes: number; readonly after: "reset" | "stall" }
  /** After N stream events send the family's in-stream error event, then end. */
  readonly streamErrorAfterChunks?: number
  /** Answer HTTP 200 with the family's error body instead of a result. */
  readonly errorIn200?: boolean
  /** openai-responses only: a response.failed event / a status:"failed" response. */
  readonly failed?: boolean
  /** Extra: message used in generated error bodies and in-stream errors. */
  readonly errorMessage?: string
}

export interface Recorded {
  readonly family: Family | "other"
  readonly method: string
  /** Without the query. */
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
}

// ─── The server ───────────────────────────────────────────────────────────────────────────────────

/**
 * Routes: openai-chat `POST /v1/chat/completions`, `POST /v1/embeddings`, `GET /v1/models`;
 * openai-responses `POST /v1/responses`; anthropic `POST /v1/messages`, `POST /v1/messages/count_tokens`
 * (and `GET /v1/models` when `anthropic-version` is sent); gemini `POST /v1beta/models/{model}:{generateContent|
 * streamGenerateContent|countTokens|batchEmbedContents}` (also under `/v1/`), `GET /v1beta/models`;
 * ollama `POST /api/chat`, `POST /api/embed`, `GET /api/tags`. Anything else: 404, still recorded.
 */
export class FakeUpstream {
  readonly requests: Array<Recorded> = []
  /**
   * Ids of responses (and their reasoning items) answered without `store: false`: like OpenAI, valid
   * as previous_response_id, and a reasoning input item without encrypted_content must be one of them.
   */
  readonly stored = new Set<string>()
  /** Strictness violations found (each was also answered 400 with this text). */
  readonly violations: Array<string> = []
  private responder: ((request: Recorded) => Reply) | undefined
  /** Responses whose client went away before the response finished. */
  aborted = 0
  /** Requests being answered right now, and the most at once since the last reset of `maxInFlight`. */
  inFlight = 0
  maxInFlight = 0
  private queue: Array<Reply> = []
  private fallback: Reply = {}
  private seq = 0
  private closing = false
  private readonly timers = new Set<NodeJS.Timeout>()
  private readonly endedByUs = new WeakSet<http.ServerResponse>()

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly strict: boolean,
    private readonly issuer: string | undefined
  ) {}

  /**
   * `issuer`: the reasoning state this server issues (thinking signatures, redacted thinking,
   * encrypted_content, thoughtSignature) is `sig.<issuer>.<n>`, and any other it receives is
   * refused with the error the real API gives for another account's signature.
   */
  static async start(options: { readonly strict?: boolean; readonly issuer?: string } = {}): Promise<FakeUpstream> {
    let self: FakeUpstream | undefined
    const server = http.createServer((req, res) => self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as AddressInfo).port
    self = new FakeUpstream(server, `http://127.0.0.1:${port}`, options.strict ?? true, options.issuer)
    return self
  }

  /** Base URL as that family's SDK takes it. */
  baseUrl(family: Family): string {
    return family === "openai-chat" || family === "openai-responses" ? `${this.url}/v1` : this.url
  }

  next(...replies: ReadonlyArray<Reply>): this {
    this.queue.push(...replies)
    return this
  }

  always(reply: Reply): this {
    this.fallback = reply
    this.queue = []
    this.responder = undefined
    return this
  }

  /** Decides each reply from the request itself (when the queue is empty): for scripted clients. */
  script(responder: (request: Recorded) => Reply): this {
    this.responder = responder
    this.queue = []
    return this
  }

  requestsOf(family: Family): ReadonlyArray<Recorded> {
    return this.requests.filter((r) => r.family === family)
  }

  async close(): Promise<void> {
    this.closing = true
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private later(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t)
      f()
    }, ms)
    this.timers.add(t)
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const parts: Array<Buffer> = []
    req.on("data", (c: Buffer) => parts.push(c))
    req.on("end", () => {
      const text = Buffer.concat(parts).toString("utf8")
      let body: any
      let badJson = false
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        body = text
        badJson = true
      }
      const u = new URL(req.url ?? "/", "http://fake")
      const method = req.method ?? "GET"
      const route = routeOf(method, u.pathname, req.headers, u.searchParams)
      this.requests.push({ family: route.family, method, path: u.pathname, query: u.searchParams, headers: req.headers, body })
      const reply = this.queue.shift() ?? this.responder?.(this.requests[this.requests.length - 1]!) ?? this.fallback
      this.inFlight++
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight)
      res.on("close", () => {
        this.inFlight--
        if (!res.writableFinished && !this.endedByUs.has(res) && !this.closing) this.aborted++
      })
      const ctx: Ctx = { route, body, query: u.searchParams, headers: req.headers, reply, badJson }
      this.later(reply.delayMs ?? 0, () => this.respond(res, ctx))
    })
  }

  private respond(res: http.ServerResponse, ctx: Ctx): void {
    if (res.destroyed) return
    const { route, reply } = ctx
    const headers = reply.headers ?? {}
    if (route.family === "other") {
      return sendJson(
        res,
        404,
        { error: { message: `fake upstream: no route for this path`, type: "invalid_request_error", code: null, param: null } },
        headers
      )
    }
    const family = route.family
    if (this.strict) {
      const found = ctx.badJson ? ["request body is not valid JSON"] : validate(ctx, this.stored)
      if (found.length > 0) {
        this.violations.push(...found)
        return sendJson(res, 400, errorBody(family, 400, found.join("; ")), headers)
      }
    }
    if (this.issuer !== undefined && route.endpoint === "generate") {
      const foreign = foreignSignature(family, ctx.body, `sig.${this.issuer}.`)
      if (foreign) {
        this.violations.push(foreign.message)
        return sendJson(res, 400, foreign.body, headers)
      }
    }
    if (reply.resetBeforeHeaders) {
      this.endedByUs.add(res)
      return void res.socket?.resetAndDestroy()
    }
    const status = reply.status ?? 200
    if (reply.body !== undefined) {
      const raw = typeof reply.body === "string"
      res.writeHead(status, { "content-type": raw ? "text/plain" : "application/json", ...headers })
      return void res.end(raw ? (reply.body as string) : JSON.stringify(reply.body))
    }
    const message = reply.errorMessage ?? `fake upstream error ${status}`
    if (status < 200 || status >= 300) return sendJson(res, status, errorBody(family, status, message), headers)
    if (reply.errorIn200) return sendJson(res, 200, errorBody(family, 500, reply.errorMessage ?? "fake upstream error"), headers)

    const answer = this.answer(ctx)
    if (answer.kind === "json") {
      if (reply.partialBody)
        return this.partial(
          res,
          status,
          { "content-type": "application/json", ...requestIdHeader(family, this.seq), ...headers },
          JSON.stringify(answer.body),
          reply.partialBody
        )
      res.writeHead(status, { "content-type": "application/json", ...requestIdHeader(family, this.seq), ...headers })
      if (!reply.bodyDelayMs) return void res.end(JSON.stringify(answer.body))
      res.flushHeaders()
      return this.later(reply.bodyDelayMs, () => void (res.destroyed || res.end(JSON.stringify(answer.body))))
    }
    res.writeHead(status, {
      "content-type": answer.contentType,
      "cache-control": "no-cache",
      ...requestIdHeader(family, this.seq),
      ...headers
    })
    res.flushHeaders()
    this.stream(res, reply, answer)
  }

  /** A whole answer's headers and the first bytes of its body, then a reset or silence (`Reply.partialBody`). */
  private partial(
    res: http.ServerResponse,
    status: number,
    headers: Record<string, string>,
    body: string,
    how: NonNullable<Reply["partialBody"]>
  ): void {
    // The whole length announced, so the client waits for the rest; no chunked framing around the bytes sent.
    res.writeHead(status, { ...headers, "content-length": String(Buffer.byteLength(body)) })
    res.write(Buffer.from(body).subarray(0, how.bytes), () => {
      if (how.after === "stall") return
      this.resetSoon(res)
    })
  }

  /**
   * Resets the response's connection (a TCP RST) once what was written had time to arrive: a
   * reset drops whatever is still in the sender's queue, and the test wants the bytes sent before it read.
   */
  private resetSoon(res: http.ServerResponse): void {
    this.endedByUs.add(res)
    this.later(50, () => void res.socket?.resetAndDestroy())
  }

  /** Writes stream events one by one, honouring the cut / reset / stall / error / delay options of the reply. */
  private stream(res: http.ServerResponse, reply: Reply, answer: StreamAnswer): void {
    let sent = 0
    const step = (): void => {
      if (res.destroyed) return
      if (reply.cutAfterChunks !== undefined && sent >= reply.cutAfterChunks) {
        this.endedByUs.add(res)
        return void res.socket?.destroy()
      }
      if (reply.resetAfterChunks !== undefined && sent >= reply.resetAfterChunks) return this.resetSoon(res)
      if (reply.stallAfterChunks !== undefined && sent >= reply.stallAfterChunks) return
      if (reply.streamErrorAfterChunks !== undefined && sent >= reply.streamErrorAfterChunks) {
        return void res.end(answer.errorFrames(sent, reply.errorMessage ?? "fake upstream stream error"))
      }
      if (sent >= answer.frames.length) return void res.end()
      res.write(answer.frames[sent++])
      this.later(reply.chunkDelayMs ?? 0, step)
    }
    step()
  }

  private answer(ctx: Ctx): Answer {
    const { route, body } = ctx
    switch (route.endpoint) {
      case "models":
        return { kind: "json", body: modelsList(route.family as Family) }
      case "embed":
        return { kind: "json", body: embeddings(route.family as Family, body, route.model) }
      case "count": {
        const n = countTokens(route.family === "anthropic" ? [body?.messages, body?.system, body?.tools] : body)
        return { kind: "json", body: route.family === "anthropic" ? { input_tokens: n } : { totalTokens: n } }
      }
      default:
        break
    }
    const plan = this.plan(ctx)
    switch (route.family) {
      case "openai-chat":
        return chatAnswer(plan, body?.stream === true, body?.stream_options?.include_usage === true)
      case "openai-responses":
        if (body?.store !== false) this.stored.add(`resp_${plan.n}`).add(`rs_${plan.n}`)
        return responsesAnswer(
          plan,
          body,
          body?.stream === true,
          ctx.reply.failed === true,
          ctx.reply.errorMessage ?? "fake upstream failure"
        )
      case "anthropic":
        return anthropicAnswer(plan, body?.stream === true)
      case "gemini": {
        // Asked for images (what the gateway's /v1/images routes send), it answers like an image model.
        const modalities = body?.generationConfig?.responseModalities
        const image = Array.isArray(modalities) && modalities.some((m: unknown) => String(m).toUpperCase() === "IMAGE")
        const answer = geminiAnswer(plan, route.action === "streamGenerateContent")
        if (image && answer.kind === "json") {
          const parts = (answer.body as any).candidates[0].content.parts as Array<unknown>
          parts.push({ inlineData: { mimeType: "image/png", data: makePng([255, 0, 0, 255]).toString("base64") } })
        }
        return answer
      }
      default:
        return ollamaAnswer(plan, body?.stream !== false)
    }
  }

  /** What to answer, independent of the wire format. Ids come from one counter, so they are unique per server. */
  private plan(ctx: Ctx): Plan {
    const { reply, body } = ctx
    const calls = (reply.toolCalls ?? []).map((c): Call => {
      const k = ++this.seq
      return { k, name: c.name, arguments: c.arguments, args: parseArgs(c.arguments), pieces: split(c.arguments, 2) }
    })
    const json = jsonRequested(ctx.route.family as Family, body)
    const text =
      reply.content ??
      (calls.length > 0 ? "" : json ? JSON.stringify(json.schema === undefined ? { ok: true } : sampleValue(json.schema)) : DEFAULT_TEXT)
    return {
      n: ++this.seq,
      model: String(body?.model ?? ctx.route.model ?? "fake-model"),
      text,
      pieces: split(text, reply.chunks ?? 3),
      calls,
      reasoning: reply.reasoning && {
        text: reply.reasoning.text,
        signature: reply.reasoning.signature ?? (this.issuer !== undefined ? `sig.${this.issuer}.${this.seq}` : undefined),
        pieces: split(reply.reasoning.text, 2)
      },
      usage: reply.usage ?? DEFAULT_USAGE,
      stop: reply.stop
    }
  }
}

/** One fake upstream for the whole test file: started before the first test, closed after the last. */
export const fakeUpstreamForFile = (options: { readonly strict?: boolean } = {}): { readonly upstream: FakeUpstream } => {
  const holder = {} as { upstream: FakeUpstream }
  beforeAll(async () => {
    holder.upstream = await FakeUpstream.start(options)
  })
  afterAll(() => holder.upstream?.close())
  return holder
}

// ─── Shared helpers ───────────────────────────────────────────────────────────────────────────────

const DEFAULT_TEXT = "Hello from upstream"
const DEFAULT_USAGE = { input: 11, output: 7 }
const CREATED = 1_700_000_000

interface Route {
  readonly family: Family | "other"
  readonly endpoint: "generate" | "embed" | "models" | "count" | "none"
  /** Gemini: the model in the path. */
  readonly model?: string
  /** Gemini: the method after the colon. */
  readonly action?: string
}

interface Ctx {
  readonly route: Route
  readonly body: any
  readonly query: URLSearchParams
  readonly headers: http.IncomingHttpHeaders
  readonly reply: Reply
  readonly badJson: boolean
}

interface Call {
  readonly k: number
  readonly name: string
  readonly arguments: string
  readonly args: Record<string, unknown>
  readonly pieces: ReadonlyArray<string>
}

interface Plan {
  /** Unique number of this response (ids like `msg_<n>`). */
  readonly n: number
  readonly model: string
  /** Assistant text; "" when the answer is only tool calls. */
  readonly text: string
  readonly pieces: ReadonlyArray<string>
  readonly calls: ReadonlyArray<Call>
  readonly reasoning: { readonly text: string; readonly signature: string | undefined; readonly pieces: ReadonlyArray<string> } | undefined
  readonly usage: { readonly input: number; readonly output: number }
  readonly stop: "max_tokens" | "refusal" | undefined
}

interface StreamAnswer {
  readonly kind: "stream"
  readonly contentType: string
  readonly frames: ReadonlyArray<string>
  /** The family's in-stream error, sent after `sent` frames. */
  readonly errorFrames: (sent: number, message: string) => string
}
type Answer = { readonly kind: "json"; readonly body: unknown } | StreamAnswer

const GEMINI_ACTIONS: Record<string, Route["endpoint"]> = {
  generateContent: "generate",
  streamGenerateContent: "generate",
  countTokens: "count",
  batchEmbedContents: "embed"
}

const routeOf = (method: string, path: string, headers: http.IncomingHttpHeaders, query: URLSearchParams): Route => {
  const post = method === "POST"
  const get = method === "GET"
  const gemini = /^\/v1(?:beta)?\/models\/([^/:]+):([A-Za-z]+)$/.exec(path)
  if (gemini && post && GEMINI_ACTIONS[gemini[2]!]) {
    return { family: "gemini", endpoint: GEMINI_ACTIONS[gemini[2]!]!, model: decodeURIComponent(gemini[1]!), action: gemini[2]! }
  }
  const geminiKey = headers["x-goog-api-key"] !== undefined || query.has("key")
  if (get && (path === "/v1beta/models" || (path === "/v1/models" && geminiKey))) return { family: "gemini", endpoint: "models" }
  if (get && path === "/v1/models") return { family: headers["anthropic-version"] ? "anthropic" : "openai-chat", endpoint: "models" }
  if (post && path === "/v1/chat/completions") return { family: "openai-chat", endpoint: "generate" }
  if (post && path === "/v1/embeddings") return { family: "openai-chat", endpoint: "embed" }
  if (post && path === "/v1/responses") return { family: "openai-responses", endpoint: "generate" }
  if (post && path === "/v1/messages") return { family: "anthropic", endpoint: "generate" }
  if (post && path === "/v1/messages/count_tokens") return { family: "anthropic", endpoint: "count" }
  if (post && path === "/api/chat") return { family: "ollama", endpoint: "generate" }
  if (post && path === "/api/embed") return { family: "ollama", endpoint: "embed" }
  if (get && path === "/api/tags") return { family: "ollama", endpoint: "models" }
  return { family: "other", endpoint: "none" }
}

const sendJson = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string>): void => {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(JSON.stringify(body))
}

const requestIdHeader = (family: Family, n: number): Record<string, string> =>
  family === "anthropic" ? { "request-id": `req_fake${n}` } : family.startsWith("openai") ? { "x-request-id": `req_fake${n}` } : {}

const sse = (data: unknown, event?: string): string => `${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`
const ndjson = (data: unknown): string => `${JSON.stringify(data)}\n`

const isObj = (x: unknown): x is Record<string, any> => typeof x === "object" && x !== null && !Array.isArray(x)

/** `text` in `n` contiguous pieces (fewer when the text is shorter; always at least one). */
const split = (text: string, n: number): Array<string> => {
  const count = Math.max(1, Math.min(Math.floor(n), text.length))
  const size = Math.ceil(text.length / count)
  return Array.from({ length: count }, (_, i) => text.slice(i * size, (i + 1) * size))
}

const parseArgs = (text: string): Record<string, unknown> => {
  try {
    const v = JSON.parse(text)
    return isObj(v) ? v : {}
  } catch {
    return {}
  }
}

/** Keys whose string values are structure, not text. */
const NOT_TEXT = new Set([
  "role",
  "type",
  "model",
  "id",
  "tool_use_id",
  "tool_call_id",
  "call_id",
  "mimeType",
  "media_type",
  "signature",
  "thoughtSignature"
])

/** All text inside `x` (every string value except structural ones like roles and types), concatenated. */
const textOf = (x: unknown): string =>
  typeof x === "string"
    ? x
    : Array.isArray(x)
      ? x.map(textOf).join("")
      : isObj(x)
        ? Object.entries(x)
            .map(([k, v]) => (NOT_TEXT.has(k) ? "" : textOf(v)))
            .join("")
        : ""

/** A deterministic stand-in for a token count: characters of all text / 4, rounded up, at least 1. */
const countTokens = (x: unknown): number => Math.max(1, Math.ceil(textOf(x).length / 4))

/** Whether the request asks for JSON output, and with which schema. */
const jsonRequested = (family: Family, body: any): { readonly schema?: unknown } | undefined => {
  switch (family) {
    case "openai-chat": {
      const f = body?.response_format
      return f?.type === "json_schema" ? { schema: f.json_schema?.schema } : f?.type === "json_object" ? {} : undefined
    }
    case "openai-responses": {
      const f = body?.text?.format
      return f?.type === "json_schema" ? { schema: f.schema } : f?.type === "json_object" ? {} : undefined
    }
    case "anthropic": {
      const f = body?.output_config?.format
      return f?.type === "json_schema" ? { schema: f.schema } : undefined
    }
    case "gemini": {
      const g = body?.generationConfig
      return g?.responseMimeType === "application/json" ? { schema: g.responseJsonSchema ?? g.responseSchema } : undefined
    }
    case "ollama":
      return body?.format === "json" ? {} : isObj(body?.format) ? { schema: body.format } : undefined
  }
}

/** A value valid for a (JSON or Gemini upper-case) schema: required properties filled with defaults of their type. */
const sampleValue = (schema: unknown): unknown => {
  if (!isObj(schema)) return {}
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0]
  if (Array.isArray(schema.anyOf) && schema.anyOf.length > 0) return sampleValue(schema.anyOf[0])
  const types: Array<unknown> = Array.isArray(schema.type) ? schema.type : [schema.type]
  const type = types.map((t) => String(t ?? "").toLowerCase()).find((t) => t !== "null") ?? (schema.properties ? "object" : "")
  switch (type) {
    case "string":
      return "x"
    case "number":
    case "integer":
      return 1
    case "boolean":
      return true
    case "array":
      return []
    default: {
      const required: Array<unknown> = Array.isArray(schema.required) ? schema.required : []
      const props = isObj(schema.properties) ? schema.properties : {}
      return Object.fromEntries(required.map((k) => [String(k), sampleValue(props[String(k)])]))
    }
  }
}

/** Deterministic 8-dimensional vector for a text. */
const vector = (text: string): Array<number> => {
  let h = 7
  for (const ch of text) h = (h * 31 + ch.charCodeAt(0)) % 1_000_003
  return Array.from({ length: 8 }, (_, j) => Math.round(((h * (j + 3)) % 997) - 498) / 1000)
}

/**
 * For models named `*similar*`: letter frequencies (26 dimensions), so texts that differ only in
 * case, spacing or a small edit get nearly the same vector (similarity tests need that).
 */
const letterVector = (text: string): Array<number> => {
  const v = new Array<number>(26).fill(0)
  for (const ch of text.toLowerCase()) {
    const i = ch.charCodeAt(0) - 97
    if (i >= 0 && i < 26) v[i]!++
  }
  return v
}

const embeddings = (family: Family, body: any, model: string | undefined): unknown => {
  if (String(body?.model ?? model ?? "").includes("similar")) {
    const texts: Array<string> = Array.isArray(body?.input) ? body.input.map(String) : [String(body?.input ?? "")]
    return {
      object: "list",
      data: texts.map((t, index) => ({ object: "embedding", index, embedding: letterVector(t) })),
      model: body?.model,
      usage: { prompt_tokens: 4, total_tokens: 4 }
    }
  }
  const inputs = (x: unknown): Array<string> =>
    Array.isArray(x) ? x.map((v) => (typeof v === "string" ? v : JSON.stringify(v))) : [String(x ?? "")]
  if (family === "gemini") {
    const requests: Array<any> = Array.isArray(body?.requests) ? body.requests : []
    return { embeddings: requests.map((r) => ({ values: vector(textOf(r?.content)) })) }
  }
  if (family === "ollama") return { model: body?.model ?? "fake-embed", embeddings: inputs(body?.input).map(vector), prompt_eval_count: 4 }
  const base64 = body?.encoding_format === "base64" // like the real API: little-endian float32 bytes when asked
  const data = inputs(body?.input).map((t, index) => {
    const v = vector(t)
    return { object: "embedding", index, embedding: base64 ? Buffer.from(new Float32Array(v).buffer).toString("base64") : v }
  })
  return { object: "list", data, model: body?.model ?? model ?? "fake-embed", usage: { prompt_tokens: 4, total_tokens: 4 } }
}

const modelsList = (family: Family): unknown => {
  const ids = ["m1", "m2"]
  if (family === "gemini") {
    return {
      models: ids.map((id) => ({
        name: `models/${id}`,
        baseModelId: id,
        version: "001",
        displayName: id,
        inputTokenLimit: 1_048_576,
        outputTokenLimit: 8192,
        supportedGenerationMethods: ["generateContent", "countTokens"]
      }))
    }
  }
  if (family === "ollama") {
    return {
      models: ids.map((id) => ({
        name: `${id}:latest`,
        model: `${id}:latest`,
        modified_at: "2025-01-01T00:00:00Z",
        size: 1000,
        digest: `sha256:${id}`,
        details: {
          parent_model: "",
          format: "gguf",
          family: "llama",
          families: ["llama"],
          parameter_size: "1B",
          quantization_level: "Q4_K_M"
        }
      }))
    }
  }
  // One shape that both the OpenAI and the Anthropic SDK accept.
  const data = ids.map((id) => ({
    id,
    object: "model",
    created: CREATED,
    owned_by: "fake",
    type: "model",
    display_name: id,
    created_at: "2025-01-01T00:00:00Z"
  }))
  return { object: "list", data, has_more: false, first_id: "m1", last_id: "m2" }
}

// ─── Errors ───────────────────────────────────────────────────────────────────────────────────────

const OPENAI_ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  429: "rate_limit_error"
}
const ANTHROPIC_ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error"
}
const GEMINI_STATUSES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED"
}

const openaiError = (status: number, message: string) => ({
  message,
  type: OPENAI_ERROR_TYPES[status] ?? (status >= 500 ? "server_error" : "invalid_request_error"),
  code: status === 429 ? "rate_limit_exceeded" : null,
  param: null
})

/** The family's error body for an HTTP status. */
const errorBody = (family: Family, status: number, message: string): unknown => {
  switch (family) {
    case "openai-chat":
    case "openai-responses":
      return { error: openaiError(status, message) }
    case "anthropic":
      return {
        type: "error",
        error: { type: ANTHROPIC_ERROR_TYPES[status] ?? (status >= 500 ? "api_error" : "invalid_request_error"), message }
      }
    case "gemini":
      return { error: { code: status, message, status: GEMINI_STATUSES[status] ?? (status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION") } }
    case "ollama":
      return { error: message }
  }
}

// ─── Answers: OpenAI chat completions ─────────────────────────────────────────────────────────────

const chatAnswer = (p: Plan, stream: boolean, includeUsage: boolean): Answer => {
  const id = `chatcmpl-${p.n}`
  const finish = p.stop === "max_tokens" ? "length" : p.stop === "refusal" ? "content_filter" : p.calls.length > 0 ? "tool_calls" : "stop"
  const usage = { prompt_tokens: p.usage.input, completion_tokens: p.usage.output, total_tokens: p.usage.input + p.usage.output }
  if (!stream) {
    const message = {
      role: "assistant",
      content: p.calls.length > 0 && p.text === "" ? null : p.text,
      refusal: null,
      ...(p.reasoning ? { reasoning_content: p.reasoning.text } : {}),
      ...(p.calls.length > 0
        ? { tool_calls: p.calls.map((c) => ({ id: `call_${c.k}`, type: "function", function: { name: c.name, arguments: c.arguments } })) }
        : {}),
      annotations: []
    }
    return {
      kind: "json",
      body: {
        id,
        object: "chat.completion",
        created: CREATED,
        model: p.model,
        choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
        usage
      }
    }
  }
  const chunk = (delta: unknown, finish_reason: string | null = null) => ({
    id,
    object: "chat.completion.chunk",
    created: CREATED,
    model: p.model,
    choices: [{ index: 0, delta, finish_reason, logprobs: null }],
    ...(includeUsage ? { usage: null } : {}) // with include_usage every chunk but the last says "usage": null
  })
  const chunks: Array<unknown> = [chunk({ role: "assistant", content: p.calls.length > 0 && p.text === "" ? null : "" })]
  for (const piece of p.reasoning?.pieces ?? []) chunks.push(chunk({ reasoning_content: piece }))
  if (p.text !== "" || p.calls.length === 0) for (const piece of p.pieces) chunks.push(chunk({ content: piece }))
  p.calls.forEach((c, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: `call_${c.k}`, type: "function", function: { name: c.name, arguments: "" } }] }))
    for (const piece of c.pieces) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
  })
  chunks.push(chunk({}, finish))
  if (includeUsage) chunks.push({ id, object: "chat.completion.chunk", created: CREATED, model: p.model, choices: [], usage })
  return {
    kind: "stream",
    contentType: "text/event-stream",
    frames: [...chunks.map((c) => sse(c)), "data: [DONE]\n\n"],
    errorFrames: (_sent, message) => sse({ error: openaiError(500, message) })
  }
}

// ─── Answers: OpenAI Responses ────────────────────────────────────────────────────────────────────

const responsesAnswer = (p: Plan, body: any, stream: boolean, failed: boolean, failMessage: string): Answer => {
  const id = `resp_${p.n}`
  const usage = {
    input_tokens: p.usage.input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: p.usage.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: p.usage.input + p.usage.output
  }
  // The Response object, echoing the request's settings like the real API.
  const response = (status: string, output: Array<unknown>, extra: Record<string, unknown> = {}) => ({
    id,
    object: "response",
    created_at: CREATED,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: body?.instructions ?? null,
    max_output_tokens: body?.max_output_tokens ?? null,
    model: p.model,
    output,
    parallel_tool_calls: body?.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: body?.reasoning?.effort ?? null, summary: body?.reasoning?.summary ?? null },
    store: body?.store ?? true,
    temperature: body?.temperature ?? 1,
    text: body?.text ?? { format: { type: "text" } },
    tool_choice: body?.tool_choice ?? "auto",
    tools: body?.tools ?? [],
    top_p: body?.top_p ?? 1,
    truncation: "disabled",
    usage: null,
    user: null,
    metadata: body?.metadata ?? {},
    ...extra
  })
  const failure = (message: string) => ({ error: { code: "server_error", message } })

  // Final output items, in output_index order: reasoning, message, function calls.
  const reasoningItem = p.reasoning && {
    type: "reasoning",
    id: `rs_${p.n}`,
    summary: [{ type: "summary_text", text: p.reasoning.text }],
    ...(p.reasoning.signature !== undefined ? { encrypted_content: p.reasoning.signature } : {})
  }
  const textPart =
    p.stop === "refusal" ? { type: "refusal", refusal: p.text } : { type: "output_text", text: p.text, annotations: [], logprobs: [] }
  const cut = p.stop === "max_tokens"
  const ended = cut ? "incomplete" : "completed"
  const endExtra = cut ? { incomplete_details: { reason: "max_output_tokens" } } : {}
  const messageItem = (p.text !== "" || p.calls.length === 0) && {
    type: "message",
    id: `msg_${p.n}`,
    status: "completed",
    role: "assistant",
    content: [textPart]
  }
  const callItem = (c: Call) => ({
    type: "function_call",
    id: `fc_${c.k}`,
    call_id: `call_${c.k}`,
    name: c.name,
    arguments: c.arguments,
    status: "completed"
  })
  const output: Array<unknown> = [
    ...(reasoningItem ? [reasoningItem] : []),
    ...(messageItem ? [messageItem] : []),
    ...p.calls.map(callItem)
  ]

  if (!stream) {
    return { kind: "json", body: failed ? response("failed", [], failure(failMessage)) : response(ended, output, { usage, ...endExtra }) }
  }
  const frames: Array<string> = []
  const ev = (type: string, payload: Record<string, unknown>) =>
    frames.push(sse({ type, sequence_number: frames.length, ...payload }, type))
  ev("response.created", { response: response("in_progress", []) })
  ev("response.in_progress", { response: response("in_progress", []) })
  if (failed) {
    ev("response.failed", { response: response("failed", [], failure(failMessage)) })
  } else {
    let index = 0
    if (reasoningItem && p.reasoning) {
      const at = { item_id: reasoningItem.id, output_index: index, summary_index: 0 }
      ev("response.output_item.added", { output_index: index, item: { type: "reasoning", id: reasoningItem.id, summary: [] } })
      ev("response.reasoning_summary_part.added", { ...at, part: { type: "summary_text", text: "" } })
      for (const delta of p.reasoning.pieces) ev("response.reasoning_summary_text.delta", { ...at, delta })
      ev("response.reasoning_summary_text.done", { ...at, text: p.reasoning.text })
      ev("response.reasoning_summary_part.done", { ...at, part: { type: "summary_text", text: p.reasoning.text } })
      ev("response.output_item.done", { output_index: index++, item: reasoningItem })
    }
    if (messageItem) {
      const at = { item_id: messageItem.id, output_index: index, content_index: 0 }
      ev("response.output_item.added", { output_index: index, item: { ...messageItem, status: "in_progress", content: [] } })
      if (p.stop === "refusal") {
        ev("response.content_part.added", { ...at, part: { type: "refusal", refusal: "" } })
        for (const delta of p.pieces) ev("response.refusal.delta", { ...at, delta })
        ev("response.refusal.done", { ...at, refusal: p.text })
      } else {
        ev("response.content_part.added", { ...at, part: { type: "output_text", text: "", annotations: [] } })
        for (const delta of p.pieces) ev("response.output_text.delta", { ...at, delta, logprobs: [] })
        ev("response.output_text.done", { ...at, text: p.text, logprobs: [] })
      }
      ev("response.content_part.done", { ...at, part: textPart })
      ev("response.output_item.done", { output_index: index++, item: messageItem })
    }
    for (const c of p.calls) {
      const item = callItem(c)
      ev("response.output_item.added", { output_index: index, item: { ...item, arguments: "", status: "in_progress" } })
      for (const delta of c.pieces) ev("response.function_call_arguments.delta", { item_id: item.id, output_index: index, delta })
      ev("response.function_call_arguments.done", { item_id: item.id, output_index: index, name: c.name, arguments: c.arguments })
      ev("response.output_item.done", { output_index: index++, item })
    }
    ev(`response.${ended}`, { response: response(ended, output, { usage, ...endExtra }) })
  }
  return {
    kind: "stream",
    contentType: "text/event-stream",
    frames,
    // As captured from OpenAI: a nested `error` event, then `response.failed`.
    errorFrames: (sent, message) =>
      sse(
        {
          type: "error",
          sequence_number: sent,
          code: "server_error",
          message,
          param: null,
          error: { code: "server_error", message, param: null }
        },
        "error"
      ) + sse({ type: "response.failed", sequence_number: sent + 1, response: response("failed", [], failure(message)) }, "response.failed")
  }
}

// ─── Answers: Anthropic Messages ──────────────────────────────────────────────────────────────────

const anthropicAnswer = (p: Plan, stream: boolean): Answer => {
  const stopReason = p.stop ?? (p.calls.length > 0 ? "tool_use" : "end_turn")
  const signature = p.reasoning?.signature ?? "fake-signature"
  const usage = { input_tokens: p.usage.input, output_tokens: p.usage.output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  const hasText = p.text !== "" || p.calls.length === 0
  const content = [
    ...(p.reasoning ? [{ type: "thinking", thinking: p.reasoning.text, signature }] : []),
    ...(hasText ? [{ type: "text", text: p.text }] : []),
    ...p.calls.map((c) => ({ type: "tool_use", id: `toolu_${c.k}`, name: c.name, input: c.args }))
  ]
  const message = {
    id: `msg_${p.n}`,
    type: "message",
    role: "assistant",
    model: p.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage
  }
  if (!stream) return { kind: "json", body: message }

  const frames: Array<string> = []
  const ev = (data: { readonly type: string; readonly [k: string]: unknown }) => frames.push(sse(data, data.type))
  ev({ type: "message_start", message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } })
  let index = 0
  const block = (start: unknown, deltas: ReadonlyArray<unknown>) => {
    ev({ type: "content_block_start", index, content_block: start })
    if (index === 0) ev({ type: "ping" })
    for (const delta of deltas) ev({ type: "content_block_delta", index, delta })
    ev({ type: "content_block_stop", index: index++ })
  }
  if (p.reasoning) {
    const deltas = [...p.reasoning.pieces.map((thinking) => ({ type: "thinking_delta", thinking })), { type: "signature_delta", signature }]
    block({ type: "thinking", thinking: "", signature: "" }, deltas)
  }
  if (hasText)
    block(
      { type: "text", text: "" },
      p.pieces.map((text) => ({ type: "text_delta", text }))
    )
  for (const c of p.calls) {
    block(
      { type: "tool_use", id: `toolu_${c.k}`, name: c.name, input: {} },
      c.pieces.map((partial_json) => ({ type: "input_json_delta", partial_json }))
    )
  }
  ev({ type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage })
  ev({ type: "message_stop" })
  return {
    kind: "stream",
    contentType: "text/event-stream",
    frames,
    errorFrames: (_sent, msg) => sse({ type: "error", error: { type: "overloaded_error", message: msg } }, "error")
  }
}

// ─── Answers: Gemini ──────────────────────────────────────────────────────────────────────────────

const geminiAnswer = (p: Plan, stream: boolean): Answer => {
  const sig = p.reasoning?.signature
  const sigOnCall = sig !== undefined && p.calls.length > 0
  const thoughtPart = p.reasoning && {
    text: p.reasoning.text,
    thought: true,
    ...(sig !== undefined && !sigOnCall ? { thoughtSignature: sig } : {})
  }
  const callParts = p.calls.map((c, i) => ({
    functionCall: { id: `call_${c.k}`, name: c.name, args: c.args },
    ...(i === 0 && sigOnCall ? { thoughtSignature: sig } : {})
  }))
  const hasText = p.text !== "" || p.calls.length === 0
  const usage = { promptTokenCount: p.usage.input, candidatesTokenCount: p.usage.output, totalTokenCount: p.usage.input + p.usage.output }
  const response = (parts: Array<unknown>, last: boolean) => ({
    candidates: [
      {
        content: { role: "model", parts },
        ...(last ? { finishReason: p.stop === "max_tokens" ? "MAX_TOKENS" : p.stop === "refusal" ? "SAFETY" : "STOP" } : {}),
        index: 0
      }
    ],
    // Like the real API: usage is cumulative, only the last chunk carries the final counts.
    usageMetadata: last ? usage : { promptTokenCount: p.usage.input, totalTokenCount: p.usage.input },
    modelVersion: p.model,
    responseId: `resp-${p.n}`
  })
  if (!stream) {
    return {
      kind: "json",
      body: response([...(thoughtPart ? [thoughtPart] : []), ...(hasText ? [{ text: p.text }] : []), ...callParts], true)
    }
  }
  const chunks: Array<Array<unknown>> = [
    ...(thoughtPart ? [[thoughtPart]] : []),
    ...(hasText ? p.pieces.map((text) => [{ text }]) : []),
    ...(callParts.length > 0 ? [callParts] : [])
  ]
  return {
    kind: "stream",
    contentType: "text/event-stream",
    frames: chunks.map((parts, i) => sse(response(parts, i === chunks.length - 1))),
    errorFrames: (_sent, message) => sse({ error: { code: 500, message, status: "INTERNAL" } })
  }
}

// ─── Answers: Ollama ──────────────────────────────────────────────────────────────────────────────

const ollamaAnswer = (p: Plan, stream: boolean): Answer => {
  const created_at = new Date(CREATED * 1000).toISOString()
  const toolCalls = p.calls.map((c, index) => ({ id: `call_${c.k}`, function: { index, name: c.name, arguments: c.args } }))
  const done = {
    done: true,
    done_reason: p.stop === "max_tokens" ? "length" : "stop",
    total_duration: 1_000_000,
    load_duration: 100_000,
    prompt_eval_count: p.usage.input,
    prompt_eval_duration: 200_000,
    eval_count: p.usage.output,
    eval_duration: 700_000
  }
  if (!stream) {
    const message = {
      role: "assistant",
      content: p.text,
      ...(p.reasoning ? { thinking: p.reasoning.text } : {}),
      ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
    }
    return { kind: "json", body: { model: p.model, created_at, message, ...done } }
  }
  const line = (message: Record<string, unknown>, extra: Record<string, unknown> = { done: false }) =>
    ndjson({ model: p.model, created_at, message: { role: "assistant", content: "", ...message }, ...extra })
  const frames = [
    ...(p.reasoning?.pieces ?? []).map((thinking) => line({ thinking })),
    ...(p.text !== "" || p.calls.length === 0 ? p.pieces.map((content) => line({ content })) : []),
    ...(toolCalls.length > 0 ? [line({ tool_calls: toolCalls })] : []),
    line({}, done)
  ]
  return { kind: "stream", contentType: "application/x-ndjson", frames, errorFrames: (_sent, message) => ndjson({ error: message }) }
}

// ─── Validation (strict mode) ─────────────────────────────────────────────────────────────────────

/** Everything wrong with a request, as the real service would complain about it; [] when valid. */
/**
 * The first piece of reasoning state in a request that this server did not issue, answered as
 * the real APIs answer another account's or another provider's signature.
 */
const foreignSignature = (family: Family, body: any, own: string): { readonly message: string; readonly body: unknown } | undefined => {
  const bad = (v: unknown) => typeof v === "string" && !v.startsWith(own)
  if (family === "anthropic") {
    for (const [i, m] of asArray(body?.messages).entries())
      for (const [j, b] of asArray(m?.content).entries()) {
        if ((b?.type === "thinking" && bad(b.signature)) || (b?.type === "redacted_thinking" && bad(b.data))) {
          const message = `messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`
          return { message, body: { type: "error", error: { type: "invalid_request_error", message } } }
        }
      }
  }
  if (family === "openai-responses") {
    for (const item of asArray(body?.input))
      if (item?.type === "reasoning" && bad(item.encrypted_content)) {
        const message = `The encrypted content for item ${item.id ?? "rs_unknown"} could not be verified. Reason: Encrypted content organization_id did not match the target organization.`
        return { message, body: { error: { message, type: "invalid_request_error", param: null, code: "invalid_encrypted_content" } } }
      }
  }
  if (family === "gemini") {
    for (const c of asArray(body?.contents))
      for (const p of asArray(c?.parts))
        if (bad(p?.thoughtSignature) && p.thoughtSignature !== "skip_thought_signature_validator") {
          const message = "Corrupted thought signature."
          return { message, body: { error: { code: 400, message, status: "INVALID_ARGUMENT" } } }
        }
  }
  return undefined
}

/** Each schema position of a JSON Schema (never property names), with its path. */
const eachSchema = (s: unknown, at: string, visit: (s: any, at: string) => void): void => {
  if (!isObj(s)) return
  visit(s, at)
  for (const key of ["properties", "$defs", "definitions"])
    if (isObj(s[key])) for (const [k, x] of Object.entries(s[key])) eachSchema(x, `${at}.${key}.${k}`, visit)
  for (const key of ["anyOf", "oneOf", "allOf", "prefixItems"])
    asArray(s[key]).forEach((x, i) => eachSchema(x, `${at}.${key}[${i}]`, visit))
  if (isObj(s.items)) eachSchema(s.items, `${at}.items`, visit)
  if (isObj(s.additionalProperties)) eachSchema(s.additionalProperties, `${at}.additionalProperties`, visit)
}

const STRICT_FORBIDDEN = [
  "allOf",
  "not",
  "if",
  "then",
  "else",
  "dependentRequired",
  "dependentSchemas",
  "patternProperties",
  "unevaluatedProperties"
]
const ANTHROPIC_SCHEMA_UNSUPPORTED = [
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minLength",
  "maxLength",
  "maxItems"
]
const GEMINI_JSON_SCHEMA_KEYS = new Set(
  "$id $defs $ref $anchor type format title description enum items prefixItems minItems maxItems minimum maximum anyOf oneOf properties additionalProperties required propertyOrdering".split(
    " "
  )
)

/** Structured-output schemas, as each API checks them before it answers. */
const outputSchemaRules = (family: Family | "other", body: any): Array<string> => {
  const v: Array<string> = []
  if (family === "openai-chat" || family === "openai-responses") {
    const f =
      family === "openai-chat"
        ? body?.response_format?.type === "json_schema"
          ? body.response_format.json_schema
          : undefined
        : body?.text?.format?.type === "json_schema"
          ? body.text.format
          : undefined
    if (f?.strict === true)
      eachSchema(f.schema, "", (s, at) => {
        const where = `Invalid schema for response_format '${f.name}': In context=(${at})`
        for (const k of STRICT_FORBIDDEN) if (k in s) v.push(`${where}, '${k}' is not permitted.`)
        if (s.type === "object" || isObj(s.properties)) {
          if (s.additionalProperties !== false) v.push(`${where}, 'additionalProperties' is required to be supplied and to be false.`)
          const missing = Object.keys(s.properties ?? {}).filter((k) => !asArray(s.required).includes(k))
          if (missing.length > 0)
            v.push(
              `${where}, 'required' is required to be supplied and to be an array including every key in properties. Missing '${missing[0]}'.`
            )
        }
      })
  }
  if (family === "anthropic") {
    if (body?.output_format !== undefined) v.push("output_format: Extra inputs are not permitted")
    const f = body?.output_config?.format
    if (f !== undefined) {
      if (f?.type !== "json_schema" || !isObj(f.schema)) v.push("output_config.format: a json_schema format with a schema is required")
      else
        eachSchema(f.schema, "", (s, at) => {
          if ((s.type === "object" || isObj(s.properties)) && s.additionalProperties !== false) {
            v.push(`output_config.format.schema${at}: For 'object' type, 'additionalProperties' must be explicitly set to false`)
          }
          for (const k of ANTHROPIC_SCHEMA_UNSUPPORTED)
            if (k in s) v.push(`output_config.format.schema${at}: property '${k}' is not supported`)
          if (typeof s.minItems === "number" && s.minItems > 1)
            v.push(`output_config.format.schema${at}: minItems values other than 0 or 1 are not supported`)
        })
    }
  }
  if (family === "gemini") {
    const g = body?.generationConfig
    if (g?.responseJsonSchema !== undefined && g?.responseSchema !== undefined)
      v.push("generationConfig: responseSchema and responseJsonSchema are mutually exclusive")
    if (g?.responseJsonSchema !== undefined && g?.responseMimeType !== "application/json")
      v.push("generationConfig.responseJsonSchema: responseMimeType must be application/json")
    eachSchema(g?.responseJsonSchema, "", (s, at) => {
      for (const k of Object.keys(s))
        if (!GEMINI_JSON_SCHEMA_KEYS.has(k))
          v.push(`Invalid JSON payload received. Unknown name "${k}" at 'generation_config.response_json_schema${at}': Cannot find field.`)
    })
  }
  return v
}

const validate = (ctx: Ctx, stored: ReadonlySet<string>): Array<string> => {
  const { route, body, headers, query } = ctx
  const hasBody = route.endpoint !== "models"
  if (hasBody && !isObj(body)) return ["request body must be a JSON object"]
  const schemaRules = route.endpoint === "generate" ? outputSchemaRules(route.family, body) : []
  if (schemaRules.length > 0) return schemaRules
  switch (route.family) {
    case "openai-chat":
      return route.endpoint === "generate"
        ? validateChat(body)
        : route.endpoint === "embed" && body.input === undefined
          ? ["input is required"]
          : []
    case "openai-responses":
      return validateResponses(body, stored)
    case "anthropic":
      return [...anthropicHeaders(headers), ...(route.endpoint === "models" ? [] : validateAnthropic(body, route.endpoint === "count"))]
    case "gemini":
      return validateGemini(route, body, headers, query)
    case "ollama":
      return route.endpoint === "generate"
        ? validateOllama(body)
        : route.endpoint === "embed" && body.input === undefined
          ? ["input is required"]
          : []
    default:
      return []
  }
}

const asArray = (x: unknown): Array<any> => (Array.isArray(x) ? x : [])

// ── openai-chat

const CHAT_ROLES = new Set(["system", "developer", "user", "assistant", "tool"])

const validateChat = (body: any): Array<string> => {
  const v: Array<string> = []
  if (typeof body.model !== "string") v.push("model is required")
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) return [...v, "messages must be a non-empty array"]
  // The tool calls of the closest preceding assistant message, while tool messages may still answer them.
  let open: { readonly at: number; readonly ids: Set<string>; readonly answered: Set<string> } | undefined
  const settle = () => {
    const missing = open ? [...open.ids].filter((id) => !open!.answered.has(id)) : []
    if (open && missing.length > 0) {
      v.push(
        `messages[${open.at}]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id' (missing: ${missing.join(", ")})`
      )
    }
    open = undefined
  }
  messages.forEach((m: any, i: number) => {
    if (!isObj(m)) return void v.push(`messages[${i}] must be an object`)
    if (!CHAT_ROLES.has(m.role)) v.push(`messages[${i}].role: invalid role '${m.role}'`)
    if (m.role === "tool") {
      if (!open) v.push(`messages[${i}]: messages with role 'tool' must be a response to a preceding message with 'tool_calls'`)
      else if (!open.ids.has(m.tool_call_id))
        v.push(`messages[${i}].tool_call_id '${m.tool_call_id}' does not answer a tool_call of the preceding assistant message`)
      else open.answered.add(m.tool_call_id)
      return
    }
    settle()
    if (m.role !== "assistant" || m.tool_calls === undefined || m.tool_calls === null) return
    if (!Array.isArray(m.tool_calls)) return void v.push(`messages[${i}].tool_calls must be an array`)
    asArray(m.tool_calls).forEach((tc, j) => {
      const at = `messages[${i}].tool_calls[${j}]`
      if (typeof tc?.id !== "string") v.push(`${at}.id is required`)
      if (tc?.type !== "function") v.push(`${at}.type must be 'function'`)
      if (typeof tc?.function?.name !== "string") v.push(`${at}.function.name is required`)
      if (typeof tc?.function?.arguments !== "string") v.push(`${at}.function.arguments must be a string`)
    })
    open = { at: i, ids: new Set(asArray(m.tool_calls).map((tc) => tc?.id)), answered: new Set() }
  })
  settle()
  if (body.tools !== undefined && !Array.isArray(body.tools)) v.push("tools must be an array")
  asArray(body.tools).forEach((t, i) => {
    if (t?.type !== "function") v.push(`tools[${i}].type must be 'function'`)
    if (typeof t?.function?.name !== "string") v.push(`tools[${i}].function.name is required`)
  })
  return v
}

// ── openai-responses

const RESPONSES_FIELDS = new Set(
  [
    "model input instructions tools tool_choice parallel_tool_calls text reasoning max_output_tokens temperature top_p stream store include",
    "user metadata previous_response_id truncation service_tier prompt_cache_key safety_identifier background stream_options top_logprobs",
    "conversation prompt max_tool_calls context_management prompt_cache_retention"
  ]
    .join(" ")
    .split(" ")
)
/** Allowed keys per common input item type (anything else is an unknown parameter, as on the real API). */
const RESPONSES_ITEM_KEYS: Record<string, Set<string>> = {
  message: new Set(["type", "role", "content", "id", "status", "phase"]),
  function_call: new Set(["type", "id", "call_id", "name", "arguments", "status", "namespace"]),
  function_call_output: new Set(["type", "id", "call_id", "output", "status"]),
  reasoning: new Set(["type", "id", "summary", "content", "encrypted_content", "status"])
}
const RESPONSES_OTHER_ITEMS = new Set(
  (
    "item_reference custom_tool_call custom_tool_call_output file_search_call computer_call computer_call_output web_search_call " +
    "local_shell_call local_shell_call_output shell_call shell_call_output apply_patch_call apply_patch_call_output mcp_list_tools " +
    "mcp_approval_request mcp_approval_response mcp_call image_generation_call code_interpreter_call compaction compaction_trigger tool_search_call tool_search_output"
  ).split(" ")
)
const RESPONSES_TOOL_TYPES = new Set(
  (
    "function custom file_search web_search web_search_2025_08_26 web_search_preview web_search_preview_2025_03_11 computer_use_preview " +
    "mcp code_interpreter image_generation local_shell shell apply_patch tool_search"
  ).split(" ")
)
const INPUT_PARTS = new Set(["input_text", "input_image", "input_file"])
const ASSISTANT_PARTS = new Set(["output_text", "refusal"])

const validateResponses = (body: any, stored: ReadonlySet<string>): Array<string> => {
  const v: Array<string> = []
  for (const key of Object.keys(body)) if (!RESPONSES_FIELDS.has(key)) v.push(`Unknown parameter: '${key}'`)
  if (body.previous_response_id !== undefined && body.previous_response_id !== null && !stored.has(body.previous_response_id)) {
    v.push(`Previous response with id '${body.previous_response_id}' not found.`)
  }
  if (typeof body.model !== "string") v.push("model is required")
  if (typeof body.input !== "string" && !Array.isArray(body.input)) v.push("input must be a string or an array of items")
  const calls = new Set<string>()
  asArray(body.input).forEach((item, i) => {
    const at = `input[${i}]`
    if (!isObj(item)) return void v.push(`${at} must be an object`)
    const type: string = item.type ?? (item.role !== undefined ? "message" : "item_reference")
    const allowed = RESPONSES_ITEM_KEYS[type]
    if (!allowed && !RESPONSES_OTHER_ITEMS.has(type)) return void v.push(`${at}.type: invalid value '${type}'`)
    for (const key of Object.keys(item)) if (allowed && !allowed.has(key)) v.push(`Unknown parameter: '${at}.${key}'`)
    if (type === "message") {
      const parts = item.role === "assistant" ? ASSISTANT_PARTS : INPUT_PARTS
      if (!["user", "assistant", "system", "developer"].includes(item.role)) v.push(`${at}.role: invalid value '${item.role}'`)
      if (typeof item.content !== "string" && !Array.isArray(item.content)) v.push(`${at}.content must be a string or an array`)
      asArray(item.content).forEach((part, j) => {
        if (!parts.has(part?.type))
          v.push(
            `${at}.content[${j}].type: '${part?.type}' is not allowed in a '${item.role}' message (expected ${[...parts].join(" or ")})`
          )
      })
    } else if (type === "function_call") {
      if (typeof item.call_id !== "string") v.push(`${at}.call_id is required`)
      if (typeof item.name !== "string") v.push(`${at}.name is required`)
      if (typeof item.arguments !== "string") v.push(`${at}.arguments must be a string`)
      calls.add(item.call_id)
    } else if (type === "reasoning" && typeof item.encrypted_content !== "string" && !stored.has(item.id)) {
      v.push(`${at}: Item with id '${item.id}' not found (a reasoning item needs encrypted_content unless the server stored it).`)
    } else if (type === "function_call_output" && !calls.has(item.call_id) && !body.previous_response_id) {
      v.push(`${at}: no function call found for function_call_output with call_id '${item.call_id}'`)
    }
  })
  if (body.tools !== undefined && !Array.isArray(body.tools)) v.push("tools must be an array")
  asArray(body.tools).forEach((t, i) => {
    if (!RESPONSES_TOOL_TYPES.has(t?.type)) return void v.push(`tools[${i}].type: invalid value '${t?.type}'`)
    if (t.type !== "function") return
    if (t.function !== undefined) v.push(`Unknown parameter: 'tools[${i}].function' (function tools are flat: {type, name, parameters})`)
    if (typeof t.name !== "string") v.push(`tools[${i}].name is required`)
    if (t.parameters !== undefined && t.parameters !== null && !isObj(t.parameters)) v.push(`tools[${i}].parameters must be an object`)
  })
  return v
}

// ── anthropic

const anthropicHeaders = (headers: http.IncomingHttpHeaders): Array<string> => {
  const v: Array<string> = []
  if (!headers["anthropic-version"]) v.push("anthropic-version: header is required")
  if (!headers["x-api-key"] && !/^Bearer \S/.test(String(headers["authorization"] ?? "")))
    v.push("x-api-key or Authorization: Bearer header is required")
  return v
}

const validateAnthropic = (body: any, countOnly: boolean): Array<string> => {
  const v: Array<string> = []
  if (typeof body.model !== "string") v.push("model: field required")
  if (!countOnly && typeof body.max_tokens !== "number") v.push("max_tokens: field required")
  const thinking = body.thinking?.type
  const enabled = thinking === "enabled"
  if (enabled) {
    const budget = body.thinking.budget_tokens
    if (typeof budget !== "number" || budget < 1024) v.push("thinking.budget_tokens: must be >= 1024")
    else if (typeof body.max_tokens === "number" && budget >= body.max_tokens)
      v.push("max_tokens must be greater than thinking.budget_tokens")
    if (body.temperature !== undefined && body.temperature !== 1) v.push("temperature may only be set to 1 when thinking is enabled")
    if (body.tool_choice?.type === "any" || body.tool_choice?.type === "tool")
      v.push("Thinking may not be enabled when tool_choice forces tool use")
  }
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) return [...v, "messages: at least one message is required"]
  if (messages[0]?.role !== "user") v.push("messages: first message must use the 'user' role")
  const blocksOf = (m: any): Array<any> => (typeof m?.content === "string" ? [{ type: "text", text: m.content }] : asArray(m?.content))
  const toolUseIds = (m: any) =>
    blocksOf(m)
      .filter((b) => b?.type === "tool_use")
      .map((b) => b.id)
  messages.forEach((m: any, i: number) => {
    const at = `messages.${i}`
    if (m?.role === "system") v.push(`${at}.role: 'system' is not a valid message role (use the top-level system parameter)`)
    else if (m?.role !== "user" && m?.role !== "assistant") v.push(`${at}.role: must be 'user' or 'assistant'`)
    if (i > 0 && messages[i - 1]?.role === m?.role)
      v.push(`${at}: roles must alternate between 'user' and 'assistant' (two consecutive '${m?.role}' messages)`)
    if (typeof m?.content !== "string" && !Array.isArray(m?.content)) v.push(`${at}.content: must be a string or an array of blocks`)
    const blocks = blocksOf(m)
    blocks.forEach((b, j) => {
      if (b?.type === "text" && (typeof b.text !== "string" || b.text.trim() === ""))
        v.push(`${at}.content.${j}: text content blocks must be non-empty`)
      if ((b?.type === "thinking" || b?.type === "redacted_thinking") && thinking !== "enabled" && thinking !== "adaptive") {
        v.push(`${at}.content.${j}: '${b.type}' blocks are only allowed when thinking is enabled`)
      }
      if (b?.type === "tool_use" && !isObj(b.input)) v.push(`${at}.content.${j}.tool_use.input: must be an object`)
    })
    if (m?.role === "assistant" && enabled && toolUseIds(m).length > 0 && !["thinking", "redacted_thinking"].includes(blocks[0]?.type)) {
      v.push(
        `${at}.content.0.type: Expected 'thinking' or 'redacted_thinking', but found '${blocks[0]?.type}'. When thinking is enabled, an assistant message with tool_use must start with a thinking block`
      )
    }
    const results = blocks.filter((b) => b?.type === "tool_result").map((b) => b.tool_use_id)
    if (results.length > 0) {
      const offered = messages[i - 1]?.role === "assistant" ? toolUseIds(messages[i - 1]) : []
      for (const id of results)
        if (m?.role !== "user" || !offered.includes(id))
          v.push(
            `${at}: unexpected tool_use_id '${id}' in tool_result blocks: each tool_result must have a corresponding tool_use block in the previous message`
          )
    }
    const uses = m?.role === "assistant" ? toolUseIds(m) : []
    const next = messages[i + 1]
    if (uses.length > 0 && next !== undefined) {
      const answered = new Set(
        next?.role === "user"
          ? blocksOf(next)
              .filter((b) => b?.type === "tool_result")
              .map((b) => b.tool_use_id)
          : []
      )
      const missing = uses.filter((id) => !answered.has(id))
      if (missing.length > 0) v.push(`${at}: tool_use ids were found without tool_result blocks immediately after: ${missing.join(", ")}`)
    }
  })
  asArray(body.tools).forEach((t, i) => {
    if (t?.type === undefined || t?.type === "custom") {
      if (typeof t?.name !== "string") v.push(`tools.${i}.name: field required`)
      if (t?.input_schema?.type !== "object") v.push(`tools.${i}.input_schema.type: must be 'object'`)
    }
  })
  return v
}

// ── gemini

const GEMINI_FORBIDDEN = new Set(
  "additionalProperties $schema $ref $defs definitions prefixItems uniqueItems const exclusiveMinimum exclusiveMaximum oneOf allOf patternProperties not optional".split(
    " "
  )
)

/** Walks an OpenAPI-subset `Schema` (only schema positions, never property names). */
const walkGeminiSchema = (s: unknown, at: string, v: Array<string>): void => {
  if (!isObj(s)) return
  for (const key of Object.keys(s))
    if (GEMINI_FORBIDDEN.has(key)) v.push(`Invalid JSON payload received. Unknown name "${key}" at '${at}': Cannot find field.`)
  if (s.type !== undefined && typeof s.type !== "string") v.push(`${at}.type: must be a single type string`)
  const type = typeof s.type === "string" ? s.type.toLowerCase() : undefined
  if (type === "array" && s.items === undefined) v.push(`${at}.items: missing field (array schemas need items)`)
  if (type === "string" && s.format !== undefined && s.format !== "enum" && s.format !== "date-time") {
    v.push(`${at}.format: only 'enum' and 'date-time' are supported for strings (got '${s.format}')`)
  }
  if (isObj(s.properties)) for (const [k, p] of Object.entries(s.properties)) walkGeminiSchema(p, `${at}.properties[${k}]`, v)
  if (s.items !== undefined) walkGeminiSchema(s.items, `${at}.items`, v)
  asArray(s.anyOf).forEach((b, i) => walkGeminiSchema(b, `${at}.anyOf[${i}]`, v))
}

const validateGeminiContents = (contents: unknown, v: Array<string>): void => {
  if (!Array.isArray(contents) || contents.length === 0) return void v.push("contents is not specified")
  contents.forEach((c: any, i: number) => {
    const at = `contents[${i}]`
    if (c?.role !== undefined && c.role !== "user" && c.role !== "model") v.push(`${at}.role: please use a valid role: user, model`)
    const parts = asArray(c?.parts)
    if (parts.length === 0) v.push(`${at}.parts: must not be empty`)
    const firstCall = parts.find((p) => p?.functionCall !== undefined)
    if (c?.role === "model" && firstCall && !(typeof firstCall.thoughtSignature === "string" && firstCall.thoughtSignature !== "")) {
      v.push(`Function call is missing a thought_signature in functionCall parts (${at})`)
    }
    parts.forEach((p, j) => {
      if (p?.functionCall !== undefined && p.functionCall.args !== undefined && !isObj(p.functionCall.args))
        v.push(`${at}.parts[${j}].functionCall.args: must be an object`)
      if (p?.functionResponse === undefined) return
      if (!isObj(p.functionResponse.response)) v.push(`${at}.parts[${j}].functionResponse.response: must be an object`)
      const prev: any = contents[i - 1]
      const names = prev?.role === "model" ? asArray(prev.parts).map((q) => q?.functionCall?.name) : []
      if (!names.includes(p.functionResponse.name)) {
        v.push(
          `${at}.parts[${j}]: functionResponse '${p.functionResponse.name}' must follow a model turn with a functionCall of the same name`
        )
      }
    })
  })
}

const validateGemini = (route: Route, body: any, headers: http.IncomingHttpHeaders, query: URLSearchParams): Array<string> => {
  const v: Array<string> = []
  if (!headers["x-goog-api-key"] && !query.get("key"))
    v.push("Method doesn't allow unregistered callers. Please use an API key (x-goog-api-key header or key query parameter).")
  if (route.action === "streamGenerateContent" && query.get("alt") !== "sse") v.push("streamGenerateContent requires alt=sse in this fake")
  if (route.endpoint === "count") validateGeminiContents(body.contents ?? body.generateContentRequest?.contents, v)
  if (route.endpoint === "embed" && (!Array.isArray(body.requests) || body.requests.length === 0))
    v.push("requests must be a non-empty array")
  if (route.endpoint !== "generate") return v
  validateGeminiContents(body.contents, v)
  asArray(body.tools).forEach((tool, i) => {
    asArray(tool?.functionDeclarations).forEach((d, j) => {
      const at = `tools[${i}].function_declarations[${j}]`
      if (typeof d?.name !== "string") v.push(`${at}.name: required`)
      if (d?.parameters !== undefined && d?.parametersJsonSchema !== undefined)
        v.push(`${at}: parameters and parametersJsonSchema are mutually exclusive`)
      if (d?.parameters !== undefined) walkGeminiSchema(d.parameters, `${at}.parameters`, v)
      if (isObj(d?.parametersJsonSchema) && "$schema" in d.parametersJsonSchema) {
        v.push(`Invalid JSON payload received. Unknown name "$schema" at '${at}.parameters_json_schema': Cannot find field.`)
      }
    })
  })
  return v
}

// ── ollama

const OLLAMA_ROLES = new Set(["system", "user", "assistant", "tool"])

const validateOllama = (body: any): Array<string> => {
  const v: Array<string> = []
  if (typeof body.model !== "string") v.push("model is required")
  if (!Array.isArray(body.messages)) return [...v, "messages must be an array"]
  body.messages.forEach((m: any, i: number) => {
    if (!OLLAMA_ROLES.has(m?.role)) v.push(`messages[${i}].role: invalid role '${m?.role}'`)
    asArray(m?.tool_calls).forEach((tc, j) => {
      if (!isObj(tc?.function?.arguments))
        v.push(`messages[${i}].tool_calls[${j}].function.arguments: cannot unmarshal ${typeof tc?.function?.arguments} into an object`)
    })
  })
  return v
}
