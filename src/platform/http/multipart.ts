/**
 * Multipart uploads (`/v1/images/edits`, `/v1/audio/transcriptions`, ...), parsed as they
 * stream in (@fastify/busboy): text fields are kept (each at most `maxFieldBytes`), each file is
 * written to a temporary file as it arrives, so an upload never sits whole in memory and can be
 * sent again to the next target when the first fails. The files are removed when the request's
 * scope closes. Over a limit or malformed: a `MultipartError` naming the problem (413 or 400).
 */
import type { Busboy } from "@fastify/busboy"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import type * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { Readable } from "node:stream"

/** One uploaded file, spooled to disk. */
export interface UploadedFile {
  /** The form field it came in (`image`, `image[]`, `file`, `mask`). */
  readonly field: string
  /** The name the client gave it (may be empty). */
  readonly filename: string
  /** The part's declared content type (may be `application/octet-stream`). */
  readonly mimeType: string
  readonly path: string
  readonly size: number
}

export interface MultipartForm {
  /** Text fields; a field sent several times (`timestamp_granularities[]`) keeps every value, in order. */
  readonly fields: Readonly<Record<string, ReadonlyArray<string>>>
  readonly files: ReadonlyArray<UploadedFile>
}

export interface MultipartLimits {
  /** Largest file part. Default 25 MiB (OpenAI's transcription limit). */
  readonly maxFileBytes?: number
  /** Most file parts. Default 16. */
  readonly maxFiles?: number
  /** Most text fields. Default 64. */
  readonly maxFields?: number
  /** Largest text field. Default 1 MiB. */
  readonly maxFieldBytes?: number
}

export class MultipartError {
  readonly _tag = "MultipartError"
  constructor(
    readonly status: 400 | 413 | 415,
    readonly message: string,
    readonly code: string,
    readonly param: string | null = null
  ) {}
}

export const DEFAULT_MAX_FILE_BYTES = 25 * 1024 * 1024

/** The first value of a text field. */
export const field = (form: MultipartForm, name: string): string | undefined => form.fields[name]?.[0]

/** Every value of a field sent as `name` or `name[]`. */
export const fieldValues = (form: MultipartForm, name: string): ReadonlyArray<string> => [
  ...(form.fields[name] ?? []),
  ...(form.fields[`${name}[]`] ?? [])
]

/** The files sent as `name` or `name[]` (the OpenAI SDK names an array of images `image[]`). */
export const filesOf = (form: MultipartForm, name: string): ReadonlyArray<UploadedFile> =>
  form.files.filter((f) => f.field === name || f.field === `${name}[]`)

/** A file's bytes (for upstreams that take the upload inline, base64 in JSON). */
export const readUpload = (file: UploadedFile): Effect.Effect<Buffer> => Effect.promise(() => fs.promises.readFile(file.path))

/** @fastify/busboy's parser, loaded by the first multipart body read (a start needs none of it). */
// Read through the CommonJS module's default export (its module.exports, which carries `Busboy`):
// in the CLI's chunks a bundled CommonJS module exports nothing else.
let busboy: typeof Busboy | undefined
export const loadBusboy: Effect.Effect<typeof Busboy> = Effect.suspend(() =>
  busboy !== undefined
    ? Effect.succeed(busboy)
    : Effect.promise(() =>
        import("@fastify/busboy").then(
          (m) => (busboy = (m as unknown as { readonly default: { readonly Busboy: typeof Busboy } }).default.Busboy)
        )
      )
)

/** Whether the request says it carries a multipart form. */
export const isMultipart = (req: http.IncomingMessage): boolean =>
  /^multipart\/form-data\b/i.test(String(req.headers["content-type"] ?? ""))

/**
 * Parses the request's multipart body (or `buffered`, when the body was already read, e.g. for
 * an idempotency key), spooling files to a temporary directory removed when `scope` closes.
 */
