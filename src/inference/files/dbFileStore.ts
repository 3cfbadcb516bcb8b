/**
 * The file store in the database, so every gateway on one PostgreSQL sees every file: 1 MiB chunks, the disk store's contract
 * (docs/scale-out.md, "Files"). The SQL is the same on SQLite and PostgreSQL (BLOB/BYTEA parameters are Buffers).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Runtime from "effect/Runtime"
import * as crypto from "node:crypto"
import { Readable } from "node:stream"
import { FileNotStored, type FileStoreShape, FileTooLarge, type Stored } from "./store.js"

/** Bytes per chunk row. */
export const CHUNK_BYTES = 1024 * 1024
/** Temporary chunks older than this are a crashed upload's. */
const ORPHAN_AFTER_MS = 60 * 60 * 1000
const PART = ".part-"

/** The next piece of `source` (null at its end), read in paused mode so the source is never destroyed here. */
const nextPiece = (source: Readable): Effect.Effect<Buffer | null, FileNotStored> =>
  Effect.async<Buffer | null, FileNotStored>((resume) => {
    if (source.readableEnded) return resume(Effect.succeed(null))
    if (source.destroyed) return resume(Effect.fail(new FileNotStored("the upload broke off before it was complete")))
    let done = false
    const finish = (e: Effect.Effect<Buffer | null, FileNotStored>) => {
      if (done) return
      done = true
      cleanup()
      resume(e)
    }
    const tryRead = () => {
      const piece = source.read() as Buffer | string | null
      if (piece !== null) finish(Effect.succeed(typeof piece === "string" ? Buffer.from(piece) : piece))
    }
    const onEnd = () => finish(Effect.succeed(null))
    const onError = (e: Error) => finish(Effect.fail(new FileNotStored(`the upload broke off: ${e.message}`)))
    // A source closed before its end (a client gone mid-upload) never ends.
    const onClose = () =>
      setImmediate(() =>
        finish(source.readableEnded ? Effect.succeed(null) : Effect.fail(new FileNotStored("the upload broke off before it was complete")))
      )
    const cleanup = () => {
      source.off("readable", tryRead)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("close", onClose)
    }
    source.on("readable", tryRead)
    source.on("end", onEnd)
    source.on("error", onError)
    source.on("close", onClose)
    tryRead()
    return Effect.sync(cleanup)
  })

const notStored = (what: string) => (e: unknown) => new FileNotStored(`${what}: ${e instanceof Error ? e.message : String(e)}`)

export const dbFileStore = (sql: SqlClient.SqlClient, runtime: Runtime.Runtime<never>): FileStoreShape => {
  const runPromise = Runtime.runPromise(runtime)

  const discard = (objectId: string) => sql`DELETE FROM file_chunks WHERE object_id = ${objectId}`.pipe(Effect.ignore)

  const put: FileStoreShape["put"] = (id, source, maxBytes) =>
    Effect.suspend(() => {
      const temp = `${id}${PART}${Date.now()}-${crypto.randomUUID()}`
      const hash = crypto.createHash("sha256")
      let bytes = 0
      let seq = 0
      let pending: Array<Buffer> = []
      let pendingBytes = 0
      const write = (data: Buffer) => {
        const n = seq++
        return sql`INSERT INTO file_chunks (object_id, seq, data) VALUES (${temp}, ${n}, ${data})`.pipe(
          Effect.mapError(notStored("the file could not be written"))
        )
      }
      const upload: Effect.Effect<Stored, FileTooLarge | FileNotStored> = Effect.gen(function* () {
        for (;;) {
          const piece = yield* nextPiece(source)
          if (piece === null) break
          bytes += piece.length
          if (bytes > maxBytes) return yield* Effect.fail(new FileTooLarge(maxBytes))
          hash.update(piece)
          pending.push(piece)
          pendingBytes += piece.length
          while (pendingBytes >= CHUNK_BYTES) {
            const all = Buffer.concat(pending, pendingBytes)
            pending = pendingBytes > CHUNK_BYTES ? [all.subarray(CHUNK_BYTES)] : []
            pendingBytes -= CHUNK_BYTES
            yield* write(all.subarray(0, CHUNK_BYTES))
          }
        }
        if (pendingBytes > 0) yield* write(Buffer.concat(pending, pendingBytes))
        const sha256 = hash.digest("hex")
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              yield* sql`DELETE FROM file_chunks WHERE object_id = ${id}`
              yield* sql`DELETE FROM file_objects WHERE id = ${id}`
              yield* sql`UPDATE file_chunks SET object_id = ${id} WHERE object_id = ${temp}`
              yield* sql`INSERT INTO file_objects (id, bytes, sha256, created_at) VALUES (${id}, ${bytes}, ${sha256}, ${Date.now()})`
            })
          )
          .pipe(Effect.mapError(notStored("the file could not be written")))
        return { bytes, sha256 }
      })
      return upload.pipe(Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : discard(temp))))
    })

  const open: FileStoreShape["open"] = (id) =>
    Effect.gen(function* () {
      const rows = yield* sql<{ bytes: number | string }>`SELECT bytes FROM file_objects WHERE id = ${id}`.pipe(Effect.orDie)
      if (rows.length === 0) return undefined
      let next = 0
      const stream = new Readable({
        read() {
          const n = next++
          runPromise(sql<{ data: Uint8Array }>`SELECT data FROM file_chunks WHERE object_id = ${id} AND seq = ${n}`).then(
            (chunk) =>
              this.push(
                chunk.length === 0 ? null : Buffer.from(chunk[0]!.data.buffer, chunk[0]!.data.byteOffset, chunk[0]!.data.byteLength)
              ),
            (e: unknown) => this.destroy(e instanceof Error ? e : new Error(String(e)))
          )
        }
      })
      return { stream, bytes: Number(rows[0]!.bytes) }
    })

  const remove: FileStoreShape["remove"] = (id) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          yield* sql`DELETE FROM file_chunks WHERE object_id = ${id}`
          yield* sql`DELETE FROM file_objects WHERE id = ${id}`
        })
      )
      .pipe(Effect.ignore)

  return { put, open, remove }
}

/** Removes the chunks of uploads that a crashed gateway left under a temporary id (older than an hour). */
export const removeOrphans = (sql: SqlClient.SqlClient, now: number): Effect.Effect<number> =>
  Effect.gen(function* () {
    const parts = yield* sql<{ object_id: string }>`SELECT DISTINCT object_id FROM file_chunks WHERE object_id LIKE ${`%${PART}%`}`
    let removed = 0
    for (const { object_id } of parts) {
      const at = Number(object_id.slice(object_id.lastIndexOf(PART) + PART.length).split("-")[0])
      if (Number.isFinite(at) && now - at > ORPHAN_AFTER_MS) {
        yield* sql`DELETE FROM file_chunks WHERE object_id = ${object_id}`
        removed++
      }
    }
    return removed
  }).pipe(Effect.orElseSucceed(() => 0))
