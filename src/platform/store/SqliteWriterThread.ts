/**
 * The batch writer's SQLite writes on a worker thread with its own connection: better-sqlite3 blocks the thread it runs on
 * (docs/internals.md#seam-3-the-store-dialect, "The batch writer's thread"; docs/performance.md#the-latency-tail).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createRequire } from "node:module"
import { Worker } from "node:worker_threads"
import { nativeAddonPath } from "../system/nativeAddon.js"
import { BUSY_TIMEOUT_MS } from "./sqlite.js"

/** A row as the batch writer queues it. */
export interface QueuedRow {
  readonly table: string
  readonly row: Readonly<Record<string, string | number | Uint8Array | null>>
}

/** What a batch's write came to: the rows that could not be written, each with the reason. */
export interface BatchResult {
  /** The batch failed as a whole (after the busy timeout) and its rows were written singly. */
  readonly singly: string | undefined
  readonly dropped: ReadonlyArray<{ readonly table: string; readonly error: string }>
  /**
   * The store could not take the write (the disk full, the file read-only, locked past the busy
   * timeout): nothing from row `from` on was written. Its code and message name the cause.
   */
  readonly unavailable?: { readonly code: string; readonly message: string; readonly from: number }
}

/** Rows to delete by one column's values (the write-ahead's rows of ended requests). */
export interface QueuedDelete {
  readonly table: string
  readonly column: string
  readonly values: ReadonlyArray<string | number>
}

export interface SqliteWriter {
  /**
   * Writes the rows in one transaction (one multi-row INSERT per table and column set), then the
   * deletes in the same transaction.
   */
  readonly write: (rows: ReadonlyArray<QueuedRow>, deletes?: ReadonlyArray<QueuedDelete>) => Promise<BatchResult>
  /**
   * `PRAGMA data_version` on the thread's connection: it moves when another connection commits
   * (another process, or this process's main connection), never for the thread's own rows.
   * StoreVersion polls this one when the database has no `store_changes` counter (the main
   * connection's moves with every batch the thread writes).
   */
  readonly dataVersion: () => Promise<number>
  /**
   * False once the thread has failed, and for the layer's writer (startOnFirstCall) also until its
   * thread has started: its callers then use the main connection.
   */
  readonly alive: () => boolean
  /** Closes the worker's connection and ends the thread. */
  readonly close: () => Promise<void>
}

/**
 * The writer thread's nice value: 10 weighs a tenth of the main thread's (0) when they compete
 * for a core, which is still several times what the writes of a saturated gateway need.
 */
const WRITER_NICE = 10

/**
 * Rows per statement: a batch's rows (or a delete's keys) go out in statements of these sizes,
 * largest first, so a table has at most four prepared INSERTs (and four DELETEs) whatever its
 * batches' sizes. One statement per row count, as before, prepared a new statement for most
 * batches (their sizes vary with the load) and kept up to 64 of them, each a program for
 * hundreds of rows: 10–35 MB of SQLite's memory in the writer thread under load. 256 rows of up
 * to 127 columns stay under SQLite's 32766 bound parameters (the usage row has ~21).
 */
const STATEMENT_ROWS = [256, 32, 4, 1]

