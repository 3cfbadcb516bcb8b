import { Mp3Encoder } from "@breezystack/lamejs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A fake media-job upstream for tests: a real HTTP server on 127.0.0.1 speaking the wire shapes of
 * /work/research/media-wire.md sections 3 and 4:
 *
 * - OpenAI videos (`/v1` base): `POST /v1/videos` (JSON) answers a video object `queued`; each
 *   `GET /v1/videos/{id}` moves it one step, queued → in_progress → completed (or → failed with
 *   `{code, message}`); `GET /v1/videos/{id}/content` answers the MP4 bytes once completed.
 *   Bearer auth.
 * - Gemini Veo (bare origin): `POST /v1beta/models/{model}:predictLongRunning` answers
 *   `{name: "models/{model}/operations/op-N"}`; `GET /v1beta/models/{model}/operations/op-N` answers
 *   `{done: false}` until its last step, then the `generateVideoResponse` with a sample URI on
 *   this server (`/v1beta/files/file-N:download?alt=media`, key required), which redirects to
 *   `/storage/file-N` (which refuses a request carrying the key: a signed URL needs none).
 *   `x-goog-api-key` auth.
 * - ElevenLabs music: `POST /v1/music?output_format=mp3_44100_128` answers MP3 bytes of
 *   `music_length_ms` (default 2 s). `xi-api-key` auth.
 * - Lyria: `POST /v1beta/models/lyria-002:predict` answers `predictions[0].bytesBase64Encoded`
 *   (a WAV); `POST /v1beta/models/lyria-3-*:generateContent` answers a text part and an
 *   `inlineData` MP3 part.
 *
 * `down = true` answers every request 503 (the family's error shape). Every request is recorded.
 */

export interface FakeRequest {
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: http.IncomingHttpHeaders
  readonly body: any
}

interface Video {
  readonly id: string
  readonly model: string
  readonly prompt: string
  readonly seconds: string
  readonly size: string
  readonly createdAt: number
  polls: number
}

interface Operation {
  readonly name: string
  readonly file: string
  polls: number
}

// ─── Real media bytes ─────────────────────────────────────────────────────────────────────────────

/** A 16-bit PCM WAV of a 440 Hz tone: `seconds` long at `rate` Hz, mono. */
export const makeWav = (seconds: number, rate = 16_000): Buffer => {
  const samples = Math.round(seconds * rate)
  const data = Buffer.alloc(samples * 2)
  for (let i = 0; i < samples; i++) data.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000), i * 2)
  const h = Buffer.alloc(44)
  h.write("RIFF", 0, "ascii")
  h.writeUInt32LE(36 + data.length, 4)
  h.write("WAVE", 8, "ascii")
  h.write("fmt ", 12, "ascii")
  h.writeUInt32LE(16, 16)
  h.writeUInt16LE(1, 20)
  h.writeUInt16LE(1, 22)
  h.writeUInt32LE(rate, 24)
  h.writeUInt32LE(rate * 2, 28)
  h.writeUInt16LE(2, 32)
  h.writeUInt16LE(16, 34)
  h.write("data", 36, "ascii")
  h.writeUInt32LE(data.length, 40)
  return Buffer.concat([h, data])
}

/** An MP3 (LAME, 44.1 kHz mono, 128 kb/s) of a 440 Hz tone, `seconds` long. */
export const makeMp3 = (seconds: number): Buffer => {
  const rate = 44_100
  const samples = new Int16Array(Math.round(seconds * rate))
  for (let i = 0; i < samples.length; i++) samples[i] = Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000)
  const encoder = new Mp3Encoder(1, rate, 128)
  const parts: Array<Uint8Array> = []
  for (let i = 0; i < samples.length; i += 1152) parts.push(encoder.encodeBuffer(samples.subarray(i, i + 1152)))
  parts.push(encoder.flush())
  return Buffer.concat(parts.map((p) => Buffer.from(p)))
}

