import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * OpenAI's batch API (under `/openai/v1`: files upload, batches create/retrieve/cancel, file
 * content) and Anthropic's message batches (under `/anthropic`: create, retrieve, cancel,
 * results) on 127.0.0.1, in their wire shapes. A batch moves on at each poll: OpenAI
 * `validating` → `in_progress` → `completed` (after `pollsToEnd` polls), Anthropic `in_progress`
 * → `ended`, unless `hold` is set. Every answer has usage 1000 input / 500 output tokens; a line
 * whose last user message is `fail` is answered with an error (OpenAI: a 400 in the error file,
 * Anthropic: an `errored` result).
 */
interface OpenAiBatch {
  id: string
  status: string
  endpoint: string
  input_file_id: string
  metadata: unknown
  polls: number
  output_file_id: string | null
  error_file_id: string | null
  counts: { total: number; completed: number; failed: number }
}

interface AnthropicBatch {
  id: string
  status: string
  requests: Array<{ custom_id: string; params: Record<string, unknown> }>
  polls: number
  cancelled: boolean
}

const lastText = (body: Record<string, unknown>): string => {
  const messages = (body["messages"] as Array<{ content: unknown }> | undefined) ?? []
  const c = messages[messages.length - 1]?.content
  return typeof c === "string" ? c : JSON.stringify(c)
}

export class FakeNativeBatches {
  /** Every request: method, path and the auth it carried. */
  readonly requests: Array<{ method: string; path: string; auth: string | undefined }> = []
  readonly files = new Map<string, Buffer>()
  readonly openai = new Map<string, OpenAiBatch>()
  readonly anthropic = new Map<string, AnthropicBatch>()
  pollsToEnd = 2
  /** Refuse batch creation with a 401 that echoes the key it was sent (the gateway must scrub it). */
  refuseCreate = false
  hold = false
  private n = 0
  private constructor(
    private readonly server: http.Server,
    readonly origin: string
  ) {}

