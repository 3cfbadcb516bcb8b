/**
 * The store dialect: the few things SQLite and PostgreSQL spell differently, written once in
 * the form both accept, so every query elsewhere in src/ stays portable (docs/ARCHITECTURE.md,
 * "Seam 3: the store dialect"). Plain functions, no service: nothing here depends on which
 * database is behind the SqlClient, so nothing is looked up per request.
 *
 * SQLite-only statements (pragmas, `data_version`, file checks) live in `sqlite.ts`; the
 * migrations in `migrations/` are the SQLite set. `test/store.dialect.test.ts` fails on
 * SQLite-only SQL anywhere else in src/.
 */
import type * as SqlClient from "@effect/sql/SqlClient"

export type StoreRow = Readonly<Record<string, string | number | Uint8Array | null>>

/**
 * `INSERT ... ON CONFLICT (key) DO UPDATE SET` every other column of the rows to the new value:
 * what `INSERT OR REPLACE` did for tables whose only unique key is `key` and whose rows name
 * every column, in the form SQLite (>= 3.24) and PostgreSQL both take. All rows must have the
 * same columns. Of several rows with the same key the last wins, as it did with REPLACE;
 * they are reduced to one before the statement (PostgreSQL refuses to update a row twice in
 * one statement).
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

/**
 * Rows a write statement changed, from the driver's raw result (`sql\`...\`.raw`):
 * better-sqlite3's `changes`, node-postgres's `rowCount`.
 */
export const rowsChanged = (raw: unknown): number => {
  const r = raw as { readonly changes?: unknown; readonly rowCount?: unknown } | null
  const n = r?.changes ?? r?.rowCount
  return typeof n === "number" ? n : typeof n === "bigint" ? Number(n) : 0
}
