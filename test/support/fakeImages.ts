import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as zlib from "node:zlib"

/**
 * A fake image upstream for tests: a real HTTP server on 127.0.0.1 speaking the image APIs' wire
 * shapes (/work/research/media-wire.md sections 1 and 2):
 *
 * - OpenAI images: `POST /v1/images/generations` (JSON) and `POST /v1/images/edits` (multipart,
 *   parsed with undici's own form-data parser), answering `{created, background, output_format,
 *   quality, size, data: [{b64_json}], usage}`; like OpenAI, a GPT image model refuses
 *   `response_format` and a request without a prompt is a 400 in OpenAI's error shape.
 * - Gemini: `POST /v1beta/models/{model}:generateContent` answering a text part and an
 *   `inlineData` image part when `generationConfig.responseModalities` includes IMAGE (text only
 *   otherwise), with `usageMetadata`; `POST /v1beta/models/{model}:predict` (Imagen) answering
 *   `sampleCount` predictions of `bytesBase64Encoded`. Both want `x-goog-api-key`.
 *
 * Every request is recorded (JSON body, or the form's fields and files with their bytes).
 */

// ─── PNG bytes ────────────────────────────────────────────────────────────────────────────────────

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c >>> 0
})
const crc32 = (buf: Buffer): number => {
  let c = 0xffffffff
  for (const b of buf) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}
const chunk = (type: string, data: Buffer): Buffer => {
  const len = Buffer.alloc(4)
  len.writeUInt32BE(data.length)
  const body = Buffer.concat([Buffer.from(type, "latin1"), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body))
  return Buffer.concat([len, body, crc])
}

/** A valid `width`×`height` RGBA PNG filled with one colour (IHDR, a zlib IDAT, IEND). */
export const makePng = (rgba: readonly [number, number, number, number], width = 1, height = 1): Buffer => {
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr[8] = 8 // bit depth
  ihdr[9] = 6 // RGBA
  const row = Buffer.concat([Buffer.from([0]), Buffer.concat(Array.from({ length: width }, () => Buffer.from(rgba)))])
  const raw = Buffer.concat(Array.from({ length: height }, () => row))
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(raw)),
    chunk("IEND", Buffer.alloc(0))
  ])
}

// ─── Public types ─────────────────────────────────────────────────────────────────────────────────

export interface ImageReply {
  /** Non-2xx: the family's error shape (OpenAI's or Google's). */
  readonly status?: number
  /** A raw JSON body instead of the generated answer. */
  readonly body?: unknown
  /** OpenAI images: leave `usage` out (an OpenAI-compatible server that reports none). */
  readonly noUsage?: boolean
  /** Gemini: answer text only with this finish reason (a refusal: `IMAGE_SAFETY`). */
  readonly finishReason?: string
}

export interface UploadedPart {
  readonly field: string
  readonly filename: string
  readonly type: string
  readonly bytes: Buffer
}

export interface ImageRecorded {
  readonly method: string
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  /** The JSON body, when it was JSON. */
  readonly json?: any
  /** The form, when it was multipart: text fields (every value) and files in order. */
  readonly form?: { readonly fields: Record<string, Array<string>>; readonly files: Array<UploadedPart> }
}

const GOOGLE_STATUS: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  429: "RESOURCE_EXHAUSTED",
  500: "INTERNAL",
  503: "UNAVAILABLE"
}