  static async start(): Promise<FakeNativeBatches> {
    let self: FakeNativeBatches | undefined
    const server = http.createServer((req, res) => void self!.handle(req, res).catch((e) => res.writeHead(500).end(String(e))))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new FakeNativeBatches(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    return self
  }

  get openaiBase(): string {
    return `${this.origin}/openai/v1`
  }

  get anthropicBase(): string {
    return `${this.origin}/anthropic`
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections()
      this.server.close(() => resolve())
    })
  }

  private id(prefix: string): string {
    return `${prefix}${++this.n}`
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks)
    const url = new URL(req.url ?? "/", this.origin)
    const path = url.pathname
    const auth = (req.headers["authorization"] as string | undefined) ?? (req.headers["x-api-key"] as string | undefined)
    this.requests.push({ method: req.method ?? "GET", path, auth })
    const json = (status: number, body: unknown): void =>
      void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body))
    let m: RegExpExecArray | null

    // ---------------------------------------------------------- OpenAI
    if (req.method === "POST" && path === "/openai/v1/files") {
      const type = String(req.headers["content-type"] ?? "")
      const boundary = /boundary=(.+)$/.exec(type)?.[1]
      if (!boundary) return json(400, { error: { message: "not multipart", type: "invalid_request_error" } })
      const parts = raw.toString("utf8").split(`--${boundary}`)
      let purpose: string | undefined
      let file: string | undefined
      for (const p of parts) {
        const [head, ...rest] = p.split("\r\n\r\n")
        const content = rest.join("\r\n\r\n").replace(/\r\n$/, "")
        if (/name="purpose"/.test(head ?? "")) purpose = content
        if (/name="file"/.test(head ?? "")) file = content
      }
      if (purpose !== "batch" || file === undefined)
        return json(400, { error: { message: "purpose batch and a file are required", type: "invalid_request_error" } })
      const id = this.id("file-up")
      this.files.set(id, Buffer.from(file, "utf8"))
      return json(200, {
        id,
        object: "file",
        bytes: Buffer.byteLength(file),
        created_at: 1,
        filename: "input.jsonl",
        purpose: "batch",
        status: "processed"
      })
    }
    if (req.method === "POST" && path === "/openai/v1/batches") {
      if (this.refuseCreate)
        return json(401, {
          error: {
            message: `Incorrect API key provided: ${auth?.replace(/^Bearer /, "")}`,
            type: "invalid_request_error",
            code: "invalid_api_key"
          }
        })
      const body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>
      const input = this.files.get(String(body["input_file_id"]))
      if (!input) return json(404, { error: { message: "no such file", type: "invalid_request_error" } })
      const total = input.toString("utf8").trim().split("\n").length
      const b: OpenAiBatch = {
        id: this.id("batch_up"),
        status: "validating",
        endpoint: String(body["endpoint"]),
        input_file_id: String(body["input_file_id"]),
        metadata: body["metadata"],
        polls: 0,
        output_file_id: null,
        error_file_id: null,
        counts: { total, completed: 0, failed: 0 }
      }
      this.openai.set(b.id, b)
      return json(200, this.openAiObject(b))
    }
    if ((m = /^\/openai\/v1\/batches\/([^/]+)$/.exec(path)) && req.method === "GET") {
      const b = this.openai.get(m[1]!)
      if (!b) return json(404, { error: { message: "no such batch", type: "invalid_request_error" } })
      this.advanceOpenAi(b)
      return json(200, this.openAiObject(b))
    }
    if ((m = /^\/openai\/v1\/batches\/([^/]+)\/cancel$/.exec(path)) && req.method === "POST") {
      const b = this.openai.get(m[1]!)
      if (!b) return json(404, { error: { message: "no such batch", type: "invalid_request_error" } })
      b.status = "cancelling"
      return json(200, this.openAiObject(b))
    }
    if ((m = /^\/openai\/v1\/files\/([^/]+)\/content$/.exec(path)) && req.method === "GET") {
      const f = this.files.get(m[1]!)
      if (!f) return json(404, { error: { message: "no such file", type: "invalid_request_error" } })
      return void res.writeHead(200, { "content-type": "application/octet-stream" }).end(f)
    }

    // ---------------------------------------------------------- Anthropic
    if (req.method === "POST" && path === "/anthropic/v1/messages/batches") {
      if (req.headers["anthropic-version"] === undefined)
        return json(400, { type: "error", error: { type: "invalid_request_error", message: "anthropic-version header is required" } })
      const body = JSON.parse(raw.toString("utf8")) as { requests: AnthropicBatch["requests"] }
      const b: AnthropicBatch = { id: this.id("msgbatch_"), status: "in_progress", requests: body.requests, polls: 0, cancelled: false }
      this.anthropic.set(b.id, b)
      return json(200, this.anthropicObject(b))
    }
    if ((m = /^\/anthropic\/v1\/messages\/batches\/([^/]+)$/.exec(path)) && req.method === "GET") {
      const b = this.anthropic.get(m[1]!)
      if (!b) return json(404, { type: "error", error: { type: "not_found_error", message: "no such batch" } })
      b.polls++
      if (b.status === "canceling" || (!this.hold && b.polls >= this.pollsToEnd)) b.status = "ended"
      return json(200, this.anthropicObject(b))
    }
    if ((m = /^\/anthropic\/v1\/messages\/batches\/([^/]+)\/cancel$/.exec(path)) && req.method === "POST") {
      const b = this.anthropic.get(m[1]!)
      if (!b) return json(404, { type: "error", error: { type: "not_found_error", message: "no such batch" } })
      b.status = "canceling"
      b.cancelled = true
      return json(200, this.anthropicObject(b))
    }
    if ((m = /^\/anthropic\/v1\/messages\/batches\/([^/]+)\/results$/.exec(path)) && req.method === "GET") {
      const b = this.anthropic.get(m[1]!)
      if (!b || b.status !== "ended") return json(404, { type: "error", error: { type: "not_found_error", message: "no results yet" } })
      // Out of order, as Anthropic allows.
      const lines = b.requests.map((r, i) => JSON.stringify({ custom_id: r.custom_id, result: this.anthropicResult(b, r, i) })).reverse()
      return void res.writeHead(200, { "content-type": "application/binary" }).end(lines.join("\n") + "\n")
    }
    json(404, { error: { message: `no route ${req.method} ${path}` } })
  }

  private openAiObject(b: OpenAiBatch) {
    return {
      id: b.id,
      object: "batch",
      endpoint: b.endpoint,
      errors: null,
      input_file_id: b.input_file_id,
      completion_window: "24h",
      status: b.status,
      output_file_id: b.output_file_id,
      error_file_id: b.error_file_id,
      created_at: 1,
      request_counts: b.counts,
      metadata: b.metadata
    }
  }

  /** Each poll moves the batch on; at its end the output (and error) files are written. */
  private advanceOpenAi(b: OpenAiBatch): void {
    b.polls++
    if (b.status === "validating") b.status = "in_progress"
    else if (b.status === "in_progress" && !this.hold && b.polls >= this.pollsToEnd) this.endOpenAi(b, "completed")
    else if (b.status === "cancelling") this.endOpenAi(b, "cancelled")
    if (b.status === "in_progress") b.counts = { ...b.counts, completed: Math.min(b.counts.total, 1) }
  }

  private endOpenAi(b: OpenAiBatch, status: "completed" | "cancelled"): void {
    const lines = this.files
      .get(b.input_file_id)!
      .toString("utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { custom_id: string; body: Record<string, unknown> })
    const out: Array<string> = []
    const err: Array<string> = []
    lines.forEach((l, i) => {
      const id = `batch_req_up_${i}`
      if (status === "cancelled" && i > 0) {
        err.push(JSON.stringify({ id, custom_id: l.custom_id, response: null, error: { code: "batch_cancelled", message: "cancelled" } }))
        return
      }
      const text = lastText(l.body)
      if (text === "fail") {
        err.push(
          JSON.stringify({
            id,
            custom_id: l.custom_id,
            response: {
              status_code: 400,
              request_id: `req_${i}`,
              body: { error: { message: "this line fails", type: "invalid_request_error", param: null, code: null } }
            },
            error: null
          })
        )
        return
      }
      const body = {
        id: `chatcmpl-${i}`,
        object: "chat.completion",
        created: 1,
        model: l.body["model"],
        choices: [{ index: 0, message: { role: "assistant", content: `batched: ${text}` }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500 }
      }
      out.push(JSON.stringify({ id, custom_id: l.custom_id, response: { status_code: 200, request_id: `req_${i}`, body }, error: null }))
    })
    // Out of order, as OpenAI allows.
    out.reverse()
    if (out.length > 0) {
      b.output_file_id = this.id("file-out")
      this.files.set(b.output_file_id, Buffer.from(out.join("\n") + "\n"))
    }
    if (err.length > 0) {
      b.error_file_id = this.id("file-err")
      this.files.set(b.error_file_id, Buffer.from(err.join("\n") + "\n"))
    }
    b.counts = { total: lines.length, completed: out.length, failed: lines.length - out.length }
    b.status = status
  }

  private anthropicResult(b: AnthropicBatch, r: AnthropicBatch["requests"][number], i: number) {
    if (b.cancelled && i > 0) return { type: "canceled" }
    const text = lastText(r.params)
    if (text === "fail")
      return { type: "errored", error: { type: "error", error: { type: "invalid_request_error", message: "this line fails" } } }
    return {
      type: "succeeded",
      message: {
        id: `msg_${r.custom_id}`,
        type: "message",
        role: "assistant",
        model: r.params["model"],
        content: [{ type: "text", text: `batched: ${text}` }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 1000, output_tokens: 500 }
      }
    }
  }

  private anthropicObject(b: AnthropicBatch) {
    const n = b.requests.length
    const ended = b.status === "ended"
    const done = (i: number) => (b.cancelled && i > 0 ? "canceled" : lastText(b.requests[i]!.params) === "fail" ? "errored" : "succeeded")
    const kinds = b.requests.map((_, i) => (ended ? done(i) : "processing"))
    const count = (k: string) => kinds.filter((x) => x === k).length
    return {
      id: b.id,
      type: "message_batch",
      processing_status: b.status,
      request_counts: {
        processing: count("processing"),
        succeeded: count("succeeded"),
        errored: count("errored"),
        canceled: count("canceled"),
        expired: 0
      },
      ended_at: ended ? "2025-01-01T00:00:00Z" : null,
      created_at: "2025-01-01T00:00:00Z",
      expires_at: "2025-01-02T00:00:00Z",
      archived_at: null,
      cancel_initiated_at: b.cancelled ? "2025-01-01T00:00:00Z" : null,
      results_url: ended ? `${this.origin}/anthropic/v1/messages/batches/${b.id}/results` : null,
      total: n
    }
  }
}
