/**
 * `/v1/files`: the metadata of stored files (table `files`, migration 0009) over the `FileStore`
 * that holds their bytes. Every read names the owner (the calling API key): another key's file
 * is not found, never forbidden. A file past its `expires_at` is not found at once; the sweep
 * (a Schedule, every GATEWAY_FILES_SWEEP_MS, default 60 s) removes its row and bytes.
 * docs/files-batches.md, "Files".
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { StoreHealth } from "../../platform/store/StoreHealth.js"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as crypto from "node:crypto"
import type { Readable } from "node:stream"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { FileNotStored, FileStore, type FileTooLarge, type Stored } from "./FileStore.js"

/** Purposes a client may upload with; `batch_output` is the gateway's own. */
export const UPLOAD_PURPOSES = ["assistants", "batch", "fine-tune", "vision", "user_data", "evals"] as const

export const DEFAULT_MAX_BYTES = 512 * 1024 * 1024
export const MAX_BYTES_ENV = "GATEWAY_FILES_MAX_BYTES"

/** A stored file. Times are epoch ms. */
export interface StoredFile {
  readonly id: string
  readonly owner: string
  readonly filename: string
  readonly purpose: string
  readonly bytes: number
  readonly sha256: string
  readonly status: string
  readonly createdAt: number
  readonly expiresAt: number | null
}

export interface FileList {
  readonly data: ReadonlyArray<StoredFile>
  readonly hasMore: boolean
}

export interface ListOptions {
  readonly purpose?: string | undefined
  readonly limit: number
  readonly after?: string | undefined
  readonly order: "asc" | "desc"
}

export interface NewFile {
  readonly owner: string
  readonly filename: string
  readonly purpose: string
  readonly expiresAt: number | null
}

export interface FilesShape {
  /** The largest upload (GATEWAY_FILES_MAX_BYTES, default 512 MiB). */
  readonly maxBytes: number
  /** A fresh id in OpenAI's form (`file-` and 24 characters). */
  readonly newId: () => string
  /** Stores the bytes under `id` (nothing kept on failure or interruption); `record` makes it a file. */
  readonly put: (id: string, source: Readable, maxBytes?: number) => Effect.Effect<Stored, FileTooLarge | FileNotStored>
  /** The metadata row of bytes already `put`. */
  readonly record: (id: string, file: NewFile, stored: Stored) => Effect.Effect<StoredFile>
  /** Removes bytes that never became a file. */
  readonly discard: (id: string) => Effect.Effect<void>
  /** `put` and `record` in one (the gateway's own files: batch output). */
  readonly create: (file: NewFile, source: Readable) => Effect.Effect<StoredFile, FileTooLarge | FileNotStored>
  /** The owner's file, unless it expired. */
  readonly find: (owner: string, id: string) => Effect.Effect<StoredFile | undefined>
  readonly list: (owner: string, options: ListOptions) => Effect.Effect<FileList>
  /** Deletes the owner's file: false when there was none. */
  readonly remove: (owner: string, id: string) => Effect.Effect<boolean>
  /** The owner's file and its bytes as a stream. */
  readonly content: (owner: string, id: string) => Effect.Effect<{ readonly file: StoredFile; readonly stream: Readable } | undefined>
}

interface Row {
  id: string
  api_key_id: string
  filename: string
  purpose: string
  bytes: number
  sha256: string
  status: string
  created_at: number
  expires_at: number | null
}

const toFile = (r: Row): StoredFile => ({
  id: r.id,
  owner: r.api_key_id,
  filename: r.filename,
  purpose: r.purpose,
  bytes: Number(r.bytes),
  sha256: r.sha256,
  status: r.status,
  createdAt: Number(r.created_at),
  expiresAt: r.expires_at === null ? null : Number(r.expires_at)
})

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
/** `prefix` and 24 random base-62 characters (OpenAI's `file-…`, `batch_…`). */
export const randomId = (prefix: string): string => {
  const bytes = crypto.randomBytes(24)
  let s = prefix
  for (const b of bytes) s += ALPHABET[b % 62]
  return s
}

/** The owner column of a caller: its API key id, '' when the gateway runs without keys. */
export const ownerOf = (apiKeyId: string | null): string => apiKeyId ?? ""

