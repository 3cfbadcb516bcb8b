/**
 * `gateway db migrate-to-postgres`: copies a SQLite database into PostgreSQL in one transaction, whole or not at all
 * (docs/scale-out.md, "Moving a SQLite database to PostgreSQL").
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as fs from "node:fs"
import { dbFileStore } from "../inference/files/dbFileStore.js"
import * as path from "node:path"
import { migrate } from "../platform/store/Db.js"
import { connectError, typeParsers } from "../platform/store/postgres.js"
import * as Sqlite from "../platform/store/sqlite.js"
import { maskUrl } from "../platform/store/StoreKind.js"

export class MigrateError extends Data.TaggedError("MigrateError")<{ readonly message: string; readonly conflict?: boolean }> {}

export interface TableCopied {
  readonly table: string
  readonly rows: number
}

export interface MigrateResult {
  readonly from: string
  readonly to: string
  readonly migrations: number
  readonly tables: ReadonlyArray<TableCopied>
  readonly rows: number
  readonly replaced: boolean
  /**
   * The bytes of `/v1/files`: a SQLite gateway keeps them on disk beside its database
   * (`DATA_DIR/files/<id>`); they are copied into the database file store (`file_objects`,
   * `file_chunks`), which a gateway on PostgreSQL reads by default. `missing`: files whose bytes
   * were not on disk (their rows are copied; reading them answers 404, as it would have).
   */
  readonly files: { readonly copied: number; readonly bytes: number; readonly missing: ReadonlyArray<string> }
}

/** Rows per INSERT (PostgreSQL takes at most 65535 parameters per statement; no table has 60 columns). */
const BATCH = 500

const INTEGER_TYPES = new Set(["bigint", "integer", "smallint"])

/**
 * Runs a statement of the source outside the target's transaction: @effect/sql keeps the open
 * transaction's connection in the context under one tag for every client, so a SQLite statement
 * inside the PostgreSQL transaction would otherwise be sent to PostgreSQL.
 */
