import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { NotImplemented, PayloadTooLarge } from "../../domain/errors.js"
import { Backups } from "../../store/Backups.js"
import { ManagementApi } from "../Api.js"

/** The largest upload `POST /api/db-backups/import` takes (GATEWAY_BACKUP_IMPORT_MAX_MB, default 1024). */
const ImportLimit = Config.number("GATEWAY_BACKUP_IMPORT_MAX_MB").pipe(
  Config.withDefault(1024),
  Config.map((mb) => Math.floor(mb * 1024 * 1024))
)

const removeFile = (file: string) => Effect.sync(() => fs.rmSync(file, { force: true }))

/** A file as a download, deleted once sent (or once the client went away). */
const download = (file: string, filename: string) =>
  Effect.sync(() => {
    const size = fs.statSync(file).size
    const stream = NodeStream.fromReadable<Error, Uint8Array>(
      () => fs.createReadStream(file).once("close", () => fs.rmSync(file, { force: true })),
      (e) => (e instanceof Error ? e : new Error(String(e)))
    )
    return HttpServerResponse.stream(stream, {
      contentType: "application/vnd.sqlite3",
      contentLength: size,
      headers: { "content-disposition": `attachment; filename="${filename}"` }
    })
  })

const stampNow = () => new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")

/** Database backups (docs/operations.md, "Backups"). */
export const BackupsLive = HttpApiBuilder.group(ManagementApi, "backups", (handlers) =>
  Effect.gen(function* () {
    const backups = yield* Backups
    const importLimit = yield* Effect.orDie(ImportLimit)
    return handlers
      .handle("list", () => Effect.map(backups.list, (list) => ({ backups: list })))
      .handle("create", () => backups.create("manual"))
      .handle("restore", ({ payload }) => Effect.flatMap(backups.fileOf(payload.id), (file) => backups.restoreFile(file, payload.id)))
      .handle("export", () => Effect.flatMap(backups.snapshot, (file) => download(file, `gateway-${stampNow()}.db`)))
      .handle("import", () =>
        Effect.gen(function* () {
          const req = yield* HttpServerRequest.HttpServerRequest
          const declared = Number(req.headers["content-length"] ?? NaN)
          if (declared > importLimit) return yield* Effect.fail(new PayloadTooLarge({ message: `upload exceeds ${importLimit} bytes (GATEWAY_BACKUP_IMPORT_MAX_MB)` }))
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
            if (written > importLimit) return yield* Effect.fail(new PayloadTooLarge({ message: `upload exceeds ${importLimit} bytes (GATEWAY_BACKUP_IMPORT_MAX_MB)` }))
            if (copied._tag === "Left") return yield* Effect.die(copied.left)
            return yield* backups.restoreFile(file, "the uploaded file")
          }).pipe(Effect.ensuring(removeFile(file)))
        })
      )
      .handle("exportAll", () =>
        Effect.fail(
          new NotImplemented({
            message:
              "GET /api/db-backups/exportAll (database plus configuration, key only with a passphrase) is not built yet: use GET /api/db-backups/export for the database; the storage key is DATA_DIR's key file"
          })
        )
      )
  })
)
