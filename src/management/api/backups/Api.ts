import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, NotFound, PayloadTooLarge, ServiceUnavailable } from "../../../domain/errors.js"
import { BackupList, BackupView, ExportAllQuery, RestoreBackup, RestoreResult } from "../../../domain/backups.js"
import { ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, Roles } from "../Roles.js"

/** A SQLite database file as a response body. */
const SqliteFile = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/vnd.sqlite3" })

/** A gzipped tar archive as a response body (`GET /api/db-backups/exportAll`, src/management/sync/Archive.ts). */
const ArchiveFile = HttpApiSchema.withEncoding(Schema.Uint8ArrayFromSelf, { kind: "Uint8Array", contentType: "application/gzip" })

/** Backups of the database: list, create, restore, download, upload (docs/operations.md); 409 on PostgreSQL (docs/scale-out.md). */
export class BackupsGroup extends HttpApiGroup.make("backups")
  .add(HttpApiEndpoint.get("list", "/api/db-backups").addSuccess(BackupList).addError(Conflict))
  .add(HttpApiEndpoint.put("create", "/api/db-backups").addSuccess(BackupView, { status: 201 }).addError(Conflict))
  .add(
    HttpApiEndpoint.post("restore", "/api/db-backups")
      .setPayload(RestoreBackup)
      .addSuccess(RestoreResult)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(ServiceUnavailable)
  )
  .add(HttpApiEndpoint.get("export", "/api/db-backups/export").addSuccess(SqliteFile).addError(Conflict))
  /**
   * The body is the database file or an exportAll archive, raw (any content type but JSON) or as the
   * `file` field of a multipart/form-data form; read by the handler as a stream.
   */
  .add(
    HttpApiEndpoint.post("import", "/api/db-backups/import")
      .addSuccess(RestoreResult)
      .addError(BadRequest)
      .addError(PayloadTooLarge)
      .addError(Conflict)
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.get("exportAll", "/api/db-backups/exportAll")
      .setUrlParams(ExportAllQuery)
      .addSuccess(ArchiveFile)
      .addError(BadRequest)
      .addError(Conflict)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, ADMIN_ONLY) {}
