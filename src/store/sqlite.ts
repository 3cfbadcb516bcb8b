/**
 * What only SQLite says: connection pragmas, the change counter behind `StoreVersion.layer`,
 * and the file checks of `gateway doctor`. The one module besides `dialect.ts` (and the
 * SQLite migration set) where SQLite-only SQL may appear; a PostgreSQL store brings its own
 * counterpart (docs/ARCHITECTURE.md, "Seam 3: the store dialect").
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"

/** How long a statement waits for another process's write lock before SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000

/**
 * Per-connection settings. WAL is set by the client itself; the busy timeout lets the CLI and
 * a running server share the file; `synchronous = NORMAL` is durable with WAL at commit
 * boundaries and avoids an fsync per transaction.
 */
export const configure = (sql: SqlClient.SqlClient) =>
  Effect.all([sql.unsafe(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`), sql.unsafe("PRAGMA synchronous = NORMAL"), sql.unsafe("PRAGMA foreign_keys = ON")], {
    discard: true
  })

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
