import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import type * as http from "node:http"
import * as path from "node:path"
import { EXPORT_PASSPHRASE_HEADER } from "../../../domain/backups.js"
import { BadRequest, Conflict, PayloadTooLarge } from "../../../domain/errors.js"
import { field, filesOf, parseMultipart } from "../../../platform/http/multipart.js"
import { AppConfig } from "../../../platform/config/AppConfig.js"
import { Backups } from "../../../platform/store/Backups.js"
import { Secrets } from "../../../platform/store/Secrets.js"
import { ARCHIVE, databaseOf, ENV_FILE, isArchive, storageKeyHex, writeArchive } from "../../sync/Archive.js"
import { ConfigBundle } from "../../sync/ConfigBundle.js"
import * as Envelope from "../../sync/envelope.js"
import { VERSION } from "../../../kernel/version.js"
import { ManagementApi } from "../Api.js"

/** The largest upload `POST /api/db-backups/import` takes (GATEWAY_BACKUP_IMPORT_MAX_MB, default 1024). */
const ImportLimit = Config.number("GATEWAY_BACKUP_IMPORT_MAX_MB").pipe(
  Config.withDefault(1024),
  Config.map((mb) => Math.floor(mb * 1024 * 1024))
)

const removeFile = (file: string) => Effect.sync(() => fs.rmSync(file, { force: true }))

/** A file as a download, deleted once sent (or once the client went away). */
const download = (file: string, filename: string, contentType = "application/vnd.sqlite3") =>
  Effect.sync(() => {
    const size = fs.statSync(file).size
    const stream = NodeStream.fromReadable<Error, Uint8Array>(
      () => fs.createReadStream(file).once("close", () => fs.rmSync(file, { force: true })),
      (e) => (e instanceof Error ? e : new Error(String(e)))
    )
    return HttpServerResponse.stream(stream, {
      contentType,
      contentLength: size,
      headers: { "content-disposition": `attachment; filename="${filename}"` }
    })
  })

const stampNow = () =>
  new Date()
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z")

