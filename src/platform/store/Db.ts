import * as Migrator from "@effect/sql/Migrator"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { AppConfig } from "../config/AppConfig.js"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { REPLACING } from "./BatchWriter.js"
import { loader } from "./migrations/index.js"
import { SqliteWriterThread } from "./SqliteWriterThread.js"
import { StoreHealth } from "./StoreHealth.js"
import * as Sqlite from "./sqlite.js"
import { DatabaseUrl, maskUrl, StoreKind, type StoreKindShape } from "./StoreKind.js"

export const DB_FILENAME = "gateway.db"

const runMigrations = Migrator.make({})

/**
 * Applies this build's migrations not yet in the database; answers the ones applied
 * (`0009_files_batches`). The set is the SQLite one unless the client is PostgreSQL's.
 */
export const migrate = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.flatMap(
    // The PostgreSQL set is loaded only for a PostgreSQL client.
    sql.onDialectOrElse({
      pg: () => Effect.promise(() => import("./migrations-pg/index.js")).pipe(Effect.map((m) => m.loader)),
      orElse: () => Effect.succeed(loader)
    }),
    (set) =>
      Effect.map(runMigrations({ loader: set, table: "schema_migrations" }), (applied) =>
        applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`)
      )
  )
)

/**
 * PostgreSQL: the migrations under an advisory lock held by a connection of its own, so gateways
 * starting together on an empty database migrate one after the other (the second finds the
 * work done) instead of racing to create `schema_migrations`. (Not one transaction: the
 * migrator probes for its table with a statement that may fail, which would abort it.)
 */
const MIGRATION_LOCK = 7_023_512_641
const migrateLocked = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.scoped(
    Effect.gen(function* () {
      const lock = yield* sql.reserve
      yield* lock.executeRaw(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`, [])
      return yield* migrate.pipe(Effect.ensuring(Effect.ignore(lock.executeRaw(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`, []))))
    })
  )
)

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

/** The PostgreSQL migration set, after the collation check (src/platform/store/postgres.ts). */
const preparePg = (check: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown>) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* check(sql)
      const applied = yield* migrateLocked
      if (applied.length > 0) yield* Effect.logInfo(`database migrated: ${applied.join(", ")}`)
    }).pipe(Effect.orDie)
  )

/** Where the store is: DATABASE_URL's PostgreSQL server when set, else the SQLite file in `DATA_DIR`. */
export const storeKind = Effect.gen(function* () {
  const { dataDir } = yield* AppConfig
  const url = yield* DatabaseUrl
  return Option.match(url, {
    onNone: (): StoreKindShape => ({ _tag: "sqlite", file: path.join(dataDir, DB_FILENAME) }),
    onSome: (u): StoreKindShape => ({ _tag: "postgres", url: u, display: maskUrl(Redacted.value(u)) })
  })
})

/**
 * The PostgreSQL client on `url` with its migration set applied. The driver is loaded here, on
 * first use: a SQLite gateway never loads it. A server that cannot be reached stops the start
 * with one line naming DATABASE_URL (password masked).
 */
export const postgresLayer = (url: Redacted.Redacted<string>) =>
  Layer.unwrapEffect(
    Effect.map(
      Effect.promise(() => import("./postgres.js")),
      (pg) =>
        preparePg(pg.checkCollation).pipe(
          Layer.provideMerge(pg.clientLayer(url)),
          Layer.catchAll((e) => Layer.die(e._tag === "SqlError" ? new Error(pg.connectError(url, e)) : e))
        )
    )
  )

/**
 * The store, migrated before anything reads it: the SQLite file in `DATA_DIR` (created on first
 * use), or PostgreSQL when DATABASE_URL is set (docs/scale-out.md, "PostgreSQL"). Provides the
 * SqlClient, `StoreKind` and `StoreHealth` (whether it takes writes; the rows waiting for it).
 */
export const layer = Layer.unwrapEffect(
  Effect.gen(function* () {
    const kind = yield* storeKind
    if (kind._tag === "postgres") return Layer.mergeAll(postgresLayer(kind.url), Layer.succeed(StoreKind, kind), StoreHealth.layer)
    const { dataDir } = yield* AppConfig
    yield* Effect.sync(() => fs.mkdirSync(dataDir, { recursive: true }))
    // The database lives here: a directory the gateway cannot write stops the start with one line.
    const unwritable = yield* Effect.sync(() => writeProblem(dataDir))
    if (unwritable !== undefined) return Layer.die(new Error(unwritable))
    const client = prepare.pipe(Layer.provideMerge(SqliteClient.layer({ filename: kind.file })))
    // The batch writer's thread (src/platform/store/SqliteWriterThread.ts), started on the migrated file.
    const thread = Layer.unwrapEffect(
      Effect.as(SqlClient.SqlClient, SqliteWriterThread.layer(kind.file, REPLACING as Record<string, ReadonlyArray<string>>))
    )
    return Layer.mergeAll(thread.pipe(Layer.provideMerge(client)), Layer.succeed(StoreKind, kind), StoreHealth.layer)
  })
).pipe(Layer.orDie)

/** Why the gateway cannot keep its SQLite database in `dir`, or undefined when it can. */
const writeProblem = (dir: string): string | undefined => {
  try {
    fs.accessSync(dir, fs.constants.W_OK)
    return undefined
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    const why =
      code === "EROFS"
        ? "is on a read-only file system"
        : code === "EACCES" || code === "EPERM"
          ? "is not writable by this user"
          : `cannot be written (${code})`
    return `the data directory ${dir} ${why}: the gateway keeps its SQLite database there (DATA_DIR); mount it read-write, or set DATA_DIR to a writable directory`
  }
}

export const now = (): number => Date.now()

/** Epoch ms as ISO 8601; null for none (or a time that is not one: NaN, ±Infinity, beyond year 275760). */
export const toIso = (ms: number | null | undefined): string | null => {
  if (ms === null || ms === undefined) return null
  const d = new Date(ms)
  return Number.isNaN(d.getTime()) ? null : d.toISOString()
}

/**
 * Runs `use` on a second connection to `file`, closed afterwards. Its commits are another
 * connection's to the live one, so `PRAGMA data_version` moves and every cache reloads
 * (StoreVersion), as after a restore. Used to apply a configuration bundle (src/management/sync/ConfigBundle.ts).
 */
export const withSecondConnection = <A, E>(file: string, use: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* SqliteClient.make({ filename: file })
      yield* Effect.orDie(Sqlite.configure(sql))
      return yield* use(sql)
    })
  ).pipe(Effect.provide(Reactivity.layer))