export const parseMultipart: (
  req: http.IncomingMessage,
  limits?: MultipartLimits,
  buffered?: Buffer
) => Effect.Effect<MultipartForm, MultipartError, Scope.Scope> = Effect.fnUntraced(function* (
  req: http.IncomingMessage,
  limits: MultipartLimits = {},
  buffered?: Buffer
) {
  const contentType = String(req.headers["content-type"] ?? "")
  if (!/^multipart\/form-data\b/i.test(contentType)) {
    if (!buffered) req.resume()
    return yield* Effect.fail(
      new MultipartError(
        415,
        `expected a multipart/form-data body, got ${contentType === "" ? "no content type" : contentType.slice(0, 100)}`,
        "unsupported_media_type"
      )
    )
  }
  if (!/boundary=/i.test(contentType)) {
    if (!buffered) req.resume()
    return yield* Effect.fail(new MultipartError(400, "the multipart/form-data content type names no boundary", "invalid_multipart"))
  }
  const dir = yield* Effect.acquireRelease(
    Effect.promise(() => fs.promises.mkdtemp(path.join(os.tmpdir(), "gateway-upload-"))),
    (d) => Effect.promise(() => fs.promises.rm(d, { recursive: true, force: true }).catch(() => undefined))
  )
  const Busboy = yield* loadBusboy
  return yield* Effect.async<MultipartForm, MultipartError>((resume) => {
    const maxFileBytes = limits.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES
    const maxFiles = limits.maxFiles ?? 16
    const maxFields = limits.maxFields ?? 64
    const maxFieldBytes = limits.maxFieldBytes ?? 1024 * 1024
    const fields: Record<string, Array<string>> = {}
    // In the order the parts came, whichever finished writing first.
    const files: Array<UploadedFile | undefined> = []
    const writing: Array<Promise<void>> = []
    let settled = false
    let parser: ReturnType<typeof Busboy>
    const source: Readable = buffered ? Readable.from([buffered], { objectMode: false }) : req
    const fail = (e: MultipartError) => {
      if (settled) return
      settled = true
      source.unpipe(parser)
      // The rest of the upload is read and dropped, so the answer can still be written.
      if (!buffered) req.resume()
      resume(Effect.fail(e))
    }
    try {
      parser = Busboy({
        headers: req.headers as http.IncomingHttpHeaders & { "content-type": string },
        limits: {
          fileSize: maxFileBytes,
          files: maxFiles,
          fields: maxFields,
          fieldSize: maxFieldBytes,
          fieldNameSize: 200,
          parts: maxFiles + maxFields
        }
      })
    } catch (e) {
      fail(new MultipartError(400, `the multipart body could not be read: ${(e as Error).message}`, "invalid_multipart"))
      return
    }
    parser.on("field", (name, value, _nameTruncated, valueTruncated) => {
      if (valueTruncated)
        return fail(
          new MultipartError(
            413,
            `the field '${name.slice(0, 100)}' is larger than ${maxFieldBytes} bytes`,
            "field_too_large",
            name.slice(0, 100)
          )
        )
      ;(fields[name] ??= []).push(value)
    })
    parser.on("file", (name, stream, filename, _encoding, mimeType) => {
      if (settled) return void stream.resume()
      const slot = files.push(undefined) - 1
      const target = path.join(dir, crypto.randomUUID())
      const out = fs.createWriteStream(target)
      let size = 0
      stream.on("data", (chunk: Buffer) => (size += chunk.length))
      stream.on("limit", () =>
        fail(
          new MultipartError(
            413,
            `the file in '${name.slice(0, 100)}' is larger than ${maxFileBytes} bytes`,
            "file_too_large",
            name.slice(0, 100)
          )
        )
      )
      writing.push(
        new Promise<void>((done) => {
          out.on("finish", () => {
            files[slot] = { field: name, filename: filename ?? "", mimeType: mimeType || "application/octet-stream", path: target, size }
            done()
          })
          out.on("error", (e) => {
            fail(new MultipartError(413, `the upload could not be stored: ${e.message}`, "upload_not_stored"))
            done()
          })
        })
      )
      stream.pipe(out)
    })
    parser.on("filesLimit", () => fail(new MultipartError(413, `more than ${maxFiles} files`, "too_many_files")))
    parser.on("fieldsLimit", () => fail(new MultipartError(413, `more than ${maxFields} fields`, "too_many_fields")))
    parser.on("partsLimit", () => fail(new MultipartError(413, `more than ${maxFiles + maxFields} parts`, "too_many_parts")))
    parser.on("error", (e: unknown) =>
      fail(
        new MultipartError(400, `the multipart body could not be read: ${e instanceof Error ? e.message : String(e)}`, "invalid_multipart")
      )
    )
    parser.on("finish", () => {
      void Promise.all(writing).then(() => {
        if (settled) return
        settled = true
        resume(Effect.succeed({ fields, files: files.filter((f): f is UploadedFile => f !== undefined) }))
      })
    })
    source.on("error", () => fail(new MultipartError(400, "the upload ended before it was complete", "incomplete_upload")))
    source.pipe(parser)
    return Effect.sync(() => {
      settled = true
      source.unpipe(parser)
    })
  })
})