// CommonJS evaluated from a string, so the bundle, the compiled tree and the tests start it alike; the driver is the path resolved here.
const WORKER_SOURCE = String.raw`
"use strict"
const { parentPort, workerData } = require("node:worker_threads")
// Below the main thread (Linux: the calling thread only), so that where both share a core a
// request preempts a batch rather than wait for it; still enough to keep up under full load.
try { require("node:os").setPriority(0, workerData.nice) } catch {}
// And under SCHED_BATCH (Linux, the native addon built): woken by a batch, it no longer preempts
// the main thread where both share a core (a request waited out the batch's write, ~0.2 ms, about
// 30 times a second under load); its share of the core stays its nice value's, so it keeps up.
if (workerData.addon) try { require(workerData.addon).setBatchPolicy() } catch {}
const Database = require(workerData.driver)
const statements = new Map()
const open = () => {
  const d = new Database(workerData.file)
  d.pragma("busy_timeout = " + workerData.busyTimeoutMs)
  d.pragma("synchronous = NORMAL")
  d.pragma("foreign_keys = ON")
  return d
}
let db = open()
// A connection that found its file read-only (or could not open it) stays so: the next write
// opens it afresh, so writes resume once the mount is writable again.
let reopen = false
const reopened = () => {
  if (!reopen) return
  try { db.close() } catch {}
  statements.clear()
  insertsByColumns.clear()
  db = open()
  writeAll = transaction()
  reopen = false
}
// Failures that are the store's state, not the rows': the batch is kept and tried again.
const UNAVAILABLE = /^SQLITE_(FULL|READONLY|IOERR|CANTOPEN|BUSY|LOCKED)/
const unavailable = (e, from) => {
  const code = String((e && e.code) || "")
  if (!UNAVAILABLE.test(code)) return undefined
  if (/^SQLITE_(READONLY|CANTOPEN)/.test(code)) reopen = true
  return { code, message: String(e && e.message), from }
}
const replacing = workerData.replacing
const quote = (name) => '"' + String(name).replace(/"/g, '""') + '"'
const prepared = (sql) => {
  let s = statements.get(sql)
  if (s === undefined) {
    if (statements.size >= 64) statements.delete(statements.keys().next().value)
    s = db.prepare(sql)
    statements.set(sql, s)
  }
  return s
}
// A run's INSERT for each statement size, by table and column list: looked up once a run, where
// building each statement's SQL text (hundreds of characters) and hashing it to find its
// statement cost more than a small batch's rows. At most 16 column lists (the tables' row shapes
// are a handful) of STATEMENT_ROWS.length statements each: as many as the cache of other statements keeps.
const insertsByColumns = new Map()
const insertsFor = (table, columns) => {
  const id = table + "\u0000" + columns.join("\u0000")
  let bySize = insertsByColumns.get(id)
  if (bySize === undefined) {
    if (insertsByColumns.size >= 16) insertsByColumns.delete(insertsByColumns.keys().next().value)
    bySize = new Map()
    insertsByColumns.set(id, bySize)
  }
  return bySize
}
const value = (v) => (v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v)
// A run: consecutive rows of one table with the same columns, their values in one flat array.
// Rows replacing one another by key: the last of each key, in the position of the last write.
const lastPerKey = (values, columns, key) => {
  const n = columns.length
  const count = values.length / n
  if (count < 2) return values
  const at = key.map((k) => columns.indexOf(k))
  const byKey = new Map()
  for (let r = 0; r < count; r++) {
    const id = at.map((j) => String(values[r * n + j])).join("\u0000")
    byKey.delete(id)
    byKey.set(id, r)
  }
  if (byKey.size === count) return values
  const out = []
  for (const r of byKey.values()) for (let c = 0; c < n; c++) out.push(values[r * n + c])
  return out
}
// The largest statement size that is not more than the rows left.
const STATEMENT_ROWS = ${JSON.stringify(STATEMENT_ROWS)}
const statementRows = (left) => STATEMENT_ROWS.find((size) => size <= left)
const insertSql = (table, columns, rows, key) => {
  const one = "(" + columns.map(() => "?").join(", ") + ")"
  let sql = "INSERT INTO " + quote(table) + " (" + columns.map(quote).join(", ") + ") VALUES " + new Array(rows).fill(one).join(", ")
  if (key) {
    const updates = columns.filter((c) => !key.includes(c)).map((c) => quote(c) + " = excluded." + quote(c))
    sql += " ON CONFLICT (" + key.map(quote).join(", ") + ") " + (updates.length === 0 ? "DO NOTHING" : "DO UPDATE SET " + updates.join(", "))
  }
  return sql
}
// binary: the values may hold Uint8Arrays (a batch cloned, not sent as JSON), which bind as Buffers.
const insert = (table, columns, values, binary) => {
  const key = replacing[table]
  const n = columns.length
  const list = key ? lastPerKey(values, columns, key) : values
  const count = list.length / n
  const bySize = insertsFor(table, columns)
  for (let i = 0, rows; i < count; i += rows) {
    rows = statementRows(count - i)
    let statement = bySize.get(rows)
    if (statement === undefined) {
      statement = db.prepare(insertSql(table, columns, rows, key))
      bySize.set(rows, statement)
    }
    const part = i === 0 && rows === count ? list : list.slice(i * n, (i + rows) * n)
    statement.run(binary ? part.map(value) : part)
  }
}
const remove = (d) => {
  for (let i = 0, rows; i < d.values.length; i += rows) {
    rows = statementRows(d.values.length - i)
    const part = d.values.slice(i, i + rows)
    prepared("DELETE FROM " + quote(d.table) + " WHERE " + quote(d.column) + " IN (" + part.map(() => "?").join(", ") + ")").run(part)
  }
}
const transaction = () => db.transaction((runs, deletes, binary) => {
  for (const r of runs) insert(r.table, r.columns, r.values, binary)
  if (deletes) for (const d of deletes) remove(d)
})
let writeAll = transaction()
parentPort.on("message", (m) => {
  if (m.dataVersion) {
    parentPort.postMessage({ id: m.id, version: db.pragma("data_version", { simple: true }) })
    return
  }
  if (m.close) {
    try { db.close() } catch {}
    parentPort.postMessage({ id: m.id, closed: true })
    return
  }
  let singly
  const dropped = []
  // Packed by the main thread (pack, below): JSON when no value is binary (one string to copy).
  const binary = m.json === undefined
  const runs = binary ? m.runs : JSON.parse(m.json)
  try {
    reopened()
    writeAll.immediate(runs, m.deletes, binary)
  } catch (e) {
    const down = unavailable(e, 0)
    if (down) {
      parentPort.postMessage({ id: m.id, singly, dropped, unavailable: down })
      return
    }
    // The batch as a whole failed: rows one by one, so one bad row cannot take the others with it.
    singly = String(e && e.message)
    let i = 0
    for (const r of runs) {
      const n = r.columns.length
      for (let at = 0; at < r.values.length; at += n, i++) {
        try {
          insert(r.table, r.columns, r.values.slice(at, at + n), binary)
        } catch (e2) {
          const downNow = unavailable(e2, i)
          if (downNow) {
            parentPort.postMessage({ id: m.id, singly, dropped, unavailable: downNow })
            return
          }
          dropped.push({ table: r.table, error: String(e2 && e2.message) })
        }
      }
    }
    for (const d of m.deletes || []) {
      try {
        remove(d)
      } catch (e2) {
        const downNow = unavailable(e2, i)
        if (downNow) {
          parentPort.postMessage({ id: m.id, singly, dropped, unavailable: downNow })
          return
        }
        dropped.push({ table: d.table, error: String(e2 && e2.message) })
      }
    }
  }
  parentPort.postMessage({ id: m.id, singly, dropped })
})
`

