/** Images over three upstream families (OpenAI-compatible, Gemini, Imagen), answered in OpenAI's shape (docs/media.md, "Images"). */
import * as Effect from "effect/Effect"
import { type FormPart, multipartBody } from "../../platform/http/multipart.js"
import * as fs from "node:fs"
import { arr, num, obj, str, tryJson } from "../../upstream/formats/common.js"
import type { Usage } from "../../domain/canonical.js"
import { usageFromGemini } from "../../upstream/formats/gemini.js"
import { encodeComponent } from "../../kernel/untrusted.js"
import { type AttemptFailed, attemptFailed } from "../../kernel/attempts.js"
import type { InferenceShape } from "../call.js"
import { clientError } from "../../kernel/errors.js"
import type { AttemptRequest } from "../fallback.js"
import type { Candidate } from "../../services/routing/types.js"
import type { CustomCall } from "../../upstream/client/executors.js"
import type { UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"
import { badAnswer, does, headerValue, mediaBytes, type MediaOutcome, sendMedia } from "./run.js"

// ---------------------------------------------------------------- the request

export type ImageFamily = "openai" | "gemini" | "imagen"

/** How a candidate makes images: by its connection's wire format, and for Gemini by its model (Imagen ids). */
export const imageFamily = (c: Candidate): ImageFamily | undefined => {
  const format = c.connection.format
  if (format === "gemini") return /^(models\/)?imagen-/i.test(c.model) ? "imagen" : "gemini"
  if (format === "openai-chat" || format === "openai-responses") return "openai"
  return undefined
}

/** A candidate that can generate images (the catalog's kind, else what its provider offers) with a family the gateway speaks. */
export const canGenerate = (c: Candidate): boolean => does("image")(c) && imageFamily(c) !== undefined

/** A candidate that can edit images: Imagen edits are Vertex-only, not on the Gemini API. */
export const canEdit = (c: Candidate): boolean => {
  if (!does("image")(c)) return false
  const family = imageFamily(c)
  return family === "openai" || family === "gemini"
}

/** An input image (an upload spooled to disk, or a `data:` URL's bytes): read when a try sends it. */
export interface ImageInput {
  readonly filename: string
  /** Its type, from its first bytes (PNG, JPEG, WEBP, GIF). */
  readonly mimeType: string
  readonly size: number
  readonly read: Effect.Effect<Buffer>
  /** An upload's spooled file: sent to multipart upstreams as a stream from disk. */
  readonly path?: string
}

export interface ImagesRequest extends AttemptRequest {
  readonly operation: "generations" | "edits"
  readonly prompt: string
  readonly n: number
  readonly size: string | undefined
  readonly quality: string | undefined
  readonly responseFormat: "url" | "b64_json" | undefined
  readonly outputFormat: string | undefined
  readonly outputCompression: number | undefined
  /** The client's fields the gateway knows (prompt, n, size, ... model excluded), forwarded to OpenAI-compatible upstreams. */
  readonly fields: Readonly<Record<string, unknown>>
  /** Edits: the images, in order. */
  readonly images: ReadonlyArray<ImageInput>
  readonly mask: ImageInput | undefined
}

export interface ImagesOutcome extends MediaOutcome {
  /** The answer in OpenAI's images shape. */
  readonly answer: Record<string, unknown>
}

// ---------------------------------------------------------------- bytes and types

const MIME_OF_FORMAT: Record<string, string> = {
  png: "image/png",
  jpeg: "image/jpeg",
  jpg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  svg: "image/svg+xml"
}
const FORMAT_OF_MIME: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/webp": "webp",
  "image/gif": "gif",
  "image/svg+xml": "svg"
}

/** The image type of a file's first bytes (PNG, JPEG, WEBP, GIF), if it is one of them. */
export const sniffImage = (head: Uint8Array): string | undefined => {
  const b = Buffer.from(head.buffer, head.byteOffset, head.byteLength)
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return "image/png"
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return "image/jpeg"
  if (b.length >= 6 && (b.toString("latin1", 0, 6) === "GIF87a" || b.toString("latin1", 0, 6) === "GIF89a")) return "image/gif"
  if (b.length >= 12 && b.toString("latin1", 0, 4) === "RIFF" && b.toString("latin1", 8, 12) === "WEBP") return "image/webp"
  return undefined
}

