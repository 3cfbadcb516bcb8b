/**
 * Capture mode 1, `agent-bridge`: a lifecycle listener records every request the gateway serves. Bodies and the upstream exchange
 * are recorded only while someone looks, so an unwatched request costs `begin` and `end` only (docs/inspector.md#1-agent-bridge).
 */
import { attach, type LifecycleListener } from "../../kernel/hooks.js"
import type { ExchangeTap, RequestContext } from "../../kernel/request.js"
import { requestHeader } from "../../kernel/request.js"
import { conversationOf, mergeStream, readAnswer, readRequest } from "./analyze.js"
import { captureBody, jsonOf } from "./bodies.js"
import { pathKind } from "./detect.js"
import type { InspectorCore } from "./buffer.js"
import type { OwnRequest } from "./bufferEntry.js"
import { HeaderBytes } from "./headerBytes.js"
import type { CaptureEnd, CaptureStart, CapturedBody, InterceptedRequest, UpstreamExchange } from "./types.js"
import type { FormatId } from "../../domain/canonical.js"

/** What one request recorded with its bodies gathers between begin and end. */
interface Recording {
  readonly id: string
  format: FormatId | null
  endpoint: string | null
  clientBody: unknown
  frames: Array<Buffer | string>
  frameBytes: number
  answer: string | Buffer | undefined
  exchanges: Array<{ ex: UpstreamExchange; chunks: Array<Buffer>; bytes: number }>
}

const socketPort = (ctx: RequestContext): number | undefined => {
  // The inference plane's context carries node's request (src/inference/io.ts); a WebSocket frame's may not.
  const port = (ctx as { readonly req?: { readonly socket?: { readonly remotePort?: number; readonly remoteAddress?: string } } }).req
    ?.socket
  if (port?.remotePort === undefined) return undefined
  const a = port.remoteAddress ?? ""
  return a === "127.0.0.1" || a === "::1" || a === "::ffff:127.0.0.1" ? port.remotePort : undefined
}

/** An answer without headers (nothing written). */
const NO_HEADERS: CaptureEnd["headers"] = {}

/** An LLM call's metadata before anything is known of it. */
const blankLlm = (apiKind: string | null, streamed: boolean): NonNullable<InterceptedRequest["llm"]> => ({
  provider: null,
  apiKind,
  model: null,
  messages: 0,
  tokensIn: null,
  tokensOut: null,
  streamed,
  mappedTo: null,
  costEstimateUsd: null
})

/**
 * One request the agent-bridge records, from `begin` to `end` (`ctx.inspection`), and, while
 * nobody looks, what its slot keeps until someone reads its entry (buffer.ts, `OwnRequest`): a few
 * plain values of a fixed shape, not closures over the request (its URLSearchParams, its socket)
 * nor its usage row, and its headers and its answer's as bytes (headerBytes.ts), not node's
 * objects: anything else would live as long as the slot (a thousand requests later) and be
 * promoted to the old generation only to die there.
 */
class BridgeRequest implements OwnRequest {
  id = ""
  /** Its bodies and upstream exchange, kept only while someone looks (or it is a replay). */
  recording: Recording | undefined = undefined
  /** Its headers (`requestHeaders`): as bytes, or the object when bytes cannot hold them. */
  private readonly headerBytes = new HeaderBytes()
  private headerObject: RequestContext["headers"] | undefined = undefined
  // Its end: the status, the answer's headers as written, the error, and the usage row's figures (`settle` reads them).
  status = 0
  /** The answer's headers as written, from `noteEnd` until `keepAnswerAsBytes` (then in `answerBytes`). */
  answerHeaders: CaptureEnd["headers"] = NO_HEADERS
  private readonly answerBytes = new HeaderBytes()
  private answerInBytes = false
  failed: string | undefined = undefined
  streamed = false
  hasRow = false
  rowEndpoint: string | undefined = undefined
  rowProvider: string | null | undefined = undefined
  rowRequestedModel: string | null | undefined = undefined
  rowModel: string | null | undefined = undefined
  rowInput: number | null | undefined = undefined
  rowOutput: number | null | undefined = undefined
  rowStream: boolean | undefined = undefined
  rowCost: number | null | undefined = undefined

