/**
 * Capture mode 1, `agent-bridge`: a lifecycle listener records every request the gateway serves. Bodies and the upstream exchange
 * are recorded only while someone looks, so an unwatched request costs `begin` and `end` only (docs/inspector.md#1-agent-bridge).
 */
import { attach, type LifecycleListener } from "../../kernel/hooks.js"
import type { ExchangeTap, RequestContext } from "../../kernel/request.js"
import type { UsageRecord } from "../usage/Usage.js"
import { requestHeader } from "../../kernel/request.js"
import { conversationOf, mergeStream, readAnswer, readRequest } from "./analyze.js"
import { captureBody, jsonOf } from "./bodies.js"
import { pathKind } from "./detect.js"
import type { InspectorCore } from "./buffer.js"
import type { CapturedBody, InterceptedRequest, UpstreamExchange } from "./types.js"
import type { FormatId } from "../../domain/canonical.js"

/** What one recorded request gathers between begin and end. */
interface Recording {
  readonly id: string
  readonly bodies: boolean
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

  /** What the gateway knows better than any reading of bytes: the usage row, and the error. */
  const settle = (
    e: InterceptedRequest,
    status: number,
    failed: string | undefined,
    row: UsageRecord | undefined,
    streamed: boolean
  ): void => {
    if (failed !== undefined && status >= 400) e.error = failed
    if (e.llm !== null || row !== undefined) {
      const base = e.llm ?? {
        provider: null,
        apiKind: row?.endpoint ?? null,
        model: null,
        messages: 0,
        tokensIn: null,
        tokensOut: null,
        streamed,
        mappedTo: null,
        costEstimateUsd: null
      }
      e.llm = {
        ...base,
        apiKind: row?.endpoint ?? base.apiKind,
        provider: row?.provider ?? base.provider,
        model: row?.requestedModel ?? base.model,
        mappedTo: row?.model ?? base.mappedTo,
        tokensIn: row?.usage.input ?? base.tokensIn,
        tokensOut: row?.usage.output ?? base.tokensOut,
        streamed: row?.stream ?? streamed,
        costEstimateUsd: row?.costUsd ?? base.costEstimateUsd
      }
      if (e.detectedKind !== "llm" && row !== undefined) e.detectedKind = "llm"
    }
  }

  return {
    name: "inspector",
    begin: (ctx) => {
      const replayOf = core.pendingReplayOf(ctx.requestId)
      const bodies = core.wantsBodies() || replayOf !== undefined
      // Read when the entry is built (at once when someone looks, else when someone reads it): a few values, not the request.
      const { method, path, query, headers, requestId } = ctx
      const socket = (ctx as { readonly req?: { readonly socket?: object } }).req?.socket
      const clientPort = socketPort(ctx)
      const start = () => {
        const host = requestHeader({ headers } as RequestContext, "host") ?? "gateway"
        const q = query.toString()
        return { source: "agent-bridge" as const, method, url: `http://${host}${path}${q ? `?${q}` : ""}`, headers, requestId }
      }
      const kind = pathKind(path)
      const began = (slot: { readonly entry: InterceptedRequest; format: FormatId | null }) => {
        if (kind !== undefined) {
          slot.entry.detectedKind = "llm"
          slot.format = kind.format
          slot.entry.llm = {
            provider: null,
            apiKind: kind.apiKind,
            model: null,
            messages: 0,
            tokensIn: null,
            tokensOut: null,
            streamed: false,
            mappedTo: null,
            costEstimateUsd: null
          }
        }
        if (replayOf !== undefined) core.linkReplay(slot.entry, replayOf)
      }
      const { id } = core.beginOwn(
        start,
        requestId,
        began,
        () => (clientPort === undefined || socket === undefined ? undefined : { port: clientPort, connection: socket }),
        bodies
      )
      const rec: Recording = {
        id,
        bodies,
        format: kind?.format ?? null,
        endpoint: null,
        clientBody: undefined,
        frames: [],
        frameBytes: 0,
        answer: undefined,
        exchanges: []
      }
      ctx.inspection = rec
      if (bodies) attachBodies(ctx, rec)
    },
    end: (ctx, status, error) => {
      const rec = ctx.inspection as Recording | undefined
      if (rec === undefined) return
      ctx.inspection = undefined
      const headers = ctx.answerHeaders ?? {}
      const type = String(headers["content-type"] ?? "")
      const row = ctx.usageRow
      const failed = error?.message
      if (!rec.bodies) {
        const streamed = /event-stream|ndjson/.test(type)
        core.endOwn(rec.id, { status, headers, bodySize: 0 }, (slot) => settle(slot.entry, status, failed, row, streamed))
        return
      }
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
      settle(e, status, failed, row, streamed)
      core.changed(slot)
    }
  }
}
