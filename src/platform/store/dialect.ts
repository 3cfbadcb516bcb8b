/**
 * The store dialect: what SQLite and PostgreSQL spell differently, written once in a form both accept, as plain functions.
 * SQLite-only SQL lives in `sqlite.ts` and the migrations; test/store.dialect.test.ts fails on it anywhere else in src/
 * (docs/internals.md#seam-3-the-store-dialect).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"

export type StoreRow = Readonly<Record<string, string | number | Uint8Array | null>>

/**
 * `INSERT ... ON CONFLICT (key) DO UPDATE SET` every other column (the portable `INSERT OR REPLACE`). Rows must share columns;
 * of several with one key the last wins, reduced before the statement (PostgreSQL will not update a row twice in one).
 */
export const upsert = (sql: SqlClient.SqlClient, table: string, rows: StoreRow | ReadonlyArray<StoreRow>, key: ReadonlyArray<string>) => {
  const list = Array.isArray(rows) ? lastPerKey(rows as ReadonlyArray<StoreRow>, key) : [rows as StoreRow]
  const columns = Object.keys(list[0] ?? {})
  const keyFragments = key.map((k) => sql`${sql(k)}`)
  const updates = columns.filter((c) => !key.includes(c)).map((c) => sql`${sql(c)} = excluded.${sql(c)}`)
  const inserted = sql.insert(list as Array<Record<string, unknown>>)
  return updates.length === 0
    ? sql`INSERT INTO ${sql(table)} ${inserted} ON CONFLICT (${sql.csv(keyFragments)}) DO NOTHING`
    : sql`INSERT INTO ${sql(table)} ${inserted} ON CONFLICT (${sql.csv(keyFragments)}) DO UPDATE SET ${sql.csv(updates)}`
}

const lastPerKey = (rows: ReadonlyArray<StoreRow>, key: ReadonlyArray<string>): ReadonlyArray<StoreRow> => {
  if (rows.length < 2) return rows
  const byKey = new Map<string, StoreRow>()
  for (const row of rows) {
    const id = key.map((k) => String(row[k])).join("\u0000")
    // Deleted first so the survivor takes the position of the last write.
    byKey.delete(id)
    byKey.set(id, row)
  }
  return byKey.size === rows.length ? rows : Array.from(byKey.values())
}

/** The width of a usage bucket. */
export type TimeBucket = "hour" | "day"

const BUCKET_MS: Record<TimeBucket, number> = { hour: 3_600_000, day: 86_400_000 }

/**
 * SQL for the start (epoch ms, UTC) of the hour or day holding `column`, an epoch-ms integer
 * column: integer arithmetic, the same in both databases (no `strftime`, no `date_trunc`).
 * `column` is an identifier from code, never input. Group by it and label with `bucketLabel`.
 */
export const bucketStart = (column: string, unit: TimeBucket): string => {
  const ms = BUCKET_MS[unit]
  // Both databases give `%` the sign of the dividend: the outer `% ms` floors instants before 1970 too.
  return `(${column} - ((${column} % ${ms}) + ${ms}) % ${ms})`
}

/**
 * A bucket's label as the usage API shows it: `2024-05-01T13:00:00Z` for an hour, `2024-05-01`
 * for a day. Takes what the driver returned for `bucketStart` (a number, or a string for a
 * PostgreSQL bigint).
 */
export const bucketLabel = (start: number | string, unit: TimeBucket): string => {
  const iso = new Date(Number(start)).toISOString()
  return unit === "day" ? iso.slice(0, 10) : `${iso.slice(0, 13)}:00:00Z`
}

/**
 * `sql.withTransaction(effect)` with a COMMIT (or ROLLBACK) that failed as the failure it is:
 * the platform makes it a defect, which a writer's `catchAll` does not see (a disk that filled up
 * at the COMMIT killed the writer it happened in). Background writers use this one.
 */
export const transaction = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.catchAllDefect(sql.withTransaction(effect), (defect) => (defect instanceof SqlError ? Effect.fail(defect) : Effect.die(defect)))

/** The driver's code of a failed statement: on the error, or on its cause (an SqlError wraps it). */
const driverCode = (error: unknown): string => {
  let e = error
  for (let depth = 0; depth < 3 && typeof e === "object" && e !== null; depth++) {
    const code = (e as { readonly code?: unknown }).code
    if (typeof code === "string") return code
    e = (e as { readonly cause?: unknown }).cause
  }
  return ""
}