  constructor(
    private readonly core: InspectorCore,
    public method: string,
    public path: string,
    /** Its query string as the request's URLSearchParams writes it. */
    public query: string,
    headers: RequestContext["headers"],
    public requestId: string,
    /** The entry this request replays (the inspector's replay), if it is one. */
    public replayOf: string | undefined,
    /** Its entry is built at once (someone looks): its headers are read now, kept as the object. */
    eager: boolean
  ) {
    this.keepHeaders(headers, eager)
  }

  private keepHeaders(headers: RequestContext["headers"], eager: boolean): void {
    if (eager) {
      this.headerBytes.clear()
      this.headerObject = headers
    } else this.headerObject = this.headerBytes.store(headers) ? undefined : headers
  }

  /** Its headers as the request had them. */
  requestHeaders(): RequestContext["headers"] {
    // Bytes hold a request's headers as node gives them: strings, and lists of strings (no numbers).
    return this.headerObject ?? (this.headerBytes.read() as RequestContext["headers"])
  }

  /**
   * This object, handed back by the buffer (`recycledOwn`: its request ended and its slot was
   * evicted unread), taken for a new request: every field as the constructor makes it.
   */
  reuse(
    method: string,
    path: string,
    query: string,
    headers: RequestContext["headers"],
    requestId: string,
    replayOf: string | undefined,
    eager: boolean
  ): this {
    this.method = method
    this.path = path
    this.query = query
    this.keepHeaders(headers, eager)
    this.requestId = requestId
    this.replayOf = replayOf
    this.id = ""
    this.recording = undefined
    this.status = 0
    this.answerHeaders = NO_HEADERS
    this.answerBytes.clear()
    this.answerInBytes = false
    this.failed = undefined
    this.streamed = false
    this.hasRow = false
    this.rowEndpoint = undefined
    this.rowProvider = undefined
    this.rowRequestedModel = undefined
    this.rowModel = undefined
    this.rowInput = undefined
    this.rowOutput = undefined
    this.rowStream = undefined
    this.rowCost = undefined
    return this
  }

  start(): CaptureStart {
    const headers = this.requestHeaders()
    const host = requestHeader({ headers } as RequestContext, "host") ?? "gateway"
    const q = this.query
    return {
      source: "agent-bridge" as const,
      method: this.method,
      url: `http://${host}${this.path}${q ? `?${q}` : ""}`,
      headers,
      requestId: this.requestId
    }
  }

  began(slot: { readonly entry: InterceptedRequest; format: FormatId | null }): void {
    const kind = pathKind(this.path)
    if (kind !== undefined) {
      slot.entry.detectedKind = "llm"
      slot.format = kind.format
      slot.entry.llm = blankLlm(kind.apiKind, false)
    }
    if (this.replayOf !== undefined) this.core.linkReplay(slot.entry, this.replayOf)
  }

  /** Its end as the request's context has it now. */
  noteEnd(ctx: RequestContext, status: number, error: { readonly message: string } | undefined): void {
    this.status = status
    this.answerHeaders = ctx.answerHeaders ?? NO_HEADERS
    this.failed = error?.message
    const row = ctx.usageRow
    if (row === undefined) return
    this.hasRow = true
    this.rowEndpoint = row.endpoint
    this.rowProvider = row.provider
    this.rowRequestedModel = row.requestedModel
    this.rowModel = row.model
    this.rowInput = row.usage.input
    this.rowOutput = row.usage.output
    this.rowStream = row.stream
    this.rowCost = row.costUsd
  }

  /** The answer's content type (before `keepAnswerAsBytes`). */
  contentType(): string {
    return String(this.answerHeaders["content-type"] ?? "")
  }

  /** The request is over and its entry not built (`endOwn`): the answer's headers are kept as bytes from now on. */
  keepAnswerAsBytes(): void {
    if (this.answerHeaders === NO_HEADERS || !this.answerBytes.store(this.answerHeaders)) return
    this.answerInBytes = true
    this.answerHeaders = NO_HEADERS
  }

