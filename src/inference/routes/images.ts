/**
 * `POST /v1/images/generations`, `GET /v1/images/generations` (the image models),
 * `POST /v1/images/edits` (multipart, or JSON with `images[].image_url` data URLs). Requests are
 * checked here (a bad field is a 400 naming it), served by `runMedia` over the candidates that can
 * make images, and answered in OpenAI's images shape (src/inference/media/images.ts; docs/media.md).
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { obj, str } from "../../upstream/formats/common.js"
import { RequestDecodeError } from "../../upstream/formats/format.js"
import { boolean, checkParams, integer, invalidParam, object, oneOf, params, requireParam, string } from "../../upstream/formats/params.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import {
  DEFAULT_MAX_FILE_BYTES,
  filesOf,
  isMultipart,
  type MultipartError,
  type MultipartForm,
  parseMultipart,
  readUpload,
  type UploadedFile
} from "../../platform/http/multipart.js"
import { canEdit, canGenerate, fileHead, type ImageInput, type ImagesRequest, sniffImage, tryImages } from "../media/images.js"
import { runMedia } from "../media/run.js"
import { modelDoes } from "../../domain/catalog/catalog.js"
import { catalogEntries, type CatalogEntry } from "../../upstream/providers/catalogEntries.js"
import { badRequest, InferenceError, tryDecode } from "../../kernel/errors.js"
import { type HttpRequestContext, sendJson, withJsonObject } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

// ---------------------------------------------------------------- what a request may say

const QUALITIES = ["auto", "low", "medium", "high", "xhigh", "max", "standard", "hd"]

/** The OpenAI images fields the gateway knows: checked, and forwarded to OpenAI-compatible upstreams. */
const IMAGE_PARAMS = params({
  prompt: string,
  n: integer(1, 10),
  size: string,
  quality: oneOf(...QUALITIES),
  response_format: oneOf("url", "b64_json"),
  background: oneOf("transparent", "opaque", "auto"),
  output_format: oneOf("png", "jpeg", "webp", "gif", "svg"),
  output_compression: integer(0, 100),
  moderation: oneOf("low", "auto"),
  style: oneOf("vivid", "natural"),
  complexity: oneOf("low", "medium", "high"),
  input_fidelity: oneOf("high", "low"),
  frame_count: integer(1),
  frame_duration_ms: integer(1),
  partial_images: integer(0, 3),
  svg: object,
  user: string,
  safety_identifier: string,
  stream: boolean
})
const KNOWN = new Set(IMAGE_PARAMS.map((p) => p.key))
/** Multipart sends every value as text: these are numbers. */
const NUMERIC = new Set(["n", "output_compression", "partial_images", "frame_count", "frame_duration_ms"])
const NON_EMPTY = { expected: "a non-empty string", ok: (v: unknown) => typeof v === "string" && v.trim() !== "" }
const SIZE = /^(auto|\d{1,5}x\d{1,5}|\d{1,3}:\d{1,3})$/

/** Most images in one edit (OpenAI's limit), and their total size (they are held in memory while sent). */
const MAX_IMAGES = 16
export const MAX_IMAGE_BYTES = DEFAULT_MAX_FILE_BYTES
const MAX_TOTAL_IMAGE_BYTES = 64 * 1024 * 1024

/** The checked fields of a request (JSON, or multipart made JSON-like), as the try wants them; model apart. */
const decodeAsk = (body: Record<string, unknown>): Omit<ImagesRequest, "ctx" | "format" | "model" | "operation" | "images" | "mask"> => {
  requireParam(body, "prompt", NON_EMPTY)
  checkParams(body, IMAGE_PARAMS)
  if (body["stream"] === true)
    throw new RequestDecodeError("stream: streamed image answers are not supported by the gateway; leave stream unset", "stream")
  const size = str(body["size"])
  if (size !== undefined && !SIZE.test(size)) throw invalidParam("size", `"auto", "WIDTHxHEIGHT" or "W:H"`, size)
  const fields: Record<string, unknown> = {}
  for (const k of KNOWN) if (k !== "stream" && body[k] !== undefined && body[k] !== null) fields[k] = body[k]
  return {
    prompt: body["prompt"] as string,
    n: typeof body["n"] === "number" ? body["n"] : 1,
    size,
    quality: str(body["quality"]),
    responseFormat: str(body["response_format"]) as ImagesRequest["responseFormat"],
    outputFormat: str(body["output_format"]),
    outputCompression: typeof body["output_compression"] === "number" ? body["output_compression"] : undefined,
    fields
  }
}

const modelOf = (body: Record<string, unknown>): Effect.Effect<string, InferenceError> => {
  const model = str(body["model"])
  return model && model.trim() !== ""
    ? Effect.succeed(model)
    : Effect.fail(badRequest("model must be a non-empty string (an image model, e.g. openai/gpt-image-2)", "model"))
}

// ---------------------------------------------------------------- generations

