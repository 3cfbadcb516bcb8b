import * as Migrator from "@effect/sql/Migrator"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../config/AppConfig.js"
import { loader } from "./migrations/index.js"
import * as Sqlite from "./sqlite.js"

export const DB_FILENAME = "gateway.db"

const runMigrations = Migrator.make({})

/** Applies this build's migrations not yet in the database; answers the ones applied (`0009_files_batches`). */
export const migrate = Effect.map(runMigrations({ loader, table: "schema_migrations" }), (applied) => applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`))

/** The migration numbers this build knows: a database carrying any other was made by a newer gateway. */
export const knownMigrations = Effect.map(Effect.orDie(loader), (all) => all.map(([id]) => id))

/** Connection settings (`sqlite.ts`) and the SQLite migration set. */
const prepare = Layer.effectDiscard(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* Sqlite.configure(sql)
    const applied = yield* migrate
    if (applied.length > 0) {
      yield* Effect.logInfo(`database migrated: ${applied.join(", ")}`)
    }
  }).pipe(Effect.orDie)
)

/** The SQLite file in `DATA_DIR`, created on first use, migrated before anything reads it. */
export const layer = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { dataDir } = yield* AppConfig
    yield* Effect.sync(() => fs.mkdirSync(dataDir, { recursive: true }))
    const client = SqliteClient.layer({ filename: path.join(dataDir, DB_FILENAME) })
    return prepare.pipe(Layer.provideMerge(client))
  })
).pipe(Layer.orDie)

export const now = (): number => Date.now()

export const toIso = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined ? null : new Date(ms).toISOString()

/**
 * Runs `use` on a second connection to `file`, closed afterwards. Its commits are another
 * connection's to the live one, so `PRAGMA data_version` moves and every cache reloads
 * (StoreVersion), as after a restore. Used to apply a configuration bundle (src/sync/Bundle.ts).
 */
export const withSecondConnection = <A, E>(file: string, use: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqliteClient.make({ filename: file })
      yield* Effect.orDie(Sqlite.configure(sql))
      return yield* use(sql)
    })
  ).pipe(Effect.provide(Reactivity.layer))
