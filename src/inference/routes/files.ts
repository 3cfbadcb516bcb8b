/**
 * `/v1/files` (docs/files-batches.md, "Files"). An upload is parsed as it streams in
 * (@fastify/busboy) and its one file part goes straight into the `FileStore` (no spool to a
 * temporary directory, so the bytes are written once); the text fields (`purpose`,
 * `expires_after[...]`) may come before or after it (the openai SDK sends the file first), so
 * they are checked once the body ended, and the stored bytes removed when they are wrong.
 */
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import type { Readable } from "node:stream"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { type Files, ownerOf, type StoredFile, UPLOAD_PURPOSES } from "../files/Files.js"
import type { FileNotStored, FileTooLarge, Stored } from "../files/FileStore.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { loadBusboy } from "../../platform/http/multipart.js"
import { type HttpRequestContext, relayBytes, responseHeaders, sendJson } from "../io.js"
import type { RouteDef } from "./types.js"

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

/** The OpenAI file object. */
export const fileObject = (f: StoredFile) => ({
  id: f.id,
  object: "file",
  bytes: f.bytes,
  created_at: seconds(f.createdAt),
  expires_at: seconds(f.expiresAt),
  filename: f.filename,
  purpose: f.purpose,
  status: f.status,
  status_details: null
})

export const notFound = (what: string, id: string, param = "file_id") =>
  new InferenceError({
    status: 404,
    kind: "not_found",
    code: "not_found",
    message: `no ${what} '${id.slice(0, 80)}' for this API key`,
    param
  })

const tooLarge = (max: number) =>
  new InferenceError({
    status: 413,
    kind: "too_large",
    code: "file_too_large",
    message: `the file is larger than ${max} bytes`,
    param: "file"
  })

interface Upload {
  readonly fields: Record<string, string>
  readonly file: { readonly filename: string; readonly stored: Stored } | undefined
}

/**
 * Reads the multipart body: text fields kept, the single `file` part stored under `id` as it
 * arrives. Interrupted (the client left) or failed: what was stored is removed by `put`.
 */
const readUpload = Effect.fnUntraced(
  function* (files: typeof Files.Service, req: http.IncomingMessage, id: string) {
    const contentType = String(req.headers["content-type"] ?? "")
    if (!/^multipart\/form-data\b/i.test(contentType) || !/boundary=/i.test(contentType)) {
      req.resume()
      return yield* new InferenceError({
        status: 415,
        kind: "invalid_request",
        code: "unsupported_media_type",
        message: "POST /v1/files takes a multipart/form-data body with a boundary",
        param: "file"
      })
    }
    const declared = Number(req.headers["content-length"] ?? NaN)
    // A body declared larger than the file limit plus room for the fields cannot be accepted.
    if (Number.isFinite(declared) && declared > files.maxBytes + 1024 * 1024) {
      req.resume()
      return yield* tooLarge(files.maxBytes)
    }
    const Busboy = yield* loadBusboy
    let parser: ReturnType<typeof Busboy>
    try {
      parser = Busboy({
        headers: req.headers as http.IncomingHttpHeaders & { "content-type": string },
        limits: { files: 1, fields: 16, fieldSize: 64 * 1024, parts: 17 }
      })
    } catch (e) {
      req.resume()
      return yield* badRequest(`the multipart body could not be read: ${(e as Error).message}`, "file", "invalid_multipart")
    }
    const fields: Record<string, string> = {}
    let storing: Effect.Effect<{ filename: string; stored: Stored }, FileTooLarge | FileNotStored> | undefined
    let failure: InferenceError | undefined
    let finished = false
    let onFinish: (() => void) | undefined
    const finish = () => {
      finished = true
      onFinish?.()
    }
    parser.on("finish", finish)
    const stop = (e: InferenceError) => {
      failure ??= e
      req.unpipe(parser)
      // The rest is read and dropped, so the answer can be written.
      req.resume()
      onFinish?.()
    }
    // The file part's stream, handed from busboy's event to the fiber that stores it.
    const part = yield* Effect.async<{ name: string; filename: string; stream: Readable } | undefined, InferenceError>((resume) => {
      let done = false
      parser.on("field", (name, value, _n, truncated) => {
        if (truncated) stop(badRequest(`the field '${name.slice(0, 100)}' is too long`, name.slice(0, 100)))
        else fields[name] = value
      })
      parser.on("file", (name, stream, filename) => {
        if (done) return void stream.resume()
        done = true
        resume(Effect.succeed({ name, filename: filename ?? "", stream }))
      })
      parser.on("filesLimit", () => stop(badRequest("send one file per upload", "file")))
      parser.on("fieldsLimit", () => stop(badRequest("too many fields", null)))
      parser.on("error", (e: unknown) => {
        stop(badRequest(`the multipart body could not be read: ${e instanceof Error ? e.message : String(e)}`, "file", "invalid_multipart"))
        finish()
        if (!done) {
          done = true
          resume(Effect.fail(failure!))
        }
      })
      parser.on("finish", () => {
        if (!done) {
          done = true
          resume(Effect.succeed(undefined))
        }
      })
      req.pipe(parser)
      return Effect.sync(() => req.unpipe(parser))
    })
    if (part !== undefined) {
      if (part.name !== "file") {
        part.stream.resume()
        stop(badRequest(`the file part must be named 'file', got '${part.name.slice(0, 100)}'`, "file"))
      } else {
        storing = Effect.map(files.put(id, part.stream), (stored) => ({ filename: part.filename, stored }))
      }
    }
    const file = storing
      ? yield* Effect.mapError(storing, (e) => {
          if (e._tag === "FileTooLarge") {
            stop(tooLarge(e.maxBytes))
            return failure!
          }
          return new InferenceError({ status: 400, kind: "invalid_request", code: "incomplete_upload", message: e.message, param: "file" })
        })
      : undefined
    // The fields after the file: the parser's end.
    yield* Effect.async<void>((resume) => {
      if (failure || finished) return resume(Effect.void)
      onFinish = () => resume(Effect.void)
    })
    if (failure) {
      if (file) yield* files.discard(id)
      return yield* Effect.fail(failure)
    }
    return { fields, file }
  },
  (effect, files, _req, id): Effect.Effect<Upload, InferenceError> => Effect.onInterrupt(effect, () => files.discard(id))
)