interface Run {
  readonly table: string
  readonly columns: ReadonlyArray<string>
  readonly values: Array<string | number | Uint8Array | null>
}

/**
 * A batch as the thread takes it: runs of consecutive rows of one table and column set, each
 * run's values in one flat array (the batch's order kept, so a failure's `from` is a row's index),
 * sent as one JSON string unless a value is binary. A structured clone of the row objects cost
 * ~15 µs a usage row on the main thread; a string is copied whole.
 *
 * Every usage row goes through here: a run's columns are listed once (a row joins the run when its
 * keys are the run's, compared in place) and its values array is made at its final size, not
 * grown a row at a time.
 */
const pack = (rows: ReadonlyArray<QueuedRow>): { readonly json: string } | { readonly runs: ReadonlyArray<Run> } => {
  const runs: Array<Run> = []
  let binary = false
  let i = 0
  while (i < rows.length) {
    const table = rows[i]!.table
    const columns = Object.keys(rows[i]!.row)
    let end = i + 1
    while (end < rows.length && rows[end]!.table === table && hasColumns(rows[end]!.row, columns)) end++
    const n = columns.length
    const values = new Array<string | number | Uint8Array | null>(n * (end - i))
    let at = 0
    for (; i < end; i++) {
      const row = rows[i]!.row
      for (let c = 0; c < n; c++) {
        const v = row[columns[c]!]!
        if (typeof v === "object" && v !== null) binary = true
        values[at++] = v
      }
    }
    runs.push({ table, columns, values })
  }
  if (!binary) {
    try {
      return { json: JSON.stringify(runs) }
    } catch {
      // A value JSON cannot hold (a bigint): cloned as it is.
    }
  }
  return { runs }
}

/** Whether the row's keys are `columns`, in their order (`for...in` lists them without making an array). */
const hasColumns = (row: QueuedRow["row"], columns: ReadonlyArray<string>): boolean => {
  let i = 0
  for (const key in row) if (key !== columns[i++]) return false
  return i === columns.length
}

/**
 * Starts the writer thread on `file` and answers its writer at once: calls queue until it is up (~100 ms). `started` rejects
 * when it cannot open the file, and `alive()` is then false. `replacing`: the tables upserted by key (their key columns).
 */
