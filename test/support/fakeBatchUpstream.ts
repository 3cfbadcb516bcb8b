import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * An OpenAI chat-completions upstream on 127.0.0.1 for batch tests: the answer echoes the last
 * user message (`echo: <text>`), so each output line can be checked against its input; it can
 * refuse the next N requests with 429 and delay every answer; it counts requests per prompt.
 */
export class FakeBatchUpstream {
  readonly seen = new Map<string, number>()
  refuseNext = 0
  delayMs = 0
  private constructor(
    private readonly server: http.Server,
    readonly url: string
  ) {}

  static async start(): Promise<FakeBatchUpstream> {
    let self: FakeBatchUpstream | undefined
    const server = http.createServer((req, res) => void self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new FakeBatchUpstream(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    return self
  }

  get baseUrl(): string {
    return `${this.url}/v1`
  }

  get total(): number {
    let n = 0
    for (const v of this.seen.values()) n += v
    return n
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    if (req.url?.endsWith("/models")) {
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ object: "list", data: [{ id: "m1", object: "model" }] }))
      return
    }
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}")
    if (this.refuseNext > 0) {
      this.refuseNext--
      res
        .writeHead(429, { "content-type": "application/json", "retry-after": "0" })
        .end(JSON.stringify({ error: { message: "slow down", type: "rate_limit_error", code: "rate_limit_exceeded" } }))
      return
    }
    const text = String(body.messages?.[body.messages.length - 1]?.content ?? "")
    this.seen.set(text, (this.seen.get(text) ?? 0) + 1)
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs))
    if (res.destroyed) return
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id: `chatcmpl-${Math.random().toString(36).slice(2)}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: "assistant", content: `echo: ${text}` }, finish_reason: "stop" }],
        usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 }
      })
    )
  }

  close(): Promise<void> {
    this.server.closeAllConnections()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}