  end(): CaptureEnd {
    return { status: this.status, headers: this.answerInBytes ? this.answerBytes.read() : this.answerHeaders, bodySize: 0 }
  }

  ended(slot: { readonly entry: InterceptedRequest }): void {
    settle(slot.entry, this)
  }
}

/** What the gateway knows better than any reading of bytes: the usage row, and the error. */
const settle = (e: InterceptedRequest, r: BridgeRequest): void => {
  const { status, failed, streamed } = r
  if (failed !== undefined && status >= 400) e.error = failed
  if (e.llm !== null || r.hasRow) {
    const base = e.llm ?? blankLlm(r.rowEndpoint ?? null, streamed)
    e.llm = {
      ...base,
      apiKind: r.rowEndpoint ?? base.apiKind,
      provider: r.rowProvider ?? base.provider,
      model: r.rowRequestedModel ?? base.model,
      mappedTo: r.rowModel ?? base.mappedTo,
      tokensIn: r.rowInput ?? base.tokensIn,
      tokensOut: r.rowOutput ?? base.tokensOut,
      streamed: r.rowStream ?? streamed,
      costEstimateUsd: r.rowCost ?? base.costEstimateUsd
    }
    if (e.detectedKind !== "llm" && r.hasRow) e.detectedKind = "llm"
  }
}