const MIN_EXPIRY_S = 3600
const MAX_EXPIRY_S = 30 * 24 * 3600

const upload = (files: typeof Files.Service) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const id = files.newId()
    const { fields, file } = yield* readUpload(files, ctx.req, id)
    const invalid = (e: InferenceError) => Effect.zipRight(file ? files.discard(id) : Effect.void, Effect.fail(e))
    if (!file) return yield* invalid(badRequest("the upload has no 'file' part", "file"))
    const purpose = fields["purpose"]
    if (!purpose || !(UPLOAD_PURPOSES as ReadonlyArray<string>).includes(purpose)) {
      return yield* invalid(
        badRequest(
          `'purpose' must be one of ${UPLOAD_PURPOSES.join(", ")}, got ${purpose === undefined ? "nothing" : `'${purpose.slice(0, 50)}'`}`,
          "purpose"
        )
      )
    }
    const anchor = fields["expires_after[anchor]"]
    const after = fields["expires_after[seconds]"]
    let expiresAt: number | null = null
    if (anchor !== undefined || after !== undefined) {
      if (anchor !== "created_at")
        return yield* invalid(badRequest("'expires_after[anchor]' must be 'created_at'", "expires_after[anchor]"))
      const s = Number(after)
      if (!/^\d+$/.test(after ?? "") || s < MIN_EXPIRY_S || s > MAX_EXPIRY_S) {
        return yield* invalid(
          badRequest(`'expires_after[seconds]' must be an integer between ${MIN_EXPIRY_S} and ${MAX_EXPIRY_S}`, "expires_after[seconds]")
        )
      }
      expiresAt = Date.now() + s * 1000
    }
    const stored = yield* files.record(
      id,
      { owner: ownerOf(ctx.apiKeyId), filename: file.filename || "upload", purpose, expiresAt },
      file.stored
    )
    sendJson(ctx, 200, fileObject(stored))
  })

const intParam = (
  ctx: HttpRequestContext,
  name: string,
  min: number,
  max: number,
  fallback: number
): Effect.Effect<number, InferenceError> => {
  const v = ctx.query.get(name)
  if (v === null) return Effect.succeed(fallback)
  const n = Number(v)
  return /^\d+$/.test(v) && n >= min && n <= max
    ? Effect.succeed(n)
    : Effect.fail(badRequest(`'${name}' must be an integer between ${min} and ${max}`, name))
}

const list = (files: typeof Files.Service) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const limit = yield* intParam(ctx, "limit", 1, 10_000, 10_000)
    const order = ctx.query.get("order") ?? "desc"
    if (order !== "asc" && order !== "desc") return yield* badRequest("'order' must be 'asc' or 'desc'", "order")
    const purpose = ctx.query.get("purpose") ?? undefined
    const page = yield* files.list(ownerOf(ctx.apiKeyId), { purpose, limit, after: ctx.query.get("after") ?? undefined, order })
    const data = page.data.map(fileObject)
    sendJson(ctx, 200, {
      object: "list",
      data,
      first_id: data[0]?.id ?? null,
      last_id: data[data.length - 1]?.id ?? null,
      has_more: page.hasMore
    })
  })

const retrieve = (files: typeof Files.Service) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const id = params["id"] ?? ""
    const f = yield* files.find(ownerOf(ctx.apiKeyId), id)
    if (!f) return yield* notFound("file", id)
    sendJson(ctx, 200, fileObject(f))
  })

const remove = (files: typeof Files.Service) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const id = params["id"] ?? ""
    if (!(yield* files.remove(ownerOf(ctx.apiKeyId), id))) return yield* notFound("file", id)
    sendJson(ctx, 200, { id, object: "file", deleted: true })
  })

const content = (files: typeof Files.Service) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const id = params["id"] ?? ""
    const found = yield* files.content(ownerOf(ctx.apiKeyId), id)
    if (!found) return yield* notFound("file", id)
    yield* relayFile(ctx, found.stream, found.file.bytes)
  })

/** The file's bytes as they are read (backpressure from the client). */
const relayFile = (ctx: HttpRequestContext, readable: Readable, length: number): Effect.Effect<void> =>
  relayBytes(
    ctx,
    readable,
    responseHeaders(ctx, { "content-type": "application/octet-stream", "content-length": length, "cache-control": "private, no-store" }),
    "the file"
  )

const ID = /^\/v1\/files\/(?<id>[^/]+)$/

export const fileRoutes = (files: typeof Files.Service): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/v1/files", format: openAiChat, handle: upload(files) },
  { method: "GET", path: "/v1/files", format: openAiChat, handle: list(files) },
  { method: "GET", path: ID, format: openAiChat, handle: retrieve(files) },
  { method: "DELETE", path: ID, format: openAiChat, handle: remove(files) },
  { method: "GET", path: /^\/v1\/files\/(?<id>[^/]+)\/content$/, format: openAiChat, handle: content(files) }
]