/** `POST /v1/images/generations` (and `/v1/providers/{provider}/images/generations` with the model pinned). */
export const imagesGenerate = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const model = yield* modelOf(body)
    const ask = yield* tryDecode(openAiChat, () => decodeAsk(body))
    const served = yield* runMedia(deps.inference, deps.accounting, {
      ctx,
      client: openAiChat,
      model,
      endpoint: "images.generations",
      what: "image generation",
      able: canGenerate,
      request: { ctx, format: openAiChat, model, operation: "generations", images: [], mask: undefined, ...ask },
      attempt: tryImages(deps.inference)
    })
    sendJson(ctx, 200, served.outcome.answer)
  })

// ---------------------------------------------------------------- edits

const multipartFailure = (e: MultipartError): InferenceError =>
  new InferenceError({
    status: e.status,
    kind: e.status === 413 ? "too_large" : "invalid_request",
    code: e.code,
    message: e.message,
    param: e.param
  })

/** A multipart form's text fields as a JSON-like body: known fields only, numbers and booleans parsed, `svg[key]` nested. */
const formBody = (form: MultipartForm): Record<string, unknown> => {
  const body: Record<string, unknown> = {}
  for (const [name, values] of Object.entries(form.fields)) {
    const nested = /^([a-z_]+)\[([^\]]+)\]$/.exec(name)
    if (nested) {
      if (KNOWN.has(nested[1]!)) body[nested[1]!] = { ...obj(body[nested[1]!]), [nested[2]!]: values[0] }
      continue
    }
    const value = values[0]
    if (name === "model") body["model"] = value
    if (!KNOWN.has(name) || value === undefined) continue
    body[name] =
      NUMERIC.has(name) && /^-?\d+$/.test(value.trim())
        ? Number(value)
        : name === "stream" && (value === "true" || value === "false")
          ? value === "true"
          : value
  }
  return body
}

const IMAGE_TYPES = "a PNG, JPEG, WEBP or GIF image"

/** An uploaded file as an input image: its type from its first bytes; anything else is a 400 naming the field. */
const uploadedImage = (file: UploadedFile, param: string): Effect.Effect<ImageInput, InferenceError> =>
  Effect.flatMap(fileHead(file.path), (head) => {
    const mimeType = sniffImage(head)
    if (!mimeType) {
      return Effect.fail(
        badRequest(
          `${param}: expected ${IMAGE_TYPES}, got ${file.size === 0 ? "an empty file" : `a file that is not one (${file.mimeType})`}${file.filename ? ` '${file.filename.slice(0, 100)}'` : ""}`,
          param,
          "invalid_image"
        )
      )
    }
    return Effect.succeed({ filename: file.filename, mimeType, size: file.size, read: readUpload(file), path: file.path })
  })

/** A JSON edit's `{ image_url }`: a data: URL's bytes (the gateway fetches no remote images and keeps no files). */
const inlineImage = (value: unknown, param: string): Effect.Effect<ImageInput, InferenceError> => {
  const ref = obj(value)
  if (!ref) return Effect.fail(badRequest(`${param}: expected an object with image_url`, param))
  if (ref["file_id"] !== undefined)
    return Effect.fail(
      badRequest(
        `${param}.file_id: file ids are not supported by the gateway; send the image as a data: URL in image_url, or as multipart`,
        `${param}.file_id`
      )
    )
  const url = str(ref["image_url"])
  if (url === undefined) return Effect.fail(badRequest(`${param}.image_url: Field required, expected a data: URL`, `${param}.image_url`))
  const m = /^data:([^;,]*)(;base64)?,/i.exec(url)
  if (!m || !m[2])
    return Effect.fail(
      badRequest(`${param}.image_url: only base64 data: URLs are accepted (the gateway does not fetch remote images)`, `${param}.image_url`)
    )
  const bytes = Buffer.from(url.slice(m[0].length), "base64")
  if (bytes.length > MAX_IMAGE_BYTES) {
    return Effect.fail(
      new InferenceError({
        status: 413,
        kind: "too_large",
        code: "file_too_large",
        message: `${param}: the image is larger than ${MAX_IMAGE_BYTES} bytes`,
        param
      })
    )
  }
  const mimeType = sniffImage(bytes.subarray(0, 16))
  if (!mimeType) return Effect.fail(badRequest(`${param}.image_url: expected ${IMAGE_TYPES}`, `${param}.image_url`, "invalid_image"))
  return Effect.succeed({ filename: "", mimeType, size: bytes.length, read: Effect.succeed(bytes) })
}

interface EditInput {
  readonly body: Record<string, unknown>
  readonly images: ReadonlyArray<ImageInput>
  readonly mask: ImageInput | undefined
}