export const startSqliteWriter = (
  file: string,
  replacing: Readonly<Record<string, ReadonlyArray<string>>>
): { readonly writer: SqliteWriter; readonly started: Promise<void> } => {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3")
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { driver, file, busyTimeoutMs: BUSY_TIMEOUT_MS, replacing, nice: WRITER_NICE, addon: nativeAddonPath() }
  })
  // A thread that does nothing keeps no process alive (a CLI command ends when its work does).
  worker.unref()
  let next = 0
  let failure: Error | undefined
  const waiting = new Map<number, { readonly ok: (m: never) => void; readonly fail: (e: Error) => void }>()
  const failAll = (e: Error) => {
    failure = e
    for (const w of waiting.values()) w.fail(e)
    waiting.clear()
  }
  worker.on("message", (m: { readonly id: number }) => {
    const w = waiting.get(m.id)
    waiting.delete(m.id)
    w?.ok(m as never)
  })
  worker.on("error", (e) => failAll(e))
  worker.on("exit", (code) => failAll(new Error(`the SQLite writer thread exited (code ${code})`)))
  const call = <A>(message: Record<string, unknown>): Promise<A> =>
    failure
      ? Promise.reject(failure)
      : new Promise<A>((ok, fail) => {
          const id = next++
          waiting.set(id, { ok: ok as (m: never) => void, fail })
          worker.postMessage({ ...message, id })
        })
  const writer: SqliteWriter = {
    write: (rows, deletes) => call<BatchResult>(deletes === undefined || deletes.length === 0 ? pack(rows) : { ...pack(rows), deletes }),
    dataVersion: () => call<{ readonly version: number }>({ dataVersion: true }).then((m) => m.version),
    alive: () => failure === undefined,
    close: async () => {
      if (failure) return
      await call({ close: true }).catch(() => undefined)
      failure = new Error("the SQLite writer thread is closed")
      await worker.terminate()
    }
  }
  const started = writer.write([]).then(
    () => undefined,
    (e: Error) => {
      failure ??= e
      void worker.terminate()
      throw e
    }
  )
  // Whoever waits for it hears the failure; without a waiter (the scope closed first) it is not an unhandled rejection.
  started.catch(() => undefined)
  return { writer, started }
}

/**
 * A writer whose thread starts at its first call, not before: the thread (its own V8 isolate,
 * better-sqlite3, the file opened) cost ~60 ms of CPU before a gateway's first answer, and a local
 * command that writes nothing paid it too. The batch writer's first batch starts it (it calls
 * without asking `alive()`; the batch waits in the thread's message queue while it starts, ~100 ms,
 * as every call did while a thread started with the store). `alive()` is false until the thread
 * has started, so the callers that ask it first (the in-flight write-ahead, StoreVersion) use the
 * main connection until then: a write-ahead row sent to a thread still starting could commit
 * after the clean stop's delete on the main connection, and be taken for a crashed request at the
 * next start. `onStart` hears the start's outcome. Closed before any call, no thread starts;
 * calls made after `close` fail as the thread's do.
 */
const startOnFirstCall = (
  file: string,
  replacing: Readonly<Record<string, ReadonlyArray<string>>>,
  onStart: (started: Promise<void>) => void
): SqliteWriter => {
  let thread: SqliteWriter | undefined
  let ready = false
  let closed = false
  const started = (): SqliteWriter => {
    if (thread === undefined) {
      const t = startSqliteWriter(file, replacing)
      thread = t.writer
      t.started.then(
        () => {
          ready = true
        },
        () => undefined
      )
      onStart(t.started)
    }
    return thread
  }
  const closedError = () => Promise.reject(new Error("the SQLite writer thread is closed"))
  return {
    write: (rows, deletes) => (closed && thread === undefined ? closedError() : started().write(rows, deletes)),
    dataVersion: () => (closed && thread === undefined ? closedError() : started().dataVersion()),
    alive: () => ready && thread?.alive() === true,
    close: () => {
      closed = true
      return thread === undefined ? Promise.resolve() : thread.close()
    }
  }
}

/**
 * The writer thread of the SQLite file, for the batch writer and StoreVersion, started by the
 * first write (startOnFirstCall); when it cannot start, `alive()` turns false and both use the
 * main connection, as before.
 */
export class SqliteWriterThread extends Context.Tag("gateway/SqliteWriterThread")<
  SqliteWriterThread,
  { readonly writer: SqliteWriter | undefined }
>() {
  static readonly layer = (file: string, replacing: Readonly<Record<string, ReadonlyArray<string>>>) =>
    Layer.scoped(
      SqliteWriterThread,
      Effect.gen(function* () {
        let heard: (started: Promise<void>) => void = () => undefined
        const started = new Promise<void>((ok, fail) => {
          heard = (p) => p.then(ok, fail)
        })
        const writer = yield* Effect.acquireRelease(
          Effect.sync(() => startOnFirstCall(file, replacing, heard)),
          (writer) => Effect.promise(() => writer.close())
        )
        // Waits for the first write's start (interrupted with the scope if none came).
        yield* Effect.forkScoped(
          Effect.catchAll(
            Effect.tryPromise(() => started),
            (e) => Effect.logWarning("the SQLite writer thread did not start; rows are written on the main thread", e.error)
          )
        )
        return { writer }
      })
    )
}
