import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json } from "../options.js"

const impl = () => import("./backup.impl.js")

export const backupOptions = {
  list: Options.boolean("list").pipe(Options.withDescription("List the backups instead of creating one.")),
  json
}
export const restoreOptions = {
  source: Args.text({ name: "id|file" }).pipe(
    Args.withDescription("A backup id (gateway backup --list), a database file or an exportAll archive (.tar.gz).")
  ),
  passphrase: Options.text("passphrase").pipe(
    Options.withDescription("The archive's passphrase: also restore the storage key it carries (exportAll?includeKey=true)."),
    Options.optional
  ),
  json
}

/** `gateway backup`: a manual backup of the local database now; prints its id. `--list` lists them. */
export const backupCommand = Command.make(
  "backup",
  backupOptions,
  lazy(impl, (m) => m.backup)
).pipe(Command.withDescription("Back up the local database (SQLite online backup) into DATA_DIR/backups; prints the backup id."))

/**
 * `gateway restore <id|file>`: the same checks and safety backup as `POST /api/db-backups`. An
 * exportAll archive restores its database; with `--passphrase` also its storage key (into the key
 * file, the old one kept beside it), which a running server reads at its next start.
 */
export const restoreCommand = Command.make(
  "restore",
  restoreOptions,
  lazy(impl, (m) => m.restore)
).pipe(
  Command.withDescription(
    "Replace the local database with a backup, a database file or an exportAll archive (and, with --passphrase, its storage key), after an integrity and schema check and a safety backup."
  )
)