const onSource = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.mapInputContext(
    effect,
    (ctx: Context.Context<never>) => Context.omit(SqlClient.TransactionConnection)(ctx) as Context.Context<never>
  )

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`

export const migrateToPostgres = (options: { readonly from: string; readonly to: Redacted.Redacted<string>; readonly force: boolean }) =>
  Effect.scoped(
    Effect.gen(function* () {
      const display = maskUrl(Redacted.value(options.to))
      if (!fs.existsSync(options.from))
        return yield* new MigrateError({
          message: `--from ${options.from}: no such file (the gateway's SQLite database is DATA_DIR/gateway.db)`
        })
      const check = Sqlite.checkDatabaseFile(options.from)
      if (check._tag === "Invalid") return yield* new MigrateError({ message: `--from ${options.from}: ${check.reason}` })

      const src = yield* SqliteClient.make({ filename: options.from }).pipe(
        Effect.mapError((e) => new MigrateError({ message: `--from ${options.from}: ${String(e)}` }))
      )
      yield* Effect.orDie(Sqlite.configure(src))
      yield* Effect.provideService(migrate, SqlClient.SqlClient, src).pipe(
        Effect.mapError(
          (e) => new MigrateError({ message: `--from ${options.from}: cannot bring it to this build's schema: ${e.message}` })
        )
      )

      const dst = yield* PgClient.make({
        url: options.to,
        maxConnections: 2,
        connectTimeout: Duration.seconds(10),
        applicationName: "gateway-migrate",
        types: typeParsers() as never
      }).pipe(Effect.mapError((e) => new MigrateError({ message: connectError(options.to, e) })))
      const applied = yield* Effect.provideService(migrate, SqlClient.SqlClient, dst).pipe(
        Effect.mapError((e) => new MigrateError({ message: `--to ${display}: cannot apply the PostgreSQL migrations: ${e.message}` }))
      )
      const migrations = (yield* Effect.orDie(dst<{ n: number }>`SELECT count(*) AS n FROM schema_migrations`))[0]?.n ?? applied.length

      // `store_changes` is SQLite's change counter for its caches (migration 0021), not data:
      // PostgreSQL's caches listen to notifications, its own row stays as its migration made it.
      const tables = (yield* Effect.orDie(Sqlite.tablesInDependencyOrder(src))).filter((t) => t !== "store_changes")
      const target = yield* Effect.orDie(
        dst<{
          table_name: string
          column_name: string
          data_type: string
        }>`SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema()`
      )
      const targetColumns = new Map<string, Map<string, string>>()
      for (const c of target) {
        const m = targetColumns.get(c.table_name) ?? new Map<string, string>()
        m.set(c.column_name, c.data_type)
        targetColumns.set(c.table_name, m)
      }
      const missing = tables.filter((t) => !targetColumns.has(t))
      if (missing.length > 0)
        return yield* new MigrateError({
          message: `the source has tables the PostgreSQL schema lacks: ${missing.join(", ")} (made by a newer gateway?)`
        })

      // Refuse a target that holds anything, unless asked to replace it.
      const occupied: Array<string> = []
      for (const t of tables) {
        const n = (yield* Effect.orDie(dst.unsafe<{ n: number }>(`SELECT count(*) AS n FROM ${quote(t)}`)))[0]?.n ?? 0
        if (n > 0) occupied.push(`${t} (${n} rows)`)
      }
      if (occupied.length > 0 && !options.force) {
        return yield* new MigrateError({
          conflict: true,
          message: `--to ${display} is not empty: ${occupied.join(", ")}. Use an empty database, or --force to replace its contents`
        })
      }

      const copyAll = Effect.gen(function* () {
        if (occupied.length > 0) yield* dst.unsafe(`TRUNCATE ${tables.map(quote).join(", ")} RESTART IDENTITY CASCADE`)
        const copied: Array<TableCopied> = []
        for (const table of tables) {
          const columns = yield* onSource(Sqlite.columnsOf(src, table))
          const types = targetColumns.get(table)!
          const unknown = columns.filter((c) => !types.has(c))
          if (unknown.length > 0)
            return yield* new MigrateError({ message: `${table}: columns the PostgreSQL schema lacks: ${unknown.join(", ")}` })
          let after = 0
          let rows = 0
          for (;;) {
            const batch = yield* onSource(Sqlite.rowsAfter(src, table, after, BATCH))
            if (batch.length === 0) break
            after = Number(batch[batch.length - 1]!.__rowid)
            const out = batch.map((row) => {
              const r: Record<string, unknown> = {}
              for (const c of columns) {
                const v = row[c]
                // SQLite keeps whatever a column is given; PostgreSQL's integers take integers only.
                r[c] = typeof v === "number" && INTEGER_TYPES.has(types.get(c)!) && !Number.isInteger(v) ? Math.round(v) : v
              }
              return r
            })
            yield* dst`INSERT INTO ${dst(table)} ${dst.insert(out)}`.pipe(
              Effect.mapError(
                (e) =>
                  new MigrateError({
                    message: `${table}: a row does not fit PostgreSQL (nothing was copied): ${String((e.cause as Error | undefined)?.message ?? e.message)}`
                  })
              )
            )
            rows += batch.length
          }
          copied.push({ table, rows })
        }
        // Identity columns continue after the copied ids.
        for (const [table, column] of [
          ["usage", "id"],
          ["audit_log", "id"]
        ] as const) {
          if (!tables.includes(table)) continue
          yield* dst.unsafe(
            `SELECT setval(pg_get_serial_sequence('${table}', '${column}'), COALESCE((SELECT max(${column}) FROM ${table}), 0) + 1, false)`
          )
        }
        // Every table holds what the source holds.
        for (const c of copied) {
          const inSource = (yield* onSource(src.unsafe<{ n: number }>(`SELECT count(*) AS n FROM ${quote(c.table)}`)))[0]?.n ?? 0
          const inTarget = (yield* dst.unsafe<{ n: number }>(`SELECT count(*) AS n FROM ${quote(c.table)}`))[0]?.n ?? 0
          if (inSource !== c.rows || inTarget !== c.rows) {
            return yield* new MigrateError({
              message: `${c.table}: ${inSource} rows in the source, ${c.rows} copied, ${inTarget} in the target; nothing was copied (stop the gateway before migrating: the source must not change meanwhile)`
            })
          }
        }
        // The files' bytes, from the disk beside the source into the database file store (after
        // the row counts: these tables were just checked as copied from the source).
        const runtime = yield* Effect.runtime<never>()
        const store = dbFileStore(dst, runtime)
        const stored = new Set((yield* onSource(src<{ id: string }>`SELECT id FROM file_objects`)).map((r) => r.id))
        const fileIds = tables.includes("files")
          ? (yield* onSource(src<{ id: string }>`SELECT id FROM files ORDER BY id`)).map((r) => r.id)
          : []
        const files = { copied: 0, bytes: 0, missing: [] as Array<string> }
        for (const id of fileIds) {
          if (stored.has(id)) continue
          const onDisk = path.join(path.dirname(options.from), "files", id)
          if (!/^[A-Za-z0-9_-]{1,128}$/.test(id) || !fs.existsSync(onDisk)) {
            files.missing.push(id)
            continue
          }
          const put = yield* store.put(id, fs.createReadStream(onDisk), Number.MAX_SAFE_INTEGER).pipe(
            Effect.mapError(
              (e) =>
                new MigrateError({
                  message: `file ${id}: its bytes could not be copied (nothing was copied): ${e._tag === "FileNotStored" ? e.message : "too large"}`
                })
            )
          )
          files.copied++
          files.bytes += put.bytes
        }
        return { copied, files }
      })

      // One write transaction on the target; the counts check catches a source that changed meanwhile.
      const { copied, files } = yield* dst.withTransaction(copyAll).pipe(
        Effect.catchTag("SqlError", (e) =>
          Effect.fail(
            new MigrateError({
              message: `copy failed, nothing was copied: ${String((e.cause as Error | undefined)?.message ?? e.message)}`
            })
          )
        )
      )
      return {
        from: options.from,
        to: display,
        migrations,
        tables: copied,
        rows: copied.reduce((n, c) => n + c.rows, 0),
        replaced: occupied.length > 0,
        files
      } satisfies MigrateResult
    })
  ).pipe(Effect.provide(Reactivity.layer))
