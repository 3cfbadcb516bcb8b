import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as path from "node:path"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { BadRequest, Conflict } from "../../domain/errors.js"
import { DB_FILENAME } from "../../platform/store/Db.js"
import { migrateToPostgres as migrate } from "../migrateToPostgres.js"
import { DatabaseUrl, parseDatabaseUrl } from "../../platform/store/StoreKind.js"
import type { Parsed } from "../handler.js"
import { printJson, table } from "../output.js"
import { cliConfig } from "../root.js"
import type { migrateToPostgresOptions } from "./db.js"

export const migrateToPostgres = (opts: Parsed<typeof migrateToPostgresOptions>) =>
  Effect.gen(function* () {
    const overrides = yield* cliConfig
    const { dataDir } = yield* Effect.provide(AppConfig, AppConfig.layer(overrides)).pipe(
      Effect.mapError((e) => new BadRequest({ message: String(e) }))
    )
    const from = Option.match(opts.from, { onNone: () => path.join(dataDir, DB_FILENAME), onSome: (f) => path.resolve(f) })
    const to = Option.isSome(opts.to)
      ? yield* Either.match(parseDatabaseUrl(opts.to.value), {
          onLeft: (reason) => Effect.fail(new BadRequest({ message: `--to: ${reason.replace(/^DATABASE_URL /, "the URL ")}` })),
          onRight: (url) => Effect.succeed(Redacted.make(url))
        })
      : yield* DatabaseUrl.pipe(
          Effect.mapError((e) => new BadRequest({ message: String(e).replace(/^\(Invalid data at \): /, "") })),
          Effect.flatMap(
            Option.match({
              onNone: () =>
                Effect.fail(new BadRequest({ message: "--to: no PostgreSQL URL (pass --to postgres://… or set DATABASE_URL)" })),
              onSome: Effect.succeed
            })
          )
        )
    const result = yield* migrate({ from, to, force: opts.force }).pipe(
      Effect.catchTag("MigrateError", (e) =>
        Effect.fail(e.conflict ? new Conflict({ message: e.message }) : new BadRequest({ message: e.message }))
      )
    )
    if (opts.json) return yield* printJson(result)
    yield* Console.log(
      table(
        ["TABLE", "ROWS"],
        result.tables.map((t) => [t.table, String(t.rows)])
      )
    )
    yield* Console.log(
      `copied ${result.rows} rows in ${result.tables.length} tables from ${result.from} to ${result.to}${result.replaced ? " (its previous contents replaced)" : ""}; row counts verified. Start the gateway with DATABASE_URL set to that database.`
    )
    yield* Console.log(
      `files: ${result.files.copied} copied into the database file store (${result.files.bytes} bytes)${result.files.missing.length > 0 ? `; ${result.files.missing.length} had no bytes on disk: ${result.files.missing.slice(0, 5).join(", ")}${result.files.missing.length > 5 ? ", …" : ""}` : ""}`
    )
  })