/** Bytes that start like an MP4 (an `ftyp` box) and carry `label`, so each video's content is its own. */
export const makeMp4 = (label: string): Buffer => {
  const ftyp = Buffer.alloc(24)
  ftyp.writeUInt32BE(24, 0)
  ftyp.write("ftypisom", 4, "ascii")
  ftyp.writeUInt32BE(0x200, 12)
  ftyp.write("isomiso2", 16, "ascii")
  const payload = Buffer.from(`mdat:${label}:`.padEnd(64 * 1024, "#"))
  const mdat = Buffer.alloc(8)
  mdat.writeUInt32BE(8 + payload.length, 0)
  mdat.write("mdat", 4, "ascii")
  return Buffer.concat([ftyp, mdat, payload])
}

// ─── The server ───────────────────────────────────────────────────────────────────────────────────

export class FakeJobs {
  readonly requests: Array<FakeRequest> = []
  /** Answer every request 503. */
  down = false
  /** Polls a job takes: the job is done at this poll (OpenAI: 1 → in_progress, 2 → completed). */
  pollsToFinish = 2
  /** Jobs created from now on fail at their last poll (OpenAI `failed`, Veo `error`). */
  failJobs = false
  /** Bytes of the last content served per video id / file. */
  readonly videos = new Map<string, Video>()
  readonly operations = new Map<string, Operation>()
  readonly contents = new Map<string, Buffer>()
  /** Audio answered per music request, in order. */
  readonly audio: Array<Buffer> = []
  private seq = 0
  private readonly failing = new Set<string>()

  private constructor(
    private readonly server: http.Server,
    readonly url: string
  ) {}