/** The first bytes of a spooled file. */
export const fileHead = (path: string, bytes = 16): Effect.Effect<Buffer> =>
  Effect.promise(async () => {
    const handle = await fs.promises.open(path, "r")
    try {
      const buf = Buffer.alloc(bytes)
      const { bytesRead } = await handle.read(buf, 0, bytes, 0)
      return buf.subarray(0, bytesRead)
    } finally {
      await handle.close()
    }
  })

/** The type of base64 image data, from its first bytes, else `fallback`. */
const base64Mime = (b64: string, fallback: string): string => sniffImage(Buffer.from(b64.slice(0, 24), "base64")) ?? fallback

const dataUrl = (mime: string, b64: string): string => `data:${mime};base64,${b64}`

// ---------------------------------------------------------------- multipart out

/** A JSON value as form fields, the way the OpenAI SDK sends it: arrays as `key[]`, objects as `key[sub]`. */
export const formFields = (name: string, value: unknown): Array<FormPart> => {
  if (value === undefined || value === null) return []
  if (Array.isArray(value)) return value.flatMap((v) => formFields(`${name}[]`, v))
  if (typeof value === "object") return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => formFields(`${name}[${k}]`, v))
  return [{ name, value: String(value) }]
}

// ---------------------------------------------------------------- the try

/** Whether a model is one of OpenAI's GPT image models, which always answer `b64_json` (and may refuse `response_format`). */
const GPT_IMAGE = /^(gpt-image|chatgpt-image)/i

/** One try against one candidate, by its family. */
export const tryImages =
  (inference: InferenceShape) =>
  (request: ImagesRequest, c: Candidate): Effect.Effect<ImagesOutcome, AttemptFailed> => {
    switch (imageFamily(c)) {
      case "openai":
        return tryOpenAi(inference, request, c)
      case "gemini":
        return tryGemini(inference, request, c)
      case "imagen":
        return tryImagen(inference, request, c)
      default:
        return Effect.fail(badAnswer(request, c.connection, "this connection's format has no images API"))
    }
  }

/** The images of an answer priced by their quality and size (`high:1024x1024`, then `high`). */
const openAiKeys = (quality: string | undefined, size: string | undefined): ReadonlyArray<string> => [
  ...(quality && size ? [`${quality}:${size}`] : []),
  ...(quality ? [quality] : []),
  ...(size ? [size] : [])
]

const json = (inference: InferenceShape, request: ImagesRequest, c: Candidate, res: UpstreamResponse) =>
  Effect.map(mediaBytes(inference, request, c.connection, res), (bytes) => obj(tryJson(bytes.toString("utf8"))))

