import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { BACKUP_ID_PATTERN } from "../../domain/backups.js"
import { NotFound } from "../../domain/errors.js"
import { Backups } from "../../store/Backups.js"
import { withLocalGateway } from "../local.js"
import { printJson, table } from "../output.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

/** `gateway backup`: a manual backup of the local database now; prints its id. `--list` lists them. */
export const backupCommand = Command.make(
  "backup",
  { list: Options.boolean("list").pipe(Options.withDescription("List the backups instead of creating one.")), json },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const backups = yield* Backups
        if (opts.list) {
          const list = yield* backups.list
          if (opts.json) return yield* printJson({ backups: list })
          if (list.length === 0) return yield* Console.log("no backups yet: create one with `gateway backup`")
          return yield* Console.log(table(["ID", "CREATED", "SIZE", "KIND"], list.map((b) => [b.id, b.createdAt, String(b.size), b.kind])))
        }
        const made = yield* backups.create("manual")
        if (opts.json) return yield* printJson(made)
        yield* Console.log(made.id)
        yield* Console.error(`backup ${made.id} written (${made.size} bytes); restore it with \`gateway restore ${made.id}\``)
      })
    )
).pipe(Command.withDescription("Back up the local database (SQLite online backup) into DATA_DIR/backups; prints the backup id."))

/** `gateway restore <id|file>`: the same checks and safety backup as `POST /api/db-backups`. */
export const restoreCommand = Command.make(
  "restore",
  { source: Args.text({ name: "id|file" }).pipe(Args.withDescription("A backup id (gateway backup --list) or a database file.")), json },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const backups = yield* Backups
        const file = BACKUP_ID_PATTERN.test(opts.source)
          ? yield* backups.fileOf(opts.source)
          : fs.existsSync(opts.source)
            ? path.resolve(opts.source)
            : yield* Effect.fail(new NotFound({ message: `${JSON.stringify(opts.source)} is neither a backup id nor a file` }))
        const result = yield* backups.restoreFile(file, opts.source)
        if (opts.json) return yield* printJson(result)
        yield* Console.log(`restored ${opts.source}; the previous state is backup ${result.safetyBackup.id}`)
      })
    )
).pipe(Command.withDescription("Replace the local database with a backup or a database file, after an integrity and schema check and a safety backup."))
