import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { BACKUP_ID_PATTERN } from "../../domain/backups.js"
import { BadRequest, Conflict, NotFound } from "../../domain/errors.js"
import { Backups } from "../../platform/store/Backups.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { ARCHIVE, databaseOf, isArchive, openStorageKey } from "../../management/sync/Archive.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { printJson, table } from "../output.js"
import type { backupOptions, restoreOptions } from "./backup.js"

export const backup = (opts: Parsed<typeof backupOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const backups = yield* Backups
      if (backups.unavailable !== undefined) return yield* new Conflict({ message: backups.unavailable })
      if (opts.list) {
        const list = yield* backups.list
        if (opts.json) return yield* printJson({ backups: list })
        if (list.length === 0) return yield* Console.log("no backups yet: create one with `gateway backup`")
        return yield* Console.log(
          table(
            ["ID", "CREATED", "SIZE", "KIND"],
            list.map((b) => [b.id, b.createdAt, String(b.size), b.kind])
          )
        )
      }
      const made = yield* backups.create("manual")
      if (opts.json) return yield* printJson(made)
      yield* Console.log(made.id)
      yield* Console.error(`backup ${made.id} written (${made.size} bytes); restore it with \`gateway restore ${made.id}\``)
    })
  )

export const restore = (opts: Parsed<typeof restoreOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const backups = yield* Backups
      if (backups.unavailable !== undefined) return yield* new Conflict({ message: backups.unavailable })
      const file = BACKUP_ID_PATTERN.test(opts.source)
        ? yield* backups.fileOf(opts.source)
        : fs.existsSync(opts.source)
          ? path.resolve(opts.source)
          : yield* Effect.fail(new NotFound({ message: `${JSON.stringify(opts.source)} is neither a backup id nor a file` }))
      if (!isArchive(file)) {
        if (Option.isSome(opts.passphrase))
          return yield* new BadRequest({ message: "--passphrase is for exportAll archives; this is a database file" })
        const result = yield* backups.restoreFile(file, opts.source)
        if (opts.json) return yield* printJson(result)
        return yield* Console.log(`restored ${opts.source}; the previous state is backup ${result.safetyBackup.id}`)
      }
      const found = yield* databaseOf(file, path.dirname(backups.tempFile("")), opts.source, [ARCHIVE.key])
      return yield* Effect.gen(function* () {
        const sealedKey = found.files[ARCHIVE.key]
        // The key is opened before anything changes: a wrong passphrase restores nothing.
        const key = Option.isSome(opts.passphrase)
          ? sealedKey
            ? yield* openStorageKey(fs.readFileSync(sealedKey, "utf8"), opts.passphrase.value)
            : yield* new BadRequest({ message: `${opts.source} carries no storage key (exported without includeKey=true)` })
          : undefined
        const secrets = yield* Secrets
        if (key !== undefined && secrets.source === "env") {
          return yield* new BadRequest({
            message:
              "STORAGE_ENCRYPTION_KEY is set, so the key file is not used: restore without --passphrase and set that variable to the archived key yourself"
          })
        }
        const result = yield* backups.restoreFile(found.db, opts.source)
        let keyNote = ""
        if (key !== undefined) {
          const current = fs.existsSync(secrets.keyFile) ? fs.readFileSync(secrets.keyFile, "utf8").trim() : ""
          if (current !== key) {
            if (current) fs.copyFileSync(secrets.keyFile, `${secrets.keyFile}.${result.safetyBackup.id}.bak`)
            fs.writeFileSync(secrets.keyFile, key + "\n", { mode: 0o600 })
            keyNote = `; storage key restored into ${secrets.keyFile} (the previous one kept as ${path.basename(secrets.keyFile)}.${result.safetyBackup.id}.bak): restart a running server`
          }
        }
        if (opts.json) return yield* printJson({ ...result, storageKey: key !== undefined })
        yield* Console.log(`restored ${opts.source}; the previous state is backup ${result.safetyBackup.id}${keyNote}`)
      }).pipe(Effect.ensuring(Effect.sync(() => Object.values(found.files).forEach((f) => fs.rmSync(f, { force: true })))))
    })
  )
