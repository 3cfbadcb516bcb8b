import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** One OTLP attribute value as OTLP/JSON writes it. */
type AnyValue = { stringValue?: string; intValue?: number | string; doubleValue?: number; boolValue?: boolean }

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP span kind: 2 server, 3 client. */
  readonly kind: number
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: number
  readonly attributes: Record<string, string | number | boolean>
  readonly resource: Record<string, string | number | boolean>
}

export interface ReceivedPost {
  readonly path: string
  readonly contentType: string
  readonly headers: http.IncomingHttpHeaders
  readonly bytes: number
  /** The decoded body of an OTLP/JSON post. */
  readonly json: any
}

const attributeValue = (v: AnyValue): string | number | boolean =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue ?? ""))

export const attributesOf = (
  list: ReadonlyArray<{ key: string; value: AnyValue }> | undefined
): Record<string, string | number | boolean> => Object.fromEntries((list ?? []).map((a) => [a.key, attributeValue(a.value)]))

/**
 * A small OTLP/HTTP receiver on 127.0.0.1: records every post to `/v1/traces` and `/v1/metrics`
 * and decodes OTLP/JSON bodies (the gateway's exporter with `http/json`); answers 200 `{}`.
 */
export class OtlpReceiver {
  readonly posts: Array<ReceivedPost> = []
  private constructor(
    private readonly server: http.Server,
    readonly url: string
  ) {}

  static async start(): Promise<OtlpReceiver> {
    let self: OtlpReceiver | undefined
    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        const body = Buffer.concat(chunks)
        const contentType = String(req.headers["content-type"] ?? "")
        let json: any
        if (contentType.includes("json")) json = JSON.parse(body.toString("utf8"))
        self!.posts.push({ path: req.url ?? "", contentType, headers: req.headers, bytes: body.length, json })
        res.writeHead(200, { "content-type": contentType.includes("json") ? "application/json" : contentType || "application/json" })
        res.end(contentType.includes("json") ? "{}" : "")
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new OtlpReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    return self
  }

  /** Every span received so far. */
  get spans(): Array<ReceivedSpan> {
    const out: Array<ReceivedSpan> = []
    for (const post of this.posts) {
      if (!post.path.endsWith("/v1/traces") || !post.json) continue
      for (const rs of post.json.resourceSpans ?? []) {
        const resource = attributesOf(rs.resource?.attributes)
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            out.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId || undefined,
              name: s.name,
              kind: s.kind,
              status: s.status?.code ?? 0,
              attributes: attributesOf(s.attributes),
              resource
            })
          }
        }
      }
    }
    return out
  }

  /** The names of the metrics received so far, with their data points' attributes and values. */
  metric(name: string): Array<{ attributes: Record<string, string | number | boolean>; point: any }> {
    const out: Array<{ attributes: Record<string, string | number | boolean>; point: any }> = []
    for (const post of this.posts) {
      if (!post.path.endsWith("/v1/metrics") || !post.json) continue
      for (const rm of post.json.resourceMetrics ?? []) {
        for (const sm of rm.scopeMetrics ?? []) {
          for (const m of sm.metrics ?? []) {
            if (m.name !== name) continue
            const points = m.histogram?.dataPoints ?? m.sum?.dataPoints ?? m.gauge?.dataPoints ?? []
            for (const p of points) out.push({ attributes: attributesOf(p.attributes), point: p })
          }
        }
      }
    }
    return out
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections()
      this.server.close(() => resolve())
    })
  }
}