export const makeAgentBridge = (core: InspectorCore): LifecycleListener => {
  const max = core.sink.maxBodyBytes + 1

  const body = (text: string | Buffer, type: string): CapturedBody => {
    const buf = typeof text === "string" ? Buffer.from(text) : text
    return captureBody(
      buf.length > max ? buf.subarray(0, max) : buf,
      buf.length,
      { "content-type": type },
      { maxBytes: core.sink.maxBodyBytes, mask: core.maskSecrets }
    )
  }

  const tapFor = (rec: Recording): ExchangeTap => {
    const current = () => rec.exchanges[rec.exchanges.length - 1]
    const settle = () => {
      const slot = core.slot(rec.id)
      if (!slot) return
      slot.entry.upstream = rec.exchanges.map((x) => x.ex)
      core.changed(slot)
    }
    return {
      sent: (target, sentBody) => {
        rec.exchanges.push({
          ex: {
            attempt: rec.exchanges.length + 1,
            provider: target.provider,
            connection: target.connection,
            model: target.model,
            url: target.url,
            requestBody: body(sentBody, "application/json"),
            status: null,
            responseBody: null,
            error: null
          },
          chunks: [],
          bytes: 0
        })
        settle()
      },
      answered: (status, headers, text) => {
        const x = current()
        if (!x) return
        x.ex = {
          ...x.ex,
          status,
          ...(text !== undefined ? { responseBody: body(text, headers["content-type"] ?? "application/json") } : {})
        }
        if (text !== undefined) settle()
      },
      chunk: (bytes) => {
        const x = current()
        if (!x || x.bytes >= max) return
        x.chunks.push(bytes)
        x.bytes += bytes.length
      },
      failed: (status, message, text) => {
        const x = current()
        if (!x) return
        x.ex = { ...x.ex, status, error: message, ...(text !== undefined ? { responseBody: body(text, "application/json") } : {}) }
        settle()
      }
    }
  }

  const attachBodies = (ctx: RequestContext, rec: Recording) => {
    ctx.tap = tapFor(rec)
    attach(ctx, {
      name: "inspector",
      // First, so it sees the body as the client sent it.
      priority: -1_000_000,
      onRequest: (event) => {
        rec.format = event.format
        rec.endpoint = event.endpoint
        rec.clientBody = event.body
      },
      onFrame: (event) => {
        if (rec.frameBytes >= max) return
        const piece = event.bytes !== undefined ? Buffer.from(event.bytes) : event.text
        rec.frames.push(piece)
        rec.frameBytes += typeof piece === "string" ? Buffer.byteLength(piece) : piece.length
      },
      onStreamEnd: (event) => {
        if (event.text && rec.frameBytes < max) {
          rec.frames.push(event.text)
          rec.frameBytes += Buffer.byteLength(event.text)
        }
      }
    })
  }

  return {
    name: "inspector",
    begin: (ctx) => {
      const replayOf = core.pendingReplayOf(ctx.requestId)
      const bodies = core.wantsBodies() || replayOf !== undefined
      // Read when the entry is built (at once when someone looks, else when someone reads it): a few values, not the request.
      const recycled = core.recycledOwn()
      const own =
        recycled instanceof BridgeRequest
          ? recycled.reuse(ctx.method, ctx.path, ctx.query.toString(), ctx.headers, ctx.requestId, replayOf, bodies)
          : new BridgeRequest(core, ctx.method, ctx.path, ctx.query.toString(), ctx.headers, ctx.requestId, replayOf, bodies)
      const clientPort = socketPort(ctx)
      const socket = clientPort === undefined ? undefined : (ctx as { readonly req?: { readonly socket?: object } }).req?.socket
      own.id = core.beginOwn(own, ctx.requestId, bodies, clientPort, socket)
      ctx.inspection = own
      if (bodies) {
        const rec: Recording = {
          id: own.id,
          format: pathKind(ctx.path)?.format ?? null,
          endpoint: null,
          clientBody: undefined,
          frames: [],
          frameBytes: 0,
          answer: undefined,
          exchanges: []
        }
        own.recording = rec
        attachBodies(ctx, rec)
      }
    },
    end: (ctx, status, error) => {
      const own = ctx.inspection as BridgeRequest | undefined
      if (own === undefined) return
      ctx.inspection = undefined
      own.noteEnd(ctx, status, error)
      const rec = own.recording
      if (rec === undefined) {
        own.streamed = /event-stream|ndjson/.test(own.contentType())
        if (core.endOwn(own.id, own)) own.keepAnswerAsBytes()
        return
      }
      own.recording = undefined
      const headers = own.answerHeaders
      const type = own.contentType()
      const slot = core.slot(rec.id)
      if (!slot) return
      const e = slot.entry
      const streamed = rec.frames.length > 0 || /event-stream|ndjson/.test(type)
      // A whole answer as written (src/inference/io.ts keeps it on the request): read here, since the
      // end hooks may still be running (the usage row's write) when listeners hear the end.
      if (ctx.answerBody !== undefined) rec.answer = ctx.answerBody
      const answer =
        rec.answer !== undefined
          ? typeof rec.answer === "string"
            ? Buffer.from(rec.answer)
            : rec.answer
          : rec.frames.length > 0
            ? Buffer.concat(rec.frames.map((f) => (typeof f === "string" ? Buffer.from(f) : f)))
            : undefined
      if (rec.clientBody !== undefined && e.requestBody === null) {
        e.requestBody = body(JSON.stringify(rec.clientBody), "application/json")
        e.requestSize = e.requestBody.size
      }
      // Streamed upstream answers: their chunks, put together once.
      for (const x of rec.exchanges)
        if (x.chunks.length > 0 && x.ex.responseBody === null)
          x.ex = { ...x.ex, responseBody: body(Buffer.concat(x.chunks), "text/event-stream") }
      if (rec.exchanges.length > 0) e.upstream = rec.exchanges.map((x) => x.ex)
      core.sink.end(rec.id, { status, headers, ...(answer !== undefined ? { body: answer } : { bodySize: 0 }) })
      if (rec.format !== null && rec.clientBody !== undefined) {
        const reading = readRequest(rec.format, rec.clientBody, ctx.path)
        const merged =
          answer === undefined || status >= 400
            ? undefined
            : streamed
              ? mergeStream(rec.format, answer.toString("utf8"), /ndjson/.test(type) ? "ndjson" : "sse")
              : readAnswer(rec.format, jsonOf(body(answer, "application/json")))
        e.conversation = conversationOf(reading, merged)
        e.contextKey = e.conversation.contextKey
        if (e.llm !== null)
          e.llm = { ...e.llm, model: e.llm.model ?? reading.model, messages: reading.canonical?.messages.length ?? e.llm.messages }
      }
      own.streamed = streamed
      settle(e, own)
      core.changed(slot)
    }
  }
}
