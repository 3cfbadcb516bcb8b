import { Mp3Encoder } from "@breezystack/lamejs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A fake audio upstream for tests: a real HTTP server on 127.0.0.1 that speaks four families'
 * audio APIs in their wire shapes (docs: /work/research/media-wire.md §5, §6):
 *
 * - OpenAI-compatible (base URL `<origin>/v1`): `POST /v1/audio/speech` (JSON in, audio bytes out,
 *   chunked), `POST /v1/audio/transcriptions` and `/translations` (multipart in; `json`,
 *   `verbose_json`, `text` out, with `duration` and `usage` as the upstream states them);
 * - ElevenLabs (bare origin, `xi-api-key`): `POST /v1/text-to-speech/{voice}[/stream]?output_format=`,
 *   `POST /v1/speech-to-text` (multipart);
 * - Deepgram (bare origin, `Authorization: Token`): `POST /v1/listen` (raw audio), `POST /v1/speak`;
 * - Gemini (bare origin, `x-goog-api-key`): `POST /v1beta/models/{model}:generateContent`, audio
 *   out (`responseModalities: ["AUDIO"]`: base64 PCM s16le 24 kHz) or a transcript of inline audio.
 *
 * Every request is recorded (multipart bodies parsed with undici's own FormData parser); each
 * takes the next queued reply, else the `always` one.
 */

export type AudioFamily = "openai" | "elevenlabs" | "deepgram" | "gemini"

export interface AudioReply {
  /** Non-2xx: the family's error shape. */
  readonly status?: number
  /** Speech: the audio bytes answered (default: 0.5 s of MP3-looking bytes). */
  readonly audio?: Buffer
  /** Speech: sent in this many pieces (default 3). */
  readonly chunks?: number
  /** Speech: after the first piece, wait for this before sending the rest. */
  readonly holdAfterFirst?: Promise<void>
  /** Speech: destroy the socket after the first piece. */
  readonly cutAfterFirst?: boolean
  /** Gemini speech: the PCM (s16le, 24 kHz, mono) answered, base64 in JSON. */
  readonly pcm?: Buffer
  /** Gemini speech: the inline data's mime type (default `audio/L16;codec=pcm;rate=24000`). */
  readonly pcmMimeType?: string
  /** Transcription: the transcript (default "Hello from the fake."). */
  readonly text?: string
  /** Transcription: the duration the upstream claims (default 99: a lie the gateway must not repeat). */
  readonly claimedDuration?: number
  /** OpenAI transcription `json`: report token usage. */
  readonly tokens?: { readonly input: number; readonly output: number }
  /** Gemini: usageMetadata. */
  readonly geminiUsage?: { readonly prompt: number; readonly candidates: number }
}

export interface FormFileSeen {
  readonly field: string
  readonly filename: string
  readonly type: string
  readonly bytes: Buffer
}

export interface AudioRecorded {
  readonly family: AudioFamily | "other"
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  readonly headers: http.IncomingHttpHeaders
  readonly raw: Buffer
  readonly json?: any
  readonly form?: { readonly fields: Record<string, Array<string>>; readonly files: Array<FormFileSeen> }
}

const DEFAULT_TEXT = "Hello from the fake. It speaks twice."

export class FakeAudio {
  readonly requests: Array<AudioRecorded> = []
  private queue: Array<AudioReply> = []
  private fallback: AudioReply = {}
  private readonly sockets = new Set<import("node:net").Socket>()

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<FakeAudio> {
    const server = http.createServer()
    const fake = new FakeAudio(server)
    server.on("connection", (s) => {
      fake.sockets.add(s)
      s.on("close", () => fake.sockets.delete(s))
    })
    server.on("request", (req, res) => void fake.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return fake
  }

  get origin(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  /** The base URL a connection of `family` is given (OpenAI-compatible ones include `/v1`). */
  baseUrl(family: AudioFamily): string {
    return family === "openai" ? `${this.origin}/v1` : this.origin
  }

  always(reply: AudioReply): void {
    this.fallback = reply
  }

  next(...replies: Array<AudioReply>): void {
    this.queue.push(...replies)
  }

  reset(): void {
    this.requests.length = 0
    this.queue = []
    this.fallback = {}
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Array<Buffer> = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks)
    const url = new URL(req.url ?? "/", this.origin)
    const path = url.pathname
    const type = String(req.headers["content-type"] ?? "")
    const family: AudioFamily | "other" = path.startsWith("/v1/audio/")
      ? "openai"
      : path.startsWith("/v1/text-to-speech/") || path === "/v1/speech-to-text"
        ? "elevenlabs"
        : path === "/v1/listen" || path === "/v1/speak"
          ? "deepgram"
          : path.startsWith("/v1beta/models/")
            ? "gemini"
            : "other"
    let json: any
    if (type.startsWith("application/json")) {
      try {
        json = JSON.parse(raw.toString("utf8"))
      } catch {
        json = undefined
      }
    }
    const form = type.startsWith("multipart/form-data") ? await parseForm(raw, type) : undefined
    this.requests.push({
      family,
      method: req.method ?? "GET",
      path,
      query: url.searchParams,
      headers: req.headers,
      raw,
      ...(json !== undefined ? { json } : {}),
      ...(form ? { form } : {})
    })
    const reply = this.queue.shift() ?? this.fallback

    if (family === "other") return send(res, 404, { error: { message: `no route ${path}` } })
    if (reply.status !== undefined && reply.status >= 400) return send(res, reply.status, errorBody(family, reply.status))

    switch (family) {
      case "openai": {
        if (req.headers.authorization === undefined || !/^Bearer \S+/.test(req.headers.authorization))
          return send(res, 401, errorBody(family, 401))
        if (path === "/v1/audio/speech") {
          if (typeof json?.input !== "string" || typeof json?.model !== "string" || typeof json?.voice !== "string")
            return send(res, 400, errorBody(family, 400))
          return streamAudio(res, OPENAI_TYPES[json.response_format ?? "mp3"] ?? "audio/mpeg", reply)
        }
        if (path === "/v1/audio/transcriptions" || path === "/v1/audio/translations") {
          const file = form?.files.find((f) => f.field === "file")
          const model = form?.fields["model"]?.[0]
          if (!file || !model) return send(res, 400, errorBody(family, 400))
          const text = reply.text ?? DEFAULT_TEXT
          const format = form!.fields["response_format"]?.[0] ?? "json"
          const duration = reply.claimedDuration ?? 99
          if (format === "text") return sendText(res, `${text}\n`)
          if (format === "json") {
            return send(
              res,
              200,
              reply.tokens
                ? {
                    text,
                    usage: {
                      type: "tokens",
                      input_tokens: reply.tokens.input,
                      output_tokens: reply.tokens.output,
                      total_tokens: reply.tokens.input + reply.tokens.output,
                      input_token_details: { audio_tokens: reply.tokens.input, text_tokens: 0 }
                    }
                  }
                : { text, usage: { type: "duration", seconds: Math.ceil(duration) } }
            )
          }
          if (format !== "verbose_json")
            return send(res, 400, errorBody(family, 400, `response_format ${format} not supported by this fake`))
          const sentences = text.split(/(?<=\.)\s+/)
          const granularities = form!.fields["timestamp_granularities[]"] ?? ["segment"]
          return send(res, 200, {
            task: path.endsWith("translations") ? "translate" : "transcribe",
            language: "english",
            duration,
            text,
            segments: sentences.map((s, i) => ({
              id: i,
              seek: 0,
              start: (i * 7) / 10,
              end: (i * 7 + 6) / 10,
              text: ` ${s}`,
              tokens: [50364],
              temperature: 0,
              avg_logprob: -0.2,
              compression_ratio: 1.1,
              no_speech_prob: 0.01
            })),
            ...(granularities.includes("word")
              ? { words: text.split(/\s+/).map((w, i) => ({ word: w, start: i * 0.2, end: i * 0.2 + 0.15 })) }
              : {}),
            usage: { type: "duration", seconds: Math.ceil(duration) }
          })
        }
        return send(res, 404, errorBody(family, 404))
      }
      case "elevenlabs": {
        if (!req.headers["xi-api-key"]) return send(res, 401, errorBody(family, 401))
        if (path === "/v1/speech-to-text") {
          const file = form?.files.find((f) => f.field === "file")
          if (!file || !form!.fields["model_id"]?.[0]) return send(res, 422, errorBody(family, 422))
          const text = reply.text ?? DEFAULT_TEXT
          const words = text
            .split(/\s+/)
            .flatMap((w, i) => [
              ...(i > 0 ? [{ text: " ", start: i * 0.25 - 0.05, end: i * 0.25, type: "spacing" }] : []),
              { text: w, start: i * 0.25, end: i * 0.25 + 0.2, type: "word", speaker_id: "speaker_0" }
            ])
          return send(res, 200, { language_code: "eng", language_probability: 0.98, text, words })
        }
        if (typeof json?.text !== "string" || typeof json?.model_id !== "string") return send(res, 422, errorBody(family, 422))
        const format = url.searchParams.get("output_format") ?? "mp3_44100_128"
        return streamAudio(res, format.startsWith("pcm") ? "audio/pcm" : format.startsWith("opus") ? "audio/opus" : "audio/mpeg", reply)
      }
      case "deepgram": {
        if (!/^Token \S+/.test(String(req.headers.authorization ?? ""))) return send(res, 401, errorBody(family, 401))
        if (path === "/v1/speak") {
          if (typeof json?.text !== "string") return send(res, 400, errorBody(family, 400))
          const encoding = url.searchParams.get("encoding") ?? "mp3"
          return streamAudio(res, encoding === "linear16" ? "audio/wav" : `audio/${encoding}`, reply)
        }
        if (raw.length === 0 || !/^(audio|video)\//.test(type)) return send(res, 400, errorBody(family, 400))
        const text = reply.text ?? DEFAULT_TEXT
        const words = text.split(/\s+/).map((w, i) => ({
          word: w.toLowerCase().replace(/[.,!?]/g, ""),
          start: i * 0.25,
          end: i * 0.25 + 0.2,
          confidence: 0.99,
          punctuated_word: w
        }))
        return send(res, 200, {
          metadata: {
            request_id: "0d3c-fake",
            sha256: "00",
            created: "2026-11-23T06:00:00Z",
            duration: reply.claimedDuration ?? 99,
            channels: 1,
            models: ["m-uuid"],
            model_info: { "m-uuid": { name: "general-nova-3", version: "1", arch: "nova-3" } }
          },
          results: {
            channels: [
              {
                ...(url.searchParams.get("detect_language") === "true" ? { detected_language: "en", language_confidence: 0.99 } : {}),
                alternatives: [{ transcript: text, confidence: 0.99, words }]
              }
            ]
          }
        })
      }
      case "gemini": {
        if (!req.headers["x-goog-api-key"]) return send(res, 401, errorBody(family, 401))
        const parts: Array<any> = json?.contents?.[0]?.parts ?? []
        const usageMetadata = {
          promptTokenCount: reply.geminiUsage?.prompt ?? 12,
          candidatesTokenCount: reply.geminiUsage?.candidates ?? 40,
          totalTokenCount: (reply.geminiUsage?.prompt ?? 12) + (reply.geminiUsage?.candidates ?? 40)
        }
        if (json?.generationConfig?.responseModalities?.includes("AUDIO")) {
          const voice = json.generationConfig.speechConfig?.voiceConfig?.prebuiltVoiceConfig?.voiceName
          if (typeof voice !== "string" || typeof parts[0]?.text !== "string") return send(res, 400, errorBody(family, 400))
          const pcm = reply.pcm ?? sinePcm(0.5)
          return send(res, 200, {
            candidates: [
              {
                content: {
                  role: "model",
                  parts: [{ inlineData: { mimeType: reply.pcmMimeType ?? "audio/L16;codec=pcm;rate=24000", data: pcm.toString("base64") } }]
                },
                finishReason: "STOP",
                index: 0
              }
            ],
            usageMetadata,
            modelVersion: "fake"
          })
        }
        const audio = parts.find((p) => p?.inlineData?.data)
        if (!audio) return send(res, 400, errorBody(family, 400))
        const answer = JSON.stringify({ text: reply.text ?? DEFAULT_TEXT, language: "en" })
        return send(res, 200, {
          candidates: [{ content: { role: "model", parts: [{ text: answer }] }, finishReason: "STOP", index: 0 }],
          usageMetadata,
          modelVersion: "fake"
        })
      }
    }
  }
}

const OPENAI_TYPES: Record<string, string> = {
  mp3: "audio/mpeg",
  opus: "audio/opus",
  aac: "audio/aac",
  flac: "audio/flac",
  wav: "audio/wav",
  pcm: "audio/pcm"
}

const parseForm = async (raw: Buffer, type: string) => {
  const data = await new Request("http://fake/", { method: "POST", headers: { "content-type": type }, body: raw }).formData()
  const fields: Record<string, Array<string>> = {}
  const files: Array<FormFileSeen> = []
  for (const [name, value] of data.entries()) {
    if (typeof value === "string") (fields[name] ??= []).push(value)
    else files.push({ field: name, filename: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) })
  }
  return { fields, files }
}

const errorBody = (family: AudioFamily, status: number, message = `fake ${family} error ${status}`): unknown => {
  switch (family) {
    case "openai":
      return {
        error: {
          message,
          type: status === 401 ? "invalid_request_error" : status >= 500 ? "server_error" : "invalid_request_error",
          param: null,
          code: null
        }
      }
    case "elevenlabs":
      return { detail: { status: status === 401 ? "invalid_api_key" : "error", message } }
    case "deepgram":
      return { err_code: status === 401 ? "INVALID_AUTH" : "Bad Request", err_msg: message, request_id: "0d3c-fake" }
    case "gemini":
      return { error: { code: status, message, status: status >= 500 ? "UNAVAILABLE" : "INVALID_ARGUMENT" } }
  }
}

const send = (res: http.ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

const sendText = (res: http.ServerResponse, text: string) => {
  res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/** Audio bytes, chunked: the first piece, then (after `holdAfterFirst`) the rest. */
const streamAudio = async (res: http.ServerResponse, contentType: string, reply: AudioReply) => {
  const audio = reply.audio ?? Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) & 0xff))
  const n = Math.max(1, reply.chunks ?? 3)
  const size = Math.ceil(audio.length / n)
  res.writeHead(200, { "content-type": contentType, "transfer-encoding": "chunked" })
  for (let i = 0; i < n; i++) {
    res.write(audio.subarray(i * size, (i + 1) * size))
    if (i === 0) {
      if (reply.cutAfterFirst) {
        await new Promise((r) => setTimeout(r, 30))
        res.socket?.destroy()
        return
      }
      if (reply.holdAfterFirst) await reply.holdAfterFirst
    }
  }
  res.end()
}

// ─── Real audio, generated ───────────────────────────────────────────────────────────────────────

/** `seconds` of a 440 Hz tone: signed 16-bit little-endian mono PCM. */
export const sinePcm = (seconds: number, rate = 24_000): Buffer => {
  const n = Math.round(seconds * rate)
  const out = Buffer.alloc(n * 2)
  for (let i = 0; i < n; i++) out.writeInt16LE(Math.round(Math.sin((2 * Math.PI * 440 * i) / rate) * 8000), i * 2)
  return out
}

/** A WAV file (canonical 44-byte RIFF header, 16-bit PCM mono) of `seconds` of tone. */
export const sineWav = (seconds: number, rate = 16_000): Buffer => {
  const data = sinePcm(seconds, rate)
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

/** An MP3 of `seconds` of tone (lamejs, 64 kbit/s, mono). */
export const sineMp3 = (seconds: number, rate = 24_000): Buffer => {
  const pcm = sinePcm(seconds, rate)
  const samples = new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + pcm.length))
  const encoder = new Mp3Encoder(1, rate, 64)
  const out: Array<Buffer> = []
  for (let i = 0; i < samples.length; i += 1152) out.push(Buffer.from(encoder.encodeBuffer(samples.subarray(i, i + 1152))))
  out.push(Buffer.from(encoder.flush()))
  return Buffer.concat(out)
}