  static async start(): Promise<FakeJobs> {
    let self: FakeJobs | undefined
    const server = http.createServer((req, res) => self!.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    self = new FakeJobs(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    return self
  }

  close(): Promise<void> {
    this.server.closeAllConnections()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  /** Requests on paths matching `re` (method and path). */
  hits(re: RegExp): number {
    return this.requests.filter((r) => re.test(`${r.method} ${r.path}`)).length
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const url = new URL(req.url ?? "/", this.url)
      const raw = Buffer.concat(chunks).toString("utf8")
      let body: any
      try {
        body = raw ? JSON.parse(raw) : undefined
      } catch {
        body = raw
      }
      const r: FakeRequest = { method: req.method ?? "GET", path: url.pathname, query: url.searchParams, headers: req.headers, body }
      this.requests.push(r)
      try {
        this.route(r, res)
      } catch (e) {
        json(res, 500, { error: { message: String(e) } })
      }
    })
  }

  private route(r: FakeRequest, res: http.ServerResponse): void {
    const p = r.path
    const gemini = p.startsWith("/v1beta/")
    const eleven = p === "/v1/music"
    if (this.down) {
      if (gemini)
        return json(res, 503, { error: { code: 503, message: "The model is overloaded. Please try again later.", status: "UNAVAILABLE" } })
      if (eleven) return json(res, 503, { detail: { status: "service_unavailable", message: "busy" } })
      return json(res, 503, { error: { message: "The server is overloaded", type: "server_error", param: null, code: null } })
    }
    // ── Veo's redirect target: a signed URL, no key.
    if (r.method === "GET" && p.startsWith("/storage/")) {
      if (r.headers["x-goog-api-key"]) return json(res, 400, { error: { message: "the key must not follow the redirect" } })
      const bytes = this.contents.get(p.slice("/storage/".length))
      if (!bytes) return json(res, 404, { error: { message: "no such file" } })
      res.writeHead(200, { "content-type": "video/mp4", "content-length": bytes.length })
      return void res.end(bytes)
    }
    if (gemini) {
      if (r.headers["x-goog-api-key"] !== "gemini-key")
        return json(res, 403, { error: { code: 403, message: "API key not valid.", status: "PERMISSION_DENIED" } })
      return this.gemini(r, res)
    }
    if (eleven) {
      if (r.headers["xi-api-key"] !== "eleven-key")
        return json(res, 401, { detail: { status: "invalid_api_key", message: "Invalid API key" } })
      if (r.method !== "POST" || r.query.get("output_format") !== "mp3_44100_128")
        return json(res, 422, { detail: [{ loc: ["query", "output_format"], msg: "bad output_format" }] })
      if (typeof r.body?.prompt !== "string" || typeof r.body?.model_id !== "string")
        return json(res, 422, { detail: [{ loc: ["body", "prompt"], msg: "field required" }] })
      const mp3 = makeMp3((r.body.music_length_ms ?? 2000) / 1000)
      this.audio.push(mp3)
      res.writeHead(200, { "content-type": "audio/mpeg", "content-length": mp3.length })
      return void res.end(mp3)
    }
    if (r.headers.authorization !== "Bearer sk-video")
      return json(res, 401, {
        error: { message: "Incorrect API key provided", type: "invalid_request_error", param: null, code: "invalid_api_key" }
      })
    return this.openAi(r, res)
  }

  private openAi(r: FakeRequest, res: http.ServerResponse): void {
    const p = r.path
    if (r.method === "POST" && p === "/v1/videos") {
      const b = r.body ?? {}
      if (typeof b.prompt !== "string" || typeof b.model !== "string")
        return json(res, 400, {
          error: { message: "Missing required parameter: 'prompt'.", type: "invalid_request_error", param: "prompt", code: null }
        })
      if (b.seconds !== undefined && !["4", "8", "12"].includes(b.seconds)) {
        return json(res, 400, {
          error: {
            message: `Invalid value: '${b.seconds}'. Supported values are: '4', '8', and '12'.`,
            type: "invalid_request_error",
            param: "seconds",
            code: "invalid_value"
          }
        })
      }
      const v: Video = {
        id: `video_${++this.seq}`,
        model: b.model,
        prompt: b.prompt,
        seconds: b.seconds ?? "4",
        size: b.size ?? "720x1280",
        createdAt: Math.floor(Date.now() / 1000),
        polls: 0
      }
      this.videos.set(v.id, v)
      if (this.failJobs) this.failing.add(v.id)
      return json(res, 200, this.videoObject(v))
    }
    const m = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(p)
    const v = m ? this.videos.get(m[1]!) : undefined
    if (!m || !v)
      return json(res, 404, {
        error: { message: `Video '${m?.[1]}' not found`, type: "invalid_request_error", param: null, code: "not_found" }
      })
    if (m[2]) {
      if (this.statusOf(v) !== "completed")
        return json(res, 404, { error: { message: "Video is not ready yet", type: "invalid_request_error", param: null, code: null } })
      const bytes = this.contents.get(v.id)!
      res.writeHead(200, { "content-type": "video/mp4", "content-length": bytes.length })
      return void res.end(bytes)
    }
    v.polls++
    if (this.statusOf(v) === "completed" && !this.contents.has(v.id)) this.contents.set(v.id, makeMp4(v.id))
    return json(res, 200, this.videoObject(v))
  }

  private statusOf(v: Video): string {
    if (v.polls >= this.pollsToFinish) return this.failing.has(v.id) ? "failed" : "completed"
    return v.polls === 0 ? "queued" : "in_progress"
  }

  private videoObject(v: Video) {
    const status = this.statusOf(v)
    return {
      id: v.id,
      object: "video",
      model: v.model,
      status,
      progress: status === "completed" ? 100 : status === "in_progress" ? Math.round((100 * v.polls) / this.pollsToFinish) : 0,
      created_at: v.createdAt,
      completed_at: status === "completed" ? Math.floor(Date.now() / 1000) : null,
      expires_at: status === "completed" ? Math.floor(Date.now() / 1000) + 3600 : null,
      prompt: v.prompt,
      remixed_from_video_id: null,
      seconds: v.seconds,
      size: v.size,
      error: status === "failed" ? { code: "moderation_blocked", message: "Your request was blocked by our moderation system." } : null
    }
  }

  private gemini(r: FakeRequest, res: http.ServerResponse): void {
    const p = r.path
    let m = /^\/v1beta\/models\/([^/:]+):predictLongRunning$/.exec(p)
    if (m && r.method === "POST") {
      if (typeof r.body?.instances?.[0]?.prompt !== "string")
        return json(res, 400, { error: { code: 400, message: "instances[0].prompt is required", status: "INVALID_ARGUMENT" } })
      const n = ++this.seq
      const op: Operation = { name: `models/${m[1]}/operations/op-${n}`, file: `file-${n}`, polls: 0 }
      this.operations.set(op.name, op)
      if (this.failJobs) this.failing.add(op.name)
      return json(res, 200, { name: op.name })
    }
    m = /^\/v1beta\/(models\/[^/]+\/operations\/[^/]+)$/.exec(p)
    if (m && r.method === "GET") {
      const op = this.operations.get(m[1]!)
      if (!op) return json(res, 404, { error: { code: 404, message: "Operation not found", status: "NOT_FOUND" } })
      op.polls++
      if (op.polls < this.pollsToFinish) return json(res, 200, { name: op.name, done: false })
      if (this.failing.has(op.name))
        return json(res, 200, {
          name: op.name,
          done: true,
          error: { code: 3, message: "The prompt could not be processed.", status: "INVALID_ARGUMENT" }
        })
      if (!this.contents.has(op.file)) this.contents.set(op.file, makeMp4(op.file))
      return json(res, 200, {
        name: op.name,
        done: true,
        response: {
          "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
          generateVideoResponse: { generatedSamples: [{ video: { uri: `${this.url}/v1beta/files/${op.file}:download?alt=media` } }] }
        }
      })
    }
    m = /^\/v1beta\/files\/([^/:]+):download$/.exec(p)
    if (m && r.method === "GET") {
      if (!this.contents.has(m[1]!)) return json(res, 404, { error: { code: 404, message: "File not found", status: "NOT_FOUND" } })
      res.writeHead(302, { location: `/storage/${m[1]}` })
      return void res.end()
    }
    m = /^\/v1beta\/models\/(lyria-[^/:]+):(predict|generateContent)$/.exec(p)
    if (m && r.method === "POST") {
      if (m[2] === "predict") {
        if (typeof r.body?.instances?.[0]?.prompt !== "string")
          return json(res, 400, { error: { code: 400, message: "prompt is required", status: "INVALID_ARGUMENT" } })
        const wav = makeWav(2)
        this.audio.push(wav)
        return json(res, 200, { predictions: [{ bytesBase64Encoded: wav.toString("base64"), mimeType: "audio/wav" }] })
      }
      const mods = r.body?.generationConfig?.responseModalities
      if (!Array.isArray(mods) || !mods.includes("AUDIO"))
        return json(res, 400, { error: { code: 400, message: "responseModalities must include AUDIO", status: "INVALID_ARGUMENT" } })
      const mp3 = makeMp3(3)
      this.audio.push(mp3)
      return json(res, 200, {
        candidates: [
          {
            content: {
              role: "model",
              parts: [{ text: "[Verse]\nla la la" }, { inlineData: { mimeType: "audio/mpeg", data: mp3.toString("base64") } }]
            },
            finishReason: "STOP",
            index: 0
          }
        ],
        usageMetadata: { promptTokenCount: 9, totalTokenCount: 9 },
        modelVersion: m[1]
      })
    }
    return json(res, 404, { error: { code: 404, message: `no route ${r.method} ${p}`, status: "NOT_FOUND" } })
  }
}

const json = (res: http.ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}