const tryOpenAi = (inference: InferenceShape, request: ImagesRequest, c: Candidate): Effect.Effect<ImagesOutcome, AttemptFailed> =>
  Effect.gen(function* () {
    const fields: Record<string, unknown> = { ...request.fields, model: c.model }
    if (GPT_IMAGE.test(c.model)) delete fields["response_format"]
    let call: CustomCall
    if (request.operation === "generations") {
      call = { path: "/images/generations", json: fields }
    } else {
      // Uploads stream from their spooled files; images given inline (data: URLs) are in memory already.
      const part = (img: ImageInput, name: string, filename: string): Effect.Effect<FormPart> =>
        img.path !== undefined
          ? Effect.succeed({ name, filename, contentType: img.mimeType, path: img.path, size: img.size })
          : Effect.map(img.read, (data) => ({ name, filename, contentType: img.mimeType, data }))
      const field = request.images.length === 1 ? "image" : "image[]"
      const parts: Array<FormPart> = [
        ...(yield* Effect.forEach(request.images, (img, i) =>
          part(img, field, img.filename || `image-${i + 1}.${FORMAT_OF_MIME[img.mimeType] ?? "png"}`)
        )),
        ...(request.mask ? [yield* part(request.mask, "mask", request.mask.filename || "mask.png")] : []),
        ...Object.entries(fields).flatMap(([k, v]) => formFields(k, v))
      ]
      call = { path: "/images/edits", bytes: multipartBody(parts) }
    }
    const res = yield* sendMedia(inference, request, c, call)
    const body = yield* json(inference, request, c, res)
    const data = arr(body?.["data"]).flatMap((d) => (obj(d) ? [obj(d)!] : []))
    if (!body || data.length === 0) return yield* Effect.fail(badAnswer(request, c.connection, "the images answer carries no data[]"))
    const outputFormat = str(body["output_format"]) ?? request.outputFormat ?? "png"
    const answerData = data.map((d) => {
      const b64 = str(d["b64_json"])
      // Asked for a URL, answered with bytes (every GPT image model): the bytes as a data: URL.
      if (request.responseFormat === "url" && b64 !== undefined && d["url"] === undefined) {
        const { b64_json: _b, ...rest } = d
        return { ...rest, url: dataUrl(base64Mime(b64, MIME_OF_FORMAT[outputFormat] ?? "image/png"), b64) }
      }
      return d
    })
    const usage = openAiImageUsage(body["usage"])
    return {
      status: 200,
      usage,
      ttftMs: null,
      error: null,
      headers: headerValue(res.headers),
      units: {
        images: answerData.length,
        imageKeys: openAiKeys(str(body["quality"]) ?? request.quality, str(body["size"]) ?? request.size)
      },
      answer: { ...body, data: answerData }
    }
  })

/** OpenAI's images `usage` (`input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens`). */
export const openAiImageUsage = (u: unknown): Partial<Usage> | undefined => {
  const usage = obj(u)
  const input = num(usage?.["input_tokens"])
  const output = num(usage?.["output_tokens"])
  if (input === undefined && output === undefined) return undefined
  const cached = num(obj(usage?.["input_tokens_details"])?.["cached_tokens"])
  return { inputTokens: input ?? 0, outputTokens: output ?? 0, ...(cached ? { cachedInputTokens: cached } : {}) }
}

// ---------------------------------------------------------------- Gemini

/** The aspect ratios Gemini's image models and Imagen take. */
const RATIOS: ReadonlyArray<readonly [string, number]> = (
  ["1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9"] as const
).map((r) => {
  const [w, h] = r.split(":").map(Number)
  return [r, w! / h!] as const
})

/**
 * An OpenAI `size` as Gemini's `imageConfig`: `WxH` becomes the nearest aspect ratio, and the
 * image size whose longest edge is nearest (`1K` up to 1600 px, omitted as the default; `2K` up
 * to 3200 px; `4K` beyond); `W:H` is an aspect ratio already; `auto` or none: nothing.
 */
export const geminiImageConfig = (size: string | undefined): { aspectRatio?: string; imageSize?: string } | undefined => {
  if (size === undefined || size === "auto") return undefined
  if (/^\d+:\d+$/.test(size)) return { aspectRatio: size }
  const m = /^(\d+)x(\d+)$/.exec(size)
  if (!m) return undefined
  const w = Number(m[1])
  const h = Number(m[2])
  if (!(w > 0 && h > 0)) return undefined
  const ratio = Math.log(w / h)
  let best = RATIOS[0]!
  for (const r of RATIOS) if (Math.abs(Math.log(r[1]) - ratio) < Math.abs(Math.log(best[1]) - ratio)) best = r
  const edge = Math.max(w, h)
  return { aspectRatio: best[0], ...(edge > 3200 ? { imageSize: "4K" } : edge > 1600 ? { imageSize: "2K" } : {}) }
}