export class Files extends Context.Tag("gateway/Files")<Files, FilesShape>() {
  static readonly layer = Layer.scoped(
    Files,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const health = yield* StoreHealth
      const store = yield* FileStore
      const maxBytes = yield* positiveInteger(MAX_BYTES_ENV, "bytes", DEFAULT_MAX_BYTES)
      const sweepMs = yield* positiveInteger("GATEWAY_FILES_SWEEP_MS", "milliseconds", 60_000)

      const record = (id: string, file: NewFile, stored: Stored) =>
        Effect.gen(function* () {
          const row: Row = {
            id,
            api_key_id: file.owner,
            filename: file.filename,
            purpose: file.purpose,
            bytes: stored.bytes,
            sha256: stored.sha256,
            status: "processed",
            created_at: Date.now(),
            expires_at: file.expiresAt
          }
          yield* sql`INSERT INTO files ${sql.insert(row as never)}`
          return toFile(row)
        }).pipe(Effect.orDie)

      const find = (owner: string, id: string) =>
        Effect.map(
          sql<Row>`SELECT * FROM files WHERE id = ${id} AND api_key_id = ${owner} AND (expires_at IS NULL OR expires_at > ${Date.now()})`,
          (rows) => (rows[0] ? toFile(rows[0]) : undefined)
        ).pipe(Effect.orDie)

      const list = (owner: string, o: ListOptions) =>
        Effect.gen(function* () {
          const now = Date.now()
          const cursor = o.after ? (yield* sql<Row>`SELECT * FROM files WHERE id = ${o.after} AND api_key_id = ${owner}`)[0] : undefined
          const purpose = o.purpose ? sql`AND purpose = ${o.purpose}` : sql``
          const after = cursor
            ? o.order === "asc"
              ? sql`AND (created_at > ${cursor.created_at} OR (created_at = ${cursor.created_at} AND id > ${cursor.id}))`
              : sql`AND (created_at < ${cursor.created_at} OR (created_at = ${cursor.created_at} AND id < ${cursor.id}))`
            : sql``
          const order = o.order === "asc" ? sql`ORDER BY created_at ASC, id ASC` : sql`ORDER BY created_at DESC, id DESC`
          const rows =
            yield* sql<Row>`SELECT * FROM files WHERE api_key_id = ${owner} AND (expires_at IS NULL OR expires_at > ${now}) ${purpose} ${after} ${order} LIMIT ${o.limit + 1}`
          return { data: rows.slice(0, o.limit).map(toFile), hasMore: rows.length > o.limit }
        }).pipe(Effect.orDie)

      const remove = (owner: string, id: string) =>
        Effect.gen(function* () {
          const found = yield* find(owner, id)
          if (!found) return false
          yield* sql`DELETE FROM files WHERE id = ${id}`.pipe(Effect.orDie)
          yield* store.remove(id)
          return true
        })

      const put = (id: string, source: Readable, limit = maxBytes) => store.put(id, source, limit)

      const create = (file: NewFile, source: Readable) =>
        Effect.gen(function* () {
          const id = randomId("file-")
          const stored = yield* store.put(id, source, Number.MAX_SAFE_INTEGER)
          return yield* Effect.onInterrupt(record(id, file, stored), () => store.remove(id))
        })

      // Expired files: invisible at once (every read checks expires_at), removed here.
      const sweep = Effect.gen(function* () {
        const gone = yield* sql<{ id: string }>`SELECT id FROM files WHERE expires_at IS NOT NULL AND expires_at <= ${Date.now()}`
        for (const g of gone) {
          yield* sql`DELETE FROM files WHERE id = ${g.id}`
          yield* store.remove(g.id)
        }
        if (gone.length > 0) yield* Effect.logDebug(`removed ${gone.length} expired file(s)`)
      }).pipe(Effect.catchAllCause((cause) => health.warn("the file sweep failed", cause)))
      yield* Effect.forkScoped(Effect.repeat(sweep, Schedule.spaced(sweepMs)))

      return {
        maxBytes,
        newId: () => randomId("file-"),
        put,
        record,
        discard: store.remove,
        create,
        find,
        list,
        remove,
        content: (owner, id) =>
          Effect.gen(function* () {
            const file = yield* find(owner, id)
            if (!file) return undefined
            const opened = yield* store.open(id)
            return opened ? { file, stream: opened.stream } : undefined
          })
      } satisfies FilesShape
    })
  )
}

export { FileNotStored }