// ---------------------------------------------------------------- multipart out (to upstreams)

/** A part of a form sent upstream: a text field, a file in memory, or an upload on disk (streamed). */
export type FormPart =
  | { readonly name: string; readonly value: string }
  | { readonly name: string; readonly filename: string; readonly contentType: string; readonly data: Buffer }
  | { readonly name: string; readonly filename: string; readonly contentType: string; readonly path: string; readonly size: number }

/** A body sent upstream: in memory, or streamed (from uploads on disk) with its length known. */
export interface OutgoingBody {
  readonly data: Buffer | Readable
  readonly contentType: string
  readonly length: number
}

/** A name inside `Content-Disposition`: quotes and line breaks escaped the way browsers (and undici's FormData) do. */
const quoted = (s: string): string => s.replace(/"/g, "%22").replace(/\r/g, "%0D").replace(/\n/g, "%0A")

/**
 * A `multipart/form-data` body of `parts`, in order. Uploads on disk are streamed from their
 * files as the upstream reads them (never whole in memory); the length is exact, so the upstream
 * gets a `Content-Length`. Build one per try: a streamed body can be sent once.
 */
export const multipartBody = (parts: ReadonlyArray<FormPart>): OutgoingBody => {
  const boundary = `----gateway${crypto.randomUUID().replace(/-/g, "")}`
  const pieces: Array<Buffer | { readonly path: string; readonly size: number }> = []
  for (const p of parts) {
    if ("value" in p) {
      pieces.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${quoted(p.name)}"\r\n\r\n${p.value}\r\n`, "utf8"))
      continue
    }
    pieces.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(p.name)}"; filename="${quoted(p.filename)}"\r\nContent-Type: ${quoted(p.contentType)}\r\n\r\n`,
        "utf8"
      )
    )
    pieces.push("data" in p ? p.data : { path: p.path, size: p.size }, Buffer.from("\r\n"))
  }
  pieces.push(Buffer.from(`--${boundary}--\r\n`))
  const contentType = `multipart/form-data; boundary=${boundary}`
  const length = pieces.reduce((n, p) => n + (Buffer.isBuffer(p) ? p.length : p.size), 0)
  if (pieces.every((p) => Buffer.isBuffer(p))) return { data: Buffer.concat(pieces as Array<Buffer>), contentType, length }
  return { data: Readable.from(streamPieces(pieces), { objectMode: false }), contentType, length }
}

/** The pieces of a multipart body in order, files read as they are reached (one generator function, not one per body). */
async function* streamPieces(pieces: ReadonlyArray<Buffer | { readonly path: string; readonly size: number }>) {
  for (const p of pieces) {
    if (Buffer.isBuffer(p)) yield p
    else for await (const chunk of fs.createReadStream(p.path)) yield chunk as Buffer
  }
}

/** An upload sent upstream as the raw body (Deepgram), streamed from its file. */
export const uploadBody = (file: UploadedFile, contentType: string): OutgoingBody => ({
  data: fs.createReadStream(file.path),
  contentType,
  length: file.size
})