/** Finish reasons that say the safety system refused (others with no image are the target's failure). */
const REFUSALS = new Set([
  "SAFETY",
  "IMAGE_SAFETY",
  "PROHIBITED_CONTENT",
  "IMAGE_PROHIBITED_CONTENT",
  "BLOCKLIST",
  "SPII",
  "RECITATION",
  "IMAGE_RECITATION"
])

interface Found {
  readonly images: Array<{ readonly data: string; readonly mimeType: string }>
  readonly blocked: string | undefined
  readonly text: string
}

/** The images of a generateContent answer (thought parts skipped), or why there are none. */
export const geminiImages = (body: Record<string, unknown> | undefined): Found => {
  const images: Array<{ data: string; mimeType: string }> = []
  let text = ""
  let blocked = str(obj(body?.["promptFeedback"])?.["blockReason"])
  for (const cand of arr(body?.["candidates"])) {
    const candidate = obj(cand)
    for (const p of arr(obj(candidate?.["content"])?.["parts"])) {
      const part = obj(p)
      if (!part || part["thought"] === true) continue
      const inline = obj(part["inlineData"]) ?? obj(part["inline_data"])
      const data = str(inline?.["data"])
      const mime = str(inline?.["mimeType"]) ?? str(inline?.["mime_type"]) ?? "image/png"
      if (data && mime.startsWith("image/")) images.push({ data, mimeType: mime })
      else if (typeof part["text"] === "string") text += part["text"]
    }
    const reason = str(candidate?.["finishReason"])
    if (reason && REFUSALS.has(reason)) blocked ??= reason
  }
  return { images, blocked, text }
}

/** The prompt refused by the upstream's safety system: the request's own failure (another target would refuse it too), 400. */
const refused = (request: ImagesRequest, c: Candidate, reason: string): AttemptFailed =>
  attemptFailed(
    clientError(request.format, {
      status: 400,
      kind: "invalid_request",
      code: "moderation_blocked",
      message: `${c.connection.name} made no image: the request was refused (${reason.slice(0, 100)})`,
      param: "prompt"
    }),
    undefined
  )

const geminiAnswer = (
  request: ImagesRequest,
  images: ReadonlyArray<{ readonly data: string; readonly mimeType: string }>,
  usage: Partial<Usage> | undefined
) => ({
  created: Math.floor(Date.now() / 1000),
  data: images.map((i) => (request.responseFormat === "url" ? { url: dataUrl(i.mimeType, i.data) } : { b64_json: i.data })),
  output_format: FORMAT_OF_MIME[images[0]?.mimeType ?? "image/png"] ?? "png",
  ...(request.size !== undefined && request.size !== "auto" ? { size: request.size } : {}),
  ...(usage
    ? {
        usage: {
          input_tokens: usage.inputTokens ?? 0,
          output_tokens: usage.outputTokens ?? 0,
          total_tokens: (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)
        }
      }
    : {})
})

const sumUsage = (all: ReadonlyArray<Partial<Usage> | undefined>): Partial<Usage> | undefined => {
  const some = all.filter((u): u is Partial<Usage> => u !== undefined)
  if (some.length === 0) return undefined
  return {
    inputTokens: some.reduce((n, u) => n + (u.inputTokens ?? 0), 0),
    outputTokens: some.reduce((n, u) => n + (u.outputTokens ?? 0), 0)
  }
}

/** Calls made together for `n` images from generateContent (one image per call). */
const GEMINI_CONCURRENCY = 4

