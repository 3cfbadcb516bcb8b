import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json } from "../options.js"

const impl = () => import("./db.impl.js")

export const migrateToPostgresOptions = {
  from: Options.text("from").pipe(Options.withDescription("The SQLite database to copy (default: DATA_DIR/gateway.db)."), Options.optional),
  to: Options.text("to").pipe(Options.withDescription("The PostgreSQL URL to copy into (default: DATABASE_URL)."), Options.optional),
  force: Options.boolean("force").pipe(Options.withDescription("Replace the contents of a target database that is not empty.")),
  json
}

/**
 * `gateway db migrate-to-postgres`: the SQLite database into PostgreSQL, every table in one
 * transaction, row counts verified (src/cli/migrateToPostgres.ts, docs/scale-out.md).
 */
const migrateToPostgres = Command.make(
  "migrate-to-postgres",
  migrateToPostgresOptions,
  lazy(impl, (m) => m.migrateToPostgres)
).pipe(
  Command.withDescription(
    "Copy the SQLite database into a PostgreSQL database: migrates the target, refuses one that is not empty (unless --force), copies every table in one transaction, checks the row counts and prints them per table. Stop the gateway first."
  )
)

/** `gateway db ...`: the store itself. */
export const dbCommand = Command.make("db").pipe(
  Command.withDescription("The gateway's database: move a SQLite database into PostgreSQL (docs/scale-out.md)."),
  Command.withSubcommands([migrateToPostgres])
)
