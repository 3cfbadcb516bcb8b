/**
 * What only SQLite says: connection pragmas, the change counter behind `StoreVersion.layer`,
 * and the file checks of `gateway doctor`. The one module besides `dialect.ts` (and the
 * SQLite migration set) where SQLite-only SQL may appear; a PostgreSQL store brings its own
 * counterpart (docs/ARCHITECTURE.md, "Seam 3: the store dialect").
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type BetterSqlite3 from "better-sqlite3"
import * as Effect from "effect/Effect"
import { createRequire } from "node:module"

/** better-sqlite3, loaded when first used: `gateway doctor` reports a native module that does not load. */
const openFile = (file: string, options: BetterSqlite3.Options): BetterSqlite3.Database => {
  const Database = createRequire(import.meta.url)("better-sqlite3") as typeof BetterSqlite3
  return new Database(file, options)
}

/** How long a statement waits for another process's write lock before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000

/**
 * Per-connection settings. WAL is set by the client itself; the busy timeout lets the CLI and
 * a running server share the file; `synchronous = NORMAL` is durable with WAL at commit
 * boundaries and avoids an fsync per transaction.
 */
export const configure = (sql: SqlClient.SqlClient) =>
  Effect.all(
    [
      sql.unsafe(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`),
      sql.unsafe("PRAGMA synchronous = NORMAL"),
      sql.unsafe("PRAGMA foreign_keys = ON")
    ],
    {
      discard: true
    }
  )

/**
 * SQLite's change counter for this connection: it changes when another connection (another
 * process) commits to the file, and not for this connection's own commits.
 */
export const dataVersion = (sql: SqlClient.SqlClient): Effect.Effect<number> =>
  sql<{ data_version: number }>`PRAGMA data_version`.pipe(
    Effect.map((rows) => rows[0]?.data_version ?? 0),
    Effect.orDie
  )

/** The synchronous better-sqlite3 handle `gateway doctor` opens on the file. */
export interface SqliteHandle {
  prepare(sql: string): { get(...params: Array<unknown>): unknown }
}

/** The SQLite library's version (`doctor`'s native-module check). */
export const engineVersion = (db: SqliteHandle): string => (db.prepare("select sqlite_version() as v").get() as { v: string }).v

/** `doctor`'s file check: `ok` or the first problems found, and the journal mode (`wal` expected). */
export const fileHealth = (db: SqliteHandle): { readonly integrity: string; readonly journalMode: string } => ({
  integrity: (db.prepare("PRAGMA quick_check").get() as { quick_check: string }).quick_check,
  journalMode: (db.prepare("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode
})

/**
 * What `checkDatabaseFile` found in a candidate database (a backup, an upload): the integrity
 * check's first problem, or the migrations it carries when it is a gateway database.
 */
export type FileCheck =
  | { readonly _tag: "Ok"; readonly migrations: ReadonlyArray<number> }
  | { readonly _tag: "Invalid"; readonly reason: string }

/**
 * Opens `file` read-only (its own connection, never the live one), runs `PRAGMA integrity_check`
 * and reads `schema_migrations`. A file that is not SQLite, is damaged, or lacks the gateway's
 * migration table answers `Invalid` with a one-line reason.
 */
export const checkDatabaseFile = (file: string): FileCheck => {
  let db: BetterSqlite3.Database | undefined
  try {
    db = openFile(file, { readonly: true, fileMustExist: true })
    const problems = (db.prepare("PRAGMA integrity_check(3)").all() as Array<{ integrity_check: string }>).map((r) => r.integrity_check)
    if (problems.length !== 1 || problems[0] !== "ok") return { _tag: "Invalid", reason: `integrity check failed: ${problems.join("; ")}` }
    const table = db.prepare("select name from sqlite_master where type = 'table' and name = 'schema_migrations'").get()
    if (table === undefined) return { _tag: "Invalid", reason: "not a gateway database (no schema_migrations table)" }
    const rows = db.prepare("select migration_id as id from schema_migrations order by migration_id").all() as Array<{ id: number }>
    return { _tag: "Ok", migrations: rows.map((r) => Number(r.id)) }
  } catch (e) {
    return { _tag: "Invalid", reason: `not a readable SQLite database: ${e instanceof Error ? e.message : String(e)}` }
  } finally {
    db?.close()
  }
}

/** The target's write lock was held by another connection (a batch commit, another process): nothing was copied. */
export class TargetBusy extends Error {
  readonly _tag = "TargetBusy"
  constructor(readonly target: string) {
    super(`the database ${target} was locked by another writer; nothing was copied`)
  }
}

/**
 * Copies `source` into the database file at `target` with SQLite's online backup API, in one write transaction; the caller
 * keeps its own connection idle. A locked target rejects with `TargetBusy` (docs/internals.md#seam-3-the-store-dialect).
 */
export const copyDatabase = (source: string, target: string): Promise<void> => {
  const src = openFile(source, { readonly: true, fileMustExist: true })
  return src
    .backup(target, { progress: () => 0x7fffffff })
    .then((progress) => {
      if (progress.totalPages === 0) throw new TargetBusy(target)
    })
    .finally(() => src.close())
}

/**
 * The gateway's tables in a file (not SQLite's own, not `schema_migrations`), each after the
 * tables its foreign keys reference: the order `gateway db migrate-to-postgres` copies them in.
 */
export const tablesInDependencyOrder = (sql: SqlClient.SqlClient) =>
  Effect.gen(function* () {
    const names = (yield* sql<{
      name: string
    }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations' ORDER BY name`).map(
      (r) => r.name
    )
    const refs = new Map<string, Array<string>>()
    for (const t of names)
      refs.set(
        t,
        (yield* sql.unsafe<{ table: string }>(`PRAGMA foreign_key_list("${t.replace(/"/g, '""')}")`)).map((r) => r.table)
      )
    const ordered: Array<string> = []
    const visit = (t: string, path: ReadonlyArray<string>) => {
      if (ordered.includes(t) || path.includes(t)) return
      for (const r of refs.get(t) ?? []) if (r !== t && names.includes(r)) visit(r, [...path, t])
      ordered.push(t)
    }
    for (const t of names) visit(t, [])
    return ordered
  })

/** A table's column names in a file, in declaration order. */
export const columnsOf = (sql: SqlClient.SqlClient, table: string) =>
  Effect.map(sql.unsafe<{ name: string }>(`PRAGMA table_info("${table.replace(/"/g, '""')}")`), (rows) => rows.map((r) => r.name))

/**
 * Up to `limit` rows of `table` after the row `after` (SQLite's rowid; 0 to start), in rowid
 * order, each with its rowid as `__rowid`: a table read in batches without OFFSET.
 */
export const rowsAfter = (sql: SqlClient.SqlClient, table: string, after: number, limit: number) =>
  sql.unsafe<Record<string, unknown>>(
    `SELECT rowid AS __rowid, * FROM "${table.replace(/"/g, '""')}" WHERE rowid > ? ORDER BY rowid LIMIT ?`,
    [after, limit]
  )