const tryGemini = (inference: InferenceShape, request: ImagesRequest, c: Candidate): Effect.Effect<ImagesOutcome, AttemptFailed> =>
  Effect.gen(function* () {
    const parts: Array<Record<string, unknown>> = [{ text: request.prompt }]
    for (const img of request.images) parts.push({ inlineData: { mimeType: img.mimeType, data: (yield* img.read).toString("base64") } })
    if (request.mask) {
      // Gemini has no mask: it goes as one more image, said to be the mask.
      parts.push({ text: "The next image is a mask: edit only where it is transparent." })
      parts.push({ inlineData: { mimeType: request.mask.mimeType, data: (yield* request.mask.read).toString("base64") } })
    }
    const imageConfig = geminiImageConfig(request.size)
    const body = {
      contents: [{ role: "user", parts }],
      generationConfig: { responseModalities: ["TEXT", "IMAGE"], ...(imageConfig ? { imageConfig } : {}) }
    }
    const call: CustomCall = { path: `/v1beta/models/${encodeComponent(c.model.replace(/^models\//, ""))}:generateContent`, json: body }
    const answers = yield* Effect.forEach(
      Array.from({ length: request.n }, () => call),
      (one) =>
        Effect.gen(function* () {
          const res = yield* sendMedia(inference, request, c, one)
          const answer = yield* json(inference, request, c, res)
          return { found: geminiImages(answer), usage: usageFromGemini(answer?.["usageMetadata"]), headers: res.headers }
        }),
      { concurrency: GEMINI_CONCURRENCY }
    )
    const images = answers.flatMap((a) => a.found.images).slice(0, request.n)
    if (images.length === 0) {
      const blocked = answers.find((a) => a.found.blocked !== undefined)?.found.blocked
      if (blocked) return yield* Effect.fail(refused(request, c, blocked))
      const text = answers
        .map((a) => a.found.text)
        .join(" ")
        .trim()
      return yield* Effect.fail(
        badAnswer(request, c.connection, `generateContent answered no image${text ? ` (text: ${text.slice(0, 120)})` : ""}`)
      )
    }
    const usage = sumUsage(answers.map((a) => a.usage))
    return {
      status: 200,
      usage,
      ttftMs: null,
      error: null,
      headers: headerValue(answers[0]!.headers),
      units: { images: images.length, imageKeys: [imageConfig?.imageSize ?? "1K"] },
      answer: geminiAnswer(request, images, usage)
    }
  })

const tryImagen = (inference: InferenceShape, request: ImagesRequest, c: Candidate): Effect.Effect<ImagesOutcome, AttemptFailed> =>
  Effect.gen(function* () {
    const config = geminiImageConfig(request.size)
    // Imagen makes 1K and 2K images.
    const imageSize = config?.imageSize === undefined ? undefined : "2K"
    const mimeType = request.outputFormat === "jpeg" || request.outputFormat === "png" ? MIME_OF_FORMAT[request.outputFormat] : undefined
    const parameters = {
      sampleCount: request.n,
      ...(config?.aspectRatio ? { aspectRatio: config.aspectRatio } : {}),
      ...(imageSize ? { imageSize } : {}),
      ...(mimeType
        ? {
            outputOptions: {
              mimeType,
              ...(request.outputCompression !== undefined && mimeType === "image/jpeg"
                ? { compressionQuality: request.outputCompression }
                : {})
            }
          }
        : {})
    }
    const call: CustomCall = {
      path: `/v1beta/models/${encodeComponent(c.model.replace(/^models\//, ""))}:predict`,
      json: { instances: [{ prompt: request.prompt }], parameters }
    }
    const res = yield* sendMedia(inference, request, c, call)
    const body = yield* json(inference, request, c, res)
    const predictions = arr(body?.["predictions"]).flatMap((p) => (obj(p) ? [obj(p)!] : []))
    const images = predictions.flatMap((p) => {
      const data = str(p["bytesBase64Encoded"])
      return data ? [{ data, mimeType: str(p["mimeType"]) ?? base64Mime(data, "image/png") }] : []
    })
    if (images.length === 0) {
      const filtered = predictions.map((p) => str(p["raiFilteredReason"])).find((r) => r !== undefined)
      if (filtered) return yield* Effect.fail(refused(request, c, filtered))
      return yield* Effect.fail(badAnswer(request, c.connection, ":predict answered no image"))
    }
    return {
      status: 200,
      usage: undefined,
      ttftMs: null,
      error: null,
      headers: headerValue(res.headers),
      units: { images: images.length, imageKeys: [imageSize ?? "1K"] },
      answer: geminiAnswer(request, images.slice(0, request.n), undefined)
    }
  })
