/**
 * What a Responses WebSocket sends: a response's events as messages, one per event (the stream
 * relay's sink on the socket, `SocketSink`), and errors as the Responses API's own `error` event.
 */
import type { CanonicalError } from "../domain/canonical.js"
import { errorBody, type InferenceError } from "../kernel/errors.js"
import { observe } from "../kernel/hooks.js"
import { obj } from "../upstream/formats/common.js"
import { openAiResponses } from "../upstream/formats/openai-responses.js"
import { type HttpRequestContext, responseHeaders } from "../inference/io.js"
import type { EventFraming, FrameRelay, StreamSink } from "../inference/stream.js"

/**
 * An error sent as a frame, shaped like the Responses API's own `error` event; `headers` (what an
 * HTTP answer would carry in its head: `retry-after`, the rate-limit fields, a guardrail's
 * warning) go in the event's `headers` object, where Codex reads them.
 */
export const errorFrame = (e: InferenceError, headers?: Readonly<Record<string, string>>) => {
  const body = obj(errorBody(e, openAiResponses))?.["error"] ?? { message: e.message }
  return JSON.stringify({ type: "error", status: e.status, error: body, ...(headers ? { headers } : {}) })
}

/** The head fields of an error answer: the rate-limit fields the request got, then the error's own. */
export const errorHeaders = (ctx: HttpRequestContext, e: InferenceError): Record<string, string> | undefined => {
  let out: Record<string, string> | undefined
  for (const k in ctx.responseHeaders)
    if (k.startsWith("ratelimit-") || k.startsWith("x-ratelimit-")) (out ??= {})[k] = ctx.responseHeaders[k]!
  if (e.headers) for (const k in e.headers) (out ??= {})[k.toLowerCase()] = e.headers[k]!
  return out
}

/**
 * Events of a relayed stream become WebSocket messages: each event's data followed by an ASCII
 * record separator (as in JSON text sequences, RFC 7464; it cannot occur in JSON text), which
 * the socket's sink splits on. The stream's own `[DONE]` is not an event.
 */
const RS = "\u001e"

/** What the socket gets in place of SSE: one message per event; a broken stream ends with an error message. */
export const socketEvents = (): EventFraming => ({
  element: (data) => (data === "[DONE]" ? "" : data + RS),
  close: () => "",
  broken: (e: CanonicalError) =>
    JSON.stringify({
      type: "error",
      status: e.status,
      error: { type: e.kind === "timeout" ? "timeout_error" : "upstream_error", code: e.code ?? null, message: e.message }
    }) + RS
})

/** A Responses stream's last event (the response done, failed or cut short). */
const TERMINAL_EVENT = /"type"\s*:\s*"response\.(completed|failed|incomplete)"/

/** Messages (each followed by RS) as the Responses API's SSE events, for an answer rewrite written for the HTTP stream. */
const toSse = (text: string): string => {
  let out = ""
  for (const m of text.split(RS)) if (m !== "") out += `data: ${m.replace(/\n/g, "\ndata: ")}\n\n`
  return out
}

/** SSE events back into messages (each followed by RS); comments (a rewrite's warning) have no message. */
export const fromSse = (text: string): string => {
  let out = ""
  for (const block of text.split("\n\n")) {
    if (block === "" || block.startsWith(":")) continue
    const data: Array<string> = []
    for (const line of block.split("\n")) if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5))
    if (data.length !== 0) out += data.join("\n") + RS
  }
  return out
}

/**
 * What the lifecycle reads of a WebSocket response where an HTTP request has its response
 * (`HookHost.res`): the status it ended with, and whether its answer began.
 */
export interface SocketAnswer {
  statusCode: number
  headersSent: boolean
  /** Its last message went out: a socket closed now does not cancel it (its bookkeeping finishes). */
  finished?: boolean
}

/**
 * A relayed stream's sink on a WebSocket, one message per event: io.ts's stream writers' counterpart,
 * with the same answer rewrite and stream hooks (docs/formats.md, "Decisions").
 */
export class SocketSink implements StreamSink {
  /** The relay wrote: the response is committed. */
  sent = false

  constructor(
    private readonly ctx: HttpRequestContext,
    private readonly answer: SocketAnswer,
    private readonly send: (text: string) => void,
    private readonly open: () => boolean
  ) {}

  private start(): void {
    if (this.answer.headersSent) return
    this.answer.headersSent = true
    const { ctx } = this
    const listeners = ctx.hooks?.onStreamStart
    const head = ctx.rewrite?.head
    if (head === undefined && (listeners === undefined || listeners.length === 0)) return
    let headers: Readonly<Record<string, string | number>> = responseHeaders(ctx)
    if (head !== undefined) headers = head(headers)
    ctx.answerHeaders = headers
    if (listeners !== undefined && listeners.length !== 0) observe(ctx, "onStreamStart", listeners, { status: 200, headers })
  }

  private out(text: string): void {
    const onFrame = this.ctx.hooks?.onFrame
    for (const message of text.split(RS)) {
      if (message === "") continue
      // The response's last event: the client may close at once, which must not cancel it.
      if (this.answer.finished !== true && TERMINAL_EVENT.test(message)) this.answer.finished = true
      this.send(message)
      if (onFrame !== undefined && onFrame.length !== 0) observe(this.ctx, "onFrame", onFrame, { text: message })
    }
  }

  write(text: string): boolean {
    this.sent = true
    this.start()
    const frame = this.ctx.rewrite?.frame
    this.out(frame === undefined ? text : fromSse(frame(toSse(text))))
    return true
  }

  end(tail: string, error: string | null): void {
    this.answer.finished = true
    this.start()
    const end = this.ctx.rewrite?.end
    if (end !== undefined) {
      const r = end(toSse(tail), error)
      tail = fromSse(r.text)
      error = r.error
    }
    this.out(tail)
    const listeners = this.ctx.hooks?.onStreamEnd
    if (listeners !== undefined && listeners.length !== 0)
      observe(this.ctx, "onStreamEnd", listeners, {
        text: tail
          .split(RS)
          .filter((m) => m !== "")
          .join("\n"),
        error
      })
  }

  gone(): boolean {
    return !this.open()
  }

  committed(): boolean {
    return this.sent
  }

  onDrain(): void {}

  offDrain(): void {}
}

/**
 * A translated stream's relay for the socket: the client encoder writes SSE events (as for an
 * HTTP client); each event's data becomes one message (`fromSse`).
 */
export const asMessages = (relay: FrameRelay): FrameRelay => ({
  frame: (frame) => fromSse(relay.frame(frame)),
  end: () => fromSse(relay.end()),
  broken: (e) => fromSse(relay.broken(e))
})