export class FakeImages {
  readonly requests: Array<ImageRecorded> = []
  private queue: Array<ImageReply> = []
  private fallback: ImageReply = {}
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    /** The image every answer carries. */
    public png: Buffer
  ) {}

  static async start(png: Buffer): Promise<FakeImages> {
    let self: FakeImages | undefined
    const server = http.createServer((req, res) => {
      self!.handle(req, res).catch((e) => {
        res.writeHead(500, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: String(e), type: "server_error" } }))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new FakeImages(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, png)
    return self
  }

  next(...replies: ReadonlyArray<ImageReply>): this {
    this.queue.push(...replies)
    return this
  }
  always(reply: ImageReply): this {
    this.fallback = reply
    this.queue = []
    return this
  }
  hits(path: RegExp): number {
    return this.requests.filter((r) => path.test(r.path)).length
  }
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections()
      this.server.close(() => resolve())
    })
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks)
    const path = req.url ?? "/"
    const type = String(req.headers["content-type"] ?? "")
    const recorded: { -readonly [K in keyof ImageRecorded]: ImageRecorded[K] } = { method: req.method ?? "GET", path, headers: req.headers }
    if (/^application\/json/i.test(type)) {
      try {
        recorded.json = JSON.parse(raw.toString("utf8"))
      } catch {
        recorded.json = undefined
      }
    } else if (/^multipart\/form-data/i.test(type)) {
      // undici's parser (what fetch's Request.formData uses): the real thing, not a test double.
      const form = await new Request("http://fake/", { method: "POST", headers: { "content-type": type }, body: raw }).formData()
      const fields: Record<string, Array<string>> = {}
      const files: Array<UploadedPart> = []
      for (const [name, value] of form.entries()) {
        if (typeof value === "string") (fields[name] ??= []).push(value)
        else files.push({ field: name, filename: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) })
      }
      recorded.form = { fields, files }
    }
    this.requests.push(recorded)
    const reply = this.queue.shift() ?? this.fallback
    const gemini = path.startsWith("/v1beta/")
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" })
      res.end(JSON.stringify(body))
    }
    const openAiError = (status: number, message: string, param: string | null = null, code: string | null = null) =>
      send(status, { error: { message, type: status === 400 ? "invalid_request_error" : "server_error", param, code } })
    const googleError = (status: number, message: string) =>
      send(status, { error: { code: status, message, status: GOOGLE_STATUS[status] ?? "UNKNOWN" } })

    if (reply.status && reply.status >= 300) {
      return gemini
        ? googleError(reply.status, "The model is overloaded. Please try again later.")
        : openAiError(reply.status, "upstream unavailable")
    }
    if (reply.body !== undefined) return send(200, reply.body)

    const b64 = this.png.toString("base64")
    if (gemini) {
      if (req.headers["x-goog-api-key"] === undefined)
        return googleError(403, "Method doesn't allow unregistered callers. Please use API Key.")
      const m = /^\/v1beta\/models\/([^:]+):(generateContent|predict)$/.exec(path)
      if (!m || req.method !== "POST" || !recorded.json) return googleError(404, `no route ${path}`)
      if (m[2] === "predict") {
        const prompt = recorded.json.instances?.[0]?.prompt
        if (typeof prompt !== "string") return googleError(400, "instances[0].prompt is required")
        const count = recorded.json.parameters?.sampleCount ?? 4
        if (count < 1 || count > 4) return googleError(400, "sampleCount must be between 1 and 4")
        return send(200, { predictions: Array.from({ length: count }, () => ({ mimeType: "image/png", bytesBase64Encoded: b64 })) })
      }
      const parts = recorded.json.contents?.[0]?.parts
      if (!Array.isArray(parts) || parts.length === 0) return googleError(400, "contents is not specified")
      const wantsImage = (recorded.json.generationConfig?.responseModalities ?? []).includes("IMAGE")
      const usageMetadata = { promptTokenCount: 12, candidatesTokenCount: wantsImage ? 1290 : 5, totalTokenCount: wantsImage ? 1302 : 17 }
      if (reply.finishReason) {
        return send(200, {
          candidates: [{ content: { role: "model", parts: [] }, finishReason: reply.finishReason, index: 0 }],
          usageMetadata
        })
      }
      const answerParts: Array<unknown> = [{ text: "Here you go" }]
      if (wantsImage) answerParts.push({ inlineData: { mimeType: "image/png", data: b64 } })
      return send(200, {
        candidates: [{ content: { role: "model", parts: answerParts }, finishReason: "STOP", index: 0 }],
        usageMetadata,
        modelVersion: m[1],
        responseId: "resp-1"
      })
    }

    if (!String(req.headers["authorization"] ?? "").startsWith("Bearer "))
      return openAiError(401, "You didn't provide an API key.", null, "invalid_api_key")
    let body: Record<string, unknown>
    if (path === "/v1/images/generations" && recorded.json) {
      body = recorded.json
    } else if (path === "/v1/images/edits" && recorded.form) {
      body = Object.fromEntries(Object.entries(recorded.form.fields).map(([k, v]) => [k, v[0]]))
      if (!recorded.form.files.some((f) => f.field === "image" || f.field === "image[]"))
        return openAiError(400, "Missing required parameter: 'image'.", "image")
    } else if (path === "/v1/images/edits") {
      return openAiError(400, "Invalid Content-Type header, expected multipart/form-data.")
    } else {
      return openAiError(404, `Invalid URL (${req.method} ${path})`)
    }
    if (typeof body["prompt"] !== "string") return openAiError(400, "Missing required parameter: 'prompt'.", "prompt")
    const model = String(body["model"] ?? "")
    if (/^gpt-image/.test(model) && body["response_format"] !== undefined)
      return openAiError(400, "Unknown parameter: 'response_format'.", "response_format", "unknown_parameter")
    const n = Number(body["n"] ?? 1)
    const quality = String(body["quality"] ?? "auto") === "auto" ? "medium" : String(body["quality"])
    const size = String(body["size"] ?? "auto") === "auto" ? "1024x1024" : String(body["size"])
    const data = Array.from({ length: n }, () =>
      body["response_format"] === "url" ? { url: `${this.url}/files/image.png` } : { b64_json: b64 }
    )
    return send(200, {
      created: Math.floor(Date.now() / 1000),
      background: "opaque",
      output_format: String(body["output_format"] ?? "png"),
      quality,
      size,
      data,
      ...(reply.noUsage
        ? {}
        : {
            usage: {
              input_tokens: 50,
              output_tokens: 1056 * n,
              total_tokens: 50 + 1056 * n,
              input_tokens_details: { text_tokens: 50, image_tokens: 0 },
              output_tokens_details: { image_tokens: 1056 * n, text_tokens: 0 }
            }
          })
    })
  }
}