/**
 * A statement refused because a row with the same unique key exists (a UNIQUE index or the
 * primary key): SQLite's SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY, PostgreSQL's SQLSTATE 23505.
 */
export const isUniqueViolation = (error: unknown): boolean => {
  const code = driverCode(error)
  return code.startsWith("SQLITE_CONSTRAINT_UNIQUE") || code.startsWith("SQLITE_CONSTRAINT_PRIMARYKEY") || code === "23505"
}

/**
 * A statement that lost to another writer and may succeed if tried again: SQLite's
 * SQLITE_BUSY / SQLITE_LOCKED (another process holds the file's write lock past the busy
 * timeout); PostgreSQL's serialization failure (40001), deadlock (40P01) and lock not
 * available (55P03).
 */
export const isBusy = (error: unknown): boolean => {
  const code = driverCode(error)
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") || code === "40001" || code === "40P01" || code === "55P03"
}

/** The innermost message of a failure (an SqlError's own says only "Failed to execute statement"). */
const innerMessage = (error: unknown): string => {
  let e = error
  let message = ""
  for (let depth = 0; depth < 5 && typeof e === "object" && e !== null; depth++) {
    const m = (e as { readonly message?: unknown }).message
    if (typeof m === "string" && m !== "") message = m
    e = (e as { readonly cause?: unknown }).cause
  }
  if (typeof e === "string" && e !== "") message = e
  return message.split("\n")[0]!.slice(0, 300)
}

/** Node's socket errors: the server is not there, or the connection to it broke. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ECONNABORTED"
])

/**
 * Why the store cannot take a write now (full, read-only, failed disk, locked, server unreachable or down), as one line for
 * logs and the 503; undefined for a bad row or a bug. Such a store comes back by itself (docs/resilience.md#when-the-store-fails).
 */
export const unavailableCause = (error: unknown): string | undefined => {
  const code = driverCode(error)
  const message = innerMessage(error)
  const detail = (what: string) => `${what} (${code !== "" && !message.includes(code) ? `${code}: ` : ""}${message || code})`
  if (code.startsWith("SQLITE_FULL")) return detail("the disk holding the database is full")
  if (code.startsWith("SQLITE_READONLY")) return detail("the database is read-only")
  if (code.startsWith("SQLITE_IOERR")) return detail("the database's disk failed")
  if (code.startsWith("SQLITE_CANTOPEN")) return detail("the database file cannot be opened")
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return detail("the database is locked by another writer")
  // The files beside the database (DATA_DIR/files, media results) on the same disk.
  if (code === "ENOSPC" || code === "EDQUOT") return detail("the disk holding the data directory is full")
  if (code === "EROFS") return detail("the data directory is on a read-only file system")
  if (code === "EIO") return detail("the data directory's disk failed")
  if (SOCKET_CODES.has(code)) return detail("the database server is unreachable")
  if (code.startsWith("08")) return detail("the connection to the database server failed")
  if (code === "57P01" || code === "57P02" || code === "57P03") return detail("the database server is shutting down or starting")
  if (code === "53100") return detail("the database server's disk is full")
  if (code.startsWith("53")) return detail("the database server is out of resources")
  if (code === "25006") return detail("the database server is read-only")
  // node-postgres's own words for a connection that ended or never came.
  if (
    /Connection terminated|connection timeout|Connection error|Failed to acquire connection|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
      `${message} ${(error as { message?: string })?.message ?? ""}`
    )
  ) {
    return detail("the database server is unreachable")
  }
  return undefined
}

/** Why the store could not serve a request, when that is what the request died of (a failure or a defect in `cause`). */
export const storeUnavailable = (cause: Cause.Cause<unknown>): string | undefined => {
  for (const e of [...Cause.failures(cause), ...Cause.defects(cause)]) {
    const why = unavailableCause(e)
    if (why !== undefined) return why
  }
  return undefined
}

/**
 * Rows a write statement changed, from the driver's raw result (`sql\`...\`.raw`):
 * better-sqlite3's `changes`, node-postgres's `rowCount`.
 */
export const rowsChanged = (raw: unknown): number => {
  const r = raw as { readonly changes?: unknown; readonly rowCount?: unknown } | null
  const n = r?.changes ?? r?.rowCount
  return typeof n === "number" ? n : typeof n === "bigint" ? Number(n) : 0
}
