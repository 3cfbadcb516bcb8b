import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll } from "vitest"

/** What the fake answers to one chat request. Unset fields take the defaults. */
export interface Reply {
  readonly status?: number
  readonly headers?: Record<string, string>
  /** A raw body (JSON-encoded unless a string) instead of a completion. */
  readonly body?: unknown
  /** Assistant text of the completion (split into `chunks` pieces when streaming). */
  readonly content?: string
  readonly chunks?: number
  /** Streamed tool calls: each split into argument pieces. */
  readonly toolCalls?: ReadonlyArray<{ readonly name: string; readonly arguments: string }>
  /** Delay before the response headers. */
  readonly delayMs?: number
  /** Delay between the response headers and the body (non-streaming). */
  readonly bodyDelayMs?: number
  /** Delay between stream chunks. */
  readonly chunkDelayMs?: number
  /** Destroy the socket after this many stream chunks (a cut mid-stream). */
  readonly cutAfterChunks?: number
  readonly usage?: { readonly prompt_tokens: number; readonly completion_tokens: number }
}

export interface Recorded {
  readonly method: string
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
}

const DEFAULT_USAGE = { prompt_tokens: 11, completion_tokens: 7 }

/**
 * A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions wire format, SSE
 * included: `POST /v1/chat/completions`, `GET /v1/models`. Replies are queued per request
 * (`next`) or set for all (`always`); every request is recorded.
 */
export class FakeOpenAI {
  readonly requests: Array<Recorded> = []
  /** Requests whose connection closed before the reply finished (the client went away). */
  aborted = 0
  private queue: Array<Reply> = []
  private fallback: Reply = {}
  private constructor(
    private readonly server: http.Server,
    readonly url: string
  ) {}

  static async start(): Promise<FakeOpenAI> {
    let self: FakeOpenAI | undefined
    const server = http.createServer((req, res) => self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as AddressInfo).port
    self = new FakeOpenAI(server, `http://127.0.0.1:${port}`)
    return self
  }

  /** Base URL as an OpenAI SDK would take it. */
  get baseUrl(): string {
    return `${this.url}/v1`
  }

  next(...replies: ReadonlyArray<Reply>): this {
    this.queue.push(...replies)
    return this
  }

  always(reply: Reply): this {
    this.fallback = reply
    this.queue = []
    return this
  }

  get chatRequests(): ReadonlyArray<Recorded> {
    return this.requests.filter((r) => r.path.endsWith("/chat/completions"))
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      let body: any
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        body = text
      }
      const path = (req.url ?? "/").split("?")[0]!
      this.requests.push({ method: req.method ?? "GET", path, headers: req.headers, body })
      const reply = this.queue.shift() ?? this.fallback
      res.on("close", () => {
        if (!res.writableFinished) this.aborted++
      })
      setTimeout(() => this.respond(req, res, path, body, reply), reply.delayMs ?? 0)
    })
  }

  private respond(req: http.IncomingMessage, res: http.ServerResponse, path: string, body: any, reply: Reply): void {
    const status = reply.status ?? 200
    if (reply.body !== undefined || status >= 400) {
      const payload =
        typeof reply.body === "string"
          ? reply.body
          : JSON.stringify(reply.body ?? { error: { message: `fake upstream error ${status}`, type: "server_error", code: null } })
      res.writeHead(status, { "content-type": typeof reply.body === "string" ? "text/plain" : "application/json", ...reply.headers })
      res.end(payload)
      return
    }
    if (req.method === "GET" && path.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json", ...reply.headers })
      res.end(
        JSON.stringify({
          object: "list",
          data: [
            { id: "m1", object: "model", owned_by: "fake" },
            { id: "m2", object: "model", owned_by: "fake" }
          ]
        })
      )
      return
    }
    if (!path.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" })
      res.end(JSON.stringify({ error: { message: `no route ${path}`, type: "invalid_request_error", code: null } }))
      return
    }
    const model = body?.model ?? "unknown"
    const content = reply.content ?? "Hello from upstream"
    const usage = reply.usage ?? DEFAULT_USAGE
    const id = "chatcmpl-fake"
    if (body?.stream === true) {
      const events: Array<unknown> = []
      const base = { id, object: "chat.completion.chunk", created: 1_700_000_000, model }
      events.push({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })
      if (reply.toolCalls) {
        reply.toolCalls.forEach((call, index) => {
          const callId = `call_${index}_fake`
          events.push({
            ...base,
            choices: [
              {
                index: 0,
                delta: { tool_calls: [{ index, id: callId, type: "function", function: { name: call.name, arguments: "" } }] },
                finish_reason: null
              }
            ]
          })
          const half = Math.ceil(call.arguments.length / 2)
          for (const piece of [call.arguments.slice(0, half), call.arguments.slice(half)]) {
            events.push({
              ...base,
              choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: piece } }] }, finish_reason: null }]
            })
          }
        })
        events.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] })
      } else {
        const n = Math.max(1, reply.chunks ?? 3)
        const size = Math.ceil(content.length / n)
        for (let i = 0; i < n; i++) {
          events.push({
            ...base,
            choices: [{ index: 0, delta: { content: content.slice(i * size, (i + 1) * size) }, finish_reason: null }]
          })
        }
        events.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })
      }
      if (body?.stream_options?.include_usage) {
        // OpenAI marks every other chunk with "usage": null and sends the totals last.
        for (const e of events) (e as Record<string, unknown>)["usage"] = null
        events.push({ ...base, choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...reply.headers })
      let i = 0
      const step = () => {
        if (res.destroyed) return
        if (reply.cutAfterChunks !== undefined && i >= reply.cutAfterChunks) {
          res.socket?.destroy()
          return
        }
        if (i < events.length) {
          res.write(`data: ${JSON.stringify(events[i++])}\n\n`)
          setTimeout(step, reply.chunkDelayMs ?? 0)
        } else {
          res.end("data: [DONE]\n\n")
        }
      }
      step()
      return
    }
    const send = (payload: string) => {
      if (!reply.bodyDelayMs) return res.end(payload)
      res.flushHeaders()
      setTimeout(() => res.destroyed || res.end(payload), reply.bodyDelayMs)
    }
    const message = reply.toolCalls
      ? {
          role: "assistant",
          content: null,
          tool_calls: reply.toolCalls.map((c, i) => ({ id: `call_${i}_fake`, type: "function", function: c }))
        }
      : { role: "assistant", content }
    res.writeHead(200, { "content-type": "application/json", ...reply.headers })
    send(
      JSON.stringify({
        id,
        object: "chat.completion",
        created: 1_700_000_000,
        model,
        choices: [{ index: 0, message, finish_reason: reply.toolCalls ? "tool_calls" : "stop" }],
        usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens }
      })
    )
  }
}

/** One fake upstream for the whole test file: started before the first test, closed after the last. */
export const fakeOpenAIForFile = (): { readonly upstream: FakeOpenAI } => {
  const holder = {} as { upstream: FakeOpenAI }
  beforeAll(async () => {
    holder.upstream = await FakeOpenAI.start()
  })
  afterAll(() => holder.upstream?.close())
  return holder
}