const fromMultipart: (ctx: HttpRequestContext) => Effect.Effect<EditInput, InferenceError, Scope.Scope> = Effect.fnUntraced(function* (
  ctx: HttpRequestContext
) {
  const form = yield* Effect.mapError(
    parseMultipart(ctx.req, { maxFileBytes: MAX_IMAGE_BYTES, maxFiles: MAX_IMAGES + 2 }, ctx.body),
    multipartFailure
  )
  const files = filesOf(form, "image")
  if (files.length === 0) return yield* badRequest("image: Field required, expected one or more image files (image or image[])", "image")
  if (files.length > MAX_IMAGES) return yield* badRequest(`image: at most ${MAX_IMAGES} images, got ${files.length}`, "image")
  const masks = filesOf(form, "mask")
  const total = [...files, ...masks].reduce((n, f) => n + f.size, 0)
  if (total > MAX_TOTAL_IMAGE_BYTES) {
    return yield* new InferenceError({
      status: 413,
      kind: "too_large",
      code: "upload_too_large",
      message: `the images together are larger than ${MAX_TOTAL_IMAGE_BYTES} bytes`,
      param: "image"
    })
  }
  const images = yield* Effect.forEach(files, (f) => uploadedImage(f, "image"))
  const mask = masks[0] ? yield* uploadedImage(masks[0], "mask") : undefined
  return { body: formBody(form), images, mask }
})

const jsonEdit: (body: Record<string, unknown>) => Effect.Effect<EditInput, InferenceError> = Effect.fnUntraced(function* (
  body: Record<string, unknown>
) {
  const list = body["images"]
  if (!Array.isArray(list) || list.length === 0) {
    return yield* badRequest(
      "images: Field required, expected a non-empty array of { image_url } (or send the images as multipart/form-data)",
      "images"
    )
  }
  if (list.length > MAX_IMAGES) return yield* badRequest(`images: at most ${MAX_IMAGES} images, got ${list.length}`, "images")
  const images = yield* Effect.forEach(list, (v, i) => inlineImage(v, `images[${i}]`))
  const mask = body["mask"] === undefined || body["mask"] === null ? undefined : yield* inlineImage(body["mask"], "mask")
  return { body, images, mask }
})

const fromJson = (ctx: HttpRequestContext): Effect.Effect<EditInput, InferenceError> => withJsonObject(ctx, jsonEdit)

const isJson = (ctx: HttpRequestContext): boolean =>
  /^application\/([\w.+-]+\+)?json\b/i.test(String(ctx.req.headers["content-type"] ?? ""))

/** `POST /v1/images/edits`. */
export const imagesEdit = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    let input: EditInput
    if (isMultipart(ctx.req)) input = yield* fromMultipart(ctx)
    else if (isJson(ctx)) input = yield* fromJson(ctx)
    else {
      if (!ctx.body) ctx.req.resume()
      const type = String(ctx.req.headers["content-type"] ?? "")
      return yield* new InferenceError({
        status: 415,
        kind: "invalid_request",
        code: "unsupported_media_type",
        message: `image edits take a multipart/form-data body (image, prompt, mask, ...) or JSON with images[].image_url; got ${type === "" ? "no content type" : type.slice(0, 100)}`
      })
    }
    const model = yield* modelOf(input.body)
    const ask = yield* tryDecode(openAiChat, () => decodeAsk(input.body))
    const served = yield* runMedia(deps.inference, deps.accounting, {
      ctx,
      client: openAiChat,
      model,
      endpoint: "images.edits",
      what: "image editing",
      able: canEdit,
      request: { ctx, format: openAiChat, model, operation: "edits", images: input.images, mask: input.mask, ...ask },
      attempt: tryImages(deps.inference)
    })
    sendJson(ctx, 200, served.outcome.answer)
  }, Effect.scoped)

// ---------------------------------------------------------------- the image models

/** Model ids that name an image model, for connection models the catalog does not list. */
const IMAGE_NAME = /image|imagen|dall-e|flux|diffusion|sdxl|recraft|ideogram|seedream/i

/** The catalog's image models of the connected providers, and connection models whose name says image where the provider offers images. */
const isImageModel = (e: CatalogEntry): boolean =>
  !e.alias && (e.spec ? e.spec.kind === "image" : modelDoes(e.connection.provider, e.modelId, "image") && IMAGE_NAME.test(e.modelId))

/** `GET /v1/images/generations`: the image models, in OpenAI's list shape. */
export const listImageModels = (deps: RouteDeps) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const entries = catalogEntries(yield* deps.connections).filter(isImageModel)
    sendJson(ctx, 200, {
      object: "list",
      data: entries.map((e) => ({
        id: e.id,
        object: "model",
        created: Math.floor(e.connection.createdAt / 1000),
        owned_by: e.connection.provider.id,
        kind: "image"
      }))
    })
  })

export const imageRoutes = (deps: RouteDeps): ReadonlyArray<RouteDef> => {
  const generate = imagesGenerate(deps)
  return [
    {
      method: "POST",
      path: "/v1/images/generations",
      format: openAiChat,
      handle: (ctx) => withJsonObject(ctx, (body) => generate(ctx, body))
    },
    { method: "GET", path: "/v1/images/generations", format: openAiChat, handle: listImageModels(deps) },
    { method: "POST", path: "/v1/images/edits", format: openAiChat, handle: imagesEdit(deps) }
  ]
}