/** Database backups (docs/operations.md, "Backups"). */
export const layer = HttpApiBuilder.group(ManagementApi, "backups", (handlers) =>
  Effect.gen(function* () {
    const backups = yield* Backups
    const bundle = yield* ConfigBundle
    const secrets = yield* Secrets
    const { dataDir } = yield* AppConfig
    const importLimit = yield* Effect.orDie(ImportLimit)
    const tooLarge = () => new PayloadTooLarge({ message: `upload exceeds ${importLimit} bytes (GATEWAY_BACKUP_IMPORT_MAX_MB)` })

    /** Restores an uploaded file: a database as it is, an exportAll archive by its database. */
    const restoreUpload = (file: string, label: string) =>
      Effect.gen(function* () {
        if (!(yield* Effect.sync(() => isArchive(file)))) return yield* backups.restoreFile(file, label)
        const found = yield* databaseOf(file, path.dirname(backups.tempFile("")), label)
        return yield* backups.restoreFile(found.db, label).pipe(Effect.ensuring(removeFile(found.db)))
      })

    /** `multipart/form-data` with the file in the `file` field: parsed with the inference plane's parser, spooled to disk. */
    const importForm = (req: HttpServerRequest.HttpServerRequest) =>
      Effect.scoped(
        Effect.gen(function* () {
          const form = yield* parseMultipart(req.source as http.IncomingMessage, {
            maxFileBytes: importLimit,
            maxFiles: 1,
            maxFields: 8
          }).pipe(Effect.mapError((e) => (e.status === 413 ? tooLarge() : new BadRequest({ message: `file: ${e.message}` }))))
          const upload = filesOf(form, "file")[0]
          if (!upload) {
            const text = field(form, "file")
            return yield* new BadRequest({
              message:
                text === undefined
                  ? "file: the form has no file field (send the database or archive as the 'file' part)"
                  : "file: must be a file part, not a text field"
            })
          }
          return yield* restoreUpload(
            upload.path,
            upload.filename ? `the uploaded file ${JSON.stringify(upload.filename.slice(0, 100))}` : "the uploaded file"
          )
        })
      )

    /** The exportAll archive in a temporary file (src/management/sync/Archive.ts lists what is in it). */
    const exportAll = (passphrase: string | undefined) =>
      Effect.gen(function* () {
        const snapshot = yield* backups.snapshot
        return yield* Effect.gen(function* () {
          const config = yield* bundle.current("stored")
          const envFile = path.join(dataDir, ENV_FILE)
          const env = passphrase !== undefined && fs.existsSync(envFile) ? fs.readFileSync(envFile) : undefined
          const sealed: Array<{ name: string; data: string }> = []
          if (passphrase !== undefined) {
            const key = yield* storageKeyHex(secrets)
            sealed.push({ name: ARCHIVE.key, data: Envelope.seal(JSON.stringify({ format: "gateway-storage-key", key }), passphrase) })
            if (env) sealed.push({ name: ARCHIVE.env, data: Envelope.seal(env, passphrase) })
          }
          const manifest = {
            format: "gateway-archive",
            version: 1,
            gatewayVersion: VERSION,
            createdAt: new Date().toISOString(),
            entries: [ARCHIVE.db, ARCHIVE.config, ...sealed.map((e) => e.name)],
            includesKey: passphrase !== undefined,
            migrations: config.migrations
          }
          const out = backups.tempFile(".tar.gz")
          yield* Effect.tryPromise({
            try: () =>
              writeArchive(out, [
                { name: ARCHIVE.manifest, data: JSON.stringify(manifest, null, 2) },
                { name: ARCHIVE.db, file: snapshot },
                { name: ARCHIVE.config, data: JSON.stringify(config, null, 2) },
                ...sealed
              ]),
            catch: (e) => e
          }).pipe(
            Effect.tapError(() => removeFile(out)),
            Effect.orDie
          )
          return out
        }).pipe(Effect.ensuring(removeFile(snapshot)))
      })
    // On PostgreSQL every backup route answers 409 saying to use pg_dump (backups.unavailable).
    const available = backups.unavailable === undefined ? Effect.void : Effect.fail(new Conflict({ message: backups.unavailable }))
    return handlers
      .handle("list", () =>
        Effect.zipRight(
          available,
          Effect.map(backups.list, (list) => ({ backups: list }))
        )
      )
      .handle("create", () => Effect.zipRight(available, backups.create("manual")))
      .handle("restore", ({ payload }) =>
        Effect.zipRight(
          available,
          Effect.flatMap(backups.fileOf(payload.id), (file) => backups.restoreFile(file, payload.id))
        )
      )
      .handle("export", () =>
        Effect.zipRight(
          available,
          Effect.flatMap(backups.snapshot, (file) => download(file, `gateway-${stampNow()}.db`))
        )
      )
      .handle("import", () =>
        Effect.gen(function* () {
          yield* available
          const req = yield* HttpServerRequest.HttpServerRequest
          const declared = Number(req.headers["content-length"] ?? NaN)
          if (declared > importLimit) return yield* Effect.fail(tooLarge())
          if (/^multipart\/form-data\b/i.test(req.headers["content-type"] ?? "")) return yield* importForm(req)
          const file = backups.tempFile(".upload")
          return yield* Effect.gen(function* () {
            const fd = fs.openSync(file, "w")
            let written = 0
            const copied = yield* req.stream.pipe(
              Stream.runForEachWhile((chunk) =>
                Effect.sync(() => {
                  written += chunk.byteLength
                  if (written > importLimit) return false
                  fs.writeSync(fd, chunk)
                  return true
                })
              ),
              Effect.either,
              Effect.ensuring(Effect.sync(() => fs.closeSync(fd)))
            )
            if (written > importLimit)
              return yield* Effect.fail(
                new PayloadTooLarge({ message: `upload exceeds ${importLimit} bytes (GATEWAY_BACKUP_IMPORT_MAX_MB)` })
              )
            if (copied._tag === "Left") return yield* Effect.die(copied.left)
            return yield* restoreUpload(file, "the uploaded file")
          }).pipe(Effect.ensuring(removeFile(file)))
        })
      )
      .handle("exportAll", ({ urlParams }) =>
        Effect.gen(function* () {
          yield* available
          if (urlParams.passphrase !== undefined) {
            return yield* new BadRequest({
              message: `passphrase: send it in the X-Export-Passphrase header, not in the URL (URLs end up in logs)`
            })
          }
          const req = yield* HttpServerRequest.HttpServerRequest
          const passphrase = req.headers[EXPORT_PASSPHRASE_HEADER]
          const includeKey = urlParams.includeKey === "true"
          if (includeKey && (passphrase === undefined || passphrase.length < 8)) {
            return yield* new BadRequest({
              message:
                "includeKey=true needs a passphrase of at least 8 characters in the X-Export-Passphrase header: the storage key leaves the gateway only sealed with it"
            })
          }
          const file = yield* exportAll(includeKey ? passphrase : undefined)
          return yield* download(file, `gateway-${stampNow()}.tar.gz`, "application/gzip")
        })
      )
  })
)
