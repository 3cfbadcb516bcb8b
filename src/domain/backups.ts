import * as Schema from "effect/Schema"
import { strict } from "./parse.js"

/** Why a backup exists: taken on request, by the schedule, or just before a restore replaced the database. */
export const BackupKind = Schema.Literal("manual", "scheduled", "pre-restore")
export type BackupKind = typeof BackupKind.Type

/**
 * A backup's id: its creation time (UTC, to the millisecond) and kind, e.g.
 * `20240501T130000123Z-manual`; the file is `DATA_DIR/backups/<id>.db`. The pattern keeps ids
 * from naming anything outside that folder.
 */
export const BACKUP_ID_PATTERN = /^\d{8}T\d{9}Z-(manual|scheduled|pre-restore)(-\d{1,4})?$/

export const BackupId = Schema.String.pipe(
  Schema.filter((s) => BACKUP_ID_PATTERN.test(s), {
    message: () => "id must name a backup as listed by GET /api/db-backups (e.g. 20240501T130000123Z-manual)"
  })
)

export const BackupView = Schema.Struct({
  id: Schema.String,
  createdAt: Schema.String,
  /** Bytes on disk. */
  size: Schema.Number,
  kind: BackupKind
})
export type BackupView = typeof BackupView.Type

export const BackupList = Schema.Struct({ backups: Schema.Array(BackupView) })

export const RestoreBackup = Schema.Struct({ id: BackupId }).annotations(strict)

/** What a restore (of a named backup or an upload) did. */
export const RestoreResult = Schema.Struct({
  restored: Schema.String,
  /** The backup of the state the restore replaced (kind `pre-restore`). */
  safetyBackup: BackupView,
  /** Migrations applied after the swap, when the restored database was older than this build. */
  migrated: Schema.Array(Schema.String)
})
export type RestoreResult = typeof RestoreResult.Type

/**
 * `GET /api/db-backups/exportAll?includeKey=true`: the archive then carries the storage key,
 * sealed with the passphrase sent in the `X-Export-Passphrase` header (never in the URL, which
 * access logs and shell histories keep: a `passphrase` query parameter is refused).
 */
export const ExportAllQuery = Schema.Struct({
  includeKey: Schema.optional(Schema.Literal("true", "false")),
  passphrase: Schema.optional(Schema.String)
})

export const EXPORT_PASSPHRASE_HEADER = "x-export-passphrase"
