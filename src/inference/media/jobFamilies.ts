/**
 * The wire shapes of the media job families (video and music): submit, poll, fetch, read into one `UpstreamState`; the store and
 * polling are in MediaJobs.ts (docs/media.md, "Video and music (jobs)").
 */
import { arr, num, obj, str } from "../../upstream/formats/common.js"
import { encodeComponent } from "../../kernel/untrusted.js"
import type { Connection } from "../../upstream/providers/Connections.js"
import type { CustomCall } from "../../upstream/client/executors.js"

export type JobKind = "video" | "music"

/** The upstream family a job speaks; each one's calls: docs/media.md, "Video and music (jobs)". */
export type JobFamily = "openai-videos" | "veo" | "elevenlabs-music" | "lyria-generate" | "lyria-predict"

export type JobStatus = "queued" | "in_progress" | "completed" | "failed"

export const isFinal = (status: string): boolean => status === "completed" || status === "failed"

/** A video request as the gateway took it (docs/media.md maps it to each family). */
export interface VideoInput {
  readonly prompt: string
  readonly seconds?: number
  /** `WIDTHxHEIGHT`. */
  readonly size?: string
  readonly aspectRatio?: "16:9" | "9:16"
  readonly resolution?: "720p" | "1080p" | "4k"
  readonly negativePrompt?: string
}

export interface MusicInput {
  readonly prompt: string
  /** Length asked for, in ms (ElevenLabs `music_length_ms`). */
  readonly lengthMs?: number
  readonly instrumental?: boolean
  readonly negativePrompt?: string
}

/** What an upstream said of a job. */
export interface UpstreamState {
  readonly status: JobStatus
  /** 0 to 100. */
  readonly progress: number
  /** The upstream's id of the job (OpenAI's video id, Gemini's operation name). */
  readonly upstreamId?: string
  readonly seconds?: number
  readonly size?: string
  /** Where the result is fetched from (Veo's sample URI). */
  readonly resultUrl?: string
  readonly error?: { readonly code: string; readonly message: string }
}

/** The family a connection answers video jobs in, if any: Gemini's format speaks Veo, the OpenAI formats the videos API. */
export const videoFamily = (c: Connection): JobFamily | undefined =>
  c.format === "gemini"
    ? "veo"
    : c.format === "openai-chat" || c.format === "openai-responses"
      ? c.provider.authStyle === "bearer"
        ? "openai-videos"
        : undefined
      : undefined

/** The family a connection answers music jobs in, if any: ElevenLabs, or Lyria on a Gemini connection (by model generation). */
export const musicFamily = (c: Connection, model: string): JobFamily | undefined =>
  c.provider.authStyle === "xi-api-key"
    ? "elevenlabs-music"
    : c.format === "gemini"
      ? /^lyria-(2|002)/.test(model)
        ? "lyria-predict"
        : "lyria-generate"
      : undefined

// ---------------------------------------------------------------- video: submit

/** Veo's parameters from the request: an explicit aspect ratio or resolution wins over one read from `size`. */
const veoShape = (input: VideoInput): { aspectRatio?: string; resolution?: string } => {
  const m = input.size ? /^(\d+)x(\d+)$/.exec(input.size) : null
  const w = m ? Number(m[1]) : undefined
  const h = m ? Number(m[2]) : undefined
  const fromSize = w !== undefined && h !== undefined ? (w >= h ? "16:9" : "9:16") : undefined
  const short = w !== undefined && h !== undefined ? Math.min(w, h) : undefined
  const res = short === 720 ? "720p" : short === 1080 ? "1080p" : short === 2160 ? "4k" : undefined
  const aspectRatio = input.aspectRatio ?? fromSize
  const resolution = input.resolution ?? res
  return { ...(aspectRatio ? { aspectRatio } : {}), ...(resolution ? { resolution } : {}) }
}

/** OpenAI's `size` from an aspect ratio when no size was given (its 720p sizes). */
const openAiSize = (input: VideoInput): string | undefined =>
  input.size ?? (input.aspectRatio === "16:9" ? "1280x720" : input.aspectRatio === "9:16" ? "720x1280" : undefined)

/** Veo 3.x makes 8 s when no duration is asked for ⚠ (docs/media.md). */
export const VEO_DEFAULT_SECONDS = 8
/** OpenAI's videos API makes 4 s by default. */
export const OPENAI_DEFAULT_SECONDS = 4

export const videoSubmit = (family: JobFamily, model: string, input: VideoInput): CustomCall => {
  if (family === "veo") {
    const parameters: Record<string, unknown> = { ...veoShape(input), sampleCount: 1 }
    if (input.seconds !== undefined) parameters["durationSeconds"] = input.seconds
    if (input.negativePrompt) parameters["negativePrompt"] = input.negativePrompt
    return {
      path: `/v1beta/models/${encodeComponent(model)}:predictLongRunning`,
      json: { instances: [{ prompt: input.prompt }], parameters }
    }
  }
  const size = openAiSize(input)
  return {
    path: "/videos",
    json: {
      model,
      prompt: input.prompt,
      ...(input.seconds !== undefined ? { seconds: String(input.seconds) } : {}),
      ...(size ? { size } : {})
    }
  }
}

// ---------------------------------------------------------------- video: the answers

const OPENAI_STATUS: Record<string, JobStatus> = { queued: "queued", in_progress: "in_progress", completed: "completed", failed: "failed" }

/** An OpenAI video object (the create answer and every poll), or undefined when it is not one. */
const openAiVideo = (json: unknown): UpstreamState | undefined => {
  const v = obj(json)
  const id = str(v?.["id"])
  const status = OPENAI_STATUS[str(v?.["status"]) ?? ""]
  if (!v || !id || !status) return undefined
  const seconds = Number(v["seconds"])
  const error = obj(v["error"])
  return {
    status,
    upstreamId: id,
    progress: status === "completed" ? 100 : clampProgress(num(v["progress"])),
    ...(Number.isFinite(seconds) && seconds > 0 ? { seconds } : {}),
    ...(str(v["size"]) ? { size: str(v["size"])! } : {}),
    ...(status === "failed"
      ? {
          error: {
            code: str(error?.["code"]) ?? "upstream_job_failed",
            message: str(error?.["message"]) ?? "the upstream reported the video as failed"
          }
        }
      : {})
  }
}

const clampProgress = (n: number | undefined): number =>
  n === undefined || !Number.isFinite(n) ? 0 : Math.max(0, Math.min(100, Math.round(n)))

/** Operation names are paths under /v1beta (`models/veo-.../operations/abc`): nothing that could leave it. */
const OPERATION_NAME = /^[A-Za-z0-9][A-Za-z0-9._\-/]*$/
export const validOperationName = (name: string): boolean =>
  OPERATION_NAME.test(name) && !name.split("/").includes("..") && name.length <= 512

/** A Gemini long-running operation (the submit answer and every poll). */
const veoOperation = (json: unknown): UpstreamState | undefined => {
  const op = obj(json)
  const name = str(op?.["name"])
  if (!op || !name || !validOperationName(name)) return undefined
  if (op["done"] !== true) return { status: "in_progress", upstreamId: name, progress: 0 }
  const error = obj(op["error"])
  if (error) {
    return {
      status: "failed",
      upstreamId: name,
      progress: 100,
      error: {
        code: String(error["status"] ?? error["code"] ?? "upstream_job_failed"),
        message: str(error["message"]) ?? "the upstream operation failed"
      }
    }
  }
  const answer = obj(obj(op["response"])?.["generateVideoResponse"])
  const uri = str(obj(obj(arr(answer?.["generatedSamples"])[0])?.["video"])?.["uri"])
  if (uri) return { status: "completed", upstreamId: name, progress: 100, resultUrl: uri }
  const reasons = arr(answer?.["raiMediaFilteredReasons"]).filter((r): r is string => typeof r === "string")
  return {
    status: "failed",
    upstreamId: name,
    progress: 100,
    error:
      reasons.length > 0
        ? { code: "content_filtered", message: reasons.join("; ") }
        : { code: "no_result", message: "the operation finished without a video" }
  }
}

/** The submit answer read, or undefined when it is not the family's shape. */
export const readVideoSubmit = (family: JobFamily, json: unknown): UpstreamState | undefined => {
  if (family !== "veo") return openAiVideo(json)
  const state = veoOperation(json)
  // The operation has only just started: it is queued until a poll says otherwise.
  return state && state.status === "in_progress" ? { ...state, status: "queued" } : state
}

/** How a job is polled. */
export const pollCall = (family: JobFamily, upstreamId: string): CustomCall =>
  family === "veo" ? { path: `/v1beta/${upstreamId}`, method: "GET" } : { path: `/videos/${encodeComponent(upstreamId)}`, method: "GET" }

export const readPoll = (family: JobFamily, json: unknown): UpstreamState | undefined =>
  family === "veo" ? veoOperation(json) : openAiVideo(json)

/** The content of a finished OpenAI video (Veo's is its sample URI, see MediaJobs). */
export const openAiContentCall = (upstreamId: string): CustomCall => ({
  path: `/videos/${encodeComponent(upstreamId)}/content`,
  method: "GET",
  accept: "application/binary"
})

// ---------------------------------------------------------------- music

/** ElevenLabs' default output: MP3, 44.1 kHz, 128 kb/s (every plan may ask for it). */
export const ELEVENLABS_OUTPUT = "mp3_44100_128"

export const musicSubmit = (family: JobFamily, model: string, input: MusicInput): CustomCall => {
  switch (family) {
    case "elevenlabs-music":
      return {
        path: `/v1/music?output_format=${ELEVENLABS_OUTPUT}`,
        accept: "audio/mpeg",
        json: {
          prompt: input.prompt,
          model_id: model,
          ...(input.lengthMs !== undefined ? { music_length_ms: input.lengthMs } : {}),
          ...(input.instrumental !== undefined ? { force_instrumental: input.instrumental } : {})
        }
      }
    case "lyria-predict":
      return {
        path: `/v1beta/models/${encodeComponent(model)}:predict`,
        json: {
          instances: [{ prompt: input.prompt, ...(input.negativePrompt ? { negative_prompt: input.negativePrompt } : {}) }],
          parameters: { sample_count: 1 }
        }
      }
    default:
      return {
        path: `/v1beta/models/${encodeComponent(model)}:generateContent`,
        json: { contents: [{ role: "user", parts: [{ text: input.prompt }] }], generationConfig: { responseModalities: ["AUDIO", "TEXT"] } }
      }
  }
}

/** Audio from a synchronous music upstream. */
export interface MusicResult {
  readonly bytes: Buffer
  readonly contentType: string
  /** Lyrics or structure that came with it (Lyria 3). */
  readonly text?: string
}

/**
 * A music answer read: the audio (raw for ElevenLabs, base64 in JSON for Lyria), or a string
 * saying what was wrong with the answer.
 */
export const readMusic = (family: JobFamily, body: Buffer, contentType: string | undefined): MusicResult | string => {
  if (family === "elevenlabs-music") {
    const type = (contentType ?? "audio/mpeg").split(";")[0]!.trim()
    if (body.length === 0) return "the upstream answered no audio"
    if (!type.startsWith("audio/") && type !== "application/octet-stream") return `the upstream answered ${type}, not audio`
    return { bytes: body, contentType: type.startsWith("audio/") ? type : "audio/mpeg" }
  }
  let json: unknown
  try {
    json = JSON.parse(body.toString("utf8"))
  } catch {
    return "the upstream's answer is not JSON"
  }
  if (family === "lyria-predict") {
    const p = obj(arr(obj(json)?.["predictions"])[0])
    const data = str(p?.["bytesBase64Encoded"])
    if (!data) return "the answer has no predictions[0].bytesBase64Encoded"
    return { bytes: Buffer.from(data, "base64"), contentType: str(p?.["mimeType"]) ?? "audio/wav" }
  }
  const parts = arr(obj(obj(arr(obj(json)?.["candidates"])[0])?.["content"])?.["parts"]).map(obj)
  const audio = parts.find((p) => str(obj(p?.["inlineData"])?.["mimeType"])?.startsWith("audio/"))
  const inline = obj(audio?.["inlineData"])
  if (!inline || !str(inline["data"])) return "the answer has no audio part"
  const text = parts
    .filter((p) => p?.["thought"] !== true)
    .map((p) => str(p?.["text"]))
    .filter((t): t is string => t !== undefined)
    .join("\n")
  return { bytes: Buffer.from(str(inline["data"])!, "base64"), contentType: str(inline["mimeType"])!, ...(text ? { text } : {}) }
}

/** Seconds of audio, read from the audio itself (music-metadata); undefined when it cannot be read. */
export const audioSeconds = async (bytes: Buffer, contentType: string): Promise<number | undefined> => {
  try {
    const { parseBuffer } = await import("music-metadata")
    const meta = await parseBuffer(bytes, { mimeType: contentType, size: bytes.length }, { duration: true, skipCovers: true })
    const d = meta.format.duration
    return d !== undefined && Number.isFinite(d) && d > 0 ? d : undefined
  } catch {
    return undefined
  }
}

/** The file extension the stored result gets. */
export const extensionOf = (contentType: string): string => {
  const t = contentType.toLowerCase()
  if (t.includes("mpeg") || t.includes("mp3")) return "mp3"
  if (t.includes("wav")) return "wav"
  if (t.includes("ogg") || t.includes("opus")) return "ogg"
  if (t.includes("flac")) return "flac"
  if (t.includes("mp4")) return "mp4"
  if (t.includes("webm")) return "webm"
  return "bin"
}
